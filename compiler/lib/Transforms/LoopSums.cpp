//===- LoopSums.cpp - Loops that add over indices their slots ignore -----===//
//
// A loop over (J, K) that accumulates, at slots only J chooses, what each
// position computes adds the same slot at every position of K: it becomes a
// loop over J of sums over K, so that the linear maps of what is added come
// out of the sums (FactorLinearMaps.cpp) and the sums become products or
// contractions. The derivation leaves such loops wherever a term reads a
// tensor at some of its indices (a Hopfield module's gradient, added over
// tokens and memories into each token).
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"
#include "Slices.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// An accumulation in `loop` at slots that some of the loop's indices
/// choose (J) and not the others (K) adds, at each position of J, the sum
/// over K: it becomes a loop over J, before `loop`, that accumulates a
/// sum over K (the predicate, over all indices, goes with the sum). A
/// Hopfield module's gradient added over (b, a, mu) into x[b, a] becomes
/// a sum over the memories mu per token (b, a).
bool gatherOverUnusedIndices(ForeachOp loop, AccumulateOp accumulate) {
  Block &body = loop.getBody().front();
  SmallVector<bool> used(body.getNumArguments(), false);
  for (Value index : accumulate.getIndices()) {
    if (isDefinedOutside(index, loop))
      continue;
    auto *position = llvm::find(body.getArguments(), index);
    if (position == body.args_end())
      return false;
    used[position - body.args_begin()] = true;
  }
  if (llvm::all_of(used, [](bool u) { return u; }) ||
      llvm::none_of(used, [](bool u) { return u; }))
    return false;
  // What a softmax weighs (an lse, or a contraction's normaliser, in what
  // the position adds) is a contraction's to plan, over the loop's whole
  // domain as its rows: nested in a loop over fewer indices, it would be
  // one contraction per position of the loop.
  {
    llvm::SetVector<Operation *> slice;
    addToSlice(accumulate.getValue(), body, slice);
    bool weighted = false;
    for (Operation *member : slice)
      member->walk([&](Operation *op) {
        if (auto reduce = dyn_cast<ReduceOp>(op))
          weighted |= reduce.getKind() == ReduceKind::lse;
        if (auto extract = dyn_cast<ExtractOp>(op))
          if (auto result = dyn_cast<OpResult>(extract.getSource()))
            if (auto contract = dyn_cast<SoftmaxContractOp>(result.getOwner()))
              weighted |= result == contract.getLse();
      });
    if (weighted)
      return false;
  }
  SmallVector<Attribute> slotSizes, summedSizes;
  for (auto [size, isUsed] : llvm::zip(loop.getSizes(), used))
    (isUsed ? slotSizes : summedSizes).push_back(size);
  OpBuilder builder(loop);
  Location loc = accumulate.getLoc();
  auto slots = ForeachOp::create(builder, loc, builder.getArrayAttr(slotSizes));
  Block &slotBody = slots.getBody().emplaceBlock();
  IRMapping mapping;
  for (auto [argument, isUsed] : llvm::zip(body.getArguments(), used))
    if (isUsed)
      mapping.map(argument,
                  slotBody.addArgument(argument.getType(), argument.getLoc()));
  builder.setInsertionPointToStart(&slotBody);
  Value value = accumulate.getValue();
  auto sum = ReduceOp::create(builder, loc, value.getType(), ReduceKind::sum,
                              builder.getArrayAttr(summedSizes), Value());
  auto addSummed = [&](Block &block) {
    for (auto [argument, isUsed] : llvm::zip(body.getArguments(), used))
      if (!isUsed)
        mapping.map(argument,
                    block.addArgument(argument.getType(), argument.getLoc()));
  };
  if (loop.hasPredicate()) {
    Block &predicate = sum.getPredicate().emplaceBlock();
    addSummed(predicate);
    Block &loopPredicate = loop.getPredicate().front();
    IRMapping predicateMapping = mapping;
    for (auto [from, to] :
         llvm::zip(loopPredicate.getArguments(), body.getArguments()))
      predicateMapping.map(from, mapping.lookup(to));
    OpBuilder inside = OpBuilder::atBlockEnd(&predicate);
    for (Operation &op : loopPredicate)
      inside.clone(op, predicateMapping);
  }
  Block &sumBody = sum.getBody().emplaceBlock();
  addSummed(sumBody);
  llvm::SetVector<Operation *> slice;
  addToSlice(value, body, slice);
  OpBuilder inside = OpBuilder::atBlockEnd(&sumBody);
  cloneSlice(body, slice, inside, mapping);
  YieldOp::create(inside, loc, mapping.lookupOrDefault(value));
  moveLoopInvariantCode(cast<LoopLikeOpInterface>(sum.getOperation()));
  builder.setInsertionPointAfter(sum);
  SmallVector<Value> indices;
  for (Value index : accumulate.getIndices())
    indices.push_back(mapping.lookupOrDefault(index));
  AccumulateOp::create(builder, loc, sum.getResult(),
                       accumulate.getTensorAttr(), accumulate.getMapAttr(),
                       indices);
  accumulate.erase();
  return true;
}

} // namespace

void mlir::energy::gatherLoopSums(ModelOp model) {
  SmallVector<ForeachOp> loops;
  model.walk([&](ForeachOp loop) { loops.push_back(loop); });
  for (ForeachOp loop : loops) {
    Block &body = loop.getBody().front();
    bool gathered = false;
    for (AccumulateOp accumulate : llvm::to_vector(body.getOps<AccumulateOp>()))
      gathered |= gatherOverUnusedIndices(loop, accumulate);
    // A loop left without effects computes nothing.
    if (gathered && body.getOps<AccumulateOp>().empty() &&
        body.getOps<ForeachOp>().empty())
      loop.erase();
  }
}
