//===- LocalDerivatives.h - Derivatives within one block -----*- C++ -*-===//
//
// Reverse-mode derivatives of one value with respect to another inside a
// block of straight-line code (the energy of one child and one parent), by
// the ops' DerivativeOpInterface rules: what the closed forms of stationary
// rules use to decide, by differentiating, whether an energy is quadratic in
// a node. Private to compiler/lib/Dynamics.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_LIB_DYNAMICS_LOCALDERIVATIVES_H
#define ENERGY_LIB_DYNAMICS_LOCALDERIVATIVES_H

#include "energy/IR/EnergyOps.h"

namespace mlir::energy {

/// d`output`/d`input` for a scalar `output`, both defined in `block` (or
/// `input` a block argument of it), built at the end of `block`. Fails,
/// with an error on the op, where the derivative must pass through an op
/// without a rule or through a region (a reduction over an index) that uses
/// `input`. A null Value when `output` does not depend on `input`.
FailureOr<Value> buildLocalGradient(Block &block, Value output, Value input);

} // namespace mlir::energy

#endif // ENERGY_LIB_DYNAMICS_LOCALDERIVATIVES_H
