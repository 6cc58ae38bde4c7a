//===- Slices.cpp - Copying the ops a value needs between bodies ----------===//
//
// Slices of one block, cloned into another, and structural comparison of
// two computations.
//
//===----------------------------------------------------------------------===//

#include "Slices.h"

#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"

using namespace mlir;
using namespace mlir::energy;

void mlir::energy::addToSlice(Value value, Block &block,
                              llvm::SetVector<Operation *> &slice) {
  Operation *def = value.getDefiningOp();
  if (!def || def->getBlock() != &block || slice.contains(def))
    return;
  addOperandsToSlice(def, block, slice);
  slice.insert(def);
}

void mlir::energy::addOperandsToSlice(Operation *op, Block &block,
                                      llvm::SetVector<Operation *> &slice) {
  op->walk([&](Operation *nested) {
    for (Value operand : nested->getOperands())
      addToSlice(operand, block, slice);
  });
}

void mlir::energy::cloneSlice(Block &block,
                              const llvm::SetVector<Operation *> &slice,
                              OpBuilder &builder, IRMapping &mapping) {
  for (Operation &op : block)
    if (slice.contains(&op))
      builder.clone(op, mapping);
}

void mlir::energy::addIndexArguments(Block &block, Block &like,
                                     IRMapping &mapping) {
  for (BlockArgument argument : like.getArguments())
    mapping.map(argument,
                block.addArgument(argument.getType(), argument.getLoc()));
}

bool mlir::energy::atBlockIndices(AffineMap map, ValueRange indices,
                                  Block &block) {
  return map.isIdentity() && map.getNumDims() == block.getNumArguments() &&
         llvm::equal(indices, block.getArguments());
}

Value mlir::energy::readWholeTensor(OpBuilder &builder, Location loc,
                                    ArrayType type, FlatSymbolRefAttr tensor) {
  return ReadOp::create(
      builder, loc, type, tensor,
      AffineMapAttr::get(AffineMap::get(0, 0, {}, builder.getContext())),
      ValueRange());
}

Value mlir::energy::wholeTensorOf(Value value, ArrayRef<Value> indices,
                                  ArrayType type, OpBuilder &builder) {
  auto read = value.getDefiningOp<ReadOp>();
  if (!read || !read.getMap().isIdentity() ||
      !llvm::equal(read.getIndices(), indices))
    return Value();
  auto model = read->getParentOfType<ModelOp>();
  auto tensor =
      dyn_cast_or_null<TensorOp>(model.lookupSymbol(read.getSourceAttr()));
  if (!tensor || tensor.getArrayType() != type)
    return Value();
  return readWholeTensor(builder, read.getLoc(), type, read.getSourceAttr());
}

bool mlir::energy::hasPlainDims(ArrayAttr sizes) {
  return llvm::all_of(sizes, [](Attribute size) {
    return cast<DimExprAttr>(size).getDimName().has_value();
  });
}

bool mlir::energy::isScalar(Value value) {
  auto type = dyn_cast<ArrayType>(value.getType());
  return type && type.isScalar();
}

Value mlir::energy::sumOfRows(OpBuilder &builder, Location loc, Value array,
                              ValueRange leading, ArrayRef<StringAttr> axes) {
  auto type = cast<ArrayType>(array.getType());
  MLIRContext *context = builder.getContext();
  auto row = ArrayType::get(context, type.getShape().take_back());
  auto sum = ReduceOp::create(builder, loc, row, ReduceKind::sum,
                              sizesOfDims(context, axes), Value());
  Block &body = sum.getBody().emplaceBlock();
  SmallVector<Value> indices(leading);
  llvm::append_range(indices, addDimIndices(body, axes));
  OpBuilder inside = OpBuilder::atBlockEnd(&body);
  auto map = AffineMap::getMultiDimIdentityMap(indices.size(), context);
  Value element = ExtractOp::create(inside, loc, row, array,
                                    AffineMapAttr::get(map), indices);
  YieldOp::create(inside, loc, ValueRange{element});
  return sum.getResult();
}

ArrayAttr mlir::energy::sizesOfDims(MLIRContext *context,
                                    ArrayRef<StringAttr> dims) {
  SmallVector<Attribute> sizes;
  for (StringAttr dim : dims)
    sizes.push_back(DimExprAttr::getDim(context, dim.getValue()));
  return ArrayAttr::get(context, sizes);
}

SmallVector<Value> mlir::energy::addDimIndices(Block &body,
                                               ArrayRef<StringAttr> dims) {
  SmallVector<Value> indices;
  for (StringAttr dim : dims) {
    MLIRContext *context = dim.getContext();
    indices.push_back(body.addArgument(
        IndexType::get(context),
        NameLoc::get(StringAttr::get(context, dim.getValue().lower()))));
  }
  return indices;
}

RowTable::RowTable(OpBuilder &builder, Location loc, ArrayType type)
    : inside(builder.getContext()) {
  MLIRContext *context = type.getContext();
  ArrayRef<StringAttr> shape = type.getShape();
  table = TabulateOp::create(builder, loc, type,
                             sizesOfDims(context, shape.drop_back()));
  Block &body = table.getBody().emplaceBlock();
  indices = addDimIndices(body, shape.drop_back());
  inside.setInsertionPointToEnd(&body);
  rowType = ArrayType::get(context, shape.take_back());
  map = AffineMapAttr::get(
      AffineMap::getMultiDimIdentityMap(indices.size(), context));
}

Value RowTable::rowOf(Value array, Location loc) {
  return ExtractOp::create(inside, loc, rowType, array, map, indices);
}

TabulateOp RowTable::finish(Value row, Location loc) {
  YieldOp::create(inside, loc, row);
  return table;
}

bool mlir::energy::isMatrix(Value value) {
  return cast<ArrayType>(value.getType()).getRank() == 2;
}

bool mlir::energy::isSummedRowProduct(BatchMatmulOp product) {
  return product && product.getLhsRows() == 1 && product.getBatchAxes() == 1 &&
         product.getSumBatch() && product.getTransposeLhs() &&
         !product.getTransposeRhs() &&
         isMatrix(product.getLhs()) == isMatrix(product.getRhs());
}

Value mlir::energy::buildRowProduct(OpBuilder &builder, Location loc, Value lhs,
                                    Value rhs, bool transposeLhs,
                                    bool transposeRhs, bool summed) {
  bool inLoop = false;
  for (Operation *op = builder.getInsertionBlock()->getParentOp(); op;
       op = op->getParentOp())
    inLoop |= isa<LoopLikeOpInterface>(op);
  if (inLoop && isMatrix(lhs) && isMatrix(rhs)) {
    if (transposeLhs)
      lhs = TransposeOp::create(builder, loc, lhs);
    if (transposeRhs)
      rhs = TransposeOp::create(builder, loc, rhs);
    return MatmulOp::create(builder, loc, lhs, rhs);
  }
  std::string reason;
  ArrayType type = BatchMatmulOp::inferType(
      cast<ArrayType>(lhs.getType()), cast<ArrayType>(rhs.getType()),
      transposeLhs, transposeRhs, summed, reason);
  assert(type && "operands of a matrix product");
  return BatchMatmulOp::create(builder, loc, type, lhs, rhs, transposeLhs,
                               transposeRhs, summed);
}

/// The rank of the array `value`.
static int64_t rankOf(Value value) {
  return cast<ArrayType>(value.getType()).getRank();
}

bool mlir::energy::isRowsTimesMatrix(BatchMatmulOp product) {
  return product.getLhsRows() == 1 && product.getBatchAxes() == 1 &&
         !product.getTransposeLhs() && !product.getSumBatch() &&
         rankOf(product.getRhs()) == 2 &&
         rankOf(product.getLhs()) == rankOf(product.getResult());
}

namespace {
/// `value` as an element of a table, `extract %T[indices]` at all of T's
/// indices: T and the indices.
std::optional<std::pair<TabulateOp, OperandRange>> tableElement(Value value) {
  auto extract = value.getDefiningOp<ExtractOp>();
  if (!extract || !extract.getMap().isIdentity())
    return std::nullopt;
  auto table = extract.getSource().getDefiningOp<TabulateOp>();
  if (!table ||
      table.getBody().front().getNumArguments() != extract.getIndices().size())
    return std::nullopt;
  return std::make_pair(table, extract.getIndices());
}
} // namespace

namespace {
/// Whether `element` computes `array[indices]`, `array` and `indices` on
/// the side `arguments` maps from and `element` on the side it maps to: a
/// table's body at those indices, an
/// extract of the same array or a read of the same tensor at them, or a
/// product of a head's matrix and a row (`extract %P[h, rows…]` of a
/// `batch_matmul` of rows times every head's matrix transposed, against
/// `matmul(W[h], x[rows…])`), or a row times a matrix (`extract %P[b, i]`
/// of a `batch_matmul` of L and R, against `matmul(transpose(R[b]),
/// L[b, i])`).
bool isElementOf(Value element, Value array, ArrayRef<Value> indices,
                 const IRMapping &arguments);

/// Whether `product`, Xᵀ v, is the row `indices` of `rows`, a product of
/// rows and a matrix per batch position (L[b] R[b], or L R): the row
/// L[b, i] times R[b] is R[b]ᵀ L[b, i], with X = R[b] and v = L[b, i].
bool isRowTimesMatrix(MatmulOp product, BatchMatmulOp rows,
                      ArrayRef<Value> indices, const IRMapping &arguments) {
  auto transpose = product.getLhs().getDefiningOp<TransposeOp>();
  if (!transpose || rows.getLhsRows() != 1 || rows.getBatchAxes() != 1 ||
      rankOf(rows.getLhs()) != static_cast<int64_t>(indices.size()) + 1 ||
      rankOf(product.getRhs()) != 1)
    return false;
  Value matrix = transpose.getOperand();
  bool batched = rankOf(rows.getRhs()) == 3;
  if (batched != (rankOf(rows.getLhs()) == 3))
    return false;
  bool sameMatrix = batched ? isElementOf(matrix, rows.getRhs(),
                                          indices.take_front(), arguments)
                            : computeSame(matrix, rows.getRhs(), arguments);
  return sameMatrix &&
         isElementOf(product.getRhs(), rows.getLhs(), indices, arguments);
}

bool isElementOf(Value element, Value array, ArrayRef<Value> indices,
                 const IRMapping &arguments) {
  SmallVector<Value> mapped;
  for (Value index : indices)
    mapped.push_back(arguments.lookupOrDefault(index));
  if (auto table = array.getDefiningOp<TabulateOp>()) {
    Block &body = table.getBody().front();
    if (body.getNumArguments() != indices.size())
      return false;
    IRMapping inside = arguments;
    for (auto [argument, index] : llvm::zip(body.getArguments(), mapped))
      inside.map(argument, index);
    return computeSame(table.getBodyValue(), element, inside);
  }
  if (auto extract = element.getDefiningOp<ExtractOp>())
    return extract.getMap().isIdentity() &&
           llvm::equal(extract.getIndices(), mapped) &&
           computeSame(array, extract.getSource(), arguments);
  if (auto read = element.getDefiningOp<ReadOp>()) {
    auto whole = array.getDefiningOp<ReadOp>();
    return whole && whole.getIndices().empty() && read.getMap().isIdentity() &&
           whole.getSourceAttr() == read.getSourceAttr() &&
           llvm::equal(read.getIndices(), mapped);
  }
  auto product = element.getDefiningOp<MatmulOp>();
  auto heads = array.getDefiningOp<BatchMatmulOp>();
  if (!product || !heads || heads.getTransposeLhs() || heads.getSumBatch() ||
      heads.getBatchAxes() != 1)
    return false;
  if (!heads.getTransposeRhs())
    return isRowTimesMatrix(product, heads, indices, arguments);
  int64_t rows = heads.getLhsRows();
  if (rankOf(heads.getRhs()) != 3 || rankOf(heads.getLhs()) != rows + 1 ||
      indices.size() != static_cast<size_t>(rows + 1))
    return false;
  return isElementOf(product.getLhs(), heads.getRhs(), indices.take_front(),
                     arguments) &&
         isElementOf(product.getRhs(), heads.getLhs(), indices.drop_front(),
                     arguments);
}

/// The mapping the other way in `inverse`; false where two values map to
/// one (a table read at a repeated index), which has no inverse (and whose
/// choice of one would follow the map's pointer order).
bool invert(const IRMapping &mapping, IRMapping &inverse) {
  for (auto [from, to] : mapping.getValueMap()) {
    if (Value earlier = inverse.lookupOrNull(to); earlier && earlier != from)
      return false;
    inverse.map(to, from);
  }
  return true;
}

/// A table as one table over all its indices: the tables its body yields,
/// each computed in the body around it, flattened into it.
struct FlatTable {
  SmallVector<Value> indices;
  SmallVector<Attribute> sizes;
  Value element;
};

FlatTable flatten(TabulateOp table) {
  FlatTable flat;
  for (;;) {
    Block &body = table.getBody().front();
    llvm::append_range(flat.indices, body.getArguments());
    llvm::append_range(flat.sizes, table.getSizes());
    flat.element = table.getBodyValue();
    auto inner = flat.element.getDefiningOp<TabulateOp>();
    if (!inner || inner->getBlock() != &body)
      return flat;
    table = inner;
  }
}

/// `value` as `extract %A[indices]` (identity map): A and the indices.
std::optional<std::pair<Value, OperandRange>> arrayElement(Value value) {
  auto extract = value.getDefiningOp<ExtractOp>();
  if (!extract || !extract.getMap().isIdentity())
    return std::nullopt;
  return std::make_pair(extract.getSource(), extract.getIndices());
}

/// Whether result `a` of a contraction computes what result `b` of another
/// does: the same form, domains, predicate, temperature and score (the
/// regions' arguments corresponding), the same normaliser (each its own, or
/// one given what the other computes, or both given the same), and results
/// of one kind (the normaliser, or one side's sum) of values that compute
/// the same.
bool sameContractResult(SoftmaxContractOp x, OpResult a, SoftmaxContractOp y,
                        OpResult b, const IRMapping &arguments) {
  if (a.getType() != b.getType() || x.getForm() != y.getForm() ||
      x.getRows() != y.getRows() || x.getCols() != y.getCols() ||
      x.hasPredicate() != y.hasPredicate() ||
      static_cast<bool>(x.getTemperature()) !=
          static_cast<bool>(y.getTemperature()))
    return false;
  if (x.getTemperature() &&
      !computeSame(x.getTemperature(), y.getTemperature(), arguments))
    return false;
  IRMapping inside = arguments;
  for (auto [first, second] : llvm::zip(x->getRegions(), y->getRegions())) {
    if (first.empty() != second.empty() ||
        (!first.empty() && first.getNumArguments() != second.getNumArguments()))
      return false;
    if (!first.empty())
      inside.map(first.getArguments(), second.getArguments());
  }
  auto yielded = [](Region &region) {
    return region.front().getTerminator()->getOperand(0);
  };
  if ((x.hasPredicate() && !computeSame(yielded(x.getPredicate()),
                                        yielded(y.getPredicate()), inside)) ||
      !computeSame(x.getScoreValue(), y.getScoreValue(), inside))
    return false;
  Value givenX = x.getGivenLse(), givenY = y.getGivenLse();
  if (givenX && givenY && !computeSame(givenX, givenY, arguments))
    return false;
  if (givenX && !givenY && !computeSame(givenX, y.getLse(), arguments))
    return false;
  if (!givenX && givenY && !computeSame(x.getLse(), givenY, arguments))
    return false;
  if (a == x.getLse())
    return b == y.getLse();
  auto sameSum = [&](ResultRange outputsX, ValueRange valuesX,
                     ResultRange outputsY, ValueRange valuesY) {
    auto at = llvm::find(outputsX, a), other = llvm::find(outputsY, b);
    return at != outputsX.end() && other != outputsY.end() &&
           computeSame(valuesX[at - outputsX.begin()],
                       valuesY[other - outputsY.begin()], inside);
  };
  return sameSum(x.getRowOutputs(), x.getRowValues(), y.getRowOutputs(),
                 y.getRowValues()) ||
         sameSum(x.getColOutputs(), x.getColValues(), y.getColOutputs(),
                 y.getColValues());
}
} // namespace

bool mlir::energy::computeSame(Value a, Value b, const IRMapping &arguments) {
  if (Value mapped = arguments.lookupOrNull(a))
    return mapped == b;
  if (a == b)
    return true;
  // An element of a table computes its body at the element's indices (a
  // recomputed projection and a table of them). Where the other side is in
  // that body itself, its indices stand for the table's own arguments: only
  // an element at those same arguments is the body (not a transposed one).
  auto first = tableElement(a), second = tableElement(b);
  auto inBody = [](TabulateOp table, Value value) {
    if (Operation *definition = value.getDefiningOp())
      return table->isProperAncestor(definition);
    Operation *owner = cast<BlockArgument>(value).getOwner()->getParentOp();
    return owner && table->isAncestor(owner);
  };
  // The mapping `at` with the table's arguments mapped to the element's
  // indices through it; false where `other` is in the body and they differ.
  auto atElement = [&](std::pair<TabulateOp, OperandRange> element, Value other,
                       IRMapping &at) {
    bool inside = inBody(element.first, other);
    for (auto [argument, index] : llvm::zip(
             element.first.getBody().front().getArguments(), element.second)) {
      Value position = at.lookupOrDefault(index);
      if (inside && position != argument)
        return false;
      at.map(argument, position);
    }
    return true;
  };
  if (first && !second) {
    IRMapping body = arguments;
    return atElement(*first, b, body) &&
           computeSame(first->first.getBodyValue(), b, body);
  }
  if (second && !first) {
    IRMapping inverse;
    return invert(arguments, inverse) && atElement(*second, a, inverse) &&
           computeSame(second->first.getBodyValue(), a, inverse);
  }
  // An element of an array against what computes it.
  if (auto element = arrayElement(a);
      element && !arrayElement(b) && !isa<BlockArgument>(b))
    return isElementOf(b, element->first, SmallVector<Value>(element->second),
                       arguments);
  if (auto element = arrayElement(b);
      element && !arrayElement(a) && !isa<BlockArgument>(a)) {
    IRMapping inverse;
    if (!invert(arguments, inverse))
      return false;
    return isElementOf(a, element->first, SmallVector<Value>(element->second),
                       inverse);
  }
  if (isa<BlockArgument>(a))
    return false;
  Operation *x = a.getDefiningOp(), *y = b.getDefiningOp();
  // Two tables of the same values (the plan makes one per loop that needs
  // it, before CSE merges them), nested alike or not.
  if (auto first = dyn_cast_or_null<TabulateOp>(x)) {
    auto second = dyn_cast_or_null<TabulateOp>(y);
    if (!second || first.getType() != second.getType())
      return false;
    FlatTable one = flatten(first), other = flatten(second);
    if (one.sizes != other.sizes)
      return false;
    IRMapping bodies = arguments;
    bodies.map(one.indices, other.indices);
    return computeSame(one.element, other.element, bodies);
  }
  // Two plain reductions of the same values (no predicate, no
  // temperature): a row's dot products with every slot, summed as embeds.
  if (auto first = dyn_cast_or_null<ReduceOp>(x)) {
    auto second = dyn_cast_or_null<ReduceOp>(y);
    if (!second || first.getType() != second.getType() ||
        first.getKind() != second.getKind() ||
        first.getSizes() != second.getSizes() || first.hasPredicate() ||
        second.hasPredicate() || first.getTemperature() ||
        second.getTemperature())
      return false;
    IRMapping bodies = arguments;
    bodies.map(first.getBody().front().getArguments(),
               second.getBody().front().getArguments());
    return computeSame(first.getBodyValue(), second.getBodyValue(), bodies);
  }
  if (auto first = dyn_cast_or_null<SoftmaxContractOp>(x)) {
    auto second = dyn_cast_or_null<SoftmaxContractOp>(y);
    return second && sameContractResult(first, cast<OpResult>(a), second,
                                        cast<OpResult>(b), arguments);
  }
  if (!x || !y || x->getName() != y->getName() || x->getNumRegions() != 0 ||
      y->getNumRegions() != 0 || x->getResultTypes() != y->getResultTypes() ||
      cast<OpResult>(a).getResultNumber() !=
          cast<OpResult>(b).getResultNumber() ||
      x->getPropertiesAsAttribute() != y->getPropertiesAsAttribute() ||
      x->getDiscardableAttrDictionary() != y->getDiscardableAttrDictionary() ||
      x->getNumOperands() != y->getNumOperands())
    return false;
  auto sameOperands = [&](bool swapped) {
    for (unsigned i = 0, e = x->getNumOperands(); i < e; ++i) {
      unsigned j = swapped ? e - 1 - i : i;
      if (!computeSame(x->getOperand(i), y->getOperand(j), arguments))
        return false;
    }
    return true;
  };
  if (sameOperands(/*swapped=*/false))
    return true;
  return x->getNumOperands() == 2 && x->hasTrait<OpTrait::IsCommutative>() &&
         sameOperands(/*swapped=*/true);
}

bool mlir::energy::isScaledCopy(Value value, Value other, Operation *scope,
                                SmallVectorImpl<Value> &factors,
                                OpBuilder &builder,
                                SmallVectorImpl<Operation *> &built,
                                unsigned depth) {
  if (computeSame(value, other, IRMapping()))
    return true;
  if (depth > 8)
    return false;
  auto fixedScalar = [&](Value v) {
    return isScalar(v) && isDefinedOutside(v, scope);
  };
  Operation *def = value.getDefiningOp();
  if (auto neg = dyn_cast_or_null<NegOp>(def)) {
    if (!isScaledCopy(neg.getOperand(), other, scope, factors, builder, built,
                      depth + 1))
      return false;
    auto minusOne = ConstantOp::create(builder, neg.getLoc(), -1.0);
    built.push_back(minusOne);
    factors.push_back(minusOne);
    return true;
  }
  if (auto mul = dyn_cast_or_null<MulOp>(def)) {
    for (auto [scalar, scaled] : {std::pair(mul.getRhs(), mul.getLhs()),
                                  std::pair(mul.getLhs(), mul.getRhs())})
      if (fixedScalar(scalar) && scaled.getType() == value.getType() &&
          isScaledCopy(scaled, other, scope, factors, builder, built,
                       depth + 1)) {
        factors.push_back(scalar);
        return true;
      }
    return false;
  }
  auto extract = dyn_cast_or_null<ExtractOp>(def);
  if (!extract)
    return false;
  Operation *source = extract.getSource().getDefiningOp();
  // A row of a scaled array is the scaled row of the array.
  if (auto scaled = dyn_cast_or_null<MulOp>(source)) {
    for (auto [scalar, array] : {std::pair(scaled.getRhs(), scaled.getLhs()),
                                 std::pair(scaled.getLhs(), scaled.getRhs())})
      if (fixedScalar(scalar) && !isScalar(array)) {
        IRMapping mapping;
        mapping.map(extract.getSource(), array);
        Operation *row = builder.clone(*extract, mapping);
        built.push_back(row);
        if (isScaledCopy(row->getResult(0), other, scope, factors, builder,
                         built, depth + 1)) {
          factors.push_back(scalar);
          return true;
        }
        return false;
      }
    return false;
  }
  // A row of a table, computed at the read's indices.
  auto table = dyn_cast_or_null<TabulateOp>(source);
  Block &body = table ? table.getBody().front() : *extract->getBlock();
  if (!table || !extract.getMap().isIdentity() ||
      extract.getIndices().size() != body.getNumArguments() ||
      llvm::any_of(body.without_terminator(),
                   [](Operation &op) { return op.getNumRegions() != 0; }))
    return false;
  IRMapping mapping;
  mapping.map(body.getArguments(), extract.getIndices());
  for (Operation &op : body.without_terminator())
    built.push_back(builder.clone(op, mapping));
  return isScaledCopy(mapping.lookupOrDefault(table.getBodyValue()), other,
                      scope, factors, builder, built, depth + 1);
}

Operation *mlir::energy::scaledLeaf(Value value, bool linear) {
  Operation *def = value.getDefiningOp();
  if (isa_and_nonnull<ExtractOp, ReadOp>(def))
    return isScalar(value) ? nullptr : def;
  if (auto neg = dyn_cast_or_null<NegOp>(def))
    return scaledLeaf(neg.getOperand(), linear);
  auto scaled = [&](Value vector, Value factor) -> Operation * {
    if (!isScalar(factor) || isScalar(vector))
      return nullptr;
    Operation *row = scaledLeaf(vector, linear);
    return row && !(linear && dependsOn(factor, row)) ? row : nullptr;
  };
  if (auto mul = dyn_cast_or_null<MulOp>(def)) {
    if (Operation *source = scaled(mul.getLhs(), mul.getRhs()))
      return source;
    return scaled(mul.getRhs(), mul.getLhs());
  }
  if (auto div = dyn_cast_or_null<DivOp>(def))
    return scaled(div.getLhs(), div.getRhs());
  return nullptr;
}

ExtractOp mlir::energy::scaledRow(Value value, bool linear) {
  return dyn_cast_or_null<ExtractOp>(scaledLeaf(value, linear));
}

Operation *mlir::energy::declarationOf(Operation *op) {
  while (op->getParentOp() && !isa<ModelOp>(op->getParentOp()))
    op = op->getParentOp();
  return op;
}

bool mlir::energy::availableBefore(Value value, Operation *point) {
  Region *region = value.getParentRegion();
  if (!region->isAncestor(point->getParentRegion()))
    return false;
  Operation *def = value.getDefiningOp();
  if (!def)
    return true;
  Operation *ancestor = def->getBlock()->findAncestorOpInBlock(*point);
  return ancestor && def->isBeforeInBlock(ancestor);
}

bool mlir::energy::isInProgram(Operation *op) {
  return op->getParentOfType<UpdateProgramOp>() ||
         op->getParentOfType<BackwardProgramOp>();
}

bool mlir::energy::readsPlainly(Operation *op) {
  auto plain = [](AffineMap map) {
    return llvm::all_of(map.getResults(), [](AffineExpr expr) {
      return isa<AffineDimExpr>(expr);
    });
  };
  if (auto read = dyn_cast<ReadOp>(op))
    return plain(read.getMap());
  if (auto extract = dyn_cast<ExtractOp>(op))
    return plain(extract.getMap());
  return true;
}

/// The array of `value` at every position of `indices` (sizes `sizes`),
/// computed before `anchor`: the array `value` reads a slice of when it is
/// a read or extract at exactly those indices, otherwise a table of it.
/// `blocks` are the bodies, outermost first, whose ops `value` may need.
SmallVector<llvm::SetVector<Operation *>>
mlir::energy::slicesAcross(Value value, ArrayRef<Block *> blocks) {
  // Innermost first: an inner body's ops need the outer bodies' ops.
  SmallVector<llvm::SetVector<Operation *>> slices(blocks.size());
  for (int i = static_cast<int>(blocks.size()) - 1; i >= 0; --i) {
    addToSlice(value, *blocks[i], slices[i]);
    for (size_t inner = i + 1; inner < blocks.size(); ++inner)
      for (Operation *op : slices[inner])
        addOperandsToSlice(op, *blocks[i], slices[i]);
  }
  return slices;
}

Value mlir::energy::arrayOver(Value value, ArrayRef<Value> indices,
                              ArrayRef<Attribute> sizes,
                              ArrayRef<Block *> blocks, Operation *anchor) {
  MLIRContext *context = value.getContext();
  SmallVector<StringAttr> dims;
  for (Attribute size : sizes)
    dims.push_back(
        StringAttr::get(context, *cast<DimExprAttr>(size).getDimName()));
  llvm::append_range(dims, cast<ArrayType>(value.getType()).getShape());
  auto type = ArrayType::get(context, dims);
  OpBuilder builder(anchor);
  Location loc = value.getLoc();
  if (auto extract = value.getDefiningOp<ExtractOp>();
      extract && extract.getMap().isIdentity() &&
      llvm::equal(extract.getIndices(), indices) &&
      isDefinedOutside(extract.getSource(), anchor) &&
      extract.getSource().getType() == type)
    return extract.getSource();
  if (Value whole = wholeTensorOf(value, indices, type, builder))
    return whole;
  auto table =
      TabulateOp::create(builder, loc, type, ArrayAttr::get(context, sizes));
  Block &body = table.getBody().emplaceBlock();
  IRMapping mapping;
  for (Value index : indices)
    mapping.map(index, body.addArgument(index.getType(), index.getLoc()));
  SmallVector<llvm::SetVector<Operation *>> slices =
      slicesAcross(value, blocks);
  OpBuilder inside = OpBuilder::atBlockEnd(&body);
  for (size_t i = 0; i < blocks.size(); ++i)
    cloneSlice(*blocks[i], slices[i], inside, mapping);
  YieldOp::create(inside, loc, mapping.lookupOrDefault(value));
  moveLoopInvariantCode(cast<LoopLikeOpInterface>(table.getOperation()));
  return table;
}

bool mlir::energy::onlyReads(Operation *op) {
  WalkResult result = op->walk([](Operation *nested) {
    return isa<ReadOp, YieldOp>(nested) || isMemoryEffectFree(nested) ||
                   (isa<ReduceOp, TabulateOp>(nested) &&
                    nested->getNumRegions() > 0)
               ? WalkResult::advance()
               : WalkResult::interrupt();
  });
  return !result.wasInterrupted();
}

llvm::StringSet<> mlir::energy::positionDims(ModelOp model) {
  llvm::StringSet<> dims;
  for (auto tensor : model.getBody().front().getOps<TensorOp>()) {
    if (tensor.getRole() == Role::param || tensor.getAdjointOf() ||
        tensor.getCotangentOf() || tensor.getCacheFlag() || tensor.getFlagOf())
      continue;
    ArrayRef<Attribute> shape = tensor.getShape().getValue();
    if (shape.empty())
      continue;
    for (Attribute dim : shape.drop_back())
      dims.insert(cast<FlatSymbolRefAttr>(dim).getValue());
  }
  return dims;
}

void mlir::energy::eraseDeadOps(Block &block) {
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
    if (isOpTriviallyDead(&op))
      op.erase();
}

void mlir::energy::eraseBuiltBefore(Operation *op, Operation *since) {
  while (Operation *previous = op->getPrevNode()) {
    if (previous == since)
      break;
    previous->erase();
  }
}

bool mlir::energy::isPlainSum(ReduceOp sum) {
  return sum.getKind() == ReduceKind::sum && !sum.hasPredicate() &&
         !sum.getTemperature() && !sum.getAggregation() &&
         hasPlainDims(sum.getSizes());
}

ReduceOp mlir::energy::nestedSumOf(ReduceOp outer) {
  if (!isPlainSum(outer))
    return {};
  Block &outerBody = outer.getBody().front();
  auto inner = outer.getBodyValue().getDefiningOp<ReduceOp>();
  if (!inner || inner->getBlock() != &outerBody || !inner->hasOneUse() ||
      !isPlainSum(inner) || inner.getType() != outer.getType())
    return {};
  // What the outer body computes besides the inner sum is per position of
  // its indices, for the inner sum: it may run at every position of both.
  for (Operation &op : outerBody.without_terminator())
    if (&op != inner.getOperation() && !isMemoryEffectFree(&op))
      return {};
  return inner;
}

ReduceOp mlir::energy::flattenNestedSum(ReduceOp outer) {
  ReduceOp inner = nestedSumOf(outer);
  if (!inner)
    return {};
  Block &outerBody = outer.getBody().front();
  OpBuilder builder(outer);
  SmallVector<Attribute> sizes(outer.getSizes().getValue());
  llvm::append_range(sizes, inner.getSizes().getValue());
  auto flat =
      ReduceOp::create(builder, outer.getLoc(), outer.getType(),
                       ReduceKind::sum, builder.getArrayAttr(sizes), Value());
  Block &body = flat.getBody().emplaceBlock();
  IRMapping mapping;
  Block &innerBody = inner.getBody().front();
  for (Block *level : {&outerBody, &innerBody})
    for (BlockArgument index : level->getArguments())
      mapping.map(index, body.addArgument(index.getType(), index.getLoc()));
  OpBuilder inside = OpBuilder::atBlockEnd(&body);
  for (Operation &op : outerBody.without_terminator())
    if (&op != inner.getOperation())
      inside.clone(op, mapping);
  for (Operation &op : innerBody)
    inside.clone(op, mapping);
  return flat;
}

std::optional<ScalarTable> mlir::energy::scalarTableOf(TabulateOp table) {
  auto type = dyn_cast<ArrayType>(table.getType());
  if (!type || type.getRank() != 2)
    return std::nullopt;
  Block &outer = table.getBody().front();
  Value element = table.getBodyValue();
  ScalarTable result{table,       outer.getArgument(0),
                     Value(),     table.getSizes()[0],
                     Attribute(), element,
                     &outer};
  if (outer.getNumArguments() == 2) {
    result.innerIndex = outer.getArgument(1);
    result.innerSize = table.getSizes()[1];
  } else if (auto row = element.getDefiningOp<TabulateOp>();
             row && outer.getNumArguments() == 1 && row->getBlock() == &outer &&
             row.getBody().front().getNumArguments() == 1) {
    result.body = &row.getBody().front();
    result.innerIndex = result.body->getArgument(0);
    result.innerSize = row.getSizes()[0];
    result.element = row.getBodyValue();
  } else {
    return std::nullopt;
  }
  auto value = dyn_cast<ArrayType>(result.element.getType());
  if (!value || !value.isScalar())
    return std::nullopt;
  return result;
}
