//===- CompileUnavailable.cpp - energy.compile without a compiler ---------===//
//
// What a build of the package without MLIR links instead of Compile.cpp
// (python/runtime-only, for machines that run artifacts energyc wrote
// elsewhere): energy.load works, energy.compile says why it cannot.
//
//===----------------------------------------------------------------------===//

#include "Compile.h"

using namespace energy;
using namespace energy::python;

bool python::compilerAvailable() { return false; }

std::optional<Model> python::compileSource(const std::string &,
                                           const std::string &name,
                                           const CompileOptions &,
                                           CompileFailure &failure) {
  failure.file = name;
  failure.message = "this build of the energy package has no compiler (it "
                    "was built without MLIR): load artifacts that energyc "
                    "wrote with energy.load";
  failure.printed = failure.message;
  return std::nullopt;
}
