//===- SharedLibrary.cpp - Writes an artifact as a shared library ---------===//
//
// The LLVM IR goes to the system's clang (-O3 for the chosen CPU, as a PIC
// shared library linked with the kernel support functions), into a temporary
// file that is renamed to the destination only when everything succeeded.
// The CPUs an artifact can be compiled for, and the features each one lets
// the code use (what its manifest records for the runtime to check), are
// here too.
//
//===----------------------------------------------------------------------===//

#include "energy/Codegen/Artifact.h"
#include "energy/Runtime/ArtifactABI.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"
#include "llvm/TargetParser/X86TargetParser.h"

using namespace mlir;
using namespace mlir::energy;

//===----------------------------------------------------------------------===//
// Targets
//===----------------------------------------------------------------------===//

ArrayRef<StringRef> mlir::energy::artifactCpuNames() {
  static const StringRef names[] = {"native", "x86-64-v2", "x86-64-v3",
                                    "x86-64-v4"};
  return names;
}

/// The enabled features of `features` that the runtime can check, in the
/// order of ArtifactABI.h's table.
static std::vector<std::string>
checkableFeatures(const llvm::StringMap<bool> &features) {
  std::vector<std::string> result;
#define ENERGY_ADD_FEATURE(llvmName, checkName)                                \
  if (features.lookup(llvmName))                                               \
    result.push_back(llvmName);
  ENERGY_X86_CPU_FEATURES(ENERGY_ADD_FEATURE)
#undef ENERGY_ADD_FEATURE
  return result;
}

/// "x86_64" for the process's architecture.
static std::string hostArch() {
  return llvm::Triple(llvm::sys::getProcessTriple()).getArchName().str();
}

ArtifactTarget mlir::energy::hostArtifactTarget() {
  ArtifactTarget target;
  target.arch = hostArch();
  target.cpu = "native";
  target.features = checkableFeatures(llvm::sys::getHostCPUFeatures());
  return target;
}

FailureOr<ArtifactTarget>
mlir::energy::resolveArtifactTarget(StringRef cpu, std::string &error) {
  if (!llvm::is_contained(artifactCpuNames(), cpu)) {
    error = "--cpu=" + cpu.str() + ": unknown CPU; expected one of " +
            llvm::join(artifactCpuNames(), ", ");
    return failure();
  }
  if (cpu == "native")
    return hostArtifactTarget();
  ArtifactTarget target;
  target.arch = hostArch();
  target.cpu = cpu.str();
  if (target.arch != "x86_64") {
    error = "--cpu=" + cpu.str() + ": an x86-64 level needs an x86_64 host; " +
            "this one is " + target.arch + " (use --cpu=native)";
    return failure();
  }
  // The level's own features and every feature they imply (avx2 implies
  // avx, sse4.2 implies sse4.1, ...).
  llvm::SmallVector<StringRef> levelFeatures;
  llvm::X86::getFeaturesForCPU(cpu, levelFeatures, /*NeedPlus=*/false);
  llvm::StringMap<bool> features;
  for (StringRef feature : levelFeatures) {
    features[feature] = true;
    llvm::X86::updateImpliedFeatures(feature, /*Enabled=*/true, features);
  }
  target.features = checkableFeatures(features);
  return target;
}

//===----------------------------------------------------------------------===//
// The shared library
//===----------------------------------------------------------------------===//

LogicalResult mlir::energy::writeSharedLibrary(ModuleOp module,
                                               const ArtifactTarget &target,
                                               StringRef path,
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
  if (!llvm::is_contained(artifactCpuNames(), target.cpu)) {
    error = "cannot compile for CPU '" + target.cpu + "'; expected one of " +
            llvm::join(artifactCpuNames(), ", ");
    return failure();
  }
  std::string march = "-march=" + target.cpu;
  // Kernels write their inner loops as vectors already (VectorLoops.cpp);
  // unrolling them again more than doubled the time clang took and made
  // the EM step slower.
  llvm::SmallVector<llvm::StringRef> arguments = {ENERGY_CLANG_PATH,
                                                  "-O3",
                                                  "-fno-unroll-loops",
                                                  march,
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
