//===- EnergyKernelOps.cpp - Kernel-plan ops of the energy dialect --------===//
//
// Syntax and verification of the ops energy-plan-kernels writes: tables
// computed ahead of loops and fused softmax contractions, with the queries
// backends ask of a contraction (its predicate as linear constraints, its
// bilinear operands).
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
  for (Value value : getColValues())
    types.push_back(withLeadingAxes(columns, cast<ArrayType>(value.getType())));
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
  if (getReusesScores()) {
    std::string reason;
    if (failed(checkReusableScores(reason)))
      return emitOpError() << "reuses the scores of the contraction that "
                              "gives its normaliser, but "
                           << reason;
  }
  if (std::optional<StringRef> engine = getEngine()) {
    if (*engine != "cudnn")
      return emitOpError() << "has engine \"" << *engine
                           << "\"; the one known is \"cudnn\"";
    std::string reason;
    if (failed(checkFusedAttention(reason)))
      return emitOpError() << "is given to cuDNN's fused attention, but "
                           << reason;
  }
  return success();
}

LogicalResult SoftmaxContractOp::checkFusedAttention(std::string &reason) {
  if (getForm() != ContractForm::bilinear) {
    reason = "it is not bilinear";
    return failure();
  }
  FailureOr<BilinearContract> bilinear = matchBilinear(reason);
  if (failed(bilinear))
    return failure();
  if (getGivenLse())
    reason = "its normaliser is given";
  else if (!getColValues().empty())
    reason = "it has column values";
  else if (getRowValues().empty())
    reason = "it has no row values";
  else if (!bilinear->pairTerms.empty() ||
           llvm::any_of(bilinear->rowValueFactors,
                        [](Value factor) { return factor != nullptr; }))
    reason = "a row value has a factor";
  else if (llvm::is_contained(bilinear->rowValueTables, Value()))
    reason = "a row value is not a table's row";
  if (!reason.empty())
    return failure();
  if (!hasPredicate())
    return success();
  // The causal mask: column <= row, as one constraint row − col >= 0.
  std::optional<SmallVector<LinearConstraint>> constraints =
      getLinearConstraints();
  if (constraints && constraints->size() == 1) {
    const LinearConstraint &only = constraints->front();
    if (!only.notEqual && only.rowCoefficient == 1 &&
        only.colCoefficient == -1 && only.offset == 0)
      return success();
  }
  reason = "its predicate is not the causal mask (column <= row)";
  return failure();
}

std::optional<unsigned> mlir::energy::findPairTerm(ArrayRef<PairTerm> terms,
                                                   const PairTerm &term) {
  for (auto [i, other] : llvm::enumerate(terms))
    if (other.rowTable == term.rowTable && other.colTable == term.colTable)
      return i;
  return std::nullopt;
}

SoftmaxContractOp SoftmaxContractOp::getScoresSource() {
  Value given = getGivenLse();
  auto source = given ? given.getDefiningOp<SoftmaxContractOp>() : nullptr;
  if (!source || source.getLse() != given ||
      source->getBlock() != (*this)->getBlock() ||
      !source->isBeforeInBlock(*this))
    return nullptr;
  return source;
}

LogicalResult SoftmaxContractOp::checkReusableScores(std::string &reason) {
  SoftmaxContractOp source = getScoresSource();
  if (!source) {
    reason = "its normaliser is not the first result of a contraction "
             "before it in its block";
    return failure();
  }
  if (getForm() != ContractForm::bilinear ||
      source.getForm() != ContractForm::bilinear) {
    reason = "the two are not both bilinear";
    return failure();
  }
  std::string unused;
  FailureOr<BilinearContract> mine = matchBilinear(unused);
  FailureOr<BilinearContract> theirs = source.matchBilinear(unused);
  if (failed(mine) || failed(theirs)) {
    reason = "the two are not both bilinear";
    return failure();
  }
  auto sameConstraints = [](ArrayRef<LinearConstraint> a,
                            ArrayRef<LinearConstraint> b) {
    return a.size() == b.size() && llvm::all_of(llvm::zip(a, b), [](auto pair) {
             auto [x, y] = pair;
             return x.rowCoefficient == y.rowCoefficient &&
                    x.colCoefficient == y.colCoefficient &&
                    x.offset == y.offset && x.notEqual == y.notEqual;
           });
  };
  std::optional<SmallVector<LinearConstraint>> constraints =
      getLinearConstraints();
  std::optional<SmallVector<LinearConstraint>> sourceConstraints =
      source.getLinearConstraints();
  if (getRows() != source.getRows() || getCols() != source.getCols() ||
      getTemperature() != source.getTemperature() || !constraints ||
      !sourceConstraints ||
      !sameConstraints(*constraints, *sourceConstraints)) {
    reason = "their domains, constraints or temperatures differ";
    return failure();
  }
  if (mine->rowTable != theirs->rowTable ||
      mine->colTable != theirs->colTable || mine->scale != theirs->scale) {
    reason = "their scores differ";
    return failure();
  }
  if (!llvm::all_of(mine->pairTerms, [&](const PairTerm &term) {
        return findPairTerm(theirs->pairTerms, term).has_value();
      })) {
    reason = "it weighs its sums by a pair term that the other does not";
    return failure();
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
// SoftmaxContractOp: the queries backends make
//===----------------------------------------------------------------------===//

namespace {
/// An index value as c₀ + Σ coefficient · index argument, over the
/// arguments of one block.
struct LinearIndex {
  SmallVector<int64_t> coefficients;
  int64_t constant = 0;
};

std::optional<LinearIndex> linearIndexOf(Value value, Block &block) {
  LinearIndex result;
  result.coefficients.assign(block.getNumArguments(), 0);
  if (auto argument = dyn_cast<BlockArgument>(value)) {
    if (argument.getOwner() != &block)
      return std::nullopt;
    result.coefficients[argument.getArgNumber()] = 1;
    return result;
  }
  APInt constant;
  if (matchPattern(value, m_ConstantInt(&constant))) {
    result.constant = constant.getSExtValue();
    return result;
  }
  Operation *op = value.getDefiningOp();
  if (!op || op->getNumOperands() != 2)
    return std::nullopt;
  std::optional<LinearIndex> lhs = linearIndexOf(op->getOperand(0), block);
  std::optional<LinearIndex> rhs = linearIndexOf(op->getOperand(1), block);
  if (!lhs || !rhs)
    return std::nullopt;
  auto combine = [&](int64_t a, int64_t b) {
    for (size_t i = 0; i < result.coefficients.size(); ++i)
      result.coefficients[i] =
          a * lhs->coefficients[i] + b * rhs->coefficients[i];
    result.constant = a * lhs->constant + b * rhs->constant;
    return result;
  };
  if (isa<arith::AddIOp>(op))
    return combine(1, 1);
  if (isa<arith::SubIOp>(op))
    return combine(1, -1);
  if (isa<arith::MulIOp>(op)) {
    auto isConstant = [](const LinearIndex &index) {
      return llvm::all_of(index.coefficients, [](int64_t c) { return c == 0; });
    };
    if (isConstant(*lhs))
      return combine(0, lhs->constant);
    if (isConstant(*rhs))
      return combine(rhs->constant, 0);
  }
  return std::nullopt;
}

/// Appends the constraints an i1 value of the predicate says hold.
bool appendConstraints(Value condition, Block &block, unsigned rowPosition,
                       SmallVectorImpl<LinearConstraint> &constraints) {
  if (matchPattern(condition, m_One()))
    return true;
  Operation *op = condition.getDefiningOp();
  if (auto both = dyn_cast_or_null<arith::AndIOp>(op))
    return appendConstraints(both.getLhs(), block, rowPosition, constraints) &&
           appendConstraints(both.getRhs(), block, rowPosition, constraints);
  auto compare = dyn_cast_or_null<arith::CmpIOp>(op);
  if (!compare)
    return false;
  std::optional<LinearIndex> lhs = linearIndexOf(compare.getLhs(), block);
  std::optional<LinearIndex> rhs = linearIndexOf(compare.getRhs(), block);
  if (!lhs || !rhs)
    return false;
  // difference = lhs − rhs, over (batch..., row, col).
  unsigned colPosition = rowPosition + 1;
  LinearConstraint difference;
  for (unsigned i = 0; i < block.getNumArguments(); ++i) {
    int64_t coefficient = lhs->coefficients[i] - rhs->coefficients[i];
    if (i == rowPosition)
      difference.rowCoefficient = coefficient;
    else if (i == colPosition)
      difference.colCoefficient = coefficient;
    else if (coefficient != 0)
      return false; // reads a batch index
  }
  difference.offset = lhs->constant - rhs->constant;
  auto negated = [](LinearConstraint c) {
    return LinearConstraint{-c.rowCoefficient, -c.colCoefficient, -c.offset,
                            c.notEqual};
  };
  auto minusOne = [](LinearConstraint c) {
    c.offset -= 1;
    return c;
  };
  switch (compare.getPredicate()) {
  case arith::CmpIPredicate::sge: // d ≥ 0
    constraints.push_back(difference);
    return true;
  case arith::CmpIPredicate::sgt: // d − 1 ≥ 0
    constraints.push_back(minusOne(difference));
    return true;
  case arith::CmpIPredicate::sle: // −d ≥ 0
    constraints.push_back(negated(difference));
    return true;
  case arith::CmpIPredicate::slt: // −d − 1 ≥ 0
    constraints.push_back(minusOne(negated(difference)));
    return true;
  case arith::CmpIPredicate::eq:
    constraints.push_back(difference);
    constraints.push_back(negated(difference));
    return true;
  case arith::CmpIPredicate::ne:
    difference.notEqual = true;
    constraints.push_back(difference);
    return true;
  default:
    return false;
  }
}

/// Whether `value` is `extract %table[indices]` of a table computed outside
/// `op` at exactly `indices` (block arguments), returning the table.
Value tableRowAt(Value value, Operation *op, ArrayRef<BlockArgument> indices) {
  auto extract = value.getDefiningOp<ExtractOp>();
  if (!extract ||
      op->isAncestor(extract.getSource().getParentRegion()->getParentOp()) ||
      !extract.getMap().isIdentity() ||
      extract.getIndices().size() != indices.size())
    return Value();
  for (auto [index, expected] : llvm::zip(extract.getIndices(), indices))
    if (index != expected)
      return Value();
  return extract.getSource();
}
} // namespace

std::optional<SmallVector<LinearConstraint>>
SoftmaxContractOp::getLinearConstraints() {
  SmallVector<LinearConstraint> constraints;
  if (!hasPredicate())
    return constraints;
  if (getNumRowIndices() == 0)
    return std::nullopt;
  Block &block = getPredicate().front();
  for (Operation &op : block.without_terminator())
    if (!isa<arith::ArithDialect>(op.getDialect()))
      return std::nullopt;
  Value admitted = cast<YieldOp>(block.getTerminator()).getValues()[0];
  if (!appendConstraints(admitted, block, getNumRowIndices() - 1, constraints))
    return std::nullopt;
  return constraints;
}

FailureOr<BilinearContract>
SoftmaxContractOp::matchBilinear(std::string &reason) {
  unsigned rowCount = getNumRowIndices();
  if (rowCount == 0) {
    reason = "has no row index";
    return failure();
  }
  auto indicesOf = [&](Region &region, bool column) {
    SmallVector<BlockArgument> indices;
    Block &block = region.front();
    for (unsigned i = 0; i + 1 < rowCount; ++i)
      indices.push_back(block.getArgument(i));
    indices.push_back(block.getArgument(column ? rowCount : rowCount - 1));
    return indices;
  };
  auto allRows = [&](Region &region) {
    return SmallVector<BlockArgument>(
        region.front().getArguments().take_front(rowCount));
  };
  BilinearContract form;
  Value score = getScoreValue();
  if (auto mul = score.getDefiningOp<MulOp>()) {
    Operation *self = getOperation();
    auto outside = [&](Value v) {
      return !self->isAncestor(v.getParentRegion()->getParentOp());
    };
    if (outside(mul.getLhs()) && mul.getRhs().getDefiningOp<DotOp>()) {
      form.scale = mul.getLhs();
      score = mul.getRhs();
    } else if (outside(mul.getRhs()) && mul.getLhs().getDefiningOp<DotOp>()) {
      form.scale = mul.getRhs();
      score = mul.getLhs();
    }
    if (form.scale && !cast<ArrayType>(form.scale.getType()).isScalar()) {
      reason = "its scale is not a scalar";
      return failure();
    }
  }
  auto dot = score.getDefiningOp<DotOp>();
  if (!dot) {
    reason = "its score is not a dot product (times a scale)";
    return failure();
  }
  form.rowTable = tableRowAt(dot.getLhs(), *this, allRows(getScore()));
  form.colTable = tableRowAt(dot.getRhs(), *this, indicesOf(getScore(), true));
  if (!form.rowTable || !form.colTable) {
    form.rowTable = tableRowAt(dot.getRhs(), *this, allRows(getScore()));
    form.colTable =
        tableRowAt(dot.getLhs(), *this, indicesOf(getScore(), true));
  }
  if (!form.rowTable || !form.colTable) {
    reason = "its score is not a dot product of a row of a table at the row "
             "indices and a row of a table at the column";
    return failure();
  }
  // How a scalar of a value's region depends on the pair: not at all (it is
  // computed outside, or a constant), affinely through pair terms, or
  // otherwise.
  enum class Dependence { Invariant, Affine, Other };
  // A dot product of a row of a table at the row indices and one at the
  // column: `dot`, or the sum of an element-wise product of two vectors.
  auto pairTermOf = [&](Operation *product, Region &region) -> bool {
    Value lhs, rhs;
    if (auto dot = dyn_cast<DotOp>(product)) {
      lhs = dot.getLhs();
      rhs = dot.getRhs();
    } else if (auto sum = dyn_cast<ReduceElementsOp>(product);
               sum && sum.getKind() == ElementsKind::sum) {
      auto elementwise = sum.getOperand().getDefiningOp<MulOp>();
      if (!elementwise ||
          cast<ArrayType>(sum.getOperand().getType()).getRank() != 1 ||
          elementwise.getLhs().getType() != elementwise.getRhs().getType())
        return false;
      lhs = elementwise.getLhs();
      rhs = elementwise.getRhs();
    } else {
      return false;
    }
    for (bool swapped : {false, true}) {
      Value rowTable = tableRowAt(swapped ? rhs : lhs, *this, allRows(region));
      Value colTable =
          tableRowAt(swapped ? lhs : rhs, *this, indicesOf(region, true));
      if (!rowTable || !colTable)
        continue;
      auto *known = llvm::find_if(form.pairTerms, [&](const PairTerm &term) {
        return term.rowTable == rowTable && term.colTable == colTable;
      });
      form.pairTermOfDot[product] = known - form.pairTerms.begin();
      if (known == form.pairTerms.end())
        form.pairTerms.push_back({rowTable, colTable});
      return true;
    }
    return false;
  };
  std::function<Dependence(Value, Region &)> dependence =
      [&](Value value, Region &region) -> Dependence {
    auto type = dyn_cast<ArrayType>(value.getType());
    if (!type || !type.isScalar())
      return Dependence::Other;
    if (!getOperation()->isAncestor(value.getParentRegion()->getParentOp()))
      return Dependence::Invariant;
    Operation *def = value.getDefiningOp();
    if (!def)
      return Dependence::Other;
    if (isa<ConstantOp>(def))
      return Dependence::Invariant;
    if (isa<DotOp, ReduceElementsOp>(def))
      return pairTermOf(def, region) ? Dependence::Affine : Dependence::Other;
    if (!isa<AddOp, SubOp, NegOp, MulOp, DivOp>(def))
      return Dependence::Other;
    SmallVector<Dependence> operands;
    for (Value operand : def->getOperands())
      operands.push_back(dependence(operand, region));
    if (llvm::is_contained(operands, Dependence::Other))
      return Dependence::Other;
    unsigned affine = llvm::count(operands, Dependence::Affine);
    if ((isa<MulOp>(def) && affine > 1) ||
        (isa<DivOp>(def) && operands[1] != Dependence::Invariant))
      return Dependence::Other;
    return affine ? Dependence::Affine : Dependence::Invariant;
  };
  // A value: a table's row, a factor times one, or a factor alone.
  auto matchValue = [&](Value value, Region &region,
                        ArrayRef<BlockArgument> tableIndices, Value &table,
                        Value &factor) {
    table = tableRowAt(value, *this, tableIndices);
    factor = Value();
    if (table)
      return true;
    if (auto product = value.getDefiningOp<MulOp>()) {
      for (auto [row, scalar] : {std::pair(product.getLhs(), product.getRhs()),
                                 std::pair(product.getRhs(), product.getLhs())})
        if (Value found = tableRowAt(row, *this, tableIndices);
            found && dependence(scalar, region) != Dependence::Other) {
          table = found;
          factor = scalar;
          return true;
        }
    }
    if (dependence(value, region) == Dependence::Other)
      return false;
    factor = value;
    return true;
  };
  for (Value value : getRowValues()) {
    Value table, factor;
    if (!matchValue(value, getRowSums(), indicesOf(getRowSums(), true), table,
                    factor)) {
      reason = "a row value is not a row of a table at the column, times a "
               "factor affine in products of table rows at the pair";
      return failure();
    }
    form.rowValueTables.push_back(table);
    form.rowValueFactors.push_back(factor);
  }
  for (Value value : getColValues()) {
    Value table, factor;
    if (!matchValue(value, getColSums(), allRows(getColSums()), table,
                    factor)) {
      reason = "a column value is not a row of a table at the row indices, "
               "times a factor affine in products of table rows at the pair";
      return failure();
    }
    form.colValueTables.push_back(table);
    form.colValueFactors.push_back(factor);
  }
  if (!getLinearConstraints()) {
    reason = "its predicate is not a conjunction of linear comparisons of the "
             "row and the column";
    return failure();
  }
  return form;
}

/// Whether `a` and `b` hold the same array: one value, or two whole reads of
/// one tensor in one block with no store into it between them (as they are
/// before CSE merges them).
static bool sameArray(Value a, Value b) {
  if (a == b)
    return true;
  auto first = a.getDefiningOp<ReadOp>(), second = b.getDefiningOp<ReadOp>();
  if (!first || !second || first.getSource() != second.getSource() ||
      !first.getIndices().empty() || !second.getIndices().empty() ||
      first->getBlock() != second->getBlock())
    return false;
  if (second->isBeforeInBlock(first))
    std::swap(first, second);
  for (Operation *op = first->getNextNode(); op != second;
       op = op->getNextNode()) {
    WalkResult stores = op->walk([&](StoreOp store) {
      return store.getTensor() == first.getSource() ? WalkResult::interrupt()
                                                    : WalkResult::advance();
    });
    if (stores.wasInterrupted())
      return false;
  }
  return true;
}

FailureOr<QuadraticContract>
SoftmaxContractOp::matchQuadratic(std::string &reason) {
  auto fail = [&](const char *why) -> FailureOr<QuadraticContract> {
    reason = why;
    return failure();
  };
  if (getNumRowIndices() != 1)
    return fail("it does not have exactly one row index");
  if (hasPredicate() || getTemperature() || getGivenLse())
    return fail("it has a predicate, a temperature or a given normaliser");
  Operation *self = getOperation();
  auto outside = [&](Value v) {
    return !self->isAncestor(v.getParentRegion()->getParentOp());
  };
  QuadraticContract form;
  // Row values: scalars computed outside (Σ_c w(r, c) · v = v where the
  // row's weights sum to 1).
  for (Value value : getRowValues()) {
    if (!outside(value) || !cast<ArrayType>(value.getType()).isScalar())
      return fail("a row value is not a scalar computed outside it");
    form.rowScalars.push_back(value);
  }
  auto rankOf = [](Value v) { return cast<ArrayType>(v.getType()).getRank(); };
  // d = points[r] − means[c], in a region whose arguments are (r, c).
  auto isCentred = [&](Value value, Block &block) {
    auto difference = value.getDefiningOp<SubOp>();
    if (!difference)
      return false;
    Value points =
        tableRowAt(difference.getLhs(), self, {block.getArgument(0)});
    Value means = tableRowAt(difference.getRhs(), self, {block.getArgument(1)});
    if (!points || !means || rankOf(points) != 2 || rankOf(means) != 2)
      return false;
    if (!form.points) {
      form.points = points;
      form.means = means;
    }
    return sameArray(points, form.points) && sameArray(means, form.means);
  };

  // The score: a signed sum of one quadratic form (times a scale) and at
  // most one bias.
  Block &scoreBlock = getScore().front();
  bool failedTerm = false;
  std::function<void(Value, bool)> addTerm = [&](Value value, bool negated) {
    Operation *op = value.getDefiningOp();
    if (auto sum = dyn_cast_or_null<AddOp>(op)) {
      addTerm(sum.getLhs(), negated);
      addTerm(sum.getRhs(), negated);
    } else if (auto difference = dyn_cast_or_null<SubOp>(op)) {
      addTerm(difference.getLhs(), negated);
      addTerm(difference.getRhs(), !negated);
    } else if (auto negation = dyn_cast_or_null<NegOp>(op)) {
      addTerm(negation.getOperand(), !negated);
    } else if (auto product = dyn_cast_or_null<MulOp>(op)) {
      Value scale = product.getLhs(), quad = product.getRhs();
      if (!outside(scale))
        std::swap(scale, quad);
      if (form.scale || !outside(scale) ||
          !cast<ArrayType>(scale.getType()).isScalar() ||
          !quad.getDefiningOp<QuadOp>()) {
        failedTerm = true;
        return;
      }
      form.scale = scale;
      addTerm(quad, negated);
    } else if (auto quad = dyn_cast_or_null<QuadOp>(op)) {
      if (form.precisions || !isCentred(quad.getVector(), scoreBlock)) {
        failedTerm = true;
        return;
      }
      form.precisions =
          tableRowAt(quad.getMatrix(), self, {scoreBlock.getArgument(1)});
      form.negated = negated;
      if (!form.precisions || rankOf(form.precisions) != 3)
        failedTerm = true;
    } else if (Value bias =
                   tableRowAt(value, self, {scoreBlock.getArgument(1)})) {
      if (form.bias || negated || rankOf(bias) != 1)
        failedTerm = true;
      form.bias = bias;
    } else {
      failedTerm = true;
    }
  };
  addTerm(getScoreValue(), false);
  if (failedTerm || !form.precisions)
    return fail("its score is not bias[c] ± scale · quad(X[r] − M[c], P[c])");

  Block &valueBlock = getColSums().front();
  for (Value value : getColValues()) {
    if (auto constant = value.getDefiningOp<ConstantOp>();
        constant && constant.getValue().convertToDouble() == 1.0) {
      form.moments.push_back(QuadraticMoment::Weight);
    } else if (Value points =
                   tableRowAt(value, self, {valueBlock.getArgument(0)});
               points && sameArray(points, form.points)) {
      form.moments.push_back(QuadraticMoment::Point);
    } else if (isCentred(value, valueBlock)) {
      form.moments.push_back(QuadraticMoment::Centred);
    } else if (auto outer = value.getDefiningOp<OuterOp>();
               outer && isCentred(outer.getLhs(), valueBlock) &&
               isCentred(outer.getRhs(), valueBlock)) {
      form.moments.push_back(QuadraticMoment::CentredOuter);
    } else {
      return fail("a column value is not 1, X[r], X[r] − M[c] or the outer "
                  "product of X[r] − M[c] with itself");
    }
  }
  return form;
}

//===----------------------------------------------------------------------===//
// BatchMatmulOp
//===----------------------------------------------------------------------===//

ArrayType BatchMatmulOp::inferType(ArrayType lhs, ArrayType rhs,
                                   bool transposeLhs, bool transposeRhs,
                                   bool sumBatch, std::string &reason,
                                   int64_t lhsRows) {
  if (lhsRows < 1 || (lhsRows > 1 && transposeLhs && transposeRhs)) {
    reason = "expected at least one row axis of lhs, and rhs not transposed "
             "when lhs is with several";
    return {};
  }
  // lhs: [batch?, m₁, …, m_r, k]; rhs: [batch?, k, n], or, with lhs
  // transposed, [batch?, m₁, …, m_r, n].
  int64_t rhsRows = transposeLhs ? lhsRows : 1;
  int64_t lhsRank = lhs.getRank(), rhsRank = rhs.getRank();
  if ((lhsRank != lhsRows + 1 && lhsRank != lhsRows + 2) ||
      (rhsRank != rhsRows + 1 && rhsRank != rhsRows + 2)) {
    reason = lhsRows == 1
                 ? "expected operands of two or three axes"
                 : "expected lhs of " + std::to_string(lhsRows + 1) + " or " +
                       std::to_string(lhsRows + 2) + " axes and rhs of " +
                       (rhsRows == 1 ? std::string("two or three")
                                     : std::to_string(rhsRows + 1) + " or " +
                                           std::to_string(rhsRows + 2));
    return {};
  }
  StringAttr lhsBatch =
      lhsRank == lhsRows + 2 ? lhs.getShape().front() : StringAttr();
  StringAttr rhsBatch =
      rhsRank == rhsRows + 2 ? rhs.getShape().front() : StringAttr();
  // Without a batch axis (two matrices), a batch of one: the product of
  // rows of positions with a matrix, or with `summed` a sum over positions.
  StringAttr batch = lhsBatch ? lhsBatch : rhsBatch;
  if (lhsBatch && rhsBatch && lhsBatch != rhsBatch) {
    reason = "expected one batch axis, the first of an operand of three axes "
             "(the same when both have one)";
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
  if (!sumBatch && batch)
    dims.push_back(batch);
  llvm::append_range(dims, rows);
  dims.push_back(columns);
  return ArrayType::get(lhs.getContext(), dims);
}

LogicalResult BatchMatmulOp::verify() {
  std::string reason;
  ArrayType expected =
      inferType(cast<ArrayType>(getLhs().getType()),
                cast<ArrayType>(getRhs().getType()), getTransposeLhs(),
                getTransposeRhs(), getSumBatch(), reason, getLhsRows());
  if (!expected)
    return emitOpError(reason);
  if (expected != getType())
    return emitOpError("expected result type ") << expected;
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
