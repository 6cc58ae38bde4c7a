//===- ParamOptimizer.h - Training updates of a model's params --*- C++ -*-===//
//
// What training does with a gradient: a parameter optimiser updates a
// model's params in place from their gradients (SGD, SGD with momentum,
// Adam, AdamW, exactly as torch.optim computes them) and keeps its own
// state per param (moments, momentum buffers), which it gives as named
// tensors for checkpoints and takes back to resume bit for bit. Optimisers
// are found by name in one registry: the built-ins are always there,
// applications add their own, and plugins theirs from their run-time
// library (loadPluginParamOptimizers).
//
// A learning-rate schedule says which learning rate each update uses.
//
// These are the updates of training (params from the gradient of a loss);
// the dynamics of a model (its neurons' descent on the energy) are compiled
// and have nothing to do with them.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_RUNTIME_PARAMOPTIMIZER_H
#define ENERGY_RUNTIME_PARAMOPTIMIZER_H

#include "energy/Runtime/Status.h"
#include "energy/Runtime/Tensor.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace energy {

/// Hyper-parameters of the parameter optimisers; each reads the ones it
/// documents. The built-ins check them as torch.optim does (momentum,
/// eps and weightDecay non-negative, betas in [0, 1)) when created.
struct ParamOptimizerOptions {
  /// momentum: μ of the momentum buffer.
  double momentum = 0.9;
  /// adam, adamw: the decay rates of the moments and the denominator's
  /// guard.
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  /// sgd, momentum, adam: L2 added to the gradient (g + wd·p, as
  /// torch.optim does); adamw: decoupled, p *= 1 - lr·wd before the update.
  double weightDecay = 0.0;
};

/// Updates a model's params from their gradients, keeping its own state
/// (moments) per param. The state of a param is created, as zeros, at its
/// first update.
class ParamOptimizer {
public:
  virtual ~ParamOptimizer();
  /// The name it is registered under ("adam", ...).
  virtual std::string_view name() const = 0;
  /// One update of `param`'s `value` in place from `gradient` (same shape;
  /// either dtype F32 or F64, computed in double, written back in the
  /// value's dtype) at learning rate `lr`. `step` counts updates from 1
  /// (Adam's bias correction). Errors name the param and the shapes; on an
  /// error neither the value nor the state changes.
  virtual Status update(const std::string &param, Tensor &value,
                        const Tensor &gradient, double lr, int64_t step) = 0;
  /// The optimiser's state as named tensors (F64), e.g. "Wq.exp_avg",
  /// "Wq.exp_avg_sq", "Wq.momentum_buffer", for checkpoints.
  virtual std::map<std::string, Tensor> state() const = 0;
  /// Replaces the state with `state` (as state() gave it) exactly; a param
  /// that it does not hold starts fresh at its next update. Errors name
  /// missing, unknown and ill-shaped entries; on an error the state does
  /// not change.
  virtual Status setState(const std::map<std::string, Tensor> &state) = 0;
};

/// Makes an optimiser from the options.
using ParamOptimizerFactory = std::function<std::unique_ptr<ParamOptimizer>(
    const ParamOptimizerOptions &)>;

/// Adds `factory` to the registry under `name`. The built-ins "sgd",
/// "momentum", "adam" and "adamw" are always there; plugins and
/// applications add more. An empty or existing name, or an empty factory,
/// is an error.
Status registerParamOptimizer(const std::string &name,
                              ParamOptimizerFactory factory);
/// A new optimiser of the kind registered as `name`. An unknown name is an
/// error listing the known ones; so are options a built-in rejects.
Expected<std::unique_ptr<ParamOptimizer>>
createParamOptimizer(const std::string &name,
                     const ParamOptimizerOptions &options);
/// The registered names, sorted.
std::vector<std::string> paramOptimizerNames();

/// Loads the run-time library of a plugin (energy/Plugin/RuntimeCode.h) at
/// `path` — a bare file name is looked for in the directories of
/// ENERGY_PLUGIN_PATH first — and registers the parameter optimisers it
/// exports with `energyGetPluginParamOptimizers`. Returns their names; a
/// library loaded before registers nothing more and gives the same names.
/// Errors name the file: one that cannot be loaded or is no run-time
/// library, no optimisers, an optimiser without a name or an update or with
/// ill-named buffers, a name already registered. On an error nothing of the
/// library is registered.
Expected<std::vector<std::string>>
loadPluginParamOptimizers(const std::string &path);

/// The learning rate of each update of a run of `total` updates:
/// - "constant": lr;
/// - "cosine": lrMin + (lr - lrMin)(1 + cos(π step/total))/2, lrMin from
///   step `total` on (torch's CosineAnnealingLR with T_max = total, held
///   at its end);
/// - "step": lr · gamma^floor(step/stepSize) (torch's StepLR).
struct LearningRateSchedule {
  std::string kind = "constant";
  double lr = 1e-3, lrMin = 0, gamma = 0.1;
  int64_t stepSize = 1000, total = 1;

  /// Checks the kind and the values it reads (errors name the field): lr
  /// non-negative and finite, total positive; cosine: 0 <= lrMin <= lr;
  /// step: gamma positive and finite, stepSize positive.
  Status validate() const;
  /// The learning rate of update `step`, counted from 0 (a negative step
  /// counts as 0). Only for a schedule that validates.
  double at(int64_t step) const;
};

} // namespace energy

#endif // ENERGY_RUNTIME_PARAMOPTIMIZER_H
