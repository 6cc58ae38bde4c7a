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
#include "SizeEstimates.h"
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

/// E(1, …, 1, `carrier`) at `builder`'s point, for `value` = E(σ₁, …, σₘ,
/// x) as `scaled` decomposes it: its maps cloned in their order with every
/// σᵢ set to 1 (a product by one is its other factor) and x replaced by
/// `carrier`.
Value buildUnscaled(OpBuilder &builder, Location loc,
                    const ScaledDecomposition &scaled, Value value,
                    Value carrier) {
  IRMapping unscaled;
  unscaled.map(scaled.vector, carrier);
  Value one = ConstantOp::create(builder, loc, 1.0);
  for (Value scalar : scaled.scalars)
    unscaled.map(scalar, one);
  SmallVector<Operation *> maps(scaled.maps.begin(), scaled.maps.end());
  llvm::sort(maps,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  for (Operation *map : maps) {
    if (auto product = dyn_cast<MulOp>(map)) {
      Value lhs = unscaled.lookupOrDefault(product.getLhs());
      Value rhs = unscaled.lookupOrDefault(product.getRhs());
      Value other = lhs == one ? rhs : rhs == one ? lhs : Value();
      if (other && other.getType() == product.getType()) {
        unscaled.map(product.getResult(), other);
        continue;
      }
    }
    builder.clone(*map, unscaled);
  }
  return unscaled.lookup(value);
}

/// Rewrites `sum`, whose summand is E(σ₁, …, σₘ, x) (Linearity.h: varying
/// scalars σᵢ, a varying value x, multilinear maps with fixed operands), as
/// E(S, 1, …, 1), S the sum of σ₁ ⋯ σₘ x: a weight times a transformed row
/// is the transform, applied once, of the weighted sum of rows. False when
/// the summand is no such map.
bool factorScaledMaps(ReduceOp sum, bool onlyWidening) {
  Block &body = sum.getBody().front();
  Value value = cast<YieldOp>(body.getTerminator()).getValues().front();
  std::optional<ScaledDecomposition> scaled = decomposeScaled(
      value, body, [&](Value v) { return isDefinedOutside(v, sum); });
  if (!scaled || !scaled->vector || scaled->scalars.empty())
    return false;
  if (onlyWidening) {
    auto model = sum->getParentOfType<ModelOp>();
    if (estimatedElements(model, scaled->vector.getType()) >=
        estimatedElements(model, value.getType()))
      return false;
  }
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
  sum.replaceAllUsesWith(
      buildUnscaled(builder, loc, *scaled, value, product.getResult()));
  sum.erase();
  return true;
}

/// The estimated number of positions of the indices the values depend on.
double positionsOf(ArrayRef<Value> values, IndexDependence &dependence,
                   ModelOp model) {
  IndexDependence::IndexSet indices;
  for (Value value : values)
    for (Value index : dependence.of(value))
      indices.insert(index);
  double count = 1;
  for (Value index : indices)
    count *= estimatedIndexSize(model, cast<BlockArgument>(index));
  return count;
}

/// The loop (or reduction, or table) directly inside the declaration that
/// encloses `op`, and the bodies from its own down to `op`'s, outermost
/// first; a null loop where `op` is not inside one.
Operation *outermostLoop(Operation *op, SmallVectorImpl<Block *> &bodies) {
  Operation *declaration = declarationOf(op);
  for (Operation *inner = op; inner != declaration;
       inner = inner->getParentOp()) {
    if (inner->getParentOp() == declaration) {
      std::reverse(bodies.begin(), bodies.end());
      return inner;
    }
    bodies.push_back(inner->getBlock());
  }
  return nullptr;
}

/// Rewrites the summand E(σ₁, …, σₘ, x) of `sum` (Linearity.h) as
/// σ₁ ⋯ σₘ T[i], T a table, ahead of the loops around the sum, of
/// E(1, …, 1, x) over the indices i it depends on, where those (x's and
/// the maps' fixed operands') have fewer positions at the estimated sizes
/// than the sum's value, or as many and the maps narrow x: the maps then
/// apply to x once per position of its own, not to the sum once per
/// position of the loops around it.
/// Σ_i p_ji Wd mu[b, i] over few slots i is Σ_i p_ji (Wd mu[b, i]), one
/// product per slot, not Wd Σ_i p_ji mu[b, i], one per token. False, with
/// the sum unchanged, when the summand is not of that form, its maps take
/// x alone already, or the maps cost less after the sum.
bool transformCarrierFirst(ReduceOp sum) {
  Block &body = sum.getBody().front();
  Operation *yield = body.getTerminator();
  Value value = yield->getOperand(0);
  std::optional<ScaledDecomposition> scaled = decomposeScaled(
      value, body, [&](Value v) { return isDefinedOutside(v, sum); });
  if (!scaled || !scaled->vector || scaled->scalars.empty())
    return false;
  auto scales = [&](Operation *map) {
    return transformsRows(map, sum) &&
           llvm::any_of(scaled->scalars, [&](Value scalar) {
             Operation *def = scalar.getDefiningOp();
             return def && dependsOn(map->getResult(0), def);
           });
  };
  if (llvm::none_of(scaled->maps, scales))
    return false;
  SmallVector<Block *> bodies = {&body};
  Operation *anchor = outermostLoop(sum, bodies);
  if (!anchor)
    return false;
  auto model = sum->getParentOfType<ModelOp>();
  IndexDependence dependence(declarationOf(sum));
  SmallVector<Value> carrier = {scaled->vector};
  for (Operation *map : scaled->maps)
    for (Value operand : map->getOperands())
      if (isDefinedOutside(operand, sum))
        carrier.push_back(operand);
  // As many positions as the sum's value: first where the maps narrow x
  // (a projection of a column's D-vector to Y), so that the sum adds Y.
  double carrierPositions = positionsOf(carrier, dependence, model);
  double sumPositions = positionsOf({sum.getResult()}, dependence, model);
  bool narrows = estimatedElements(model, value.getType()) <
                 estimatedElements(model, scaled->vector.getType());
  if (carrierPositions > sumPositions ||
      (carrierPositions == sumPositions && !narrows))
    return false;
  // The indices the carrier depends on, outermost first, each a plain dim
  // of a loop inside the anchor.
  llvm::SetVector<Value> used;
  for (Value value : carrier)
    for (Value index : dependence.of(value))
      used.insert(index);
  SmallVector<Value> indices;
  SmallVector<Attribute> sizes;
  for (Block *block : bodies)
    for (BlockArgument index : block->getArguments()) {
      if (!used.contains(index))
        continue;
      ArrayAttr domain =
          block->getParentOp()->getAttrOfType<ArrayAttr>("sizes");
      auto dim = domain && index.getArgNumber() < domain.size()
                     ? dyn_cast<DimExprAttr>(domain[index.getArgNumber()])
                     : DimExprAttr();
      if (!dim || !dim.getDimName())
        return false;
      indices.push_back(index);
      sizes.push_back(dim);
    }
  // The table fills every position, where the loops' predicates would
  // have skipped some: no read it computes at an offset may run out of its
  // tensor (a read at an offset in the weights stays where it is).
  bool offsetReads = llvm::any_of(carrier, [&](Value value) {
    return llvm::any_of(slicesAcross(value, bodies), [&](const auto &slice) {
      return !llvm::all_of(slice, readsPlainly);
    });
  });
  if (used.empty() || indices.size() != used.size() || offsetReads)
    return false;
  OpBuilder builder(yield);
  Location loc = sum.getLoc();
  Value transformed =
      buildUnscaled(builder, loc, *scaled, value, scaled->vector);
  Value table = arrayOver(transformed, indices, sizes, bodies, anchor);
  auto map =
      AffineMap::getMultiDimIdentityMap(indices.size(), builder.getContext());
  Value total = ExtractOp::create(builder, loc, transformed.getType(), table,
                                  AffineMapAttr::get(map), indices);
  for (Value scalar : scaled->scalars)
    total = MulOp::create(builder, loc, scalar, total);
  yield->setOperands(total);
  eraseDeadOps(body);
  return true;
}

/// Σ_(j,k) L_j(u(j, k)) = Σ_j L_j(Σ_k u(j, k)) for linear maps L_j that
/// vary with some indices j of the sum only (a head's projection in a sum
/// over batch, head and position): the sum is written as one over j of one
/// over k, out of which the next round takes the maps (a product per head,
/// not per row). Where an array factor of the summand varies with the
/// other indices only (a[b, c] ⊙ M[h] u), the heads are the inner sum
/// instead, out of which the factor comes. Only for a summand without sums
/// of its own (a contraction formed, not yet to form); false, with the sum
/// unchanged, otherwise.
bool splitByMapIndices(ReduceOp sum, unsigned maxTerms) {
  if (sum.getKind() != ReduceKind::sum || sum.hasPredicate() ||
      sum.getTemperature() || !hasPlainDims(sum.getSizes()))
    return false;
  // A sum over i of a sum over j alone is the sum over (i, j).
  if (ReduceOp flat = flattenNestedSum(sum)) {
    sum.getResult().replaceAllUsesWith(flat.getResult());
    if (splitByMapIndices(flat, maxTerms)) {
      sum.erase();
      return true;
    }
    // (What the flat sum's body holds belongs to it: the nest is whole.)
    flat.getResult().replaceAllUsesWith(sum.getResult());
    flat.erase();
    return false;
  }
  ArrayAttr sizes = sum.getSizes();
  if (sizes.size() < 2)
    return false;
  Block &body = sum.getBody().front();
  if (body.walk([](ReduceOp) { return WalkResult::interrupt(); })
          .wasInterrupted())
    return false;
  auto indicesOf = [&](Value value) {
    llvm::SmallPtrSet<Value, 4> indices;
    collectIndices(value, sum, indices);
    return indices;
  };
  llvm::SmallPtrSet<Value, 4> mapIndices;
  body.walk([&](MatmulOp product) {
    for (Value operand : product->getOperands())
      if (isMatrix(operand))
        for (Value index : indicesOf(operand))
          if (index.getParentBlock() == &body)
            mapIndices.insert(index);
  });
  Value value = cast<YieldOp>(body.getTerminator()).getValues().front();
  // The split into `outer` (the maps' indices) and `inner` (summed first),
  // when the maps of the summand that do not vary with `inner` are such a
  // map of some that vary with `outer`: `withMatrix` asks for a matrix (a
  // product that applies once per outer position), otherwise an array
  // factor (an elementwise product).
  SmallVector<BlockArgument> outer, inner;
  auto trySplit = [&](function_ref<bool(BlockArgument)> isOuter,
                      bool withMatrix) {
    outer.clear();
    inner.clear();
    for (BlockArgument index : body.getArguments())
      (isOuter(index) ? outer : inner).push_back(index);
    if (outer.empty() || inner.empty())
      return false;
    auto invariant = [&](Value value) {
      llvm::SmallPtrSet<Value, 4> indices = indicesOf(value);
      return llvm::none_of(
          inner, [&](BlockArgument index) { return indices.contains(index); });
    };
    LinearDecomposition linear = decomposeLinearly(value, body, invariant);
    size_t varying = llvm::count_if(
        linear.atoms, [&](Value atom) { return !invariant(atom); });
    bool mapsPerOuter = llvm::any_of(linear.maps, [&](Operation *map) {
      if (!withMatrix && !isa<MulOp, DivOp>(map))
        return false;
      return llvm::any_of(map->getOperands(), [&](Value operand) {
        return invariant(operand) && !indicesOf(operand).empty() &&
               (withMatrix ? isMatrix(operand) : !isScalar(operand));
      });
    });
    return mapsPerOuter && varying > 0 && varying <= maxTerms;
  };
  // Σ_(b,h,c) a[b, c] ⊙ M[h] u(b, h, c), an array factor of the positions
  // around the heads: summed over the heads first, Σ_(b,c) a[b, c] ⊙
  // Σ_h M[h] u(b, h, c), one product of all the heads summed (as a head's
  // back-projection added over the heads), not a table of every head's
  // product that the factor then weighs.
  bool headsFirst =
      trySplit([&](BlockArgument index) { return !mapIndices.contains(index); },
               /*withMatrix=*/false);
  if (!headsFirst &&
      !trySplit([&](BlockArgument index) { return mapIndices.contains(index); },
                /*withMatrix=*/true))
    return false;
  auto sizesOf = [&](ArrayRef<BlockArgument> indices) {
    SmallVector<Attribute> chosen;
    for (BlockArgument index : indices)
      chosen.push_back(sizes[index.getArgNumber()]);
    return ArrayAttr::get(sum.getContext(), chosen);
  };
  OpBuilder builder(sum);
  Location loc = sum.getLoc();
  auto outerSum = ReduceOp::create(builder, loc, sum.getType(), ReduceKind::sum,
                                   sizesOf(outer), Value());
  Block &outerBody = outerSum.getBody().emplaceBlock();
  builder.setInsertionPointToStart(&outerBody);
  auto innerSum = ReduceOp::create(builder, loc, sum.getType(), ReduceKind::sum,
                                   sizesOf(inner), Value());
  Block &innerBody = innerSum.getBody().emplaceBlock();
  YieldOp::create(builder, loc, innerSum.getResult());
  for (BlockArgument index : outer)
    index.replaceAllUsesWith(
        outerBody.addArgument(index.getType(), index.getLoc()));
  for (BlockArgument index : inner)
    index.replaceAllUsesWith(
        innerBody.addArgument(index.getType(), index.getLoc()));
  innerBody.getOperations().splice(innerBody.end(), body.getOperations());
  sum.getResult().replaceAllUsesWith(outerSum.getResult());
  sum.erase();
  moveLoopInvariantCode(cast<LoopLikeOpInterface>(innerSum.getOperation()));
  return true;
}

/// Moves what `sum`'s body computes the same at every position out of it:
/// reads at indices from outside (a slot's row in a sum over its tokens,
/// the same value before the sum, as a sum writes nothing; only plain
/// reads, as one at an offset may be valid only under the sum's
/// predicate), then what is free of effects and takes only values from
/// outside.
void hoistInvariants(ReduceOp sum) {
  for (Operation &op : llvm::make_early_inc_range(sum.getBody().front()))
    if (isa<ReadOp>(op) && readsPlainly(&op) &&
        llvm::all_of(op.getOperands(),
                     [&](Value index) { return isDefinedOutside(index, sum); }))
      op.moveBefore(sum);
  moveLoopInvariantCode(cast<LoopLikeOpInterface>(sum.getOperation()));
}

/// Rewrites `sum` as the sums of the atoms of its summand, the linear maps
/// applied after them (or as the sum of scaled leaves, factorScaledMaps);
/// false when the summand is no such map.
bool factorLinearMaps(ReduceOp sum, unsigned maxTerms, bool scaled,
                      bool widening) {
  if ((sum.getKind() != ReduceKind::sum && sum.getKind() != ReduceKind::mean) ||
      sum.getTemperature())
    return false;
  hoistInvariants(sum);
  if (transformCarrierFirst(sum))
    return true;
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
    return splitByMapIndices(sum, maxTerms) ||
           (scaled && (factorScaledMaps(sum, /*onlyWidening=*/false) ||
                       distributeSummand(sum, maxTerms))) ||
           (widening && factorScaledMaps(sum, /*onlyWidening=*/true));
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
                                    bool scaled, bool widening) {
  // The sums a rewrite makes (one per value) may come apart in turn.
  bool changed = true;
  for (int round = 0; changed && round < 6; ++round) {
    changed = false;
    SmallVector<ReduceOp> sums;
    model.walk<WalkOrder::PostOrder>(
        [&](ReduceOp reduce) { sums.push_back(reduce); });
    for (ReduceOp sum : sums)
      changed |= ::factorLinearMaps(sum, maxTerms, scaled, widening);
  }
}
