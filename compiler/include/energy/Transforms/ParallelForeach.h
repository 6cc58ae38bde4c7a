//===- ParallelForeach.h - Parallel indices of a foreach --------*- C++ -*-===//
//
// The analysis behind `foreach parallel` (MarkParallel.cpp), for code
// generation: how many leading indices of a loop may each be shared out
// among threads, so that a GPU can run them as one loop.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TRANSFORMS_PARALLELFOREACH_H
#define ENERGY_TRANSFORMS_PARALLELFOREACH_H

#include "energy/IR/EnergyOps.h"

namespace mlir::energy {

/// Whether every position of `loop` along its index number `position` adds
/// into slots no other position adds into: every accumulation in it has
/// that index, alone, as one of its slot's indices, at the same axis for
/// every accumulation into the same tensor, and nothing else in it writes.
bool writesDisjointSlots(ForeachOp loop, unsigned position);

/// The number of leading indices of `loop` each of which writes disjoint
/// slots: positions that differ in any of them write different slots.
unsigned disjointLeadingIndices(ForeachOp loop);

} // namespace mlir::energy

#endif // ENERGY_TRANSFORMS_PARALLELFOREACH_H
