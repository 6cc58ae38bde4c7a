//===- LowerToLLVM.cpp - Kernels and manifest in the LLVM dialect ---------===//
//
// Runs the plan and lowering pipelines (Pipelines.h) on a model's module,
// takes the module of kernels they leave in the LLVM dialect, and adds the
// manifest function every artifact exports.
//
//===----------------------------------------------------------------------===//

#include "energy/Codegen/Artifact.h"
#include "energy/Codegen/KernelEmitter.h"
#include "energy/Codegen/Passes.h"
#include "energy/Codegen/Pipelines.h"
#include "energy/Runtime/ArtifactABI.h"
#include "energy/Transforms/InternalErrors.h"
#include "energy/Transforms/Pipelines.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/IR/Module.h"
#include "llvm/TargetParser/Host.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// `const char *energy_artifact_manifest(void)` returning `text`.
void addManifestFunction(ModuleOp module, StringRef text) {
  OpBuilder b(module.getContext());
  b.setInsertionPointToEnd(module.getBody());
  Location loc = module.getLoc();
  std::string bytes = text.str();
  bytes.push_back('\0');
  auto arrayType = LLVM::LLVMArrayType::get(b.getI8Type(), bytes.size());
  auto global = LLVM::GlobalOp::create(
      b, loc, arrayType, /*isConstant=*/true, LLVM::Linkage::Internal,
      "energy_manifest_text", b.getStringAttr(bytes));
  auto pointer = LLVM::LLVMPointerType::get(b.getContext());
  auto function =
      LLVM::LLVMFuncOp::create(b, loc, ENERGY_ARTIFACT_MANIFEST_SYMBOL,
                               LLVM::LLVMFunctionType::get(pointer, {}));
  Block *entry = function.addEntryBlock(b);
  b.setInsertionPointToStart(entry);
  Value address = LLVM::AddressOfOp::create(b, loc, global);
  LLVM::ReturnOp::create(b, loc, address);
}

} // namespace

FailureOr<OwningOpRef<ModuleOp>>
mlir::energy::buildArtifactModule(ModelOp model,
                                  const ArtifactOptions &options) {
  MLIRContext *context = model.getContext();
  if (options.dtype == "bf16" && options.target.device != "cuda")
    return model.emitError("--dtype bf16 (bf16 products on tensor cores) "
                           "needs a CUDA target");
  auto parent = model->getParentOfType<ModuleOp>();
  if (!parent)
    return model.emitError("internal error: the model is in no module");
  PassManager passes(context, ModuleOp::getOperationName());
  buildKernelLoweringPipeline(
      passes, {options.dtype == "f64", options.target.device == "cuda",
               options.target.deviceArchs, options.dtype == "bf16",
               options.deviceLoops});
  // The kernels are verified once, lowered, not after each conversion.
  passes.enableVerifier(false);
  reportCrashesByPass(passes);
  // A pass that fails says why, except where MLIR's conversions stop
  // without a word.
  bool reported = false;
  LogicalResult lowered = success();
  {
    GuardedDiagnosticHandler watch(context, [&](Diagnostic &diagnostic) {
      reported |= diagnostic.getSeverity() == DiagnosticSeverity::Error;
      return failure();
    });
    lowered = passes.run(parent);
  }
  auto artifact = parent.lookupSymbol<ModuleOp>(kArtifactModuleName);
  if (succeeded(lowered) && artifact && failed(verify(artifact))) {
    artifact.erase();
    return model.emitError("internal error: the kernels lowered to LLVM do "
                           "not verify; please report it with this file");
  }
  if (failed(lowered) || !artifact) {
    if (artifact)
      artifact.erase();
    if (!reported)
      model.emitError("lowering the kernels to LLVM failed");
    return failure();
  }
  artifact->remove();
  OwningOpRef<ModuleOp> module(artifact);
  module->setSymNameAttr(nullptr);
  addManifestFunction(*module,
                      buildManifest(model, artifactLayoutOf(model), options));
  return module;
}

FailureOr<OwningOpRef<ModuleOp>>
mlir::energy::compileToArtifactModule(ModuleOp energyModule,
                                      const ArtifactOptions &options) {
  auto models = energyModule.getOps<ModelOp>();
  if (models.empty())
    return energyModule.emitError("there is no energy.model to compile");
  ModelOp model = *models.begin();
  // Every tensor gets a gradient kernel, so that an artifact answers
  // `--eval grad --wrt` for any of them.
  std::vector<std::string> wrt;
  for (TensorOp tensor : model.getBody().front().getOps<TensorOp>())
    wrt.push_back(tensor.getSymName().str());
  PassManager updates(energyModule.getContext(), ModuleOp::getOperationName());
  buildUpdatePipeline(updates.nest<ModelOp>(), wrt,
                      {options.callerCotangents, options.shardedRank,
                       options.changeOfVariables});
  reportCrashesByPass(updates);
  KernelPlanTarget target{
      options.target.device == "cuda", options.dtype == "bf16",
      options.runCaches,
      !(options.shardedRank && options.shardedRank->backwardStepAlone),
      options.deviceLoops};
  if (failed(guardCompilation("the pass pipeline", model.getLoc(), [&] {
        if (failed(updates.run(energyModule)))
          return failure();
        return runKernelPlanPipeline(energyModule, target);
      })))
    return failure();
  FailureOr<OwningOpRef<ModuleOp>> artifact = failure();
  (void)guardCompilation("code generation", model.getLoc(), [&] {
    artifact = buildArtifactModule(model, options);
    return success(succeeded(artifact));
  });
  return artifact;
}

std::unique_ptr<llvm::Module>
mlir::energy::translateArtifact(ModuleOp module, llvm::LLVMContext &context) {
  registerBuiltinDialectTranslation(*module.getContext());
  registerLLVMDialectTranslation(*module.getContext());
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, context, "energy_artifact");
  if (!llvmModule)
    return llvmModule;
  llvmModule->setTargetTriple(llvm::Triple(llvm::sys::getProcessTriple()));
  // The loops LLVM vectorises write what the kernels' own vector loops
  // (VectorLoops.cpp, 64 bytes) read next: at the same width the stores
  // forward to the loads (docs/benchmarks.md, twenty-sixth session).
  for (llvm::Function &function : *llvmModule)
    if (!function.isDeclaration())
      function.addFnAttr("prefer-vector-width", "512");
  return llvmModule;
}
