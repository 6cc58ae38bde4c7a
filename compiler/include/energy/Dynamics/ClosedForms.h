//===- ClosedForms.h - The EM M-step of stationary rules --------*- C++ -*-===//
//
// Builds the closed-form update of a group of adjacent `stationary` rules:
// the softmax responsibilities of the energy's lse, held at the group's
// entry, and each node solved in turn in closed form.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_DYNAMICS_CLOSEDFORMS_H
#define ENERGY_DYNAMICS_CLOSEDFORMS_H

#include "energy/IR/EnergyOps.h"

namespace mlir::energy {

/// The ridge added to a weighted scatter before inverting it (the default
/// `reg_covar` of scikit-learn's GaussianMixture).
constexpr double kScatterRidge = 1e-6;

/// Builds at `builder` (inside an update program) the M-step of `rules`,
/// adjacent stationary rules of `model`, and stores every node. Errors at a
/// rule whose node has no closed form.
LogicalResult buildStationaryGroup(OpBuilder &builder, ArrayRef<UpdateOp> rules,
                                   ModelOp model);

} // namespace mlir::energy

#endif // ENERGY_DYNAMICS_CLOSEDFORMS_H
