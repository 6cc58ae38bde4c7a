//===- LossGradients.h - The tools' --eval loss-grad ------------*- C++ -*-===//
//
// A loss's gradient through a run, in the one form energy-run and energy-exec
// report it: each loss's value and `adjoint.T` for every tensor T that
// carries an adjoint, as text or JSON. Runtime only (no LLVM).
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TOOLS_COMMON_LOSSGRADIENTS_H
#define ENERGY_TOOLS_COMMON_LOSSGRADIENTS_H

#include "energy/Runtime/Session.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace energy::tools {

struct LossGradients {
  int64_t steps = 0;
  std::map<std::string, double> losses;
  /// `adjoint.T` → d(sum of the losses)/dT.
  std::map<std::string, Tensor> adjoints;
};

/// Session::backward from the session's values (`steps`, or the model's
/// count), and every adjoint.
Expected<LossGradients> lossGradientsOf(Session &session,
                                        std::optional<int64_t> steps,
                                        BackpropStorage storage);

/// The text report: `loss NAME VALUE after S steps` for each loss, then
/// `adjoint.T [shape]` for each adjoint, followed by its elements one a line
/// when `withValues`.
std::string lossGradientsText(const LossGradients &gradients, bool withValues);

/// The JSON report, on one line: `{"adjoint.T": {"data": [...], "shape":
/// [...]}, ..., "losses": {"NAME": VALUE}, "steps": S}`, keys sorted,
/// numbers with 17 significant digits.
std::string lossGradientsJson(const LossGradients &gradients);

} // namespace energy::tools

#endif // ENERGY_TOOLS_COMMON_LOSSGRADIENTS_H
