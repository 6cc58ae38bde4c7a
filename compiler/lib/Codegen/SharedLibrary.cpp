//===- SharedLibrary.cpp - Writes an artifact as a shared library ---------===//
//
// The LLVM IR goes to the system's clang (-O3 for the host CPU, as a PIC
// shared library linked with the kernel support functions), into a temporary
// file that is renamed to the destination only when everything succeeded.
//
//===----------------------------------------------------------------------===//

#include "energy/Codegen/Artifact.h"

#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::energy;

LogicalResult mlir::energy::writeSharedLibrary(ModuleOp module, StringRef path,
                                               std::string &error) {
  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> llvmModule = translateArtifact(module, context);
  if (!llvmModule) {
    error = "translating the kernels to LLVM IR failed";
    return failure();
  }
  llvm::SmallString<128> irPath;
  if (std::error_code code =
          llvm::sys::fs::createTemporaryFile("energy-artifact", "ll", irPath)) {
    error = "cannot create a temporary file: " + code.message();
    return failure();
  }
  llvm::FileRemover removeIr(irPath);
  {
    std::error_code code;
    llvm::raw_fd_ostream out(irPath, code);
    if (code) {
      error = "cannot write " + irPath.str().str() + ": " + code.message();
      return failure();
    }
    llvmModule->print(out, nullptr);
  }
  std::string temporary = (path + ".tmp").str();
  llvm::FileRemover removeTemporary(temporary);
  llvm::SmallVector<llvm::StringRef> arguments = {ENERGY_CLANG_PATH,
                                                  "-O3",
                                                  "-march=native",
                                                  "-fPIC",
                                                  "-shared",
                                                  "-Wno-override-module",
                                                  "-o",
                                                  temporary,
                                                  irPath,
                                                  ENERGY_KERNEL_SUPPORT_LIBRARY,
                                                  "-lstdc++",
                                                  "-lm",
                                                  "-lpthread"};
  std::string message;
  int status = llvm::sys::ExecuteAndWait(ENERGY_CLANG_PATH, arguments,
                                         std::nullopt, {}, 0, 0, &message);
  if (status != 0) {
    error = "compiling the kernels with " + std::string(ENERGY_CLANG_PATH) +
            " failed" + (message.empty() ? "" : ": " + message);
    return failure();
  }
  if (std::error_code code = llvm::sys::fs::rename(temporary, path)) {
    error = "cannot write " + path.str() + ": " + code.message();
    return failure();
  }
  return success();
}
