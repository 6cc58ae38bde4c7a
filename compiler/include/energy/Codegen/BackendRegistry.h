//===- BackendRegistry.h - The code-generation targets ----------*- C++ -*-===//
//
// The registry of backends: the name `energyc --target` takes and how the
// backend writes an artifact from an energy module. The CPU backend is an
// entry like any other; a plugin adds one through getBackendRegistry() from
// its registration callback (the tool that loads it exports the symbol).
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_CODEGEN_BACKENDREGISTRY_H
#define ENERGY_CODEGEN_BACKENDREGISTRY_H

#include "energy/Codegen/Artifact.h"

#include "llvm/Support/Error.h"

#include <functional>
#include <string>
#include <vector>

namespace mlir::energy {

struct Backend {
  std::string name;
  std::string summary;
  /// Compiles `energyModule` (after the update pipeline) and writes the
  /// artifact to `path`; failure with `error` set, or after diagnostics.
  std::function<LogicalResult(ModuleOp energyModule,
                              const ArtifactOptions &options, StringRef path,
                              std::string &error)>
      writeArtifact;
};

class BackendRegistry {
public:
  /// Adds `backend`; an error naming it when the registry has that name.
  llvm::Error add(Backend backend);
  /// The backend named `name`, or null.
  const Backend *lookup(StringRef name) const;
  /// Their names, comma-separated, for messages.
  std::string names() const;

private:
  std::vector<Backend> backends;
};

/// The registry every tool reads: `cpu` and what plugins added.
BackendRegistry &getBackendRegistry();

} // namespace mlir::energy

#endif // ENERGY_CODEGEN_BACKENDREGISTRY_H
