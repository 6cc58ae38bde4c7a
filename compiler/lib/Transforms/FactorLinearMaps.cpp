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
  eraseDeadOps(body);
  return copy;
}

/// Whether `map`, a map of a summand of `sum`, transforms the value (a
/// matrix product, an elementwise product with an array, a sum, …):
/// products with scalars alone would only move.
bool transformsRows(Operation *map, ReduceOp sum) {
  if (!isa<MulOp, DivOp, NegOp>(map))
    return true;
  return llvm::any_of(map->getOperands(), [&](Value operand) {
    return isDefinedOutside(operand, sum) && !isScalar(operand);
  });
}

/// The summand of `sum` as a sum of weights times transformed rows
/// (distributeOverSums), which the next round sums one by one; false when
/// it is not one.
bool distributeSummand(ReduceOp sum, unsigned maxTerms) {
  Block &body = sum.getBody().front();
  Operation *yield = body.getTerminator();
  Value value = yield->getOperand(0);
  SmallVector<Value> terms;
  if (!distributeOverSums(
          value, body, [&](Value v) { return isDefinedOutside(v, sum); },
          [&](Operation *map) { return transformsRows(map, sum); }, maxTerms,
          terms))
    return false;
  OpBuilder builder(yield);
  Value total = terms.front();
  for (Value term : llvm::drop_begin(terms))
    total = AddOp::create(builder, sum.getLoc(), total, term);
  yield->setOperands(total);
  return true;
}

/// Rewrites `sum`, whose summand is E(σ₁, …, σₘ, x) (Linearity.h: varying
/// scalars σᵢ, a varying value x, multilinear maps with fixed operands), as
/// E(S, 1, …, 1), S the sum of σ₁ ⋯ σₘ x: a weight times a transformed row
/// is the transform, applied once, of the weighted sum of rows. False when
/// the summand is no such map.
bool factorScaledMaps(ReduceOp sum) {
  Block &body = sum.getBody().front();
  Value value = cast<YieldOp>(body.getTerminator()).getValues().front();
  std::optional<ScaledDecomposition> scaled = decomposeScaled(
      value, body, [&](Value v) { return isDefinedOutside(v, sum); });
  if (!scaled || !scaled->vector || scaled->scalars.empty())
    return false;
  if (llvm::none_of(scaled->maps,
                    [&](Operation *map) { return transformsRows(map, sum); }))
    return false;
  OpBuilder builder(sum);
  Location loc = sum.getLoc();
  // The sum of the product of the leaves, in a copy of the sum.
  ReduceOp product = sumYielding(builder, sum, scaled->vector);
  {
    Block &copy = product.getBody().front();
    Operation *yield = copy.getTerminator();
    IRMapping mapping;
    mapping.map(body.getArguments(), copy.getArguments());
    // The copy's ops are the slice of x; the scalars' slices are cloned in.
    OpBuilder inside(yield);
    llvm::SetVector<Operation *> slice;
    for (Value scalar : scaled->scalars)
      addToSlice(scalar, body, slice);
    cloneSlice(body, slice, inside, mapping);
    Value total = yield->getOperand(0);
    for (Value scalar : scaled->scalars)
      total =
          MulOp::create(inside, loc, mapping.lookupOrDefault(scalar), total);
    yield->setOperands(total);
  }
  IRMapping after;
  after.map(scaled->vector, product.getResult());
  Value one = ConstantOp::create(builder, loc, 1.0);
  for (Value scalar : scaled->scalars)
    after.map(scalar, one);
  SmallVector<Operation *> maps(scaled->maps.begin(), scaled->maps.end());
  llvm::sort(maps,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  for (Operation *map : maps)
    builder.clone(*map, after);
  sum.replaceAllUsesWith(after.lookup(value));
  sum.erase();
  return true;
}

/// Rewrites `sum` as the sums of the atoms of its summand, the linear maps
/// applied after them (or as the sum of scaled leaves, factorScaledMaps);
/// false when the summand is no such map.
bool factorLinearMaps(ReduceOp sum, unsigned maxTerms, bool scaled) {
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
    return scaled &&
           (factorScaledMaps(sum) || distributeSummand(sum, maxTerms));
  OpBuilder builder(sum);
  // A fixed term (c in x + c) is summed where a sum adds it; where a map
  // takes the same value as a fixed operand (the c of c ⊙ (x + c)), it
  // stays.
  IRMapping after;
  llvm::DenseMap<Value, Value> summedTerms;
  for (Value atom : linear.atoms) {
    Value total = sumYielding(builder, sum, atom).getResult();
    if (isDefinedOutside(atom, sum))
      summedTerms[atom] = total;
    else
      after.map(atom, total);
  }
  SmallVector<Operation *> maps(linear.maps.begin(), linear.maps.end());
  llvm::sort(maps,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  for (Operation *map : maps) {
    Operation *copy = builder.clone(*map, after);
    if (linearityOf(map) != Linearity::Joint)
      continue;
    for (OpOperand &operand : map->getOpOperands())
      if (auto found = summedTerms.find(operand.get());
          found != summedTerms.end())
        copy->setOperand(operand.getOperandNumber(), found->second);
  }
  sum.replaceAllUsesWith(after.lookup(value));
  sum.erase();
  return true;
}

} // namespace

void mlir::energy::factorLinearMaps(ModelOp model, unsigned maxTerms,
                                    bool scaled) {
  // The sums a rewrite makes (one per value) may come apart in turn.
  bool changed = true;
  for (int round = 0; changed && round < 6; ++round) {
    changed = false;
    SmallVector<ReduceOp> sums;
    model.walk<WalkOrder::PostOrder>(
        [&](ReduceOp reduce) { sums.push_back(reduce); });
    for (ReduceOp sum : sums)
      changed |= ::factorLinearMaps(sum, maxTerms, scaled);
  }
}
