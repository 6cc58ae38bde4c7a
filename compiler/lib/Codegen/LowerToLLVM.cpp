//===- LowerToLLVM.cpp - Kernels and manifest in the LLVM dialect ---------===//
//
// Emits a model's kernels (KernelEmitter), simplifies them, lowers scf,
// arith, math and func to the LLVM dialect, and adds the manifest function
// every artifact exports.
//
//===----------------------------------------------------------------------===//

#include "energy/Codegen/Artifact.h"
#include "energy/Codegen/ParallelLoops.h"
#include "energy/Runtime/ArtifactABI.h"
#include "energy/Transforms/InternalErrors.h"
#include "energy/Transforms/Pipelines.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
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

/// The single-precision transcendental functions of the host's kernels as
/// polynomials (MLIR's approximations, a few ulps from the correctly
/// rounded value), which vectorise, where libm's would be one call per
/// element: tanh, exp, log and their relatives in every elementwise loop.
/// Double precision keeps libm's.
static LogicalResult approximateMathFunctions(ModuleOp module) {
  RewritePatternSet patterns(module.getContext());
  populateMathPolynomialApproximationPatterns(patterns, [](StringRef name) {
    name.consume_front("math.");
    return llvm::is_contained(
        {"tanh", "exp", "expm1", "log", "log1p", "log2", "erf", "erfc"}, name);
  });
  return applyPatternsGreedily(module, std::move(patterns));
}

FailureOr<OwningOpRef<ModuleOp>>
mlir::energy::buildArtifactModule(ModelOp model,
                                  const ArtifactOptions &options) {
  MLIRContext *context = model.getContext();
  context->loadDialect<arith::ArithDialect, func::FuncDialect,
                       LLVM::LLVMDialect, math::MathDialect, scf::SCFDialect,
                       affine::AffineDialect, vector::VectorDialect>();
  if (options.dtype == "bf16" && options.target.device != "cuda")
    return model.emitError("--dtype bf16 (bf16 products on tensor cores) "
                           "needs a CUDA target");
  OwningOpRef<ModuleOp> module = ModuleOp::create(model.getLoc());
  FloatType elementType = options.dtype == "f64"
                              ? FloatType(Float64Type::get(context))
                              : FloatType(Float32Type::get(context));
  FailureOr<ArtifactLayout> layout = emitKernels(model, *module, elementType);
  if (failed(layout))
    return failure();
  // Emission builds its IR directly; a slip there is a compiler bug, and
  // is reported as one rather than crashing a later pass.
  if (failed(verify(*module)))
    return model.emitError("internal error: the emitted kernels do not "
                           "verify");
  // For CUDA, loops the GPU can run go to a gpu.module of their own,
  // compiled to PTX that the artifact carries in one global.
  OwningOpRef<ModuleOp> deviceModule;
  gpu::GPUModuleOp gpuKernels;
  LLVM::GlobalOp images;
  if (options.target.device == "cuda") {
    context->loadDialect<gpu::GPUDialect>();
    deviceModule = ModuleOp::create(model.getLoc());
    OpBuilder b = OpBuilder::atBlockEnd(deviceModule->getBody());
    gpuKernels = gpu::GPUModuleOp::create(b, model.getLoc(), "energy_kernels");
    b.setInsertionPointToEnd(module->getBody());
    images = LLVM::GlobalOp::create(
        b, model.getLoc(), LLVM::LLVMArrayType::get(b.getI8Type(), 1),
        /*isConstant=*/true, LLVM::Linkage::Internal, kCudaImagesSymbol,
        b.getStringAttr(StringRef("", 1)));
  }
  outlineParallelLoops(*module, gpuKernels,
                       /*bf16Products=*/options.dtype == "bf16");
  if (gpuKernels) {
    auto compiled =
        compileGpuKernels(*deviceModule, options.target.deviceArchs);
    if (failed(compiled))
      return failure();
    std::string bytes;
    for (const auto &[arch, ptx] : *compiled) {
      bytes += arch;
      bytes.push_back('\0');
      bytes += ptx;
      bytes.push_back('\0');
    }
    bytes.push_back('\0');
    images.setGlobalType(
        LLVM::LLVMArrayType::get(IntegerType::get(context, 8), bytes.size()));
    images.setValueAttr(StringAttr::get(context, bytes));
  }

  if (failed(approximateMathFunctions(*module)))
    return model.emitError("internal error: approximating the kernels' "
                           "math functions failed");
  PassManager passes(context);
  passes.addPass(createCanonicalizerPass());
  passes.addPass(createCSEPass());
  passes.addPass(createLoopInvariantCodeMotionPass());
  passes.addPass(createSCFToControlFlowPass());
  passes.addPass(createConvertVectorToLLVMPass());
  passes.addPass(createConvertMathToLLVMPass());
  passes.addPass(createConvertMathToLibmPass());
  // (libm's functions of double vectors are calls per lane: extracts.)
  passes.addPass(createConvertVectorToLLVMPass());
  passes.addPass(createArithToLLVMConversionPass());
  passes.addPass(createConvertIndexToLLVMPass());
  passes.addPass(createConvertControlFlowToLLVMPass());
  passes.addPass(createConvertFuncToLLVMPass());
  passes.addPass(createReconcileUnrealizedCastsPass());
  if (failed(passes.run(*module)))
    return model.emitError("lowering the kernels to LLVM failed");
  addManifestFunction(*module, buildManifest(model, *layout, options));
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
  PassManager passes(energyModule.getContext(), ModuleOp::getOperationName());
  OpPassManager &modelPasses = passes.nest<ModelOp>();
  buildUpdatePipeline(modelPasses, wrt);
  buildKernelPlanPipeline(modelPasses,
                          {options.target.device == "cuda",
                           options.dtype == "bf16", options.runCaches});
  reportCrashesByPass(passes);
  if (failed(guardCompilation("the pass pipeline", model.getLoc(),
                              [&] { return passes.run(energyModule); })))
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
  if (llvmModule)
    llvmModule->setTargetTriple(llvm::Triple(llvm::sys::getProcessTriple()));
  return llvmModule;
}
