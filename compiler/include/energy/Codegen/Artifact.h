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
#include "energy/Runtime/Manifest.h"
#include "energy/Transforms/ShardedRankOptions.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace llvm {
class LLVMContext;
class Module;
} // namespace llvm

namespace mlir::energy {

/// The optimisation level of the kernels' native code unless a caller
/// chooses (0-3): the kernels vectorise themselves, and -O3 runs them no
/// faster than -O2 but compiles for up to twice as long (docs/benchmarks.md).
inline constexpr unsigned kDefaultOptLevel = 2;

/// The CPU an artifact's kernels are compiled for, as its manifest records
/// it (docs/api.md, "The manifest": `target`).
struct ArtifactTarget {
  /// The architecture, as in LLVM's triples: "x86_64".
  std::string arch;
  /// What energyc --cpu gave: "native" or an x86-64 level ("x86-64-v3").
  std::string cpu = "native";
  /// The x86 features the code may use that the runtime can check
  /// (ArtifactABI.h's ENERGY_X86_CPU_FEATURES), LLVM's names, in that
  /// table's order.
  std::vector<std::string> features;
  /// The device whose code the artifact also carries: empty (none) or
  /// "cuda", with the GPU architectures ("sm_80", "sm_90").
  std::string device;
  std::vector<std::string> deviceArchs;
};

/// The CPUs energyc --cpu accepts: "native", then the x86-64 levels
/// "x86-64-v2", "x86-64-v3", "x86-64-v4".
ArrayRef<StringRef> artifactCpuNames();

/// The target of `cpu` (one of artifactCpuNames): for an x86-64 level, the
/// features the level implies; for "native", the host's features as LLVM
/// reports them (what clang -march=native enables). Fails with `error` for
/// any other name (listing the valid ones), or for a level on a host that is
/// not x86-64.
FailureOr<ArtifactTarget> resolveArtifactTarget(StringRef cpu,
                                                std::string &error);

/// The "native" target: the host CPU and its features.
ArtifactTarget hostArtifactTarget();

/// What an artifact is built for, and the source it embeds.
struct ArtifactOptions {
  /// "f32", "f64", or "bf16" (CUDA only): f32 tensors whose matrix
  /// products and softmax contractions take bf16 operands on tensor cores
  /// and accumulate in f32.
  std::string dtype = "f32";
  /// The CPU its kernels are compiled for (the JIT always compiles for the
  /// host).
  ArtifactTarget target = hostArtifactTarget();
  std::string sourceName;
  std::string sourceText;
  /// How hard the native code is optimised (clang -O0 to -O3): below the
  /// default only where compiling quickly matters more than running fast.
  unsigned optLevel = kDefaultOptLevel;
  /// Whether the kernels keep what a call computes from params and inputs
  /// alone (energy-plan-run-caches; CPU artifacts only).
  bool runCaches = true;
  /// Loops without host calls where code can do the work, on a CPU too
  /// (KernelPlanTarget::deviceLoops; CUDA artifacts always have them).
  bool deviceLoops = false;
  /// Whether gd on a state read through one linear map runs in its image
  /// (energy-change-of-variables).
  bool changeOfVariables = true;
  /// Whether the backward program is seeded by the caller's cotangents of
  /// the final states (`@X.incoming`) instead of the model's losses, and
  /// also differentiates the inputs (energy-caller-cotangents): a model
  /// that is a layer of a larger program.
  bool callerCotangents = false;
  /// One rank of a sharded run: the step program reads the gradient the
  /// runtime supplies (`@X.supplied_gradient`) instead of computing it, the
  /// backward program the cotangents it gathers (energy-supplied-gradients).
  std::optional<ShardedRankOptions> shardedRank;
};

/// A dim expression as the runtime reads it (reverse Polish tokens).
::energy::DimExpr runtimeDimExpr(DimExprAttr expr);

/// The dims and tensors of `model` as a manifest without kernels: what the
/// runtime's dim inference (DimInference.h) reads, for runs that do not
/// compile.
::energy::Manifest describeDimsAndTensors(ModelOp model);

/// `tensor` as the manifest describes it (its name, shape of dims, role
/// and provenance: whose optimizer state, adjoint, cotangent, solver vector
/// or deferred sum it is, a kept value's flag), so that tools apply the
/// runtime's rules (Manifest.h: isForwardState, isDefaultGradient) to a
/// model that is not compiled.
::energy::ManifestBuffer describeTensor(TensorOp tensor);

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

/// Compiles `module` for `target`'s CPU (as clang -march=native or
/// -march=x86-64-vN) with LLVM's pipeline at -O`optLevel`, in parts on
/// threads, into the shared library `path` (linked by the system's clang
/// with the kernel support functions). The file appears
/// only when everything succeeded.
LogicalResult writeSharedLibrary(ModuleOp module, const ArtifactTarget &target,
                                 StringRef path, std::string &error,
                                 unsigned optLevel = kDefaultOptLevel);

/// `target` with CUDA as its device: the parallel loops the GPU can run
/// become kernels, carried as PTX for sm_80 and sm_90.
ArtifactTarget withCudaDevice(ArtifactTarget target);

/// The dialects, lowering interfaces and translations compileGpuKernels
/// needs, for a pass that compiles GPU kernels to declare.
void registerGpuKernelCompilation(DialectRegistry &registry);

/// The PTX of the GPU kernels in `deviceModule` (a gpu.module of kernels
/// from outlineParallelLoops) for each architecture of `archs` (oldest
/// first): NVVM, then LLVM's NVPTX back end with the CUDA toolkit's libdevice
/// (at ENERGY_CUDA_TOOLKIT, else /usr/local/cuda), once, for the oldest; the
/// others get the same PTX with their own .target. (architecture, PTX) pairs;
/// errors are emitted on the module.
FailureOr<std::vector<std::pair<std::string, std::string>>>
compileGpuKernels(ModuleOp deviceModule, ArrayRef<std::string> archs);

/// The (architecture, PTX) pairs a CUDA artifact module carries (what
/// energyc --emit=ptx prints).
std::vector<std::pair<std::string, std::string>>
cudaImagesOf(ModuleOp artifact);

/// An artifact compiled in process: its symbols stay valid while the handle
/// lives.
struct JitArtifact {
  std::shared_ptr<void> handle;
  std::function<void *(const std::string &)> lookup;
};

/// The native object code of the LLVM-dialect artifact module `module` for
/// the host CPU, at optimisation level `optLevel` (0-3).
FailureOr<SmallVector<char, 0>>
compileToObject(ModuleOp module, std::string &error,
                unsigned optLevel = kDefaultOptLevel);

/// Links object code from compileToObject into this process.
FailureOr<JitArtifact> loadObject(ArrayRef<char> object, std::string &error);

/// compileToObject, then loadObject.
FailureOr<JitArtifact> compileInProcess(ModuleOp module, std::string &error,
                                        unsigned optLevel = kDefaultOptLevel);

} // namespace mlir::energy

#endif // ENERGY_CODEGEN_ARTIFACT_H
