//===- PortableBackend.cpp - A plugin that registers a backend ------------===//
//
// `energyc --target portable`: the CPU backend's kernels for x86-64-v2,
// whatever --cpu says (the example of docs/plugins.md, "Backends").
//
//===----------------------------------------------------------------------===//

#include "energy/Codegen/BackendRegistry.h"
#include "energy/Plugin/Plugin.h"

using namespace mlir::energy;

static llvm::Error registerPortable(::energy::plugin::Registration &) {
  return getBackendRegistry().add(
      {"portable", "CPU kernels for x86-64-v2",
       [](mlir::ModuleOp module, const ArtifactOptions &options,
          llvm::StringRef path, std::string &error) -> mlir::LogicalResult {
         mlir::FailureOr<ArtifactTarget> target =
             resolveArtifactTarget("x86-64-v2", error);
         if (mlir::failed(target))
           return mlir::failure();
         ArtifactOptions portable = options;
         portable.target = *target;
         return getBackendRegistry().lookup("cpu")->writeArtifact(
             module, portable, path, error);
       }});
}

extern "C" ::energy::plugin::PluginInfo energyGetPluginInfo() {
  return {ENERGY_PLUGIN_API_VERSION, "portable", "1.0", registerPortable};
}
