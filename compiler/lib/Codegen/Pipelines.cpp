//===- Pipelines.cpp - The lowering pipelines -----------------------------===//
//
// The CPU and CUDA lowering of a kernel plan, and the GPU kernels' PTX, as
// pass pipelines (Pipelines.h).
//
//===----------------------------------------------------------------------===//

#include "energy/Codegen/Pipelines.h"
#include "energy/Codegen/Passes.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVMPass.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::energy;

void mlir::energy::buildKernelLoweringPipeline(
    OpPassManager &modulePasses, const KernelLoweringTarget &target) {
  EnergyEmitKernelsOptions emit;
  emit.elementType = target.f64 ? "f64" : "f32";
  modulePasses.addPass(createEnergyEmitKernels(emit));
  OpPassManager &kernels = modulePasses.nest<ModuleOp>();
  EnergyOutlineParallelLoopsOptions outline;
  outline.gpu = target.cuda;
  outline.bf16Products = target.bf16Products;
  outline.gpuHostCode = !target.cuda && target.gpuHostCode;
  kernels.addPass(createEnergyOutlineParallelLoops(outline));
  if (target.cuda) {
    kernels.addPass(createEnergyCudaHostFences());
    EnergyCompileGpuKernelsOptions compile;
    compile.archs.assign(target.deviceArchs.begin(), target.deviceArchs.end());
    kernels.addPass(createEnergyCompileGpuKernels(compile));
  }
  kernels.addPass(createEnergyApproximateMath());
  kernels.addPass(createCanonicalizerPass());
  kernels.addPass(createCSEPass());
  kernels.addPass(createLoopInvariantCodeMotionPass());
  kernels.addPass(createSCFToControlFlowPass());
  kernels.addPass(createConvertVectorToLLVMPass());
  kernels.addPass(createConvertMathToLLVMPass());
  kernels.addPass(createConvertMathToLibmPass());
  // (libm's functions of double vectors are calls per lane: extracts.)
  kernels.addPass(createConvertVectorToLLVMPass());
  kernels.addPass(createArithToLLVMConversionPass());
  kernels.addPass(createConvertIndexToLLVMPass());
  kernels.addPass(createConvertControlFlowToLLVMPass());
  kernels.addPass(createConvertFuncToLLVMPass());
  kernels.addPass(createReconcileUnrealizedCastsPass());
}

void mlir::energy::buildGpuBinaryPipeline(OpPassManager &modulePasses,
                                          StringRef toolkit) {
  OpPassManager &kernelPasses = modulePasses.nest<gpu::GPUModuleOp>();
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
  binaryOptions.toolkitPath = toolkit.str();
  binaryOptions.compilationTarget = "isa";
  modulePasses.addPass(createGpuModuleToBinaryPass(binaryOptions));
}

void mlir::energy::registerKernelLoweringConversions() {
  registerPass([] { return createSCFToControlFlowPass(); });
  registerPass([] { return createConvertVectorToLLVMPass(); });
  registerPass([] { return createConvertMathToLLVMPass(); });
  registerPass([] { return createConvertMathToLibmPass(); });
  registerPass([] { return createArithToLLVMConversionPass(); });
  registerPass([] { return createConvertIndexToLLVMPass(); });
  registerPass([] { return createConvertControlFlowToLLVMPass(); });
  registerPass([] { return createConvertFuncToLLVMPass(); });
  registerPass([] { return createReconcileUnrealizedCastsPass(); });
}
