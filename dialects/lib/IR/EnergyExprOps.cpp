//===- EnergyExprOps.cpp - Expression ops of the energy dialect -----------===//
//
// Shape rules and verification of the ops that build energy expressions:
// reads, constants, elementwise and vector math.
//
//===----------------------------------------------------------------------===//

#include "energy/IR/EnergyOps.h"
#include "energy/IR/IndexArithmetic.h"
#include "energy/IR/PluginCode.h"
#include "energy/Plugin/FunctionTable.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::energy;

namespace {
ArrayType arrayTypeOf(Value value) { return cast<ArrayType>(value.getType()); }

ArrayType arrayOf(MLIRContext *context, ArrayRef<StringAttr> dims) {
  return ArrayType::get(context, dims);
}

LogicalResult shapeError(std::optional<Location> location, const Twine &what,
                         ArrayRef<Type> types) {
  if (!location)
    return failure();
  InFlightDiagnostic diag = emitError(*location) << what << ", found ";
  llvm::interleave(
      types, [&](Type type) { diag << cast<ArrayType>(type).shapeString(); },
      [&] { diag << " and "; });
  return diag;
}
} // namespace

LogicalResult mlir::energy::inferBroadcastType(std::optional<Location> location,
                                               Type lhs, Type rhs,
                                               SmallVectorImpl<Type> &types) {
  auto left = cast<ArrayType>(lhs);
  auto right = cast<ArrayType>(rhs);
  if (left == right || right.isScalar()) {
    types.push_back(left);
    return success();
  }
  if (left.isScalar()) {
    types.push_back(right);
    return success();
  }
  return shapeError(location,
                    "shape mismatch: elementwise operands must have equal "
                    "shapes or one must be a scalar",
                    {lhs, rhs});
}

// -(c) = (-c) for a scalar constant; -(-x) = x.
OpFoldResult NegOp::fold(FoldAdaptor adaptor) {
  if (auto number = dyn_cast_or_null<FloatAttr>(adaptor.getOperand()))
    return FloatAttr::get(number.getType(), -number.getValueAsDouble());
  if (auto inner = getOperand().getDefiningOp<NegOp>())
    return inner.getOperand();
  return {};
}

namespace {
/// -(A v) = A (-v) for a matrix A and a vector v: a matrix applied last can
/// be taken out of a sum of such products (the kernel plan takes it out of
/// softmax-weighted sums).
struct NegateVectorNotMatrix : OpRewritePattern<NegOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(NegOp neg,
                                PatternRewriter &rewriter) const override {
    auto product = neg.getOperand().getDefiningOp<MatmulOp>();
    if (!product || !product->hasOneUse() ||
        cast<ArrayType>(product.getRhs().getType()).getRank() != 1)
      return failure();
    Value negated = NegOp::create(rewriter, neg.getLoc(), product.getRhs());
    rewriter.replaceOpWithNewOp<MatmulOp>(neg, product.getLhs(), negated);
    rewriter.eraseOp(product);
    return success();
  }
};
} // namespace

namespace {
/// -(s v) = (-s) v for a scalar s: the sign joins the scalar factors.
struct NegateScalarFactor : OpRewritePattern<NegOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(NegOp neg,
                                PatternRewriter &rewriter) const override {
    auto product = neg.getOperand().getDefiningOp<MulOp>();
    if (!product || !product->hasOneUse() ||
        cast<ArrayType>(neg.getType()).isScalar())
      return failure();
    for (unsigned side = 0; side < 2; ++side) {
      Value scale = product->getOperand(side);
      if (!cast<ArrayType>(scale.getType()).isScalar())
        continue;
      Value negated = NegOp::create(rewriter, neg.getLoc(), scale);
      rewriter.replaceOpWithNewOp<MulOp>(neg, negated,
                                         product->getOperand(1 - side));
      rewriter.eraseOp(product);
      return success();
    }
    return failure();
  }
};
} // namespace

void NegOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                        MLIRContext *context) {
  patterns.add<NegateVectorNotMatrix, NegateScalarFactor>(context);
}

namespace {
/// s (A v) = A (s v) for a scalar s, a matrix A and a vector v: as for
/// negation, the matrix is applied last.
struct ScaleVectorNotMatrix : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp mul,
                                PatternRewriter &rewriter) const override {
    for (unsigned side = 0; side < 2; ++side) {
      Value scale = mul->getOperand(side);
      auto product = mul->getOperand(1 - side).getDefiningOp<MatmulOp>();
      if (!cast<ArrayType>(scale.getType()).isScalar() || !product ||
          !product->hasOneUse() ||
          cast<ArrayType>(product.getRhs().getType()).getRank() != 1)
        continue;
      Value scaled =
          MulOp::create(rewriter, mul.getLoc(), scale, product.getRhs());
      rewriter.replaceOpWithNewOp<MatmulOp>(mul, product.getLhs(), scaled);
      rewriter.eraseOp(product);
      return success();
    }
    return failure();
  }
};
} // namespace

namespace {
/// s (t v) = (s t) v for scalars s, t and an array v: scalar factors
/// gather, so that those a sum can take out of its summand come out
/// together.
struct GatherScalarFactors : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp mul,
                                PatternRewriter &rewriter) const override {
    auto isScalar = [](Value value) {
      return cast<ArrayType>(value.getType()).isScalar();
    };
    if (isScalar(mul.getResult()))
      return failure();
    for (unsigned side = 0; side < 2; ++side) {
      Value scale = mul->getOperand(side);
      auto inner = mul->getOperand(1 - side).getDefiningOp<MulOp>();
      if (!isScalar(scale) || !inner || !inner->hasOneUse())
        continue;
      for (unsigned innerSide = 0; innerSide < 2; ++innerSide) {
        Value innerScale = inner->getOperand(innerSide);
        Value array = inner->getOperand(1 - innerSide);
        if (!isScalar(innerScale) || isScalar(array))
          continue;
        Value scales = MulOp::create(rewriter, mul.getLoc(), scale, innerScale);
        rewriter.replaceOpWithNewOp<MulOp>(mul, scales, array);
        rewriter.eraseOp(inner);
        return success();
      }
    }
    return failure();
  }
};
} // namespace

void MulOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                        MLIRContext *context) {
  patterns.add<ScaleVectorNotMatrix, GatherScalarFactors>(context);
}

namespace {
/// Σ_i a_i b_i of two vectors of one shape is their dot product: the form
/// kernel planning recognises as a matrix product's entry (derivation
/// writes the adjoint of a dot product's other side so).
struct SumOfProductsIsDot : OpRewritePattern<ReduceElementsOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReduceElementsOp reduce,
                                PatternRewriter &rewriter) const override {
    if (reduce.getKind() != ElementsKind::sum)
      return failure();
    auto mul = reduce.getOperand().getDefiningOp<MulOp>();
    if (!mul || mul.getLhs().getType() != mul.getRhs().getType() ||
        cast<ArrayType>(mul.getLhs().getType()).getRank() != 1)
      return failure();
    rewriter.replaceOpWithNewOp<DotOp>(reduce, mul.getLhs(), mul.getRhs());
    return success();
  }
};
} // namespace

void ReduceElementsOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                                   MLIRContext *context) {
  patterns.add<SumOfProductsIsDot>(context);
}

namespace {
/// Whether `attr` is the scalar constant `value`.
bool isConstant(Attribute attr, double value) {
  auto number = dyn_cast_or_null<FloatAttr>(attr);
  return number && number.getValueAsDouble() == value;
}

/// Whether `value` is an array of one number: a broadcast constant.
bool isBroadcastOf(Value value, double number) {
  auto broadcast = value.getDefiningOp<BroadcastOp>();
  if (!broadcast)
    return false;
  auto constant = broadcast.getOperand().getDefiningOp<ConstantOp>();
  return constant && constant.getValueAttr().getValueAsDouble() == number;
}

/// Whether `value` is an array of zeros: a broadcast 0.
bool isBroadcastZero(Value value) { return isBroadcastOf(value, 0.0); }
} // namespace

bool mlir::energy::isConstantOf(Value value, double number) {
  auto constant = value.getDefiningOp<ConstantOp>();
  return (constant && constant.getValueAttr().getValueAsDouble() == number) ||
         isBroadcastOf(value, number);
}

// x + 0 = 0 + x = x when the sum has x's type (0 a scalar or an array of
// zeros).
OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  if ((isConstant(adaptor.getRhs(), 0.0) || isBroadcastZero(getRhs())) &&
      getLhs().getType() == getType())
    return getLhs();
  if ((isConstant(adaptor.getLhs(), 0.0) || isBroadcastZero(getLhs())) &&
      getRhs().getType() == getType())
    return getRhs();
  return {};
}

// x - 0 = x when the difference has x's type.
OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  if ((isConstant(adaptor.getRhs(), 0.0) || isBroadcastZero(getRhs())) &&
      getLhs().getType() == getType())
    return getLhs();
  return {};
}

// x * 1 = x when the product has x's type (1 a scalar or an array of ones);
// a scalar x * 0 = 0. (An array times 0 keeps its op: the fold would need
// a zero array constant.)
OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  if ((isConstant(adaptor.getRhs(), 1.0) || isBroadcastOf(getRhs(), 1.0)) &&
      getLhs().getType() == getType())
    return getLhs();
  if ((isConstant(adaptor.getLhs(), 1.0) || isBroadcastOf(getLhs(), 1.0)) &&
      getRhs().getType() == getType())
    return getRhs();
  bool scalar = cast<ArrayType>(getType()).isScalar();
  if (scalar && isConstant(adaptor.getRhs(), 0.0))
    return adaptor.getRhs();
  if (scalar && isConstant(adaptor.getLhs(), 0.0))
    return adaptor.getLhs();
  return {};
}

//===----------------------------------------------------------------------===//
// Leaves
//===----------------------------------------------------------------------===//

void ConstantOp::build(OpBuilder &builder, OperationState &state,
                       double value) {
  build(builder, state, ArrayType::getScalar(builder.getContext()),
        builder.getF64FloatAttr(value));
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValueAttr(); }

namespace {
/// Parses `@name` and, optionally, `[affine-map-of-ssa-ids]`, adding the
/// attributes `attrName` and `map`.
ParseResult
parseIndexedSymbol(OpAsmParser &parser, OperationState &result,
                   StringRef attrName,
                   SmallVectorImpl<OpAsmParser::UnresolvedOperand> &indices) {
  FlatSymbolRefAttr symbol;
  Attribute map;
  return failure(
      parser.parseAttribute(symbol, attrName, result.attributes) ||
      parser.parseAffineMapOfSSAIds(indices, map, "map", result.attributes,
                                    AsmParser::Delimiter::OptionalSquare));
}

void printIndexedSymbol(OpAsmPrinter &printer, FlatSymbolRefAttr symbol,
                        AffineMapAttr map, ValueRange indices) {
  printer.printAttribute(symbol);
  if (map.getValue().getNumResults() != 0) {
    printer << '[';
    printer.printAffineMapOfSSAIds(map, indices);
    printer << ']';
  }
}

LogicalResult verifyMapOperands(Operation *op, AffineMap map,
                                ValueRange indices) {
  if (map.getNumInputs() != indices.size())
    return op->emitOpError()
           << "has " << indices.size() << " index operands for a map of "
           << map.getNumInputs() << " inputs";
  return success();
}

/// Checks that `whole` indexed by `map` has `type`, for an op that reads or
/// writes `symbol` as `verb`.
LogicalResult verifyIndexedType(Operation *op, StringRef verb,
                                FlatSymbolRefAttr symbol, ArrayType whole,
                                AffineMap map, Type type) {
  unsigned indexCount = map.getNumResults();
  if (indexCount > whole.getRank())
    return op->emitOpError()
           << "indexes " << symbol << " of shape " << whole.shapeString()
           << " with " << indexCount << " indices";
  ArrayType expected = whole.dropFront(indexCount);
  if (expected != type)
    return op->emitOpError()
           << verb << ' ' << symbol << " as " << type << " but its element at "
           << indexCount << " indices has type " << expected;
  return success();
}
} // namespace

// read-op ::= `energy.read` @source (`[` affine-map-of-ssa-ids `]`)? attr-dict
//             `:` type
ParseResult ReadOp::parse(OpAsmParser &parser, OperationState &result) {
  SmallVector<OpAsmParser::UnresolvedOperand> indices;
  Type type;
  if (parseIndexedSymbol(parser, result, "source", indices) ||
      parser.parseOptionalAttrDict(result.attributes) ||
      parser.parseColonType(type) ||
      parser.resolveOperands(indices, parser.getBuilder().getIndexType(),
                             result.operands))
    return failure();
  result.addTypes(type);
  return success();
}

void ReadOp::print(OpAsmPrinter &printer) {
  printer << ' ';
  printIndexedSymbol(printer, getSourceAttr(), getMapAttr(), getIndices());
  printer.printOptionalAttrDict((*this)->getAttrs(), {"source", "map"});
  printer << " : " << getType();
}

LogicalResult ReadOp::verify() {
  return verifyMapOperands(*this, getMap(), getIndices());
}

LogicalResult ReadOp::verifySymbolUses(SymbolTableCollection &tables) {
  Operation *source = tables.lookupNearestSymbolFrom(*this, getSourceAttr());
  ArrayType whole;
  if (auto tensor = dyn_cast_or_null<TensorOp>(source))
    whole = tensor.getArrayType();
  else if (auto let = dyn_cast_or_null<LetOp>(source))
    whole = let.getArrayType();
  else if (isa_and_nonnull<ConstOp>(source))
    whole = ArrayType::getScalar(getContext());
  else if (isa_and_nonnull<TermOp, OutputOp>(source))
    return emitOpError() << "reads " << getSourceAttr()
                         << "; energy and output names cannot be read";
  else
    return emitOpError() << "reads " << getSourceAttr()
                         << ", which is not a tensor, let or const";
  return verifyIndexedType(*this, "reads", getSourceAttr(), whole, getMap(),
                           getType());
}

// accumulate-op ::= `energy.accumulate` %value `into` @tensor
//                   (`[` affine-map-of-ssa-ids `]`)? attr-dict `:` type
ParseResult AccumulateOp::parse(OpAsmParser &parser, OperationState &result) {
  OpAsmParser::UnresolvedOperand value;
  SmallVector<OpAsmParser::UnresolvedOperand> indices;
  Type type;
  if (parser.parseOperand(value) || parser.parseKeyword("into") ||
      parseIndexedSymbol(parser, result, "tensor", indices) ||
      parser.parseOptionalAttrDict(result.attributes) ||
      parser.parseColonType(type) ||
      parser.resolveOperand(value, type, result.operands) ||
      parser.resolveOperands(indices, parser.getBuilder().getIndexType(),
                             result.operands))
    return failure();
  return success();
}

void AccumulateOp::print(OpAsmPrinter &printer) {
  printer << ' ' << getValue() << " into ";
  printIndexedSymbol(printer, getTensorAttr(), getMapAttr(), getIndices());
  printer.printOptionalAttrDict((*this)->getAttrs(), {"tensor", "map"});
  printer << " : " << getValue().getType();
}

LogicalResult AccumulateOp::verify() {
  auto gradient = (*this)->getParentOfType<GradientOp>();
  if (!gradient)
    return emitOpError("accumulates only inside an 'energy.gradient'");
  if (!gradient.computes(getTensor()))
    return emitOpError() << "accumulates into " << getTensorAttr()
                         << " inside the gradient of "
                         << gradient.getTensorAttr();
  return verifyMapOperands(*this, getMap(), getIndices());
}

LogicalResult AccumulateOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto tensor =
      tables.lookupNearestSymbolFrom<TensorOp>(*this, getTensorAttr());
  if (!tensor)
    return emitOpError() << "accumulates into " << getTensorAttr()
                         << ", which is not a tensor";
  return verifyIndexedType(*this, "accumulates into", getTensorAttr(),
                           tensor.getArrayType(), getMap(),
                           getValue().getType());
}

namespace {
/// accumulate (embed x into [m1(i1)]) into @T[m2(i2)] adds x into
/// @T[m2(i2), m1(i1)]: the other entries of the embedded array are zeros.
struct AccumulateEmbedded : OpRewritePattern<AccumulateOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AccumulateOp accumulate,
                                PatternRewriter &rewriter) const override {
    auto embed = accumulate.getValue().getDefiningOp<EmbedOp>();
    if (!embed)
      return failure();
    AffineMap map = concatIndexMaps(accumulate.getMap(), embed.getMap());
    if (!map)
      return failure();
    SmallVector<Value> indices(accumulate.getIndices());
    llvm::append_range(indices, embed.getIndices());
    rewriter.replaceOpWithNewOp<AccumulateOp>(accumulate, embed.getValue(),
                                              accumulate.getTensorAttr(),
                                              AffineMapAttr::get(map), indices);
    return success();
  }
};

/// accumulate (a ± b) into @T[...] is accumulate a and accumulate ±b when a
/// or b is an embedded slice, which then accumulates into its slot alone.
struct AccumulateSplitSum : OpRewritePattern<AccumulateOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AccumulateOp accumulate,
                                PatternRewriter &rewriter) const override {
    Operation *def = accumulate.getValue().getDefiningOp();
    if (!isa_and_nonnull<AddOp, SubOp>(def))
      return failure();
    Value lhs = def->getOperand(0), rhs = def->getOperand(1);
    Type type = accumulate.getValue().getType();
    if (lhs.getType() != type || rhs.getType() != type ||
        !(lhs.getDefiningOp<EmbedOp>() || rhs.getDefiningOp<EmbedOp>()))
      return failure();
    Location loc = accumulate.getLoc();
    auto addInto = [&](Value value) {
      AccumulateOp::create(rewriter, loc, value, accumulate.getTensorAttr(),
                           accumulate.getMapAttr(), accumulate.getIndices());
    };
    addInto(lhs);
    addInto(isa<SubOp>(def) ? NegOp::create(rewriter, loc, rhs).getResult()
                            : rhs);
    rewriter.eraseOp(accumulate);
    return success();
  }
};
} // namespace

void AccumulateOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                               MLIRContext *context) {
  patterns.add<AccumulateEmbedded, AccumulateSplitSum>(context);
}

// extract-op ::= `energy.extract` %source `[` affine-map-of-ssa-ids `]`
//                attr-dict `:` type `->` type
ParseResult ExtractOp::parse(OpAsmParser &parser, OperationState &result) {
  OpAsmParser::UnresolvedOperand source;
  SmallVector<OpAsmParser::UnresolvedOperand> indices;
  Attribute map;
  Type sourceType, resultType;
  if (parser.parseOperand(source) ||
      parser.parseAffineMapOfSSAIds(indices, map, "map", result.attributes) ||
      parser.parseOptionalAttrDict(result.attributes) ||
      parser.parseColonType(sourceType) || parser.parseArrow() ||
      parser.parseType(resultType) ||
      parser.resolveOperand(source, sourceType, result.operands) ||
      parser.resolveOperands(indices, parser.getBuilder().getIndexType(),
                             result.operands))
    return failure();
  result.addTypes(resultType);
  return success();
}

void ExtractOp::print(OpAsmPrinter &printer) {
  printer << ' ' << getSource() << '[';
  printer.printAffineMapOfSSAIds(getMapAttr(), getIndices());
  printer << ']';
  printer.printOptionalAttrDict((*this)->getAttrs(), {"map"});
  printer << " : " << getSource().getType() << " -> " << getType();
}

LogicalResult ExtractOp::verify() {
  if (failed(verifyMapOperands(*this, getMap(), getIndices())))
    return failure();
  return verifyIndexedType(*this, "extracts from",
                           FlatSymbolRefAttr::get(getContext(), "value"),
                           arrayTypeOf(getSource()), getMap(), getType());
}

// embed-op ::= `energy.embed` %value `into` `[` affine-map-of-ssa-ids `]`
//              attr-dict `:` type `->` type
ParseResult EmbedOp::parse(OpAsmParser &parser, OperationState &result) {
  OpAsmParser::UnresolvedOperand value;
  SmallVector<OpAsmParser::UnresolvedOperand> indices;
  Attribute map;
  Type valueType, resultType;
  if (parser.parseOperand(value) || parser.parseKeyword("into") ||
      parser.parseAffineMapOfSSAIds(indices, map, "map", result.attributes) ||
      parser.parseOptionalAttrDict(result.attributes) ||
      parser.parseColonType(valueType) || parser.parseArrow() ||
      parser.parseType(resultType) ||
      parser.resolveOperand(value, valueType, result.operands) ||
      parser.resolveOperands(indices, parser.getBuilder().getIndexType(),
                             result.operands))
    return failure();
  result.addTypes(resultType);
  return success();
}

void EmbedOp::print(OpAsmPrinter &printer) {
  printer << ' ' << getValue() << " into [";
  printer.printAffineMapOfSSAIds(getMapAttr(), getIndices());
  printer << ']';
  printer.printOptionalAttrDict((*this)->getAttrs(), {"map"});
  printer << " : " << getValue().getType() << " -> " << getType();
}

LogicalResult EmbedOp::verify() {
  if (failed(verifyMapOperands(*this, getMap(), getIndices())))
    return failure();
  return verifyIndexedType(
      *this, "embeds into", FlatSymbolRefAttr::get(getContext(), "result"),
      arrayTypeOf(getResult()), getMap(), getValue().getType());
}

LogicalResult SizeOp::verifySymbolUses(SymbolTableCollection &tables) {
  for (StringAttr name : getSize().getNames())
    if (!tables.lookupNearestSymbolFrom<DimOp>(*this,
                                               FlatSymbolRefAttr::get(name)))
      return emitOpError() << "refers to '@" << name.getValue()
                           << "', which is not a dim";
  return success();
}

LogicalResult EyeOp::verify() {
  StringAttr dim = getDimAttr().getAttr();
  if (getType() != arrayOf(getContext(), {dim, dim}))
    return emitOpError() << "of " << getDimAttr() << " has type " << getType()
                         << "; expected a square matrix over '"
                         << dim.getValue() << "'";
  return success();
}

LogicalResult EyeOp::verifySymbolUses(SymbolTableCollection &tables) {
  if (!tables.lookupNearestSymbolFrom<DimOp>(*this, getDimAttr()))
    return emitOpError() << "refers to " << getDimAttr()
                         << ", which is not a dim";
  return success();
}

//===----------------------------------------------------------------------===//
// Vector and matrix math
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *context,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  auto lhs = cast<ArrayType>(adaptor.getLhs().getType());
  auto rhs = cast<ArrayType>(adaptor.getRhs().getType());
  if (lhs.getRank() != 2 || (rhs.getRank() != 1 && rhs.getRank() != 2) ||
      lhs.getShape()[1] != rhs.getShape()[0])
    return shapeError(location,
                      "shape mismatch in '@': expected [m, n] @ [n] or "
                      "[m, n] @ [n, k]",
                      {lhs, rhs});
  SmallVector<StringAttr> dims = {lhs.getShape()[0]};
  if (rhs.getRank() == 2)
    dims.push_back(rhs.getShape()[1]);
  types.push_back(arrayOf(context, dims));
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *context,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  auto operand = cast<ArrayType>(adaptor.getOperand().getType());
  if (operand.getRank() < 2)
    return shapeError(location, "transpose expects at least two axes",
                      {operand});
  SmallVector<StringAttr> dims(operand.getShape());
  std::swap(dims[dims.size() - 1], dims[dims.size() - 2]);
  types.push_back(arrayOf(context, dims));
  return success();
}

// (xᵀ)ᵀ = x.
OpFoldResult TransposeOp::fold(FoldAdaptor) {
  if (auto inner = getOperand().getDefiningOp<TransposeOp>())
    return inner.getOperand();
  return {};
}

LogicalResult DotOp::verify() {
  std::optional<Location> location = getLoc();
  ArrayType lhs = arrayTypeOf(getLhs()), rhs = arrayTypeOf(getRhs());
  if (lhs.getRank() != 1 || lhs != rhs)
    return shapeError(location,
                      "shape mismatch in dot: expected two vectors of the "
                      "same length",
                      {lhs, rhs});
  return success();
}

LogicalResult QuadOp::verify() {
  std::optional<Location> location = getLoc();
  ArrayType vector = arrayTypeOf(getVector()),
            matrix = arrayTypeOf(getMatrix());
  if (vector.getRank() != 1 || matrix.getRank() != 2 ||
      matrix.getShape()[0] != vector.getShape()[0] ||
      matrix.getShape()[1] != vector.getShape()[0])
    return shapeError(location,
                      "shape mismatch in quad: expected a vector [n] and a "
                      "matrix [n, n]",
                      {vector, matrix});
  return success();
}

LogicalResult OuterOp::inferReturnTypes(MLIRContext *context,
                                        std::optional<Location> location,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  auto lhs = cast<ArrayType>(adaptor.getLhs().getType());
  auto rhs = cast<ArrayType>(adaptor.getRhs().getType());
  if (lhs.getRank() != 1 || rhs.getRank() != 1)
    return shapeError(location, "outer expects two vectors", {lhs, rhs});
  types.push_back(arrayOf(context, {lhs.getShape()[0], rhs.getShape()[0]}));
  return success();
}

LogicalResult SumLastOp::inferReturnTypes(MLIRContext *context,
                                          std::optional<Location> location,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  auto operand = cast<ArrayType>(adaptor.getOperand().getType());
  if (operand.isScalar())
    return shapeError(location, "sum_last expects at least one axis",
                      {operand});
  types.push_back(arrayOf(context, operand.getShape().drop_back()));
  return success();
}

// sum_last(embed x into [j]) = x for a scalar x in a vector: the one
// entry that is not zero.
OpFoldResult SumLastOp::fold(FoldAdaptor) {
  auto embed = getOperand().getDefiningOp<EmbedOp>();
  if (embed && embed.getValue().getType() == getType() &&
      arrayTypeOf(embed.getResult()).getRank() == 1)
    return embed.getValue();
  return {};
}

LogicalResult DiagOp::inferReturnTypes(MLIRContext *context,
                                       std::optional<Location> location,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &types) {
  auto operand = cast<ArrayType>(adaptor.getOperand().getType());
  if (operand.getRank() != 1)
    return shapeError(location, "diag expects a vector", {operand});
  types.push_back(
      arrayOf(context, {operand.getShape()[0], operand.getShape()[0]}));
  return success();
}

/// Whether `type` is a square matrix.
static bool isSquareMatrix(ArrayType type) {
  return type.getRank() == 2 && type.getShape()[0] == type.getShape()[1];
}

LogicalResult DiagPartOp::inferReturnTypes(MLIRContext *context,
                                           std::optional<Location> location,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &types) {
  auto operand = cast<ArrayType>(adaptor.getOperand().getType());
  if (!isSquareMatrix(operand))
    return shapeError(location, "diag_part expects a square matrix", {operand});
  types.push_back(arrayOf(context, {operand.getShape()[0]}));
  return success();
}

LogicalResult LogDetOp::verify() {
  ArrayType operand = arrayTypeOf(getOperand());
  if (!isSquareMatrix(operand))
    return shapeError(getLoc(), "logdet expects a square matrix", {operand});
  return success();
}

LogicalResult InverseOp::verify() {
  ArrayType type = arrayTypeOf(getResult());
  if (!isSquareMatrix(type))
    return emitOpError() << "expects a square matrix, found "
                         << type.shapeString();
  return success();
}

LogicalResult BroadcastOp::verify() {
  ArrayType fromType = arrayTypeOf(getOperand());
  ArrayType toType = arrayTypeOf(getResult());
  ArrayRef<StringAttr> from = fromType.getShape(), to = toType.getShape();
  if (from.size() >= to.size() || to.take_front(from.size()) != from)
    return emitOpError() << "cannot broadcast " << fromType.shapeString()
                         << " to " << toType.shapeString()
                         << "; the operand's shape must be a proper prefix";
  return success();
}

//===----------------------------------------------------------------------===//
// Plugins' functions and aggregations
//===----------------------------------------------------------------------===//

/// The plugin function `name` of `kind`, or an error on `op` saying how to
/// make it known.
static FailureOr<const ::energy::plugin::FunctionInfo *>
lookupPluginFunction(Operation *op, StringRef name,
                     ::energy::plugin::FunctionKind kind) {
  const ::energy::plugin::FunctionInfo *function =
      ::energy::plugin::getFunctionTable().lookup(name);
  if (!function || function->kind != kind)
    return op->emitOpError()
           << "names '" << name << "', which no loaded plugin registers as "
           << (kind == ::energy::plugin::FunctionKind::Elementwise
                   ? "an element-wise function"
                   : "a similarity")
           << " (load its plugin with --plugin)";
  return function;
}

LogicalResult ApplyOp::verify() {
  auto function = lookupPluginFunction(
      *this, getFunction(), ::energy::plugin::FunctionKind::Elementwise);
  if (failed(function))
    return failure();
  size_t orders = (*function)->code.symbols.size();
  if (getOrder() < 0 || static_cast<size_t>(getOrder()) >= orders)
    return emitOpError() << "asks for derivative " << getOrder() << " of '"
                         << getFunction()
                         << "', whose plugin gives orders 0 to " << orders - 1;
  return success();
}

static LogicalResult verifyVectors(Operation *op, Value vector) {
  if (arrayTypeOf(vector).getRank() != 1)
    return op->emitOpError()
           << "expects vectors, found " << arrayTypeOf(vector).shapeString();
  return success();
}

LogicalResult SimilarityOp::verify() {
  if (failed(lookupPluginFunction(*this, getFunction(),
                                  ::energy::plugin::FunctionKind::Similarity)))
    return failure();
  return verifyVectors(*this, getLhs());
}

LogicalResult SimilarityGradientOp::verify() {
  if (failed(lookupPluginFunction(*this, getFunction(),
                                  ::energy::plugin::FunctionKind::Similarity)))
    return failure();
  if (getArgument() != 0 && getArgument() != 1)
    return emitOpError() << "argument must be 0 or 1, not " << getArgument();
  return verifyVectors(*this, getLhs());
}

LogicalResult mlir::energy::verifyPluginAggregation(Operation *op,
                                                    StringRef name) {
  const ::energy::plugin::AggregationInfo *aggregation =
      ::energy::plugin::getAggregationTable().lookup(name);
  if (!aggregation ||
      aggregation->kind != ::energy::plugin::AggregationKind::Plugin)
    return op->emitOpError() << "names aggregation '" << name
                             << "', which no loaded plugin registers (load "
                                "its plugin with --plugin)";
  return success();
}

LogicalResult AggregateOp::verify() {
  return verifyPluginAggregation(*this, getAggregation());
}

LogicalResult AggregateWeightsOp::verify() {
  return verifyPluginAggregation(*this, getAggregation());
}

const ::energy::plugin::RuntimeCode *
mlir::energy::getPluginCode(Operation *op) {
  const ::energy::plugin::FunctionTable &functions =
      ::energy::plugin::getFunctionTable();
  const ::energy::plugin::AggregationTable &aggregations =
      ::energy::plugin::getAggregationTable();
  auto functionCode = [&](StringRef name) {
    return &functions.lookup(name)->code;
  };
  auto aggregationCode = [&](StringRef name) {
    return &aggregations.lookup(name)->code;
  };
  if (auto apply = dyn_cast<ApplyOp>(op))
    return functionCode(apply.getFunction());
  if (auto similarity = dyn_cast<SimilarityOp>(op))
    return functionCode(similarity.getFunction());
  if (auto gradient = dyn_cast<SimilarityGradientOp>(op))
    return functionCode(gradient.getFunction());
  if (auto aggregate = dyn_cast<AggregateOp>(op))
    return aggregationCode(aggregate.getAggregation());
  if (auto weights = dyn_cast<AggregateWeightsOp>(op))
    return aggregationCode(weights.getAggregation());
  if (auto reduce = dyn_cast<ReduceOp>(op); reduce && reduce.getAggregation())
    return aggregationCode(*reduce.getAggregation());
  return nullptr;
}
