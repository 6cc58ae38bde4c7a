//===- ObjectCode.h - Native object code of the kernels ---------*- C++ -*-===//
//-*-===//
//
// LLVM IR to native object code in process, for the host or an x86-64
// level: the shared libraries of energyc and the JIT of energy-run compile
// their kernels with the same pipeline. Private to compiler/lib/Codegen.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_LIB_CODEGEN_OBJECTCODE_H
#define ENERGY_LIB_CODEGEN_OBJECTCODE_H

#include "mlir/Support/LLVM.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <memory>
#include <string>

namespace llvm {
class Module;
class TargetMachine;
} // namespace llvm

namespace mlir::energy::codegen {

/// The target machine of the process's architecture for `cpu` ("native":
/// the host's CPU and features, as clang -march=native; or a CPU LLVM
/// knows, such as an x86-64 level), at `optLevel` (0-3), emitting
/// position-independent code if `positionIndependent` (for a shared
/// library). Fails with `error`.
FailureOr<std::unique_ptr<llvm::TargetMachine>>
createKernelTargetMachine(StringRef cpu, unsigned optLevel,
                          bool positionIndependent, std::string &error);

/// Optimises `module` with LLVM's pipeline at `optLevel` for `machine`
/// (without unrolling or interleaving loops: the kernels write their inner
/// loops as vectors already, VectorLoops.cpp; unrolling them again costs
/// compile time and speed), then appends its object code to `object`.
LogicalResult emitObjectCode(llvm::Module &module, llvm::TargetMachine &machine,
                             unsigned optLevel, SmallVectorImpl<char> &object,
                             std::string &error);

} // namespace mlir::energy::codegen

#endif // ENERGY_LIB_CODEGEN_OBJECTCODE_H
