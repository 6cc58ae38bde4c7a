//===- LetReads.h - How terms read tensors through lets ---------*- C++ -*-===//
//
// What energy-build-backward asks about the lets between the params and the
// energy: which tensors a region reads through lets, whether a let is a
// residual stream of a state, and the energy with lets read from tensors.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TRANSFORMS_LETREADS_H
#define ENERGY_TRANSFORMS_LETREADS_H

#include "energy/IR/EnergyOps.h"

#include "llvm/ADT/SetVector.h"

namespace mlir::energy {

/// The tensors that `region` reads, directly or through lets.
llvm::SetVector<StringRef> readTensors(Region &region, ModelOp model);

/// Whether `region` reads `tensor` other than through the let `through`:
/// directly, or through another let that reaches it.
bool readsBeside(Region &region, StringRef tensor, StringRef through,
                 ModelOp model);

/// Whether `let` is a residual stream of `tensor`: its element at each
/// index of its domain is `tensor` at the same index plus terms that do not
/// read `tensor`, so that its Jacobian with respect to `tensor` is the
/// identity.
bool isResidualOf(LetOp let, StringRef tensor, ModelOp model);

/// Appends to the model the auxiliary term `name`: the sum of `terms`, with
/// every read of a let of `lets` (directly or inside other lets, which are
/// inlined) read from the tensor of the same place in `values` instead.
FailureOr<TermOp> buildEnergyReadingValues(ModelOp model,
                                           ArrayRef<TermOp> terms,
                                           ArrayRef<LetOp> lets,
                                           ArrayRef<StringRef> values,
                                           StringRef name);

} // namespace mlir::energy

#endif // ENERGY_TRANSFORMS_LETREADS_H
