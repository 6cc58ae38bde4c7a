//===- FactorLinearMaps.cpp - Linear maps out of sums ---------------------===//
//
// Σ_p L(u_p) = L(Σ_p u_p) for every linear map L whose other operands do
// not depend on p (Linearity.h): a sum (or mean) whose summand is such a map
// of the values it is built from sums those values, and the maps apply once
// after it. In the gradient of an attention over normalised tokens, the
// backward of the normalisation and the product by a projection's
// transpose, which the derivation applies to every pair, apply once per
// row; what is left in the sum is the weight times a row of a table, the
// form of a softmax contraction's sums.
//
//===----------------------------------------------------------------------===//

#include "Linearity.h"
#include "PlanKernels.h"
#include "Slices.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// A copy of `sum` (before it) whose body yields `inside`, a value of its
/// body or from outside it.
ReduceOp sumYielding(OpBuilder &builder, ReduceOp sum, Value inside) {
  auto copy = ReduceOp::create(builder, sum.getLoc(), inside.getType(),
                               sum.getKind(), sum.getSizes(), Value());
  IRMapping mapping;
  sum.getPredicate().cloneInto(&copy.getPredicate(), mapping);
  sum.getBody().cloneInto(&copy.getBody(), mapping);
  Block &body = copy.getBody().front();
  body.getTerminator()->setOperands(mapping.lookupOrDefault(inside));
  // What only the other values needed is not computed (and not seen by
  // the steps that match what a sum computes).
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (isOpTriviallyDead(&op))
      op.erase();
  return copy;
}

/// Rewrites `sum` as the sums of the atoms of its summand, the linear maps
/// applied after them; false when the summand is no such map.
bool factorLinearMaps(ReduceOp sum, unsigned maxTerms) {
  if ((sum.getKind() != ReduceKind::sum && sum.getKind() != ReduceKind::mean) ||
      sum.getTemperature())
    return false;
  moveLoopInvariantCode(cast<LoopLikeOpInterface>(sum.getOperation()));
  Block &body = sum.getBody().front();
  Value value = cast<YieldOp>(body.getTerminator()).getValues().front();
  LinearDecomposition linear = decomposeLinearly(
      value, body, [&](Value v) { return isDefinedOutside(v, sum); });
  // A sum for each varying value (and the sums of fixed terms, which need
  // no body), when there are at most `maxTerms`: each recomputes what its
  // value needs.
  size_t varying = llvm::count_if(
      linear.atoms, [&](Value atom) { return !isDefinedOutside(atom, sum); });
  if (linear.maps.empty() || varying == 0 || varying > maxTerms)
    return false;
  OpBuilder builder(sum);
  IRMapping after;
  for (Value atom : linear.atoms)
    after.map(atom, sumYielding(builder, sum, atom).getResult());
  SmallVector<Operation *> maps(linear.maps.begin(), linear.maps.end());
  llvm::sort(maps,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  for (Operation *map : maps)
    builder.clone(*map, after);
  sum.replaceAllUsesWith(after.lookup(value));
  sum.erase();
  return true;
}

} // namespace

void mlir::energy::factorLinearMaps(ModelOp model, unsigned maxTerms) {
  SmallVector<ReduceOp> sums;
  model.walk<WalkOrder::PostOrder>(
      [&](ReduceOp reduce) { sums.push_back(reduce); });
  for (ReduceOp sum : sums)
    (void)::factorLinearMaps(sum, maxTerms);
}
