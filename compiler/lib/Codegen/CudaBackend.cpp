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
#include "energy/Codegen/Pipelines.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
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

/// The GPU architectures every CUDA artifact carries, oldest first: Ampere
/// and Hopper.
static const char *const kCudaArchitectures[] = {"sm_80", "sm_90"};

ArtifactTarget mlir::energy::withCudaDevice(ArtifactTarget target) {
  target.device = "cuda";
  target.deviceArchs.assign(std::begin(kCudaArchitectures),
                            std::end(kCudaArchitectures));
  return target;
}

void mlir::energy::registerGpuKernelCompilation(DialectRegistry &registry) {
  registry.insert<gpu::GPUDialect, NVVM::NVVMDialect, LLVM::LLVMDialect>();
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
  registerGpuKernelCompilation(registry);
  context->appendDialectRegistry(registry);
  context->loadDialect<gpu::GPUDialect, NVVM::NVVMDialect, LLVM::LLVMDialect>();

  // The kernels use nothing newer than the oldest architecture, so LLVM
  // compiles them once for it (NVPTX gave the same PTX for each, and took
  // most of energyc's time); every newer architecture's image is that PTX
  // with its own .target line, which PTX's forward compatibility allows.
  if (archs.empty())
    return deviceModule.emitError("no GPU architecture to compile for");
  const std::string &oldestArch = archs.front();
  Attribute target = parseAttribute("#nvvm.target<chip = \"" + oldestArch +
                                        "\", features = \"+ptx80\", O = 3>",
                                    context);
  if (!target)
    return deviceModule.emitError() << "no NVVM target for " << oldestArch;
  deviceModule.walk([&](gpu::GPUModuleOp kernels) {
    kernels.setTargetsAttr(ArrayAttr::get(context, {target}));
  });

  PassManager passes(context);
  buildGpuBinaryPipeline(passes, toolkit);
  if (failed(passes.run(deviceModule)))
    return deviceModule.emitError("compiling the GPU kernels to PTX failed");

  SmallVector<StringRef> compiled;
  deviceModule.walk([&](gpu::BinaryOp binary) {
    for (Attribute object : binary.getObjects())
      compiled.push_back(cast<gpu::ObjectAttr>(object).getObject().getValue());
  });
  if (compiled.size() != 1)
    return deviceModule.emitError("the GPU kernels gave ")
           << compiled.size() << " PTX images, expected one";
  std::string oldestTarget = ".target " + oldestArch + "\n";
  size_t targetLine = compiled.front().find(oldestTarget);
  if (targetLine == StringRef::npos)
    return deviceModule.emitError("the PTX for ")
           << oldestArch << " has no '.target " << oldestArch << "' line";
  std::vector<std::pair<std::string, std::string>> images;
  for (const std::string &arch : archs) {
    std::string ptx = compiled.front().str();
    ptx.replace(targetLine, oldestTarget.size(), ".target " + arch + "\n");
    images.emplace_back(arch, std::move(ptx));
  }
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
