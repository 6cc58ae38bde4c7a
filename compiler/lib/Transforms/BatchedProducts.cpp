//===- BatchedProducts.cpp - Per-head products as batches of GEMMs --------===//
//
// Multi-head terms apply one matrix per head b to every position p: a
// table of W[b] x[p] over (b, p) (the heads' projections), and loops that
// add Σ_b M[b] v[b, p] into a tensor's row p (their adjoints, summed over
// heads). Planned as they are, each position computes a matrix-vector
// product; written as `energy.batch_matmul`, each head is one product of
// whole matrices (a GEMM), X W[b]ᵀ for the table and Σ_b V[b] M[b]ᵀ for
// the loops.
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"
#include "Slices.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// The index arguments of blocks inside `scope` (its own included) that
/// `value` depends on, through ops inside `scope`.
void collectIndices(Value value, Operation *scope,
                    llvm::SmallPtrSetImpl<Value> &indices) {
  if (isDefinedOutside(value, scope))
    return;
  if (isa<BlockArgument>(value)) {
    indices.insert(value);
    return;
  }
  Operation *def = value.getDefiningOp();
  def->walk([&](Operation *nested) {
    for (Value operand : nested->getOperands())
      if (isDefinedOutside(operand, def))
        collectIndices(operand, scope, indices);
  });
}

/// Whether `value` depends on no index of `scope` but those of `allowed`.
bool dependsOnlyOn(Value value, Operation *scope, ArrayRef<Value> allowed) {
  llvm::SmallPtrSet<Value, 4> indices;
  collectIndices(value, scope, indices);
  return llvm::all_of(
      indices, [&](Value index) { return llvm::is_contained(allowed, index); });
}

/// `read @T` of a whole tensor.
Value wholeRead(OpBuilder &builder, Location loc, ArrayType type,
                FlatSymbolRefAttr tensor) {
  return ReadOp::create(
      builder, loc, type, tensor,
      AffineMapAttr::get(AffineMap::get(0, 0, {}, builder.getContext())),
      ValueRange());
}

/// The array of `value` at every position of `indices` (sizes `sizes`),
/// computed before `anchor`: the array `value` reads a slice of when it is
/// a read or extract at exactly those indices, otherwise a table of it.
/// `blocks` are the bodies, outermost first, whose ops `value` may need.
Value arrayOver(Value value, ArrayRef<Value> indices, ArrayRef<Attribute> sizes,
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
  if (auto read = value.getDefiningOp<ReadOp>();
      read && read.getMap().isIdentity() &&
      llvm::equal(read.getIndices(), indices)) {
    auto model = anchor->getParentOfType<ModelOp>();
    auto tensor =
        dyn_cast_or_null<TensorOp>(model.lookupSymbol(read.getSourceAttr()));
    if (tensor && tensor.getArrayType() == type)
      return wholeRead(builder, loc, type, read.getSourceAttr());
  }
  auto table =
      TabulateOp::create(builder, loc, type, ArrayAttr::get(context, sizes));
  Block &body = table.getBody().emplaceBlock();
  IRMapping mapping;
  for (Value index : indices)
    mapping.map(index, body.addArgument(index.getType(), index.getLoc()));
  // The ops each body contributes, innermost first, cloned outermost first.
  SmallVector<llvm::SetVector<Operation *>> slices(blocks.size());
  for (int i = static_cast<int>(blocks.size()) - 1; i >= 0; --i) {
    addToSlice(value, *blocks[i], slices[i]);
    for (size_t inner = i + 1; inner < blocks.size(); ++inner)
      for (Operation *op : slices[inner])
        addOperandsToSlice(op, *blocks[i], slices[i]);
  }
  OpBuilder inside = OpBuilder::atBlockEnd(&body);
  for (size_t i = 0; i < blocks.size(); ++i)
    cloneSlice(*blocks[i], slices[i], inside, mapping);
  YieldOp::create(inside, loc, mapping.lookupOrDefault(value));
  moveLoopInvariantCode(cast<LoopLikeOpInterface>(table.getOperation()));
  return table;
}

/// The matrices M[b] of every head as one array [B, …] and whether the
/// product takes it transposed, given `transposed` for M itself: a
/// transpose in M's definition is the product's flag instead.
std::pair<Value, bool> matricesOver(Value matrix, Value head, Attribute size,
                                    ArrayRef<Block *> blocks, Operation *anchor,
                                    bool transposed) {
  if (auto transpose = matrix.getDefiningOp<TransposeOp>()) {
    matrix = transpose.getOperand();
    transposed = !transposed;
  }
  return {arrayOver(matrix, head, size, blocks, anchor), transposed};
}

/// A matrix-vector product M v in `block` with M depending on `head` only
/// and v on `head` and `position`, both of them vectors/matrices of the
/// right ranks.
MatmulOp headProduct(Value value, Operation *scope, Value head,
                     Value position) {
  auto product = value.getDefiningOp<MatmulOp>();
  if (!product || cast<ArrayType>(product.getLhs().getType()).getRank() != 2 ||
      cast<ArrayType>(product.getRhs().getType()).getRank() != 1 ||
      !dependsOnlyOn(product.getLhs(), scope, {head}) ||
      !dependsOnlyOn(product.getRhs(), scope, {head, position}))
    return {};
  return product;
}

/// tabulate (%b, %p) { M[b] v[p] } is, per head, X M[b]ᵀ with X the rows
/// v[p]: batch_matmul X, M transposed.
void batchTable(TabulateOp table) {
  ArrayAttr sizes = table.getSizes();
  if (sizes.size() != 2 || !hasPlainDims(sizes))
    return;
  Block &body = table.getBody().front();
  Value head = body.getArgument(0), position = body.getArgument(1);
  MatmulOp product = headProduct(table.getBodyValue(), table, head, position);
  if (!product || !dependsOnlyOn(product.getRhs(), table, {position}))
    return;
  Value rows = arrayOver(product.getRhs(), position, sizes[1], {&body}, table);
  auto [matrices, transposed] =
      matricesOver(product.getLhs(), head, sizes[0], {&body}, table, true);
  std::string reason;
  ArrayType type = BatchMatmulOp::inferType(cast<ArrayType>(rows.getType()),
                                            cast<ArrayType>(matrices.getType()),
                                            false, transposed, false, reason);
  if (type != table.getType())
    return;
  OpBuilder builder(table);
  auto batch = BatchMatmulOp::create(builder, table.getLoc(), type, rows,
                                     matrices, false, transposed, false);
  table.getResult().replaceAllUsesWith(batch.getResult());
  table.erase();
}

/// A loop that adds M[b] v[b, p] into row p of a tensor for every head b
/// (a second index of the loop, or a sum over b in its body) adds row p of
/// Σ_b V[b] M[b]ᵀ, V[b] the rows v[b, p]: one batch_matmul, summed, then a
/// loop over p that adds its rows.
void batchAccumulation(ForeachOp loop) {
  ArrayAttr sizes = loop.getSizes();
  if (loop.hasPredicate() || !hasPlainDims(sizes) || sizes.size() > 2)
    return;
  Block &body = loop.getBody().front();
  SmallVector<AccumulateOp> accumulates(body.getOps<AccumulateOp>());
  if (accumulates.size() != 1)
    return;
  AccumulateOp accumulate = accumulates.front();
  if (accumulate.getIndices().size() != 1 ||
      !accumulate.getMap().isIdentity() ||
      !isa<BlockArgument>(accumulate.getIndices()[0]) ||
      accumulate.getIndices()[0].getParentBlock() != &body)
    return;
  // Nothing else with effects: the loop only computes that value.
  bool onlyValue = true;
  body.walk([&](Operation *op) {
    if (op != accumulate && !isMemoryEffectFree(op) &&
        !isa<ReadOp, ReduceOp, YieldOp>(op))
      onlyValue = false;
  });
  if (!onlyValue)
    return;
  Value position = accumulate.getIndices()[0];
  Value head, summand;
  Attribute headSize;
  SmallVector<Block *> blocks = {&body};
  Operation *scope = loop;
  if (sizes.size() == 2) {
    unsigned headNumber = position == body.getArgument(0) ? 1 : 0;
    head = body.getArgument(headNumber);
    headSize = sizes[headNumber];
    summand = accumulate.getValue();
  } else if (auto sum = accumulate.getValue().getDefiningOp<ReduceOp>();
             sum && sum.getKind() == ReduceKind::sum && !sum.hasPredicate() &&
             sum.getSizes().size() == 1 && hasPlainDims(sum.getSizes())) {
    Block &sumBody = sum.getBody().front();
    head = sumBody.getArgument(0);
    headSize = sum.getSizes()[0];
    summand = sum.getBodyValue();
    blocks.push_back(&sumBody);
  } else {
    return;
  }
  MatmulOp product = headProduct(summand, scope, head, position);
  if (!product)
    return;
  Attribute positionSize = sizes[position == body.getArgument(0) ? 0 : 1];
  Value rows = arrayOver(product.getRhs(), {head, position},
                         {headSize, positionSize}, blocks, loop);
  auto [matrices, transposed] =
      matricesOver(product.getLhs(), head, headSize, blocks, loop, true);
  std::string reason;
  ArrayType type = BatchMatmulOp::inferType(cast<ArrayType>(rows.getType()),
                                            cast<ArrayType>(matrices.getType()),
                                            false, transposed, true, reason);
  if (!type || type.getRank() != 2)
    return;
  OpBuilder builder(loop);
  Location loc = loop.getLoc();
  Value total = BatchMatmulOp::create(builder, loc, type, rows, matrices, false,
                                      transposed, true);
  auto adding = ForeachOp::create(
      builder, loc, ArrayAttr::get(loop.getContext(), {positionSize}));
  Block &addingBody = adding.getBody().emplaceBlock();
  Value row = addingBody.addArgument(position.getType(), position.getLoc());
  OpBuilder inside = OpBuilder::atBlockEnd(&addingBody);
  auto rowType =
      ArrayType::get(loop.getContext(), type.getShape().drop_front());
  Value value =
      ExtractOp::create(inside, loc, rowType, total,
                        AffineMapAttr::get(AffineMap::getMultiDimIdentityMap(
                            1, loop.getContext())),
                        ValueRange{row});
  AccumulateOp::create(inside, accumulate.getLoc(), value,
                       accumulate.getTensorAttr(), accumulate.getMapAttr(),
                       ValueRange{row});
  loop.erase();
}

} // namespace

void mlir::energy::formBatchedProducts(ModelOp model) {
  SmallVector<TabulateOp> tables;
  SmallVector<ForeachOp> loops;
  model.walk([&](Operation *op) {
    if (!isStatement(op))
      return;
    if (auto table = dyn_cast<TabulateOp>(op))
      tables.push_back(table);
    else if (auto loop = dyn_cast<ForeachOp>(op))
      loops.push_back(loop);
  });
  for (TabulateOp table : tables)
    batchTable(table);
  for (ForeachOp loop : loops)
    batchAccumulation(loop);
}
