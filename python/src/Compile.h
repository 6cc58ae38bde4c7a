//===- Compile.h - energy.compile's compiler half ---------------*- C++ -*-===//
//
// A model's source to a runtime Model compiled in this process (the JIT, no
// files), or the first error's location and the printed diagnostics for the
// Python exception. No Python here.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_PYTHON_COMPILE_H
#define ENERGY_PYTHON_COMPILE_H

#include "energy/Runtime/Model.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace energy::python {

struct CompileOptions {
  /// "cpu" or "cuda".
  std::string target = "cpu";
  /// "f32", "f64", or "bf16" (cuda only).
  std::string dtype = "f32";
  /// Plugin libraries to load first (as `energyc --plugin`).
  std::vector<std::string> plugins;
  /// As `energyc --caller-cotangents`.
  bool callerCotangents = false;
  /// How hard the JIT optimises the kernels, 0-3 (absent: the compiler's
  /// default).
  std::optional<unsigned> optLevel;
  /// Sizes of dims the kernels are planned at (their defaults).
  std::vector<std::pair<std::string, int64_t>> dims;
};

/// Why a compilation failed: the first error's place (line and column 0
/// when it has none) and message, and every diagnostic as energyc prints
/// them (with the source line and a caret).
struct CompileFailure {
  std::string file;
  unsigned line = 0;
  unsigned column = 0;
  std::string message;
  std::string printed;
};

/// Whether this build has the compiler (Compile.cpp); a build for a machine
/// without MLIR has CompileUnavailable.cpp instead, and only loads
/// artifacts.
bool compilerAvailable();

/// Compiles `source`, named `name` in diagnostics, to a loaded Model; on
/// failure returns none and fills `failure`.
std::optional<Model> compileSource(const std::string &source,
                                   const std::string &name,
                                   const CompileOptions &options,
                                   CompileFailure &failure);

} // namespace energy::python

#endif // ENERGY_PYTHON_COMPILE_H
