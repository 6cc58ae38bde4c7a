//===- OuterSums.cpp - Sums of outer products as products of matrices -----===//
//
// Σ_p u_p ⊗ v_p over the positions p of one or two indices is Uᵀ V, one
// summed product of the tables of u and v (a parameter's adjoint summed over
// a batch and its tokens); Σ_b Σ_j u ⊗ v, a sum per batch element (with
// tables of that element's rows ahead of it) of a sum over its tokens, is
// the same sum over (b, j). In a loop over b, a sum Σ_j u ⊗ v (j one or
// two indices, or a sum of sums) is row b of one batch of products,
// U[b]ᵀ V[b], a side that does not vary with b one table for every b.
//
//===----------------------------------------------------------------------===//

#include "BatchedProducts.h"
#include "PlanKernels.h"
#include "energy/Transforms/Dependence.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace mlir::energy;

/// Whether `sum` is a plain sum over one plain dim.
static bool isPlainSumOverOne(ReduceOp sum) {
  return sum.getKind() == ReduceKind::sum && !sum.hasPredicate() &&
         !sum.getTemperature() && !sum.getAggregation() &&
         sum.getSizes().size() == 1 && hasPlainDims(sum.getSizes());
}

/// The weight w and the outer product of `value` = w · (u ⊗ v) (w a
/// scalar of the body, either side of the product), or of `value` itself
/// with a null weight.
static std::pair<Value, OuterOp> weightedOuter(Value value) {
  if (auto outer = value.getDefiningOp<OuterOp>())
    return {Value(), outer};
  auto product = value.getDefiningOp<MulOp>();
  if (!product)
    return {};
  for (auto [weight, other] : {std::pair(product.getLhs(), product.getRhs()),
                               std::pair(product.getRhs(), product.getLhs())})
    if (isScalar(weight))
      if (auto outer = other.getDefiningOp<OuterOp>())
        return {weight, outer};
  return {};
}

/// `reduce sum (%b, %p) { … w · outer u, v }`, possibly scaled by scalars
/// from outside, as the tables U and V of w · u and v over (b, p) and one
/// GEMM Σ_b U[b]ᵀ V[b] (Uᵀ V over a single index p; a weight per position,
/// w, such as a token's total attention in an M-step's second moment, goes
/// with u). Returns whether it rewrote `reduce`.
bool mlir::energy::batchOuterSum(ReduceOp reduce) {
  ArrayAttr sizes = reduce.getSizes();
  if (reduce.getKind() != ReduceKind::sum || reduce.hasPredicate() ||
      !hasPlainDims(sizes) || sizes.empty() || sizes.size() > 2)
    return false;
  Block &body = reduce.getBody().front();
  ScalarFactors scales;
  auto [weight, outer] =
      weightedOuter(scales.peel(reduce.getBodyValue(), reduce));
  if (!outer || cast<ArrayType>(outer.getLhs().getType()).getRank() != 1 ||
      cast<ArrayType>(outer.getRhs().getType()).getRank() != 1)
    return false;
  SmallVector<Value> indices(body.getArguments());
  SmallVector<Attribute> dims(sizes.begin(), sizes.end());
  Value lhsRow = scales.peel(outer.getLhs(), reduce);
  // A weight over more positions than both sides vary with (w[j, i] u_j ⊗
  // u_j) is summed first (energy-plan-loop-sums, -linear-maps): its table
  // would be as large as the sum.
  auto variesWithEvery = [&](Value row) {
    llvm::SmallPtrSet<Value, 4> used;
    collectIndices(row, reduce, used);
    return llvm::all_of(body.getArguments(), [&](BlockArgument index) {
      return used.contains(index);
    });
  };
  if (weight) {
    if (!variesWithEvery(outer.getLhs()) || !variesWithEvery(outer.getRhs()))
      return false;
    OpBuilder inside(body.getTerminator());
    lhsRow = MulOp::create(inside, reduce.getLoc(), weight, lhsRow);
  }
  Value lhs = arrayOver(lhsRow, indices, dims, {&body}, reduce);
  Value rhs = arrayOver(scales.peel(outer.getRhs(), reduce), indices, dims,
                        {&body}, reduce);
  OpBuilder builder(reduce);
  Location loc = reduce.getLoc();
  Value total = buildRowProduct(builder, loc, lhs, rhs, true, false, true);
  assert(total.getType() == outer.getType() && "an outer product's shape");
  total = scales.apply(builder, loc, total);
  reduce.getResult().replaceAllUsesWith(total);
  reduce.erase();
  return true;
}

/// Σ_b Σ_j u ⊗ v (a sum of per-batch sums of outer products) as one
/// product over the positions (b, j), like batchOuterSum; leaves `reduce`
/// as it was where that does not apply.
void mlir::energy::batchNestedOuterSum(ReduceOp reduce) {
  auto inner = reduce.getBodyValue().getDefiningOp<ReduceOp>();
  if (!isPlainSumOverOne(reduce) || !inner || !isPlainSumOverOne(inner))
    return;
  ReduceOp flat = flattenNestedSum(reduce);
  if (!flat)
    return;
  reduce.getResult().replaceAllUsesWith(flat.getResult());
  if (batchOuterSum(flat)) {
    reduce.erase();
    return;
  }
  flat.getResult().replaceAllUsesWith(reduce.getResult());
  flat.erase();
}

namespace {
/// `sum`, in `loop`'s body over b, of u ⊗ v (or its negation) over one or
/// two indices (or Σ_i Σ_j, a sum of sums), as row b of the batch of
/// products P[b] = U[b]ᵀ V[b] over the summed positions, U and V the tables
/// of u and v, ahead of the loop; one of them a table for every b where its
/// side does not vary with b (the heads' gradients of a projection of
/// shared rows). Returns whether it rewrote `sum`.
bool batchSumPerIndex(ForeachOp loop, ReduceOp sum) {
  Block &body = loop.getBody().front();
  ReduceOp flat = sum, made;
  if (auto inner = sum.getBodyValue().getDefiningOp<ReduceOp>();
      inner && isPlainSumOverOne(sum) && isPlainSumOverOne(inner))
    flat = made = flattenNestedSum(sum);
  auto fail = [&] {
    if (made)
      made.erase();
    return false;
  };
  if (!flat)
    return false;
  ArrayAttr sizes = flat.getSizes();
  if (flat.getKind() != ReduceKind::sum || flat.hasPredicate() ||
      flat.getTemperature() || flat.getAggregation() || sizes.empty() ||
      sizes.size() > 2 || !hasPlainDims(sizes))
    return fail();
  Value value = flat.getBodyValue();
  auto negation = value.getDefiningOp<NegOp>();
  if (negation)
    value = negation.getOperand();
  auto outer = value.getDefiningOp<OuterOp>();
  if (!outer || cast<ArrayType>(outer.getLhs().getType()).getRank() != 1 ||
      cast<ArrayType>(outer.getRhs().getType()).getRank() != 1)
    return fail();
  Block &sumBody = flat.getBody().front();
  SmallVector<Value> summed(sumBody.getArguments());
  SmallVector<Attribute> summedDims(sizes.getValue());
  // Two summed indices in the order v reads them (a tensor's rows in its
  // layout, read whole).
  if (summed.size() == 2) {
    Operation *row = outer.getRhs().getDefiningOp();
    OperandRange rowIndices =
        isa_and_nonnull<ReadOp>(row)      ? cast<ReadOp>(row).getIndices()
        : isa_and_nonnull<ExtractOp>(row) ? cast<ExtractOp>(row).getIndices()
                                          : OperandRange(nullptr, 0);
    if (llvm::equal(rowIndices, ValueRange{summed[1], summed[0]})) {
      std::swap(summed[0], summed[1]);
      std::swap(summedDims[0], summedDims[1]);
    }
  }
  SmallVector<Value> indices{body.getArgument(0)};
  llvm::append_range(indices, summed);
  SmallVector<Attribute> dims{loop.getSizes()[0]};
  llvm::append_range(dims, summedDims);
  // Each side depends only on (b, j…) and what the loop reads.
  if (!dependsOnlyOn(outer.getLhs(), loop, indices) ||
      !dependsOnlyOn(outer.getRhs(), loop, indices))
    return fail();
  // A side that does not vary with b is one table for every b.
  auto tableOf = [&](Value side) {
    bool shared = dependsOnlyOn(side, loop, summed);
    return shared ? arrayOver(side, summed, summedDims, {&body, &sumBody}, loop)
                  : arrayOver(side, indices, dims, {&body, &sumBody}, loop);
  };
  if (dependsOnlyOn(outer.getLhs(), loop, summed) &&
      dependsOnlyOn(outer.getRhs(), loop, summed))
    return fail();
  Value lhs = tableOf(outer.getLhs());
  Value rhs = tableOf(outer.getRhs());
  OpBuilder builder(loop);
  std::string reason;
  int64_t rows = summed.size();
  ArrayType type = BatchMatmulOp::inferType(
      cast<ArrayType>(lhs.getType()), cast<ArrayType>(rhs.getType()),
      /*transposeLhs=*/true, /*transposeRhs=*/false, /*sumBatch=*/false, reason,
      rows);
  assert(type &&
         type.getShape().drop_front() ==
             cast<ArrayType>(outer.getType()).getShape() &&
         "a batch of the outer products' shape");
  Value products =
      BatchMatmulOp::create(builder, sum.getLoc(), type, lhs, rhs,
                            /*transpose_lhs=*/true, /*transpose_rhs=*/false,
                            /*sum_batch=*/false, rows, /*batch_axes=*/1);
  builder.setInsertionPoint(sum);
  auto map = AffineMap::getMultiDimIdentityMap(1, loop.getContext());
  Value row = ExtractOp::create(builder, sum.getLoc(), outer.getType(),
                                products, AffineMapAttr::get(map),
                                ValueRange{body.getArgument(0)});
  if (negation)
    row = NegOp::create(builder, sum.getLoc(), row);
  sum.getResult().replaceAllUsesWith(row);
  if (made)
    made.erase();
  sum.erase();
  return true;
}
} // namespace

/// `foreach (%b) { … reduce sum (%j) { outer u, v } … }` with the sums as
/// rows of the batches of products P[b] = U[b]ᵀ V[b] of the tables of u and
/// v over (b, j), ahead of the loop (batchSumPerIndex): a slot attention's
/// adjoint of its slots, a sum over each sequence's tokens; a head's
/// gradient of a projection, Σ_b Σ_i u ⊗ x[b, i], with the rows x shared by
/// every head. Returns whether it rewrote `loop`.
bool mlir::energy::batchPerIndexOuterSum(ForeachOp loop) {
  ArrayAttr loopSizes = loop.getSizes();
  if (loop.hasPredicate() || loopSizes.size() != 1 || !hasPlainDims(loopSizes))
    return false;
  Block &body = loop.getBody().front();
  bool rewrote = false;
  for (ReduceOp sum : llvm::to_vector(body.getOps<ReduceOp>()))
    rewrote |= batchSumPerIndex(loop, sum);
  if (rewrote)
    eraseDeadOps(body);
  return rewrote;
}
