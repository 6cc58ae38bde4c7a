//===- LateHostReads.h - Host reads of GPU memory as late as they can be --===//
//
// Schedules the host code of a CUDA artifact before its runs of host work
// become kernels of one thread: the host's reads of GPU memory move next to
// their users, so that several share one wait. Private to
// compiler/lib/Codegen.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_CODEGEN_LATEHOSTREADS_H
#define ENERGY_CODEGEN_LATEHOSTREADS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::energy::codegen {

/// Moves each op of `function` that only computes and reads GPU memory down
/// its block, past the ops that cannot write what it reads (kernels storing
/// into other scratch blocks; never a call), to just before its first user:
/// the host's reads of what kernels computed then come together after one
/// wait. Arithmetic moves likewise, next to what uses it.
void sinkHostReads(func::FuncOp function);

} // namespace mlir::energy::codegen

#endif // ENERGY_CODEGEN_LATEHOSTREADS_H
