//===- SerialKernels.h - Host work on GPU memory as one-thread kernels ----===//
//
// The host code of a CUDA artifact that only computes on GPU memory (a loop
// along time, a factorisation) becomes a kernel of one thread, so that the
// host neither waits for the GPU nor reads its memory. Private to
// compiler/lib/Codegen.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_CODEGEN_SERIALKERNELS_H
#define ENERGY_CODEGEN_SERIALKERNELS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mlir::energy::codegen {

/// Moves each run of consecutive host ops of `function` that a GPU can run,
/// that read or write GPU memory (codegen::intoGpuMemory) and contain no
/// loop for which `becomesKernel` holds, into a loop of one iteration in its
/// place; returns those loops, for the outliner to make kernels of.
/// Arithmetic in a run that reads no memory stays on the host, for the
/// kernel to take, but for arithmetic on scalars of GPU memory (slots,
/// params) that only the kernel uses, which goes into it; a loop of
/// arithmetic alone counts as arithmetic. A scalar a run computes that
/// later kernels and runs alone use goes through GPU memory: the kernel stores
/// it into a slot of its own, which the host loads after it, marked
/// kUnchangedLoadAttr, for the kernels that use it to load themselves; a run
/// that computes anything else the host uses after it ends before the op that
/// computes it.
SmallVector<scf::ForOp>
wrapSerialRuns(func::FuncOp function,
               function_ref<bool(scf::ForOp)> becomesKernel);

} // namespace mlir::energy::codegen

#endif // ENERGY_CODEGEN_SERIALKERNELS_H
