//===- ProgramReads.h - Reads of a program that must keep their value -*- C++
//-*-===//
//
// In a program (the step, the backward step, `until`), a tensor read before
// a store keeps the value it had. Code generation reads a tensor in place
// unless this analysis says a later store of it could change what a use of
// the read sees.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TRANSFORMS_PROGRAMREADS_H
#define ENERGY_TRANSFORMS_PROGRAMREADS_H

#include "energy/IR/EnergyOps.h"

#include "llvm/ADT/StringSet.h"

namespace mlir::energy {

/// Whether `read`, in a program, has a use (of it or of a slice of it) at
/// or after the first statement from its own on that writes its tensor —
/// so that it must be a copy. True for a read outside programs' statements
/// or where an op may write without saying what.
bool readOutlivesItsValue(ReadOp read);

/// Whether `op`, or an op nested in it, may write `tensor`: a store or an
/// accumulation into it, or an op that writes memory without saying what.
bool mayWriteTensor(Operation *op, StringRef tensor);

/// The tensors a program of `model` stores into (energy.store) or adds a
/// gradient into (energy.grad's `into`); nothing writes the others while
/// the runtime runs a call.
llvm::StringSet<> storedTensors(ModelOp model);

} // namespace mlir::energy

#endif // ENERGY_TRANSFORMS_PROGRAMREADS_H
