//===- EnergyOps.cpp - Structure ops of the energy dialect ----------------===//
//
// Syntax and verification of the ops that give a model its structure: the
// model, dims, tensors, lets, terms and outputs. Reductions, gradient
// programs and the dynamics are in EnergyProgramOps.cpp, expression ops in
// EnergyExprOps.cpp. The generated definitions of every op are included
// here, the derivative table of EnergyExprOps.td among them.
//
//===----------------------------------------------------------------------===//

#include "OpSyntax.h"
#include "energy/Interfaces/ExprBuilder.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>

using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::syntax;

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

ParseResult syntax::parseNumber(AsmParser &parser, double &value) {
  bool negative = succeeded(parser.parseOptionalMinus());
  uint64_t integer;
  OptionalParseResult parsed = parser.parseOptionalInteger(integer);
  if (parsed.has_value()) {
    if (failed(*parsed))
      return failure();
    value = static_cast<double>(integer);
  } else if (parser.parseFloat(value)) {
    return failure();
  }
  if (negative)
    value = -value;
  return success();
}

ParseResult
syntax::parseIndexDomain(OpAsmParser &parser, AsmParser::Delimiter delimiter,
                         SmallVectorImpl<OpAsmParser::Argument> &indices,
                         ArrayAttr &sizes) {
  SmallVector<Attribute> sizeAttrs;
  Type indexType = parser.getBuilder().getIndexType();
  if (parser.parseCommaSeparatedList(delimiter, [&]() -> ParseResult {
        OpAsmParser::Argument index;
        DimExprAttr size;
        if (parser.parseArgument(index) || parser.parseColon() ||
            parseDimExpr(parser, size))
          return failure();
        index.type = indexType;
        indices.push_back(index);
        sizeAttrs.push_back(size);
        return success();
      }))
    return failure();
  sizes = parser.getBuilder().getArrayAttr(sizeAttrs);
  return success();
}

void syntax::printIndexDomain(OpAsmPrinter &printer, Block &block,
                              ArrayAttr sizes, StringRef open,
                              StringRef close) {
  printer << open;
  llvm::interleaveComma(
      llvm::zip(block.getArguments(), sizes), printer, [&](auto pair) {
        printer.printRegionArgument(std::get<0>(pair), {},
                                    /*omitType=*/true);
        printer << " : ";
        printDimExpr(printer, cast<DimExprAttr>(std::get<1>(pair)));
      });
  printer << close;
}

LogicalResult syntax::verifyIndexArguments(Operation *op, Region &region,
                                           unsigned indexCount,
                                           StringRef what) {
  if (region.empty())
    return op->emitOpError() << "expects a " << what;
  Block &block = region.front();
  if (block.getNumArguments() != indexCount)
    return op->emitOpError()
           << "expects " << indexCount << " index arguments in its " << what
           << ", found " << block.getNumArguments();
  for (BlockArgument argument : block.getArguments())
    if (!argument.getType().isIndex())
      return op->emitOpError() << "expects index arguments in its " << what;
  return success();
}

LogicalResult syntax::verifyBody(Operation *op, Region &region,
                                 unsigned indexCount, TypeRange expected,
                                 StringRef what) {
  if (failed(verifyIndexArguments(op, region, indexCount, what)))
    return failure();
  Block &block = region.front();
  auto yield = block.empty() ? YieldOp() : dyn_cast<YieldOp>(block.back());
  if (!yield)
    return op->emitOpError()
           << "expects its " << what << " to end with 'energy.yield'";
  if (yield.getValues().getTypes() != expected) {
    InFlightDiagnostic diag = op->emitOpError()
                              << "expects its " << what << " to yield ";
    if (expected.size() == 1)
      diag << expected.front();
    else
      diag << expected.size() << " values";
    diag << ", found ";
    llvm::interleaveComma(yield.getValues().getTypes(), diag);
    return diag;
  }
  return success();
}

LogicalResult syntax::verifyDimNames(Operation *user,
                                     SymbolTableCollection &tables,
                                     DimExprAttr size) {
  for (StringAttr name : size.getNames()) {
    Operation *found = tables.lookupNearestSymbolFrom(
        user, FlatSymbolRefAttr::get(name.getContext(), name));
    if (!isa_and_nonnull<DimOp>(found))
      return user->emitOpError()
             << "refers to '@" << name.getValue() << "', which is not a dim";
  }
  return success();
}

LogicalResult syntax::verifyDimNames(Operation *user,
                                     SymbolTableCollection &tables,
                                     ArrayAttr sizes) {
  for (Attribute size : sizes)
    if (failed(verifyDimNames(user, tables, cast<DimExprAttr>(size))))
      return failure();
  return success();
}

namespace {

/// Shape of a comprehension (let or output): domain dims, then element dims.
ArrayType comprehensionType(ArrayAttr domain, ArrayType element) {
  SmallVector<StringAttr> dims;
  for (Attribute size : domain) {
    std::optional<StringRef> name = cast<DimExprAttr>(size).getDimName();
    dims.push_back(StringAttr::get(element.getContext(), name.value_or("?")));
  }
  llvm::append_range(dims, element.getShape());
  return ArrayType::get(element.getContext(), dims);
}

template <typename ComprehensionOp>
ParseResult parseComprehension(OpAsmParser &parser, OperationState &result) {
  StringAttr name;
  SmallVector<OpAsmParser::Argument> indices;
  ArrayAttr domain;
  Type elementType;
  if (parser.parseSymbolName(name) ||
      parseIndexDomain(parser, AsmParser::Delimiter::Square, indices, domain) ||
      parser.parseColon() || parser.parseType(elementType))
    return failure();
  result.addAttribute("sym_name", name);
  result.addAttribute("domain", domain);
  result.addAttribute("element_type", TypeAttr::get(elementType));
  if (parser.parseOptionalAttrDictWithKeyword(result.attributes) ||
      parser.parseRegion(*result.addRegion(), indices))
    return failure();
  return success();
}

template <typename ComprehensionOp>
void printComprehension(OpAsmPrinter &printer, ComprehensionOp op) {
  printer << ' ';
  printer.printSymbolName(op.getSymName());
  printer << ' ';
  printIndexDomain(printer, op.getBody().front(), op.getDomain(), "[", "]");
  printer << " : " << op.getElementType();
  printer.printOptionalAttrDictWithKeyword(
      op->getAttrs(), {"sym_name", "domain", "element_type"});
  printer << ' ';
  printer.printRegion(op.getBody(), /*printEntryBlockArgs=*/false);
}

template <typename ComprehensionOp>
LogicalResult verifyComprehension(ComprehensionOp op) {
  for (Attribute size : op.getDomain())
    if (!cast<DimExprAttr>(size).getDimName())
      return op.emitOpError() << "expects each index to range over a dim, "
                                 "found an expression";
  return verifyBody(op, op.getBody(), op.getDomain().size(),
                    {op.getElementType()}, "body");
}
} // namespace

void syntax::nameIndices(Region &region, OpAsmSetValueNameFn setName) {
  for (BlockArgument argument : region.getArguments())
    if (auto name = dyn_cast<NameLoc>(argument.getLoc()))
      setName(argument, name.getName().getValue());
}

ParseResult syntax::parseBlock(OpAsmParser &parser, Region &region) {
  if (parser.parseRegion(region, /*arguments=*/{}))
    return failure();
  if (region.empty())
    region.emplaceBlock();
  return success();
}

void syntax::printBlock(OpAsmPrinter &printer, Operation *, Region &region) {
  printer.printRegion(region, /*printEntryBlockArgs=*/false);
}

void LetOp::getAsmBlockArgumentNames(Region &region,
                                     OpAsmSetValueNameFn setName) {
  nameIndices(region, setName);
}
void OutputOp::getAsmBlockArgumentNames(Region &region,
                                        OpAsmSetValueNameFn setName) {
  nameIndices(region, setName);
}
void ReduceOp::getAsmBlockArgumentNames(Region &region,
                                        OpAsmSetValueNameFn setName) {
  nameIndices(region, setName);
}
void ForeachOp::getAsmBlockArgumentNames(Region &region,
                                         OpAsmSetValueNameFn setName) {
  nameIndices(region, setName);
}

//===----------------------------------------------------------------------===//
// ModelOp
//===----------------------------------------------------------------------===//

void ModelOp::build(OpBuilder &builder, OperationState &state, StringRef name) {
  state.addAttribute(mlir::SymbolTable::getSymbolAttrName(),
                     builder.getStringAttr(name));
  state.addRegion()->emplaceBlock();
}

DynamicsOp ModelOp::getDynamics() {
  auto range = getBody().front().getOps<DynamicsOp>();
  return range.empty() ? DynamicsOp() : *range.begin();
}

LogicalResult ModelOp::verifyRegions() {
  llvm::StringSet<> dims;
  unsigned dynamicsCount = 0;
  for (Operation &op : getBody().front()) {
    if (!isa<DimOp, TensorOp, ConstOp, LetOp, TermOp, OutputOp, DynamicsOp,
             GradientOp, UpdateProgramOp, BackwardProgramOp, IndexCheckOp>(op))
      return op.emitOpError()
             << "cannot appear in a model; a model holds dims, tensors, "
                "consts, lets, terms, outputs, dynamics, gradients, update "
                "programs, backward programs and index checks";
    if (auto dim = dyn_cast<DimOp>(op))
      dims.insert(dim.getSymName());
    if (isa<DynamicsOp>(op) && ++dynamicsCount > 1)
      return op.emitOpError() << "is the second dynamics of the model; a "
                                 "model has at most one";
  }
  // Every array type in the model must be over declared dims.
  WalkResult result = getBody().walk([&](Operation *op) -> WalkResult {
    auto check = [&](Type type) -> LogicalResult {
      auto array = dyn_cast<ArrayType>(type);
      if (!array)
        return success();
      for (StringAttr dim : array.getShape())
        if (!dims.contains(dim.getValue()))
          return op->emitOpError()
                 << "uses the type " << type << " over '" << dim.getValue()
                 << "', which is not a dim of the model";
      return success();
    };
    for (Type type : op->getResultTypes())
      if (failed(check(type)))
        return WalkResult::interrupt();
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (Type type : block.getArgumentTypes())
          if (failed(check(type)))
            return WalkResult::interrupt();
    for (NamedAttribute attr : op->getAttrs())
      if (auto typeAttr = dyn_cast<TypeAttr>(attr.getValue()))
        if (failed(check(typeAttr.getValue())))
          return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

//===----------------------------------------------------------------------===//
// DimOp
//===----------------------------------------------------------------------===//

// dim-op ::= `energy.dim` @name (`=` dim-expr)?
ParseResult DimOp::parse(OpAsmParser &parser, OperationState &result) {
  StringAttr name;
  if (parser.parseSymbolName(name))
    return failure();
  result.addAttribute("sym_name", name);
  if (succeeded(parser.parseOptionalEqual())) {
    DimExprAttr value;
    if (parseDimExpr(parser, value))
      return failure();
    if (auto constant = dyn_cast<AffineConstantExpr>(value.getExpr()))
      result.addAttribute(
          "default_value",
          parser.getBuilder().getI64IntegerAttr(constant.getValue()));
    else
      result.addAttribute("derived", value);
  }
  return parser.parseOptionalAttrDict(result.attributes);
}

void DimOp::print(OpAsmPrinter &printer) {
  printer << ' ';
  printer.printSymbolName(getSymName());
  if (std::optional<int64_t> value = getDefaultValue())
    printer << " = " << *value;
  if (DimExprAttr derived = getDerivedAttr()) {
    printer << " = ";
    printDimExpr(printer, derived);
  }
  printer.printOptionalAttrDict((*this)->getAttrs(),
                                {"sym_name", "default_value", "derived"});
}

LogicalResult DimOp::verify() {
  if (getDefaultValue() && getDerived())
    return emitOpError("has both a default and a derivation");
  if (std::optional<int64_t> value = getDefaultValue(); value && *value <= 0)
    return emitOpError() << "has default " << *value
                         << "; a dim's size must be positive";
  return success();
}

LogicalResult DimOp::verifySymbolUses(SymbolTableCollection &tables) {
  DimExprAttr derived = getDerivedAttr();
  if (!derived)
    return success();
  for (StringAttr name : derived.getNames()) {
    auto dim = tables.lookupNearestSymbolFrom<DimOp>(
        *this, FlatSymbolRefAttr::get(name));
    if (!dim)
      return emitOpError() << "is derived from '@" << name.getValue()
                           << "', which is not a dim";
    if (dim == *this || !dim->isBeforeInBlock(*this))
      return emitOpError() << "is derived from '@" << name.getValue()
                           << "', which is not declared before it";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// TensorOp
//===----------------------------------------------------------------------===//

// tensor-op ::= `energy.tensor` @name `:` role `[` @dim, ... `]`
//               (`=` (@source | init-kind (`(` float, ... `)`)?))?
ParseResult TensorOp::parse(OpAsmParser &parser, OperationState &result) {
  MLIRContext *context = parser.getContext();
  StringAttr name;
  std::string roleName;
  SMLoc roleLoc;
  SmallVector<Attribute> shape;
  if (parser.parseSymbolName(name) || parser.parseColon() ||
      parser.getCurrentLocation(&roleLoc) ||
      parser.parseKeywordOrString(&roleName) ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
        FlatSymbolRefAttr dim;
        if (parser.parseAttribute(dim))
          return failure();
        shape.push_back(dim);
        return success();
      }))
    return failure();
  std::optional<Role> role = symbolizeRole(roleName);
  if (!role)
    return parser.emitError(roleLoc) << "unknown role '" << roleName
                                     << "'; expected input, param or state";
  result.addAttribute("sym_name", name);
  result.addAttribute("role", RoleAttr::get(context, *role));
  result.addAttribute("shape", ArrayAttr::get(context, shape));
  if (succeeded(parser.parseOptionalEqual())) {
    StringAttr source;
    if (succeeded(parser.parseOptionalSymbolName(source))) {
      result.addAttribute("init", InitKindAttr::get(context, InitKind::copy));
      result.addAttribute("init_source", FlatSymbolRefAttr::get(source));
    } else {
      std::string kindName;
      SMLoc kindLoc = parser.getCurrentLocation();
      if (parser.parseKeywordOrString(&kindName))
        return failure();
      std::optional<InitKind> kind = symbolizeInitKind(kindName);
      if (!kind || *kind == InitKind::copy)
        return parser.emitError(kindLoc)
               << "unknown initialiser '" << kindName
               << "'; expected zeros, ones, eye, normal, uniform or @tensor";
      result.addAttribute("init", InitKindAttr::get(context, *kind));
      SmallVector<double> args;
      if (succeeded(parser.parseOptionalLParen())) {
        if (parser.parseCommaSeparatedList([&] {
              double value;
              if (parseNumber(parser, value))
                return failure();
              args.push_back(value);
              return success();
            }) ||
            parser.parseRParen())
          return failure();
        result.addAttribute("init_args", DenseF64ArrayAttr::get(context, args));
      }
    }
  }
  return parser.parseOptionalAttrDict(result.attributes);
}

void TensorOp::print(OpAsmPrinter &printer) {
  printer << ' ';
  printer.printSymbolName(getSymName());
  printer << " : " << stringifyRole(getRole()) << " [";
  llvm::interleaveComma(getShape(), printer,
                        [&](Attribute dim) { printer.printAttribute(dim); });
  printer << ']';
  if (std::optional<InitKind> kind = getInit()) {
    printer << " = ";
    if (*kind == InitKind::copy) {
      printer.printAttribute(getInitSourceAttr());
    } else {
      printer << stringifyInitKind(*kind);
      if (std::optional<ArrayRef<double>> args = getInitArgs()) {
        printer << '(';
        llvm::interleaveComma(*args, printer, [&](double value) {
          printer.printFloat(APFloat(value));
        });
        printer << ')';
      }
    }
  }
  printer.printOptionalAttrDict(
      (*this)->getAttrs(),
      {"sym_name", "role", "shape", "init", "init_args", "init_source"});
}

bool TensorOp::isForwardState() {
  return getRole() == Role::state && !getOptimizerState() && !getAdjointOf() &&
         !getCotangentOf() && !getSolverOf() && !getDeferredOf() &&
         !getCacheFlag() && !getFlagOf();
}

ArrayType TensorOp::getArrayType() {
  SmallVector<StringAttr> dims;
  for (Attribute dim : getShape())
    dims.push_back(cast<FlatSymbolRefAttr>(dim).getAttr());
  return ArrayType::get(getContext(), dims);
}

LogicalResult TensorOp::verify() {
  std::optional<InitKind> kind = getInit();
  size_t argCount = getInitArgs() ? getInitArgs()->size() : 0;
  if (!kind) {
    if (argCount || getInitSource())
      return emitOpError("has initialiser arguments but no initialiser");
    return success();
  }
  size_t expected =
      (*kind == InitKind::normal || *kind == InitKind::uniform) ? 2 : 0;
  if (argCount != expected)
    return emitOpError() << "initialiser '" << stringifyInitKind(*kind)
                         << "' takes " << expected << " arguments, found "
                         << argCount;
  if ((*kind == InitKind::copy) != static_cast<bool>(getInitSource()))
    return emitOpError("copies a tensor only with an initialiser 'copy'");
  if (*kind == InitKind::normal && (*getInitArgs())[1] < 0)
    return emitOpError("initialiser 'normal' needs a non-negative "
                       "standard deviation");
  if (*kind == InitKind::uniform && (*getInitArgs())[0] > (*getInitArgs())[1])
    return emitOpError("initialiser 'uniform' needs low <= high");
  if (*kind == InitKind::eye) {
    ArrayAttr shape = getShape();
    if (shape.size() < 2 || shape[shape.size() - 1] != shape[shape.size() - 2])
      return emitOpError("initialiser 'eye' needs the last two axes to be "
                         "the same dim");
  }
  return success();
}

LogicalResult TensorOp::verifySymbolUses(SymbolTableCollection &tables) {
  for (Attribute dim : getShape())
    if (!tables.lookupNearestSymbolFrom<DimOp>(*this,
                                               cast<FlatSymbolRefAttr>(dim)))
      return emitOpError() << "has shape over " << dim
                           << ", which is not a dim";
  if (FlatSymbolRefAttr source = getInitSourceAttr()) {
    auto tensor = tables.lookupNearestSymbolFrom<TensorOp>(*this, source);
    if (!tensor)
      return emitOpError() << "is initialised from " << source
                           << ", which is not a tensor";
    if (tensor.getArrayType() != getArrayType())
      return emitOpError() << "of shape " << getArrayType().shapeString()
                           << " is initialised from " << source << " of shape "
                           << tensor.getArrayType().shapeString();
  }
  // Cotangents and the implicit solve's vectors may be those of a let, a
  // caller's cotangent that of an output.
  enum class Names { Tensor, TensorOrLet, TensorOrOutput };
  std::tuple<StringRef, FlatSymbolRefAttr, Names> provenances[] = {
      {"optimizer_state", getOptimizerStateAttr(), Names::Tensor},
      {"adjoint_of", getAdjointOfAttr(), Names::Tensor},
      {"cotangent_of", getCotangentOfAttr(), Names::TensorOrLet},
      {"solver_of", getSolverOfAttr(), Names::TensorOrLet},
      {"deferred_of", getDeferredOfAttr(), Names::Tensor},
      {"cache_flag", getCacheFlagAttr(), Names::Tensor},
      {"flag_of", getFlagOfAttr(), Names::Tensor},
      {"incoming_of", getIncomingOfAttr(), Names::TensorOrOutput}};
  for (auto [name, of, names] : provenances) {
    if (!of)
      continue;
    Operation *named = tables.lookupNearestSymbolFrom(*this, of);
    if (isa_and_nonnull<TensorOp>(named) ||
        (names == Names::TensorOrLet && isa_and_nonnull<LetOp>(named)) ||
        (names == Names::TensorOrOutput && isa_and_nonnull<OutputOp>(named)))
      continue;
    return emitOpError() << "has " << name << " = " << of
                         << ", which is not a tensor"
                         << (names == Names::TensorOrLet      ? " or a let"
                             : names == Names::TensorOrOutput ? " or an output"
                                                              : "");
  }
  return success();
}

//===----------------------------------------------------------------------===//
// LetOp, TermOp, OutputOp, YieldOp
//===----------------------------------------------------------------------===//

ParseResult LetOp::parse(OpAsmParser &parser, OperationState &result) {
  return parseComprehension<LetOp>(parser, result);
}
void LetOp::print(OpAsmPrinter &printer) { printComprehension(printer, *this); }
LogicalResult LetOp::verifyRegions() { return verifyComprehension(*this); }
LogicalResult LetOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyDimNames(*this, tables, getDomain());
}
ArrayType LetOp::getArrayType() {
  return comprehensionType(getDomain(), cast<ArrayType>(getElementType()));
}

ParseResult OutputOp::parse(OpAsmParser &parser, OperationState &result) {
  return parseComprehension<OutputOp>(parser, result);
}
void OutputOp::print(OpAsmPrinter &printer) {
  printComprehension(printer, *this);
}
LogicalResult OutputOp::verifyRegions() { return verifyComprehension(*this); }
LogicalResult OutputOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyDimNames(*this, tables, getDomain());
}
ArrayType OutputOp::getArrayType() {
  return comprehensionType(getDomain(), cast<ArrayType>(getElementType()));
}

LogicalResult TermOp::verify() {
  if (getLoss() && !getAuxiliary())
    return emitOpError() << "is a loss, so it must be auxiliary (a loss is "
                            "not part of the global energy)";
  return success();
}

LogicalResult TermOp::verifyRegions() {
  return verifyBody(*this, getBody(), 0, {ArrayType::getScalar(getContext())},
                    "body (an energy is a scalar)");
}

LogicalResult YieldOp::verify() {
  Operation *parent = (*this)->getParentOp();
  if (!isa_and_nonnull<LetOp, TermOp, OutputOp, ReduceOp, ForeachOp, RepeatOp,
                       DynamicsOp, UpdateOp, AssignOp, TabulateOp,
                       SoftmaxContractOp, OnceOp>(parent))
    return emitOpError() << "ends the body of an energy op, not of '"
                         << (parent ? parent->getName().getStringRef() : "")
                         << "'";
  return success();
}

#define GET_OP_CLASSES
#include "energy/IR/EnergyOps.cpp.inc"
