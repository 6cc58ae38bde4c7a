//===- Artifact.h - Compiled artifacts: LLVM lowering, .so, JIT -*- C++ -*-===//
//
// Turns a model with derived gradients and step program into an artifact:
// the LLVM-dialect module of its kernels and manifest, written as a shared
// library (energyc) or compiled in process (the JIT of energy-run).
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_CODEGEN_ARTIFACT_H
#define ENERGY_CODEGEN_ARTIFACT_H

#include "energy/Codegen/KernelEmitter.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <functional>
#include <memory>
#include <string>

namespace llvm {
class LLVMContext;
class Module;
} // namespace llvm

namespace mlir::energy {

/// What an artifact is built for, and the source it embeds.
struct ArtifactOptions {
  /// "f32" or "f64".
  std::string dtype = "f32";
  std::string sourceName;
  std::string sourceText;
};

/// The manifest (docs/api.md, "Artifacts") of a model's kernels.
std::string buildManifest(ModelOp model, const ArtifactLayout &layout,
                          const ArtifactOptions &options);

/// The kernels of `model` with the manifest function, in the LLVM dialect.
/// Errors are emitted on the model's ops.
FailureOr<OwningOpRef<ModuleOp>>
buildArtifactModule(ModelOp model, const ArtifactOptions &options);

/// Derives the step program and the gradient of every tensor of the one
/// model in `energyModule` (in place), then builds its artifact module.
FailureOr<OwningOpRef<ModuleOp>>
compileToArtifactModule(ModuleOp energyModule, const ArtifactOptions &options);

/// The LLVM IR of an LLVM-dialect artifact module, for the host.
std::unique_ptr<llvm::Module> translateArtifact(ModuleOp module,
                                                llvm::LLVMContext &context);

/// Compiles `module` for the host CPU with the system's clang (-O3) into the
/// shared library `path`, linking the kernel support functions. The file
/// appears only when everything succeeded.
LogicalResult writeSharedLibrary(ModuleOp module, StringRef path,
                                 std::string &error);

/// An artifact compiled in process: its symbols stay valid while the handle
/// lives.
struct JitArtifact {
  std::shared_ptr<void> handle;
  std::function<void *(const std::string &)> lookup;
};

/// Compiles `module` with the MLIR ExecutionEngine (-O3, host CPU).
FailureOr<JitArtifact> compileInProcess(ModuleOp module, std::string &error);

} // namespace mlir::energy

#endif // ENERGY_CODEGEN_ARTIFACT_H
