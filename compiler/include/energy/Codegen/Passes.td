//===- Passes.td - Code generation passes ------------------*- tablegen -*-===//
//
// The passes that lower a kernel plan to the LLVM dialect: the kernels of
// the plan, parallel loops as thread-pool chunks or GPU kernels, the GPU
// kernels to PTX, and the math approximations. Pipelines.h assembles them
// with MLIR's conversions for the CPU and CUDA.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_CODEGEN_PASSES_TD
#define ENERGY_CODEGEN_PASSES_TD

include "mlir/Pass/PassBase.td"

def EnergyEmitKernels : Pass<"energy-emit-kernels", "::mlir::ModuleOp"> {
  let summary = "Writes the kernels of the module's planned model into a nested module";
  let description = [{
    For the one `energy.model` of the module (after the kernel plan), adds
    a nested `builtin.module @energy_artifact` holding the artifact's
    kernels (ArtifactABI.h) as `func` functions over scf, arith, math,
    vector and LLVM pointer ops, and the declarations of the support
    library's functions they call (SupportFunctions.cpp). Each softmax
    contraction is computed by its `engine`, each `foreach` shares out its
    `parallel<n>` indices (marked for energy-outline-parallel-loops). An op
    code generation does not support is an error on that op; kernels that
    do not verify are an internal error on the model.
  }];
  let options = [
    Option<"elementType", "element-type", "std::string", /*default=*/"\"f32\"",
           "The kernels' element type: f32 or f64">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::func::FuncDialect",
    "::mlir::LLVM::LLVMDialect", "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect", "::mlir::affine::AffineDialect",
    "::mlir::vector::VectorDialect", "::mlir::cf::ControlFlowDialect"
  ];
}

def EnergyOutlineParallelLoops
    : Pass<"energy-outline-parallel-loops", "::mlir::ModuleOp"> {
  let summary = "Parallel loops as thread-pool chunks, or with `gpu` as GPU kernels";
  let description = [{
    On a module of kernels (energy-emit-kernels'): every loop marked
    parallel becomes a call of the support library's parallel-for on a
    chunk function holding its body (ParallelLoops.h). With `gpu`, loops the
    GPU can run become kernels of a `gpu.module @energy_kernels` in the
    module, launched through the support library (their PTX images go to
    the global `energy_cuda_images`, which energy-compile-gpu-kernels
    fills), memory becomes managed memory and matrix products call the
    GPU's (with `bf16-products`, on tensor cores); the host code's reads of
    GPU memory move next to their users first, past the kernels that cannot
    write what they read (LateHostReads.h), and its runs of work on GPU
    memory alone become kernels of one thread (SerialKernels.h). With
    `gpu-host-code`
    instead, the host code takes the shape it has for the GPU, and what
    would be kernels are chunks for the thread pool: what energyc
    --device-loops compiles, to check a CUDA artifact's host code on the
    CPU.
  }];
  let options = [
    Option<"gpu", "gpu", "bool", /*default=*/"false",
           "Outline the loops the GPU can run as GPU kernels">,
    Option<"bf16Products", "bf16-products", "bool", /*default=*/"false",
           "With gpu: matrix products with bf16 operands on tensor cores">,
    Option<"gpuHostCode", "gpu-host-code", "bool", /*default=*/"false",
           "Without gpu: shape the host code as for the GPU (element-wise "
           "loops, runs of host work on GPU memory and the scalars kernels "
           "load themselves), with the thread pool for the GPU, so that the "
           "CPU runs a CUDA artifact's host code">
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::LLVM::LLVMDialect"];
}

def EnergyCompileGpuKernels
    : Pass<"energy-compile-gpu-kernels", "::mlir::ModuleOp"> {
  let summary = "Compiles the module's GPU kernels to PTX into its images global";
  let description = [{
    Takes the `gpu.module`s energy-outline-parallel-loops wrote, compiles
    them to PTX for each architecture of `archs` (NVVM and LLVM's NVPTX back
    end with the CUDA toolkit's libdevice, at ENERGY_CUDA_TOOLKIT, else
    /usr/local/cuda), stores the images in the global `energy_cuda_images`
    and erases the GPU modules, so that the rest lowers for the host.
  }];
  let options = [
    ListOption<"archs", "archs", "std::string",
               "The GPU architectures, oldest first (default sm_80, sm_90)">
  ];
}

def EnergyCudaHostFences : Pass<"energy-cuda-host-fences", "::mlir::ModuleOp"> {
  let summary = "Waits for the GPU's kernels only where the host needs them done";
  let description = [{
    On the kernels' module after energy-outline-parallel-loops{gpu=true}:
    a launch returns before its kernel is done, so that kernels follow
    each other on the GPU; the host functions call
    energy_support_cuda_fence (CudaHostFences.h) where kernels, or the work
    queued on the stream before the runtime's call, may still run and the
    host next touches memory they may write, calls the support library with
    pointers, or returns to the runtime.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::LLVM::LLVMDialect"];
}

def EnergyApproximateMath : Pass<"energy-approximate-math", "::mlir::ModuleOp"> {
  let summary = "f32 transcendental functions as polynomials; an accurate f64 log1p";
  let description = [{
    tanh, exp, expm1, log, log1p, log2, erf and erfc of f32 as MLIR's
    polynomial approximations (a few ulps from the correctly rounded
    value), which vectorise, where libm's would be one call per element.
    Double precision keeps libm's, but for log1p: x · log(u) / (u − 1) with
    u = 1 + x, accurate for small x, where convert-math-to-llvm would make
    it log(1 + x).
  }];
  let dependentDialects = ["::mlir::math::MathDialect", "::mlir::vector::VectorDialect"];
}

#endif // ENERGY_CODEGEN_PASSES_TD
