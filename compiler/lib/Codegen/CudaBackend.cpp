//===- CudaBackend.cpp - GPU kernels as PTX, and the cuda backend ---------===//
//
// The kernels outlined for the GPU go through MLIR's gpu → NVVM path and
// LLVM's NVPTX back end (gpu-module-to-binary, format isa) once per
// architecture; the artifact carries the PTX and the host code that
// launches it. The `cuda` backend writes such artifacts.
//
//===----------------------------------------------------------------------===//

#include "energy/Codegen/Artifact.h"
#include "energy/Codegen/BackendRegistry.h"
#include "energy/Codegen/ParallelLoops.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVM.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cstdlib>

using namespace mlir;
using namespace mlir::energy;

/// The GPU architectures every CUDA artifact carries: Ampere and Hopper.
static const char *const kCudaArchitectures[] = {"sm_80", "sm_90"};

ArtifactTarget mlir::energy::withCudaDevice(ArtifactTarget target) {
  target.device = "cuda";
  target.deviceArchs.assign(std::begin(kCudaArchitectures),
                            std::end(kCudaArchitectures));
  return target;
}

/// The CUDA toolkit: ENERGY_CUDA_TOOLKIT, else /usr/local/cuda.
static std::string cudaToolkit() {
  const char *path = std::getenv("ENERGY_CUDA_TOOLKIT");
  return path && *path ? path : "/usr/local/cuda";
}

FailureOr<std::vector<std::pair<std::string, std::string>>>
mlir::energy::compileGpuKernels(ModuleOp deviceModule,
                                ArrayRef<std::string> archs) {
  MLIRContext *context = deviceModule.getContext();
  std::string toolkit = cudaToolkit();
  llvm::SmallString<256> libdevice(toolkit);
  llvm::sys::path::append(libdevice, "nvvm", "libdevice", "libdevice.10.bc");
  if (!llvm::sys::fs::exists(libdevice))
    return deviceModule.emitError()
           << "the CUDA backend needs the CUDA toolkit's libdevice, and "
           << libdevice
           << " does not exist (set ENERGY_CUDA_TOOLKIT to the toolkit)";
  DialectRegistry registry;
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  // What convert-gpu-to-nvvm lowers the kernels' other dialects with.
  arith::registerConvertArithToLLVMInterface(registry);
  cf::registerConvertControlFlowToLLVMInterface(registry);
  index::registerConvertIndexToLLVMInterface(registry);
  registerConvertMathToLLVMInterface(registry);
  ub::registerConvertUBToLLVMInterface(registry);
  vector::registerConvertVectorToLLVMInterface(registry);
  registerBuiltinDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  context->appendDialectRegistry(registry);
  context->loadDialect<gpu::GPUDialect, NVVM::NVVMDialect, LLVM::LLVMDialect>();

  SmallVector<Attribute> targets;
  for (const std::string &arch : archs) {
    Attribute target = parseAttribute("#nvvm.target<chip = \"" + arch +
                                          "\", features = \"+ptx80\", O = 3>",
                                      context);
    if (!target)
      return deviceModule.emitError() << "no NVVM target for " << arch;
    targets.push_back(target);
  }
  deviceModule.walk([&](gpu::GPUModuleOp kernels) {
    kernels.setTargetsAttr(ArrayAttr::get(context, targets));
  });

  PassManager passes(context);
  OpPassManager &kernelPasses = passes.nest<gpu::GPUModuleOp>();
  kernelPasses.addPass(createCanonicalizerPass());
  kernelPasses.addPass(createCSEPass());
  kernelPasses.addPass(createLoopInvariantCodeMotionPass());
  kernelPasses.addPass(createSCFToControlFlowPass());
  kernelPasses.addPass(createConvertVectorToLLVMPass());
  ConvertGpuOpsToNVVMOpsOptions nvvmOptions;
  nvvmOptions.indexBitwidth = 64;
  kernelPasses.addPass(createConvertGpuOpsToNVVMOps(nvvmOptions));
  kernelPasses.addPass(createReconcileUnrealizedCastsPass());
  GpuModuleToBinaryPassOptions binaryOptions;
  binaryOptions.toolkitPath = toolkit;
  binaryOptions.compilationTarget = "isa";
  passes.addPass(createGpuModuleToBinaryPass(binaryOptions));
  if (failed(passes.run(deviceModule)))
    return deviceModule.emitError("compiling the GPU kernels to PTX failed");

  std::vector<std::pair<std::string, std::string>> images;
  deviceModule.walk([&](gpu::BinaryOp binary) {
    for (Attribute object : binary.getObjects()) {
      auto gpuObject = cast<gpu::ObjectAttr>(object);
      auto target = cast<NVVM::NVVMTargetAttr>(gpuObject.getTarget());
      images.emplace_back(target.getChip().str(),
                          gpuObject.getObject().getValue().str());
    }
  });
  if (images.size() != archs.size())
    return deviceModule.emitError("the GPU kernels gave ")
           << images.size() << " PTX images for " << archs.size()
           << " architectures";
  return images;
}

std::vector<std::pair<std::string, std::string>>
mlir::energy::cudaImagesOf(ModuleOp artifact) {
  std::vector<std::pair<std::string, std::string>> images;
  auto global = artifact.lookupSymbol<LLVM::GlobalOp>(kCudaImagesSymbol);
  auto bytes =
      global ? dyn_cast_or_null<StringAttr>(global.getValueOrNull()) : nullptr;
  if (!bytes)
    return images;
  StringRef rest = bytes.getValue();
  while (!rest.empty() && rest.front() != '\0') {
    auto [arch, afterArch] = rest.split('\0');
    auto [ptx, afterPtx] = afterArch.split('\0');
    images.emplace_back(arch.str(), ptx.str());
    rest = afterPtx;
  }
  return images;
}
