//===- Pipelines.h - The lowering pipelines ---------------------*- C++ -*-===//
//
// The pass pipelines that lower a kernel plan to an artifact module in the
// LLVM dialect, for the CPU and for CUDA, and that compile the GPU's
// kernels to PTX, kept in one place (the pipelines above the plan are in
// energy/Transforms/Pipelines.h).
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_CODEGEN_PIPELINES_H
#define ENERGY_CODEGEN_PIPELINES_H

#include "mlir/Pass/PassManager.h"

#include <string>
#include <vector>

namespace mlir::energy {

/// What the kernels are lowered for.
struct KernelLoweringTarget {
  /// f64 kernels, else f32.
  bool f64 = false;
  /// Parallel loops the GPU can run as GPU kernels, compiled to PTX for
  /// `deviceArchs` (oldest first).
  bool cuda = false;
  std::vector<std::string> deviceArchs;
  /// With cuda: matrix products with bf16 operands on tensor cores.
  bool bf16Products = false;
  /// Without cuda: the host code shaped as a CUDA artifact's, with the
  /// thread pool for the GPU (energy-outline-parallel-loops' gpu-host-code).
  bool gpuHostCode = false;
};

/// On a module holding one planned `energy.model`: energy-emit-kernels,
/// then on the nested module of kernels, energy-outline-parallel-loops
/// (for CUDA also energy-compile-gpu-kernels), energy-approximate-math,
/// canonicalization, CSE, loop-invariant code motion and MLIR's conversions
/// of scf, vector, math (libm where no approximation applies), arith,
/// index, cf and func to the LLVM dialect.
void buildKernelLoweringPipeline(OpPassManager &modulePasses,
                                 const KernelLoweringTarget &target);

/// On a module of `gpu.module`s with their NVVM target set: simplification,
/// NVVM, and the binary of each (format isa: PTX) with the CUDA toolkit at
/// `toolkit`.
void buildGpuBinaryPipeline(OpPassManager &modulePasses, StringRef toolkit);

/// Registers MLIR's conversions to the LLVM dialect that
/// buildKernelLoweringPipeline runs, by their names, for energy-opt (all of
/// MLIR's, mlir/Conversion/Passes.h, take twice as long to compile).
void registerKernelLoweringConversions();

} // namespace mlir::energy

#endif // ENERGY_CODEGEN_PIPELINES_H
