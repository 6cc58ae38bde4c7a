//===- ModelCheck.h - energy-run --check: compiled against the oracle -*- C++
//-*-===//
//
// `energy-run MODEL.energy --check` compiles a model in double precision
// (or single, with --dtype f32) and compares what the artifact computes with
// the reference interpreter running the unplanned program, and the
// interpreter's derived gradients with finite differences of its energy and
// losses: the check that a model the compiler was never tuned for is compiled
// right.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TOOLS_ENERGYRUN_MODELCHECK_H
#define ENERGY_TOOLS_ENERGYRUN_MODELCHECK_H

#include "energy/Codegen/Artifact.h"

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mlir::energy::tools {

struct ModelCheckOptions {
  std::vector<std::pair<std::string, int64_t>> dims;
  std::vector<std::pair<std::string, double>> consts;
  /// The seed of the random values every tensor without an initialiser
  /// gets (and of the finite differences' directions).
  uint64_t seed = 1;
  /// Steps of the run and of the loss gradient; the model's count when
  /// absent.
  std::optional<int64_t> steps;
  /// The element type the model is compiled in: "f64", or "f32" (compared
  /// within f32's rounding).
  std::string dtype = "f64";
  /// The optimisation level of the in-process compilation (0-3).
  unsigned optLevel = kDefaultOptLevel;
  /// Compiled with the loops CUDA artifacts get (energyc --device-loops),
  /// run on the CPU.
  bool deviceLoops = false;
  std::string sourceName;
  std::string sourceText;
  bool json = false;
};

/// Exit statuses of the check.
enum ModelCheckStatus {
  /// Everything agrees.
  CheckAgrees = 0,
  /// A quantity differs, or something failed (an error was printed).
  CheckDiffers = 1,
  /// The request names what the model does not have (a --dim or --const
  /// it lacks) or gives a value it cannot take: an error was printed, and
  /// nothing was compared.
  CheckInvalid = 2,
  /// The model's values are not usable at these dims and values (the
  /// interpreter's energy, a step or a loss is not finite, or an op's
  /// argument is outside its domain): nothing to compare.
  CheckUnusable = 3,
};

/// Runs the check on `module` (just emitted from the source; the check
/// compiles copies of it). Prints one line per quantity (or, with `json`,
/// one object) and returns a ModelCheckStatus.
int checkModel(ModuleOp module, const ModelCheckOptions &options);

} // namespace mlir::energy::tools

#endif // ENERGY_TOOLS_ENERGYRUN_MODELCHECK_H
