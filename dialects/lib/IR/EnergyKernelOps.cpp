//===- EnergyKernelOps.cpp - Kernel-plan ops of the energy dialect --------===//
//
// Syntax and verification of the ops energy-plan-kernels writes: tables
// computed ahead of loops, fused softmax contractions (the queries of their
// forms are in ContractForms.cpp), batched products and prefix sums.
//
//===----------------------------------------------------------------------===//

#include "OpSyntax.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"

#include <functional>

using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::syntax;

//===----------------------------------------------------------------------===//
// TabulateOp
//===----------------------------------------------------------------------===//

// tabulate-op ::= `energy.tabulate` `(` %i `:` dim-expr, ... `)` region
//                 attr-dict `:` type
ParseResult TabulateOp::parse(OpAsmParser &parser, OperationState &result) {
  SmallVector<OpAsmParser::Argument> indices;
  ArrayAttr sizes;
  Type resultType;
  if (parseIndexDomain(parser, AsmParser::Delimiter::Paren, indices, sizes) ||
      parser.parseRegion(*result.addRegion(), indices) ||
      parser.parseOptionalAttrDict(result.attributes) || parser.parseColon() ||
      parser.parseType(resultType))
    return failure();
  result.addAttribute("sizes", sizes);
  result.addTypes(resultType);
  return success();
}

void TabulateOp::print(OpAsmPrinter &printer) {
  printer << ' ';
  printIndexDomain(printer, getBody().front(), getSizes(), "(", ")");
  printer << ' ';
  printer.printRegion(getBody(), /*printEntryBlockArgs=*/false);
  printer.printOptionalAttrDict((*this)->getAttrs(), {"sizes"});
  printer << " : " << getType();
}

Value TabulateOp::getBodyValue() {
  return cast<YieldOp>(getBody().front().getTerminator()).getValues().front();
}

/// The dims of a domain whose sizes are all plain dims, or failure.
static FailureOr<SmallVector<StringAttr>>
domainDims(Operation *op, ArrayAttr sizes, StringRef what) {
  SmallVector<StringAttr> dims;
  for (Attribute size : sizes) {
    std::optional<StringRef> name = cast<DimExprAttr>(size).getDimName();
    if (!name)
      return op->emitOpError() << "expects each index of its " << what
                               << " to range over a dim, found an expression";
    dims.push_back(StringAttr::get(op->getContext(), *name));
  }
  return dims;
}

/// `prefix` followed by the axes of `element`.
static ArrayType withLeadingAxes(ArrayRef<StringAttr> prefix,
                                 ArrayType element) {
  SmallVector<StringAttr> dims(prefix);
  llvm::append_range(dims, element.getShape());
  return ArrayType::get(element.getContext(), dims);
}

LogicalResult TabulateOp::verifyRegions() {
  if (getSizes().empty())
    return emitOpError("expects at least one index in its domain");
  FailureOr<SmallVector<StringAttr>> dims =
      domainDims(*this, getSizes(), "domain");
  if (failed(dims))
    return failure();
  Region &body = getBody();
  if (failed(verifyIndexArguments(*this, body, getSizes().size(), "body")))
    return failure();
  auto yield = dyn_cast<YieldOp>(body.front().getTerminator());
  if (!yield || yield.getValues().size() != 1 ||
      !isa<ArrayType>(yield.getValues()[0].getType()))
    return emitOpError("expects its body to yield one array");
  auto element = cast<ArrayType>(yield.getValues()[0].getType());
  ArrayType expected = withLeadingAxes(*dims, element);
  if (getType() != expected)
    return emitOpError() << "has type " << getType() << " but its domain and "
                         << "body give " << expected;
  return success();
}

// tabulate (%i...) { extract %t[%i...] } = %t: a table of a table's rows.
OpFoldResult TabulateOp::fold(FoldAdaptor) {
  auto extract = getBodyValue().getDefiningOp<ExtractOp>();
  Block &body = getBody().front();
  if (!extract || extract->getParentRegion() != &getBody() ||
      !extract.getMap().isIdentity() ||
      extract.getSource().getType() != getType() ||
      getOperation()->isAncestor(
          extract.getSource().getParentRegion()->getParentOp()) ||
      !llvm::equal(extract.getIndices(), body.getArguments()))
    return {};
  return extract.getSource();
}

LogicalResult TabulateOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyDimNames(*this, tables, getSizes());
}

SmallVector<Region *> TabulateOp::getLoopRegions() { return {&getBody()}; }

void TabulateOp::getAsmBlockArgumentNames(Region &region,
                                          OpAsmSetValueNameFn setName) {
  nameIndices(region, setName);
}

//===----------------------------------------------------------------------===//
// OnceOp
//===----------------------------------------------------------------------===//

Value OnceOp::getBodyValue() {
  return cast<YieldOp>(getBody().front().getTerminator()).getValues().front();
}

LogicalResult OnceOp::verifyRegions() {
  Block &body = getBody().front();
  if (body.getNumArguments() != 0)
    return emitOpError("expects a body without arguments");
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield || yield.getValues().size() != 1 ||
      yield.getValues()[0].getType() != getType())
    return emitOpError() << "expects its body to yield one " << getType();
  return success();
}

LogicalResult OnceOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto cache = tables.lookupNearestSymbolFrom<TensorOp>(*this, getCacheAttr());
  auto valid = tables.lookupNearestSymbolFrom<TensorOp>(*this, getValidAttr());
  if (!cache || !valid)
    return emitOpError() << "keeps its value in " << getCacheAttr() << " and "
                         << getValidAttr() << ", which must be tensors";
  if (cache.getRole() != Role::state || valid.getRole() != Role::state)
    return emitOpError("expects state tensors to keep its value in");
  auto type = cast<ArrayType>(getType());
  if (type.isScalar())
    return emitOpError("expects an array to keep, not a scalar");
  ArrayRef<StringAttr> slots;
  if (getPerStep()) {
    slots = valid.getArrayType().getShape();
    if (slots.size() != 1)
      return emitOpError() << "expects a flag per step, but " << getValidAttr()
                           << " is " << valid.getArrayType();
  } else if (!valid.getArrayType().isScalar()) {
    return emitOpError() << "expects a scalar flag, but " << getValidAttr()
                         << " is " << valid.getArrayType();
  }
  SmallVector<StringAttr> expected(slots);
  llvm::append_range(expected, type.getShape());
  if (cache.getArrayType().getShape() != ArrayRef<StringAttr>(expected))
    return emitOpError() << "keeps a " << getType()
                         << (getPerStep() ? " per step" : "")
                         << " but its cache " << getCacheAttr() << " is "
                         << cache.getArrayType();
  return success();
}

//===----------------------------------------------------------------------===//
// SoftmaxContractOp: syntax
//===----------------------------------------------------------------------===//

// contract-op ::= `energy.softmax_contract` form
//                 `rows` `(` (%i `:` dim-expr),* `)` `cols` `(` %c `:` dim-expr
//                 `)`
//                 (`where` region)? (`temp` `(` %t `:` type `)`)?
//                 (`lse` `(` %l `:` type `)`)?
//                 `score` region (`row_values` region)? (`col_values` region)?
//                 attr-dict `:` type, ...
ParseResult SoftmaxContractOp::parse(OpAsmParser &parser,
                                     OperationState &result) {
  MLIRContext *context = parser.getContext();
  std::string formName;
  SMLoc formLoc = parser.getCurrentLocation();
  if (parser.parseKeywordOrString(&formName))
    return failure();
  std::optional<ContractForm> form = symbolizeContractForm(formName);
  if (!form)
    return parser.emitError(formLoc)
           << "unknown contraction form '" << formName
           << "'; expected generic, bilinear or quadratic";
  result.addAttribute("form", ContractFormAttr::get(context, *form));

  SmallVector<OpAsmParser::Argument> indices, colIndex;
  ArrayAttr rows, cols;
  if (parser.parseKeyword("rows") ||
      parseIndexDomain(parser, AsmParser::Delimiter::Paren, indices, rows) ||
      parser.parseKeyword("cols") ||
      parseIndexDomain(parser, AsmParser::Delimiter::Paren, colIndex, cols))
    return failure();
  if (cols.size() != 1)
    return parser.emitError(parser.getCurrentLocation(),
                            "expects exactly one column index");
  indices.append(colIndex);
  result.addAttribute("rows", rows);
  result.addAttribute("cols", cols[0]);

  Region *predicate = result.addRegion();
  Region *score = result.addRegion();
  Region *rowValues = result.addRegion();
  Region *colValues = result.addRegion();
  if (succeeded(parser.parseOptionalKeyword("where")) &&
      parser.parseRegion(*predicate, indices))
    return failure();
  int32_t temperatureCount = 0, lseCount = 0;
  auto parseOperand = [&](StringRef keyword, int32_t &count) -> ParseResult {
    if (failed(parser.parseOptionalKeyword(keyword)))
      return success();
    OpAsmParser::UnresolvedOperand operand;
    Type type;
    if (parser.parseLParen() || parser.parseOperand(operand) ||
        parser.parseColon() || parser.parseType(type) || parser.parseRParen() ||
        parser.resolveOperand(operand, type, result.operands))
      return failure();
    count = 1;
    return success();
  };
  if (parseOperand("temp", temperatureCount) || parseOperand("lse", lseCount))
    return failure();
  result.getOrAddProperties<Properties>().operandSegmentSizes = {
      temperatureCount, lseCount};

  // Absent value regions sum nothing: a block that yields no value.
  auto parseValues = [&](StringRef keyword, Region &region) -> ParseResult {
    if (succeeded(parser.parseOptionalKeyword(keyword)))
      return parser.parseRegion(region, indices);
    Block &block = region.emplaceBlock();
    for (OpAsmParser::Argument &index : indices)
      block.addArgument(index.type, result.location);
    OpBuilder builder(context);
    builder.setInsertionPointToEnd(&block);
    YieldOp::create(builder, result.location, ValueRange());
    return success();
  };
  SmallVector<Type> types;
  if (parser.parseKeyword("score") || parser.parseRegion(*score, indices) ||
      parseValues("row_values", *rowValues) ||
      parseValues("col_values", *colValues) ||
      parser.parseOptionalAttrDict(result.attributes) || parser.parseColon() ||
      parser.parseTypeList(types))
    return failure();
  result.addTypes(types);
  return success();
}

void SoftmaxContractOp::print(OpAsmPrinter &printer) {
  Block &score = getScore().front();
  unsigned rowCount = getNumRowIndices();
  printer << ' ' << stringifyContractForm(getForm()) << " rows (";
  for (unsigned i = 0; i < rowCount; ++i) {
    if (i)
      printer << ", ";
    printer.printRegionArgument(score.getArgument(i), {}, /*omitType=*/true);
    printer << " : ";
    printDimExpr(printer, cast<DimExprAttr>(getRows()[i]));
  }
  printer << ") cols (";
  printer.printRegionArgument(score.getArgument(rowCount), {},
                              /*omitType=*/true);
  printer << " : ";
  printDimExpr(printer, getCols());
  printer << ")";
  if (hasPredicate()) {
    printer << " where ";
    printer.printRegion(getPredicate(), /*printEntryBlockArgs=*/false);
  }
  if (Value temperature = getTemperature())
    printer << " temp(" << temperature << " : " << temperature.getType() << ")";
  if (Value lse = getGivenLse())
    printer << " lse(" << lse << " : " << lse.getType() << ")";
  printer << " score ";
  printer.printRegion(getScore(), /*printEntryBlockArgs=*/false);
  if (!getRowValues().empty()) {
    printer << " row_values ";
    printer.printRegion(getRowSums(), /*printEntryBlockArgs=*/false);
  }
  if (!getColValues().empty()) {
    printer << " col_values ";
    printer.printRegion(getColSums(), /*printEntryBlockArgs=*/false);
  }
  printer.printOptionalAttrDict(
      (*this)->getAttrs(), {"form", "rows", "cols", "operandSegmentSizes"});
  printer << " : ";
  llvm::interleaveComma(getResultTypes(), printer);
}

void SoftmaxContractOp::getAsmBlockArgumentNames(Region &region,
                                                 OpAsmSetValueNameFn setName) {
  // Every region names its indices as the score region's are named in the
  // source, so the one domain the op prints reads right in every region.
  Block &score = getScore().front();
  for (auto [argument, like] :
       llvm::zip(region.getArguments(), score.getArguments()))
    if (auto name = dyn_cast<NameLoc>(like.getLoc()))
      setName(argument, name.getName().getValue());
}

SmallVector<Region *> SoftmaxContractOp::getLoopRegions() {
  return {&getScore(), &getRowSums(), &getColSums()};
}

//===----------------------------------------------------------------------===//
// SoftmaxContractOp: accessors and verification
//===----------------------------------------------------------------------===//

/// The values a region's yield returns.
static ValueRange yieldedValues(Region &region) {
  return cast<YieldOp>(region.front().getTerminator()).getValues();
}

Value SoftmaxContractOp::getScoreValue() {
  return yieldedValues(getScore()).front();
}
ValueRange SoftmaxContractOp::getRowValues() {
  return yieldedValues(getRowSums());
}
ValueRange SoftmaxContractOp::getColValues() {
  return yieldedValues(getColSums());
}
Value SoftmaxContractOp::getLse() {
  return getGivenLse() ? Value() : getResult(0);
}
ResultRange SoftmaxContractOp::getRowOutputs() {
  unsigned first = getGivenLse() ? 0 : 1;
  return getResults().slice(first, getRowValues().size());
}
ResultRange SoftmaxContractOp::getColOutputs() {
  unsigned first = (getGivenLse() ? 0 : 1) + getRowValues().size();
  return getResults().slice(first, getColValues().size());
}

SmallVector<Type> SoftmaxContractOp::inferResultTypes() {
  SmallVector<StringAttr> rows, batch;
  for (Attribute size : getRows())
    rows.push_back(StringAttr::get(
        getContext(), cast<DimExprAttr>(size).getDimName().value_or("?")));
  batch.assign(rows.begin(), rows.end() - (rows.empty() ? 0 : 1));
  SmallVector<StringAttr> columns = batch;
  columns.push_back(
      StringAttr::get(getContext(), getCols().getDimName().value_or("?")));
  SmallVector<Type> types;
  if (!getGivenLse())
    types.push_back(ArrayType::get(getContext(), rows));
  for (Value value : getRowValues())
    types.push_back(withLeadingAxes(rows, cast<ArrayType>(value.getType())));
  ValueRange colValues = getColValues();
  const unsigned pairSums =
      std::min<unsigned>(getNumPairSums(), colValues.size());
  for (Value value : colValues.drop_back(pairSums))
    types.push_back(withLeadingAxes(columns, cast<ArrayType>(value.getType())));
  if (pairSums == 0)
    return types;
  // Pair sums: over the batch rows and the pair bias's last axis.
  SmallVector<StringAttr> pairs = batch;
  std::string reason;
  FailureOr<BilinearContract> form = matchBilinear(reason);
  pairs.push_back(
      succeeded(form) && form->pairBias
          ? cast<ArrayType>(form->pairBias.getType()).getShape().back()
          : StringAttr::get(getContext(), "?"));
  for (Value value : colValues.take_back(pairSums))
    types.push_back(withLeadingAxes(pairs, cast<ArrayType>(value.getType())));
  return types;
}

LogicalResult SoftmaxContractOp::verifyRegions() {
  unsigned indexCount = getNumRowIndices() + 1;
  if (failed(domainDims(*this, getRows(), "rows")) ||
      failed(
          domainDims(*this, ArrayAttr::get(getContext(), {getCols()}), "cols")))
    return failure();
  if (hasPredicate() &&
      failed(verifyBody(*this, getPredicate(), indexCount,
                        {IntegerType::get(getContext(), 1)}, "predicate")))
    return failure();
  if (failed(verifyBody(*this, getScore(), indexCount,
                        {ArrayType::getScalar(getContext())}, "score")))
    return failure();
  for (auto [region, what] :
       {std::pair<Region *, StringRef>{&getRowSums(), "row values"},
        {&getColSums(), "column values"}}) {
    if (failed(verifyIndexArguments(*this, *region, indexCount, what)))
      return failure();
    auto yield = dyn_cast<YieldOp>(region->front().getTerminator());
    if (!yield || !llvm::all_of(yield.getValues().getTypes(),
                                [](Type type) { return isa<ArrayType>(type); }))
      return emitOpError() << "expects its " << what << " to yield arrays";
  }
  if (!getColValues().empty() && getNumRowIndices() == 0)
    return emitOpError(
        "sums column values over its rows, but has no row index");
  if (Value given = getGivenLse()) {
    SmallVector<StringAttr> rows;
    for (Attribute size : getRows())
      rows.push_back(
          StringAttr::get(getContext(), *cast<DimExprAttr>(size).getDimName()));
    if (given.getType() != ArrayType::get(getContext(), rows))
      return emitOpError() << "takes its normaliser as "
                           << ArrayType::get(getContext(), rows) << ", found "
                           << given.getType();
  }
  SmallVector<Type> expected = inferResultTypes();
  if (TypeRange(expected) != getResultTypes()) {
    InFlightDiagnostic diag = emitOpError() << "has result types ";
    llvm::interleaveComma(getResultTypes(), diag);
    diag << " but its domains and values give ";
    llvm::interleaveComma(expected, diag);
    return diag;
  }
  if (getForm() == ContractForm::bilinear) {
    std::string reason;
    if (failed(matchBilinear(reason)))
      return emitOpError() << "is marked bilinear but " << reason;
  }
  if (getForm() == ContractForm::quadratic) {
    std::string reason;
    if (failed(matchQuadratic(reason)))
      return emitOpError() << "is marked quadratic but " << reason;
  }
  if (unsigned pairSums = getNumPairSums()) {
    std::string reason;
    FailureOr<BilinearContract> form = matchBilinear(reason);
    if (pairSums > getColValues().size() ||
        getForm() != ContractForm::bilinear || failed(form) || !form->pairBias)
      return emitOpError() << "sums " << pairSums
                           << " column values at its pair bias's index, but "
                              "is not bilinear with a pair bias and as many "
                              "column values";
    for (Value value : getColValues().take_back(pairSums))
      if (!cast<ArrayType>(value.getType()).isScalar())
        return emitOpError("sums a column value that is not a scalar at its "
                           "pair bias's index");
    if (getEngine() && *getEngine() != kCpuEngine)
      return emitOpError() << "sums column values at its pair bias's index, "
                              "which only the \"cpu\" engine does, but has "
                              "engine \""
                           << *getEngine() << '"';
  }
  if (getReusesScores()) {
    std::string reason;
    if (failed(checkReusableScores(reason)))
      return emitOpError() << "reuses the scores of the contraction that "
                              "gives its normaliser, but "
                           << reason;
  }
  if (std::optional<StringRef> engine = getEngine()) {
    if (!llvm::is_contained(kContractEngines, *engine))
      return emitOpError()
             << "has engine \"" << *engine << "\"; the known ones are \""
             << llvm::join(ArrayRef<StringLiteral>(kContractEngines), "\", \"")
             << '"';
    ContractForm form = getForm();
    if (*engine != kLoopsEngine && form != ContractForm::bilinear &&
        !(*engine == kCudaEngine && form == ContractForm::quadratic))
      return emitOpError() << "has engine \"" << *engine << "\", which takes "
                           << (*engine == kCudaEngine
                                   ? "bilinear and quadratic contractions"
                                   : "bilinear contractions")
                           << ", not " << stringifyContractForm(form)
                           << " ones";
    std::string reason;
    if (*engine == kCudnnEngine && failed(checkFusedAttention(reason)))
      return emitOpError() << "is given to cuDNN's fused attention, but "
                           << reason;
  }
  return success();
}

LogicalResult
SoftmaxContractOp::verifySymbolUses(SymbolTableCollection &tables) {
  if (failed(verifyDimNames(*this, tables, getRows())))
    return failure();
  return verifyDimNames(*this, tables, getCols());
}

//===----------------------------------------------------------------------===//
// BatchMatmulOp
//===----------------------------------------------------------------------===//

ArrayType BatchMatmulOp::inferType(ArrayType lhs, ArrayType rhs,
                                   bool transposeLhs, bool transposeRhs,
                                   bool sumBatch, std::string &reason,
                                   int64_t lhsRows, int64_t batchAxes) {
  if (lhsRows < 1 || (lhsRows > 1 && transposeLhs && transposeRhs)) {
    reason = "expected at least one row axis of lhs, and rhs not transposed "
             "when lhs is with several";
    return {};
  }
  if (batchAxes < 1) {
    reason = "expected at least one batch axis";
    return {};
  }
  // lhs: [batch…?, m₁, …, m_r, k]; rhs: [batch…?, k, n], or, with lhs
  // transposed, [batch…?, m₁, …, m_r, n].
  int64_t rhsRows = transposeLhs ? lhsRows : 1;
  int64_t lhsRank = lhs.getRank(), rhsRank = rhs.getRank();
  auto axes = [&](int64_t rows) {
    return rows == 1 && batchAxes == 1
               ? std::string("two or three")
               : std::to_string(rows + 1) + " or " +
                     std::to_string(rows + 1 + batchAxes);
  };
  if ((lhsRank != lhsRows + 1 && lhsRank != lhsRows + 1 + batchAxes) ||
      (rhsRank != rhsRows + 1 && rhsRank != rhsRows + 1 + batchAxes)) {
    reason = lhsRows == 1 && batchAxes == 1
                 ? "expected operands of two or three axes"
                 : "expected lhs of " + axes(lhsRows) + " axes and rhs of " +
                       axes(rhsRows);
    return {};
  }
  ArrayRef<StringAttr> lhsBatch = lhsRank > lhsRows + 1
                                      ? lhs.getShape().take_front(batchAxes)
                                      : ArrayRef<StringAttr>();
  ArrayRef<StringAttr> rhsBatch = rhsRank > rhsRows + 1
                                      ? rhs.getShape().take_front(batchAxes)
                                      : ArrayRef<StringAttr>();
  // Without a batch (two matrices), a batch of one: the product of rows of
  // positions with a matrix, or with `summed` a sum over positions.
  ArrayRef<StringAttr> batch = lhsBatch.empty() ? rhsBatch : lhsBatch;
  if (!lhsBatch.empty() && !rhsBatch.empty() && lhsBatch != rhsBatch) {
    reason = batchAxes == 1 ? "expected one batch axis, the first of an "
                              "operand of three axes (the same when both "
                              "have one)"
                            : "expected the same batch axes in both operands";
    return {};
  }
  ArrayRef<StringAttr> lhsMatrix = lhs.getShape().take_back(lhsRows + 1);
  SmallVector<StringAttr> rows(lhsMatrix.drop_back());
  SmallVector<StringAttr> inner = {lhsMatrix.back()};
  if (transposeLhs)
    std::swap(rows, inner);
  ArrayRef<StringAttr> rhsMatrix = rhs.getShape().take_back(rhsRows + 1);
  SmallVector<StringAttr> right(rhsMatrix.drop_back());
  StringAttr columns = rhsMatrix.back();
  if (transposeRhs)
    std::swap(right.front(), columns);
  if (inner != right) {
    reason = "the matrices' inner dims differ";
    return {};
  }
  SmallVector<StringAttr> dims;
  if (!sumBatch)
    llvm::append_range(dims, batch);
  llvm::append_range(dims, rows);
  dims.push_back(columns);
  return ArrayType::get(lhs.getContext(), dims);
}

LogicalResult BatchMatmulOp::verify() {
  std::string reason;
  ArrayType expected = inferType(
      cast<ArrayType>(getLhs().getType()), cast<ArrayType>(getRhs().getType()),
      getTransposeLhs(), getTransposeRhs(), getSumBatch(), reason, getLhsRows(),
      getBatchAxes());
  if (!expected)
    return emitOpError(reason);
  if (expected != getType())
    return emitOpError("expected result type ") << expected;
  if (bool((*this)->getAttr(kPackedRhsAttr)) != bool(getPackedRhsCache()) ||
      bool((*this)->getAttr(kPackedRhsValidAttr)) != bool(getPackedRhsFlag()) ||
      bool(getPackedRhsCache()) != bool(getPackedRhsFlag()))
    return emitOpError("expects `")
           << kPackedRhsAttr << "` and `" << kPackedRhsValidAttr
           << "` together, each a symbol (a scratch tensor and its flag)";
  return success();
}

LogicalResult BatchMatmulOp::verifySymbolUses(SymbolTableCollection &tables) {
  FlatSymbolRefAttr cacheName = getPackedRhsCache();
  if (!cacheName)
    return success();
  auto cache = tables.lookupNearestSymbolFrom<TensorOp>(*this, cacheName);
  auto valid =
      tables.lookupNearestSymbolFrom<TensorOp>(*this, getPackedRhsFlag());
  if (!cache || !valid || cache.getRole() != Role::state ||
      valid.getRole() != Role::state)
    return emitOpError() << "keeps rhs packed in " << cacheName << " under "
                         << getPackedRhsFlag()
                         << ", which must be state tensors";
  if (!valid.getArrayType().isScalar())
    return emitOpError() << "expects a scalar flag, but " << getPackedRhsFlag()
                         << " is " << valid.getArrayType();
  if (cache.getArrayType().getShape() !=
      cast<ArrayType>(getRhs().getType()).getShape())
    return emitOpError() << "keeps rhs " << getRhs().getType()
                         << " packed, but its cache " << cacheName << " is "
                         << cache.getArrayType();
  return success();
}

//===----------------------------------------------------------------------===//
// PrefixSumOp
//===----------------------------------------------------------------------===//

LogicalResult PrefixSumOp::verify() {
  if (cast<ArrayType>(getOperand().getType()).isScalar())
    return emitOpError("needs an array with a leading axis, not a scalar");
  return success();
}
