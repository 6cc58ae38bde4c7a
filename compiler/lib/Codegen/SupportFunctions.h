//===- SupportFunctions.h - The support library as kernels see it -*- C++
//-*-===//
//
// One table of the kernel support library's functions that generated code
// calls: their names, C signatures and addresses. Kernel emission declares
// them from it, and the JIT resolves them from it, so the two cannot drift.
// Private to compiler/lib/Codegen.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_LIB_CODEGEN_SUPPORTFUNCTIONS_H
#define ENERGY_LIB_CODEGEN_SUPPORTFUNCTIONS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <vector>

namespace mlir::energy::codegen {

/// The C types support functions take and return.
enum class SupportType { I32, I64, F64, Pointer, ChunkFunction };

struct SupportFunction {
  llvm::StringRef name;
  std::vector<SupportType> arguments;
  /// Empty for void.
  std::vector<SupportType> results;
  void *address;
};

/// Every support function kernels may call.
llvm::ArrayRef<SupportFunction> supportFunctions();

} // namespace mlir::energy::codegen

#endif // ENERGY_LIB_CODEGEN_SUPPORTFUNCTIONS_H
