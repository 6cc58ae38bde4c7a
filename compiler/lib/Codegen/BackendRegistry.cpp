//===- BackendRegistry.cpp - The code-generation targets ------------------===//
//
// The registry and its built-in entry, the CPU backend: kernels lowered to
// LLVM and linked into a shared library for the host (or --cpu).
//
//===----------------------------------------------------------------------===//

#include "energy/Codegen/BackendRegistry.h"

using namespace mlir;
using namespace mlir::energy;

llvm::Error BackendRegistry::add(Backend backend) {
  if (lookup(backend.name))
    return llvm::createStringError("backend '" + backend.name +
                                   "' is registered twice (a plugin's name "
                                   "must be new)");
  backends.push_back(std::move(backend));
  return llvm::Error::success();
}

const Backend *BackendRegistry::lookup(StringRef name) const {
  for (const Backend &backend : backends)
    if (backend.name == name)
      return &backend;
  return nullptr;
}

std::string BackendRegistry::names() const {
  std::string list;
  for (const Backend &backend : backends)
    list += (list.empty() ? "" : ", ") + backend.name;
  return list;
}

static LogicalResult writeCpuArtifact(ModuleOp energyModule,
                                      const ArtifactOptions &options,
                                      StringRef path, std::string &error) {
  FailureOr<OwningOpRef<ModuleOp>> artifact =
      compileToArtifactModule(energyModule, options);
  if (failed(artifact))
    return failure();
  return writeSharedLibrary(**artifact, options.target, path, error);
}

BackendRegistry &mlir::energy::getBackendRegistry() {
  static BackendRegistry registry = [] {
    BackendRegistry builtins;
    llvm::cantFail(builtins.add(
        {"cpu", "fused CPU kernels in a shared library for the host or --cpu",
         writeCpuArtifact}));
    return builtins;
  }();
  return registry;
}
