//===- DeviceScalars.h - Scalars a GPU kernel computes itself ---*- C++ -*-===//
//
// Which values a loop outlined as a GPU kernel uses can be computed in the
// kernel from memory the GPU holds instead of on the host, so that the host
// need not wait for the GPU to read them. Private to compiler/lib/Codegen.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_CODEGEN_DEVICESCALARS_H
#define ENERGY_CODEGEN_DEVICESCALARS_H

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::energy::codegen {

/// The host ops, in order, that compute `value` (used by `loop`, which
/// becomes a GPU kernel) from loads of GPU memory, for the kernel to compute
/// again at its start: arithmetic, address computations and loads where the
/// kernel reads what the host would. That is a load marked
/// kUnchangedLoadAttr (memory no code of the call writes), or, for a kernel
/// of one thread, a load of a buffer or scratch block in the block of `loop`
/// with nothing that may write memory between it and `loop`. Empty when `value`
/// reads no such load (the host passes it).
llvm::SetVector<Operation *> deviceComputation(Value value, scf::ForOp loop);

/// Whether `pointer` is into a buffer (an address from a kernel's buffers
/// argument) or a scratch block the kernel allocated: GPU memory in a CUDA
/// artifact.
bool intoGpuMemory(Value pointer);

} // namespace mlir::energy::codegen

#endif // ENERGY_CODEGEN_DEVICESCALARS_H
