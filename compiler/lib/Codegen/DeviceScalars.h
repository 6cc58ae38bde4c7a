//===- DeviceScalars.h - Scalars a GPU kernel computes itself ---*- C++ -*-===//
//
// What of a CUDA artifact's host code a GPU kernel can take over: which ops
// a kernel can hold, which addresses are GPU memory, and which values a
// loop outlined as a kernel uses can be computed in the kernel instead of on
// the host, so that the host need not wait for the GPU to read them.
// Private to compiler/lib/Codegen.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_CODEGEN_DEVICESCALARS_H
#define ENERGY_CODEGEN_DEVICESCALARS_H

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::energy::codegen {

/// The host ops, in order, that compute `value` (used by `loop`, which
/// becomes a GPU kernel) from loads of GPU memory, for the kernel to compute
/// again at its start: arithmetic (and loops of arithmetic alone, in a kernel
/// of one thread or of at most 16 trips), address computations and loads
/// where the kernel reads what the host would. That is a load marked
/// kUnchangedLoadAttr (memory nothing writes after it), or, for a kernel
/// of one thread, a load of a buffer or scratch block in the block of `loop`
/// with nothing that may write memory between it and `loop`. Empty when `value`
/// reads no such load (the host passes it).
llvm::SetVector<Operation *> deviceComputation(Value value, scf::ForOp loop);

/// The values `op` and the ops in its regions use, defined outside it.
llvm::SetVector<Value> usedValues(Operation *op);

/// The address `pointer` is an offset from (through llvm.getelementptr).
Value baseAddress(Value pointer);

/// The address an llvm.load, llvm.store or llvm.atomicrmw reads or writes;
/// null for other ops.
Value accessedAddress(Operation *op);

/// Whether `base` (an address no offset is taken of) is a block of scratch
/// or device memory the code allocated, which no other address reaches.
bool isOwnAllocation(Value base);

/// Whether `op` may write memory through a store whose base address
/// `reaches` holds for (never the host's stack), or otherwise (a call).
bool mayWrite(Operation *op, function_ref<bool(Value)> reaches);

/// Whether a GPU kernel can hold `op` itself (its nested ops asked apart):
/// arith, math, scf, vector and LLVM ops but calls, globals' addresses and
/// stack slots.
bool runsOnGpu(Operation *op);

/// Whether `pointer` is into a buffer (an address from a kernel's buffers
/// argument) or a scratch block the kernel allocated: GPU memory in a CUDA
/// artifact.
bool intoGpuMemory(Value pointer);

} // namespace mlir::energy::codegen

#endif // ENERGY_CODEGEN_DEVICESCALARS_H
