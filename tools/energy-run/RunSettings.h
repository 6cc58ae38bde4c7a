//===- RunSettings.h - What energy-run's command line asks ------*- C++ -*-===//
//
// The settings main() reads from energy-run's options, and the dims, consts,
// tensors, seed and step counter the command line binds to a model.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TOOLS_ENERGYRUN_RUNSETTINGS_H
#define ENERGY_TOOLS_ENERGYRUN_RUNSETTINGS_H

#include "energy/Runtime/Backprop.h"
#include "energy/Runtime/Tensor.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mlir::energy::tools {

/// What --eval evaluates.
enum class EvalKind { Energy, Grad, LossGrad, Run };

/// The options the runs and their reports follow (main() fills them in from
/// the command line).
struct RunSettings {
  /// --eval.
  EvalKind eval = EvalKind::Run;
  /// --wrt: the tensors to differentiate (none: the default ones).
  std::vector<std::string> wrt;
  /// --out: the safetensors file the results go to (none when empty).
  std::string outputFile;
  /// --steps (-1 when not given).
  int64_t steps = -1;
  /// --store-all-steps.
  bool storeAllSteps = false;
  /// --dtype (empty when not given).
  std::string dtype;
  /// --threads (0 when not given).
  int threads = 0;
  /// --plot (empty when not given).
  std::string plotFile;
  /// --plot-attention's TERM:CHILD and FILE (empty when not given).
  std::vector<std::string> plotAttention;
  /// --trace.
  bool trace = false;
  /// --json.
  bool json = false;
  /// --bench (0 when not given).
  int64_t benchRepetitions = 0;

  /// The step count --steps sets; none for the model's own.
  std::optional<int64_t> stepsOption() const {
    return steps >= 0 ? std::optional<int64_t>(steps) : std::nullopt;
  }

  /// How --eval loss-grad keeps the states of the run.
  ::energy::BackpropStorage backwardStorage() const {
    return storeAllSteps ? ::energy::BackpropStorage::Full
                         : ::energy::BackpropStorage::Checkpointed;
  }
};

using RuntimeTensors = std::map<std::string, ::energy::Tensor>;

/// The name under which --out files keep the step counter (`step` is a
/// keyword, so no tensor has it); --in restores it.
constexpr const char *kStepTensor = "step";

/// Everything the command line binds.
struct RunInputs {
  std::vector<std::pair<std::string, int64_t>> dims;
  std::vector<std::pair<std::string, double>> consts;
  /// The --in files' tensors (not read here for a sharded run).
  RuntimeTensors tensors;
  /// The --in files of a sharded run, read there: each rank its rows.
  std::vector<std::string> files;
  std::optional<uint64_t> seed;
  std::optional<int64_t> step;
};

} // namespace mlir::energy::tools

#endif // ENERGY_TOOLS_ENERGYRUN_RUNSETTINGS_H
