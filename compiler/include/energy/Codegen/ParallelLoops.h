//===- ParallelLoops.h - Kernel loops shared out on the thread pool -*- C++
//-*-===//
//
// The kernel emitter marks loops whose iterations write disjoint memory; this
// outlines each into a chunk function that the support thread pool runs.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_CODEGEN_PARALLELLOOPS_H
#define ENERGY_CODEGEN_PARALLELLOOPS_H

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::energy {
/// Marks `loop` (from 0 by 1, no carried values) as one whose iterations
/// write disjoint memory and may run on several threads in any order.
void markParallel(scf::ForOp loop);

/// Replaces every marked loop (the outermost of nested ones) of the kernels
/// `emitKernels` wrote into `module` by a call of the support library's
/// parallel-for, which `emitKernels` declared, on a chunk function holding
/// its body. Scratch memory used only inside a loop becomes private to each
/// chunk. Adds `energy_artifact_set_num_threads` (ArtifactABI.h).
void outlineParallelLoops(ModuleOp module);
} // namespace mlir::energy

#endif // ENERGY_CODEGEN_PARALLELLOOPS_H
