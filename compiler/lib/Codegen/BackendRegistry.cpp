//===- BackendRegistry.cpp - The code-generation targets ------------------===//
//
// The registry and its built-in entries: the CPU backend (kernels lowered to
// LLVM and linked into a shared library for the host, or --cpu) and the
// CUDA backend (the same library, with the loops the GPU can run as PTX).
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
  return writeSharedLibrary(**artifact, options.target, path, error,
                            options.optLevel);
}

static LogicalResult writeCudaArtifact(ModuleOp energyModule,
                                       const ArtifactOptions &options,
                                       StringRef path, std::string &error) {
  ArtifactOptions cudaOptions = options;
  cudaOptions.target = withCudaDevice(options.target);
  return writeCpuArtifact(energyModule, cudaOptions, path, error);
}

BackendRegistry &mlir::energy::getBackendRegistry() {
  static BackendRegistry registry = [] {
    BackendRegistry builtins;
    llvm::cantFail(builtins.add(
        {"cpu", "fused CPU kernels in a shared library for the host or --cpu",
         writeCpuArtifact}));
    llvm::cantFail(builtins.add(
        {"cuda",
         "the parallel loops as GPU kernels (PTX for sm_80 and sm_90, "
         "through NVVM), the rest on the host; runs where a CUDA GPU is",
         writeCudaArtifact}));
    return builtins;
  }();
  return registry;
}
