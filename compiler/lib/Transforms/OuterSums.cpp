//===- OuterSums.cpp - Sums of outer products as products of matrices -----===//
//
// Σ_p u_p ⊗ v_p over the positions p of one or two indices is Uᵀ V, one
// summed product of the tables of u and v (a parameter's adjoint summed over
// a batch and its tokens); Σ_b Σ_j u ⊗ v, a sum per batch element (with
// tables of that element's rows ahead of it) of a sum over its tokens, is
// the same sum over (b, j).
//
//===----------------------------------------------------------------------===//

#include "BatchedProducts.h"
#include "PlanKernels.h"

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

/// `reduce sum (%b, %p) { … outer u, v }`, possibly scaled by scalars from
/// outside, as the tables U and V of u and v over (b, p) and one GEMM
/// Σ_b U[b]ᵀ V[b] (Uᵀ V over a single index p). Returns whether it
/// rewrote `reduce`.
bool mlir::energy::batchOuterSum(ReduceOp reduce) {
  ArrayAttr sizes = reduce.getSizes();
  if (reduce.getKind() != ReduceKind::sum || reduce.hasPredicate() ||
      !hasPlainDims(sizes) || sizes.empty() || sizes.size() > 2)
    return false;
  Block &body = reduce.getBody().front();
  ScalarFactors scales;
  auto outer =
      scales.peel(reduce.getBodyValue(), reduce).getDefiningOp<OuterOp>();
  if (!outer || cast<ArrayType>(outer.getLhs().getType()).getRank() != 1 ||
      cast<ArrayType>(outer.getRhs().getType()).getRank() != 1)
    return false;
  SmallVector<Value> indices(body.getArguments());
  SmallVector<Attribute> dims(sizes.begin(), sizes.end());
  Value lhs = arrayOver(scales.peel(outer.getLhs(), reduce), indices, dims,
                        {&body}, reduce);
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
