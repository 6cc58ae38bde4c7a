//===- InterpretedLossGradients.h - Loss gradients, interpreted -*- C++ -*-===//
//
// A loss's gradient through a run on the reference interpreter, in the form
// of a compiled session's (tools/common/LossGradients.h, which energy-exec
// shares): each loss's value and `adjoint.T` for every tensor T that
// carries an adjoint.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TOOLS_ENERGYRUN_INTERPRETEDLOSSGRADIENTS_H
#define ENERGY_TOOLS_ENERGYRUN_INTERPRETEDLOSSGRADIENTS_H

#include "LossGradients.h"

#include "energy/IR/EnergyOps.h"
#include "energy/Interpreter/Interpreter.h"

#include <optional>

namespace mlir::energy::tools {

using ::energy::tools::LossGradients;

/// ::energy::tools::lossGradientsOf of a session, on the interpreter
/// (errors are emitted on the model).
FailureOr<LossGradients> lossGradientsOf(ModelOp model,
                                         Interpreter &interpreter,
                                         std::optional<int64_t> steps,
                                         ::energy::BackpropStorage storage);

} // namespace mlir::energy::tools

#endif // ENERGY_TOOLS_ENERGYRUN_INTERPRETEDLOSSGRADIENTS_H
