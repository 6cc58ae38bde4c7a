//===- ParallelLoops.h - Kernel loops shared out on the thread pool -*- C++
//-*-===//
//
// The kernel emitter marks loops whose iterations write disjoint memory; this
// outlines each into a chunk function that the support thread pool runs.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_CODEGEN_PARALLELLOOPS_H
#define ENERGY_CODEGEN_PARALLELLOOPS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::energy {
/// The attribute of a kernel's status slot (the i32 it returns), which a
/// launch on the GPU folds its own status into.
inline constexpr llvm::StringLiteral kKernelStatusAttr = "energy.status";

/// The attribute of a load of memory that nothing writes after it until
/// control leaves the load's block (a scalar of a tensor that no program
/// stores into; a slot a kernel of one thread filled before it): a GPU
/// kernel that uses the value may make the load itself.
/// outlineParallelLoops removes it.
inline constexpr llvm::StringLiteral kUnchangedLoadAttr = "energy.unchanged";

/// The attribute of an allocation of 8-byte slots that the host fills and
/// support functions read on the host (a contraction's arguments): never
/// GPU data. outlineParallelLoops removes it.
inline constexpr llvm::StringLiteral kHostSlotsAttr = "energy.host_slots";

/// Folds `code` (a status the support library returned) into the status slot
/// of the function around `b`'s insertion point (an atomic max), where it has
/// one.
void foldIntoKernelStatus(OpBuilder &b, Location loc, Value code);

/// Marks `loop` (from 0 by 1, no carried values) as one whose iterations
/// write disjoint memory and may run on several threads in any order.
void markParallel(scf::ForOp loop);

/// Marks `loop` (any bounds and step, no carried values) as one whose
/// iterations touch disjoint elements but are each too little work for the
/// thread pool: where it is not nested in another loop, outlineParallelLoops
/// makes it a GPU kernel for the GPU (so that the host does not touch the
/// memory the GPU works on) and leaves it alone for the CPU.
void markElementwise(scf::ForOp loop);

/// The same for a loop over vectors of elements and the loop over the
/// scalar remainder that follows it (`tail`, from where `vectors` ends): on
/// the GPU one kernel, a thread per vector, the last one taking the
/// remainder.
void markElementwise(scf::ForOp vectors, scf::ForOp tail);

/// The symbol of the artifact's PTX images (KernelSupport.h's
/// energy_support_cuda_launch reads them), a global that
/// outlineParallelLoops declares when it outlines for the GPU and the CUDA
/// backend fills.
inline constexpr llvm::StringLiteral kCudaImagesSymbol = "energy_cuda_images";

/// Replaces every marked loop (the outermost of nested ones) of the kernels
/// `emitKernels` wrote into `module` by a call of the support library's
/// parallel-for, which `emitKernels` declared, on a chunk function holding
/// its body. Scratch memory used only inside a loop becomes private to each
/// chunk. Adds `energy_artifact_set_num_threads` (ArtifactABI.h).
///
/// With `gpuKernels`, a loop whose body the GPU can run (arithmetic, math,
/// loops and memory access; no calls) becomes a kernel there, one thread per
/// iteration, and the loop a launch of it; its private scratch is one block
/// per iteration, and stack slots it uses are copied to managed memory and
/// back around the launch. Every malloc and free of the module then takes
/// managed memory, which the host and the GPU both reach, and matrix
/// products call the support library's GPU versions: with `bf16Products`,
/// those taking bf16 operands on tensor cores (f32 kernels only). (Softmax
/// contractions call what their plan's `engine` names.)
///
/// With `gpuHostCode` and no `gpuKernels`, the host code takes the shape it
/// has for the GPU (element-wise loops outlined, codegen::wrapSerialRuns,
/// values kernels compute themselves), with chunks for the thread pool
/// where the GPU would have kernels: a CUDA artifact's host code, for the
/// CPU to check.
void outlineParallelLoops(ModuleOp module,
                          gpu::GPUModuleOp gpuKernels = nullptr,
                          bool bf16Products = false, bool gpuHostCode = false);
} // namespace mlir::energy

#endif // ENERGY_CODEGEN_PARALLELLOOPS_H
