//===- RunReport.h - How energy-run reports its results ---------*- C++ -*-===//
//
// Errors, the --in and --out files, the energy, gradients and loss gradients
// as text or JSON, the energy step by step during a run, and --bench timings.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TOOLS_ENERGYRUN_RUNREPORT_H
#define ENERGY_TOOLS_ENERGYRUN_RUNREPORT_H

#include "LossGradients.h"
#include "RunSettings.h"

#include "energy/Runtime/Communicator.h"

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/JSON.h"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace mlir::energy::tools {

/// Prints `message` as energy-run's error; returns 1 (the exit status).
int fail(const Twine &message);
/// Makes fail() end every process of `group` (a sharded run's; null:
/// none), naming this rank, so that none waits for this one.
void setFailureGroup(::energy::Communicator *group);

/// The tensors of the --in files `paths`.
FailureOr<RuntimeTensors> readInputs(ArrayRef<std::string> paths);

/// Writes `tensors` to the --out file (atomically).
bool writeOutputs(const RunSettings &settings, const RuntimeTensors &tensors);

/// Prints the energy (text or JSON).
void printEnergy(const RunSettings &settings, double energy);

/// Prints gradients (text or JSON) and writes them with --out.
bool reportGradients(const RunSettings &settings,
                     const RuntimeTensors &gradients);

/// --eval loss-grad: each loss, then the adjoints as --eval grad reports
/// gradients (energy-exec prints the same).
bool reportLossGradients(const RunSettings &settings,
                         const ::energy::tools::LossGradients &result);

/// Reports the energy after each step (NaN where it was not evaluated):
/// --trace lines, or a progress line on stderr at most once a second.
class StepReporter {
public:
  explicit StepReporter(const RunSettings &settings)
      : trace(settings.trace), jsonOutput(settings.json) {}

  void operator()(int64_t step, double energy);
  /// The energy after the last step; none before any.
  std::optional<double> lastEnergy() const {
    return energies.empty() ? std::nullopt
                            : std::optional<double>(energies.back());
  }
  void printStart(double energy);
  /// The final report; `final` is the energy after the run (the start's
  /// when no step was taken; none for a model without energy terms), `plot`
  /// what --plot drew.
  void printSummary(int64_t steps, std::optional<double> final,
                    std::optional<llvm::json::Object> plot = std::nullopt);

private:
  bool trace;
  bool jsonOutput;
  std::vector<double> energies;
  std::chrono::steady_clock::time_point lastProgress =
      std::chrono::steady_clock::now();
};

/// What --bench times: "energy", "grad", or "run" with its step count.
std::string benchedEvaluation(const RunSettings &settings,
                              std::optional<int64_t> steps);

/// --bench: calls `evaluate` once to warm up, then benchRepetitions times,
/// timing each call alone; `reset` runs untimed before every call (to
/// restore the initial state). Both report their own errors. Prints the
/// median wall time of one call (text: also the minimum and the maximum)
/// in milliseconds; with --json only {"median_ms": M}.
bool runBench(const RunSettings &settings, llvm::function_ref<bool()> reset,
              llvm::function_ref<bool()> evaluate,
              llvm::function_ref<std::string()> describe);

} // namespace mlir::energy::tools

#endif // ENERGY_TOOLS_ENERGYRUN_RUNREPORT_H
