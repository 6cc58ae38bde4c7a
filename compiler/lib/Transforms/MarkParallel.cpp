//===- MarkParallel.cpp - Loops that may run on several threads -----------===//
//
// A `foreach` whose positions along its first index add into disjoint
// slots may share those positions out among threads without atomics; when
// another index has that property, the indices are interchanged to bring it
// first. The loop records how many leading indices have it (`parallel<n>`),
// which code generation reads. A sum outside every loop may run in fixed chunks
// whose partial sums are added in chunk order, so that the result does not
// depend on the number of threads.
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"

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

/// Whether every position of `loop` along its index number `position` adds
/// into slots no other position adds into: every accumulation in it has
/// that index, alone, as one of its slot's indices, at the same axis for
/// every accumulation into the same tensor, and nothing else in it writes.
static bool writesDisjointSlots(ForeachOp loop, unsigned position) {
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

/// The number of leading indices of `loop` each of which writes disjoint
/// slots: positions that differ in any of them write different slots.
static unsigned disjointLeadingIndices(ForeachOp loop) {
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
      loop.setParallel(disjointLeadingIndices(loop));
      return;
    }
  });
  model.walk([&](ReduceOp reduce) {
    if (reduce.getKind() == ReduceKind::sum && isStatement(reduce))
      reduce.setParallel(true);
  });
}
