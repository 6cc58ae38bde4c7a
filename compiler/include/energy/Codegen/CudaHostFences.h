//===- CudaHostFences.h - Where CUDA host code waits ------------*- C++ -*-===//
//
// The host side of a CUDA artifact launches its kernels without waiting for
// them; this places the waits (energy_support_cuda_fence) it needs.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_CODEGEN_CUDAHOSTFENCES_H
#define ENERGY_CODEGEN_CUDAHOSTFENCES_H

#include "mlir/IR/BuiltinOps.h"

namespace mlir::energy {
/// In the host functions of `module` (the kernels' module after
/// outlineParallelLoops for the GPU), calls energy_support_cuda_fence, which
/// waits for the kernels and cuBLAS products the calling thread queued
/// without waiting (and for the work queued on its stream before the
/// runtime's call: energy_support_cuda_set_stream), wherever they may still
/// run and the host next touches memory other than its stack, its globals,
/// the runtime's tables or blocks allocated since the last launch (a load,
/// a store, a call of the support library with pointers), and before a
/// function the runtime calls returns. A fence's status joins the
/// function's. Fails, with an error on `module`, where the fence function
/// is not declared.
LogicalResult insertCudaHostFences(ModuleOp module);
} // namespace mlir::energy

#endif // ENERGY_CODEGEN_CUDAHOSTFENCES_H
