//===- OuterSums.cpp - Sums of outer products as products of matrices -----===//
//
// Σ_p u_p ⊗ v_p over the positions p of one or two indices is Uᵀ V, one
// summed product of the tables of u and v (a parameter's adjoint summed over
// a batch and its tokens); Σ_b Σ_j u ⊗ v, a sum per batch element (with
// tables of that element's rows ahead of it) of a sum over its tokens, is
// the same sum over (b, j). A loop over b that adds Σ_j u ⊗ v into row b of
// a tensor adds the row b of one batch of products, U[b]ᵀ V[b].
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

/// `foreach (%b) { accumulate (reduce sum (%j) { outer u, v }) into @T[%b] }`
/// as the batch of products P[b] = U[b]ᵀ V[b] of the tables of u and v over
/// (b, j), ahead of the loop, whose row b the loop then adds: a slot
/// attention's adjoint of its slots, a sum over each sequence's tokens.
/// Returns whether it rewrote `loop`.
bool mlir::energy::batchPerIndexOuterSum(ForeachOp loop) {
  ArrayAttr loopSizes = loop.getSizes();
  if (loop.hasPredicate() || loopSizes.size() != 1 || !hasPlainDims(loopSizes))
    return false;
  Block &body = loop.getBody().front();
  for (Operation &op : body) {
    auto sum = dyn_cast<ReduceOp>(op);
    if (!sum || !isPlainSumOverOne(sum) || !sum->hasOneUse())
      continue;
    auto accumulate = dyn_cast<AccumulateOp>(*sum->getUsers().begin());
    if (!accumulate || accumulate->getBlock() != &body ||
        accumulate.getIndices().size() != 1 ||
        accumulate.getIndices()[0] != body.getArgument(0) ||
        !accumulate.getMap().isIdentity())
      continue;
    auto outer = sum.getBodyValue().getDefiningOp<OuterOp>();
    if (!outer || cast<ArrayType>(outer.getLhs().getType()).getRank() != 1 ||
        cast<ArrayType>(outer.getRhs().getType()).getRank() != 1)
      continue;
    Block &sumBody = sum.getBody().front();
    SmallVector<Value> indices{body.getArgument(0), sumBody.getArgument(0)};
    SmallVector<Attribute> dims{loopSizes[0], sum.getSizes()[0]};
    // Each side depends only on (b, j) and what the loop reads.
    if (!dependsOnlyOn(outer.getLhs(), loop, indices) ||
        !dependsOnlyOn(outer.getRhs(), loop, indices))
      continue;
    Value lhs =
        arrayOver(outer.getLhs(), indices, dims, {&body, &sumBody}, loop);
    Value rhs =
        arrayOver(outer.getRhs(), indices, dims, {&body, &sumBody}, loop);
    OpBuilder builder(loop);
    Value products = buildRowProduct(builder, sum.getLoc(), lhs, rhs,
                                     /*transposeLhs=*/true,
                                     /*transposeRhs=*/false, /*summed=*/false);
    assert(cast<ArrayType>(products.getType()).getShape().drop_front() ==
               cast<ArrayType>(outer.getType()).getShape() &&
           "a batch of the outer products' shape");
    builder.setInsertionPoint(sum);
    auto map = AffineMap::getMultiDimIdentityMap(1, loop.getContext());
    Value row = ExtractOp::create(builder, sum.getLoc(), outer.getType(),
                                  products, AffineMapAttr::get(map),
                                  ValueRange{body.getArgument(0)});
    sum.getResult().replaceAllUsesWith(row);
    sum.erase();
    eraseDeadOps(body);
    return true;
  }
  return false;
}
