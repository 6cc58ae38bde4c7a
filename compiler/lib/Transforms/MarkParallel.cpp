//===- MarkParallel.cpp - Loops that may run on several threads -----------===//
//
// A `foreach` whose positions along its first index add into disjoint
// slots may share those positions out among threads without atomics; when
// another index has that property, the indices are interchanged to bring it
// first. A sum outside every loop may run in fixed chunks whose partial
// sums are added in chunk order, so that the result does not depend on the
// number of threads.
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"
#include "energy/Transforms/ParallelForeach.h"

#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// Moves index number `position` of every region of `loop` to the front.
void bringIndexFirst(ForeachOp loop, unsigned position) {
  SmallVector<Attribute> sizes(loop.getSizes().getValue());
  Attribute size = sizes[position];
  sizes.erase(sizes.begin() + position);
  sizes.insert(sizes.begin(), size);
  loop.setSizesAttr(ArrayAttr::get(loop.getContext(), sizes));
  for (Region *region : {&loop.getPredicate(), &loop.getBody()}) {
    if (region->empty())
      continue;
    Block &block = region->front();
    BlockArgument moved = block.getArgument(position);
    BlockArgument first =
        block.insertArgument(0u, moved.getType(), moved.getLoc());
    moved.replaceAllUsesWith(first);
    block.eraseArgument(position + 1);
  }
}

} // namespace

bool mlir::energy::isStatement(Operation *op) {
  return isa<TermOp, GradientOp, UpdateProgramOp, BackwardProgramOp, RepeatOp,
             DynamicsOp>(op->getParentOp());
}

bool mlir::energy::writesDisjointSlots(ForeachOp loop, unsigned position) {
  Value index = loop.getBody().front().getArgument(position);
  llvm::StringMap<unsigned> axisOf;
  WalkResult walk = loop.getBody().walk([&](Operation *op) {
    if (isa<StoreOp, GradOp, RepeatOp>(op))
      return WalkResult::interrupt();
    auto accumulate = dyn_cast<AccumulateOp>(op);
    if (!accumulate)
      return WalkResult::advance();
    std::optional<unsigned> axis;
    for (auto [number, result] :
         llvm::enumerate(accumulate.getMap().getResults())) {
      auto dim = dyn_cast<AffineDimExpr>(result);
      if (dim && accumulate.getIndices()[dim.getPosition()] == index) {
        axis = number;
        break;
      }
    }
    if (!axis)
      return WalkResult::interrupt();
    auto [entry, inserted] = axisOf.try_emplace(accumulate.getTensor(), *axis);
    return inserted || entry->second == *axis ? WalkResult::advance()
                                              : WalkResult::interrupt();
  });
  return !walk.wasInterrupted();
}

unsigned mlir::energy::disjointLeadingIndices(ForeachOp loop) {
  unsigned count = 0, rank = loop.getSizes().size();
  while (count < rank && writesDisjointSlots(loop, count))
    ++count;
  return count;
}

void mlir::energy::markParallelLoops(ModelOp model) {
  model.walk([&](ForeachOp loop) {
    if (!isStatement(loop))
      return;
    unsigned rank = loop.getSizes().size();
    for (unsigned position = 0; position < rank; ++position) {
      if (!writesDisjointSlots(loop, position))
        continue;
      if (position != 0)
        bringIndexFirst(loop, position);
      loop.setParallel(true);
      return;
    }
  });
  model.walk([&](ReduceOp reduce) {
    if (reduce.getKind() == ReduceKind::sum && isStatement(reduce))
      reduce.setParallel(true);
  });
}
