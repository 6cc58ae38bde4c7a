//===- LossGradients.h - energy-run --eval loss-grad ------------*- C++ -*-===//
//
// A loss's gradient through a run, from a compiled session or the reference
// interpreter, in the one form energy-run reports: each loss's value and
// `adjoint.T` for every tensor T that carries an adjoint.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TOOLS_ENERGYRUN_LOSSGRADIENTS_H
#define ENERGY_TOOLS_ENERGYRUN_LOSSGRADIENTS_H

#include "energy/IR/EnergyOps.h"
#include "energy/Interpreter/Interpreter.h"
#include "energy/Runtime/Session.h"

#include <map>
#include <optional>
#include <string>

namespace mlir::energy::tools {

struct LossGradients {
  int64_t steps = 0;
  std::map<std::string, double> losses;
  /// `adjoint.T` → d(sum of the losses)/dT.
  std::map<std::string, ::energy::Tensor> adjoints;
};

::energy::Expected<LossGradients>
lossGradientsOf(::energy::Session &session, std::optional<int64_t> steps,
                ::energy::BackpropStorage storage);

/// The same on the interpreter (errors are emitted on the model).
FailureOr<LossGradients> lossGradientsOf(ModelOp model,
                                         Interpreter &interpreter,
                                         std::optional<int64_t> steps,
                                         ::energy::BackpropStorage storage);

} // namespace mlir::energy::tools

#endif // ENERGY_TOOLS_ENERGYRUN_LOSSGRADIENTS_H
