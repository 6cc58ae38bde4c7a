//===- SharedLibrary.cpp - Writes an artifact as a shared library ---------===//
//
// The LLVM IR, in parts compiled on threads at the same time to object code
// for the chosen CPU (ObjectCode.h), linked by the system's clang (with lld
// when it is installed beside clang) as a shared library with the kernel
// support functions into a temporary file that is renamed to the
// destination only when everything succeeded.
// The CPUs an artifact can be compiled for, and the features each one lets
// the code use (what its manifest records for the runtime to check), are
// here too.
//
//===----------------------------------------------------------------------===//

#include "energy/Codegen/Artifact.h"
#include "energy/Runtime/ArtifactABI.h"

#include "ObjectCode.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/MemoryBufferRef.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"
#include "llvm/TargetParser/X86TargetParser.h"
#include "llvm/Transforms/Utils/SplitModule.h"

#include <algorithm>
#include <thread>

using namespace mlir;
using namespace mlir::energy;

/// At most this many threads compile an artifact's parts at once.
static constexpr unsigned kMaxParallelParts = 4;

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

/// The kernel support library artifacts link with: installed beside the
/// compiler (PREFIX/lib next to PREFIX/bin), else the one this build made.
static const std::string &kernelSupportLibrary() {
  static const std::string path = [] {
    static int anchor;
    std::string executable =
        llvm::sys::fs::getMainExecutable("energyc", &anchor);
    llvm::SmallString<256> installed(
        llvm::sys::path::parent_path(llvm::sys::path::parent_path(executable)));
    llvm::sys::path::append(
        installed, "lib",
        llvm::sys::path::filename(ENERGY_KERNEL_SUPPORT_LIBRARY));
    if (!executable.empty() && llvm::sys::fs::exists(installed) &&
        !llvm::sys::fs::equivalent(installed, ENERGY_KERNEL_SUPPORT_LIBRARY))
      return installed.str().str();
    return std::string(ENERGY_KERNEL_SUPPORT_LIBRARY);
  }();
  return path;
}

/// Whether LLVM's linker is installed beside clang: it links an artifact in
/// about two thirds of the system linker's time.
static bool lldBesideClang() {
  static const bool found = [] {
    llvm::SmallString<256> lld(llvm::sys::path::parent_path(ENERGY_CLANG_PATH));
    llvm::sys::path::append(lld, "ld.lld");
    return llvm::sys::fs::can_execute(lld);
  }();
  return found;
}

LogicalResult mlir::energy::writeSharedLibrary(ModuleOp module,
                                               const ArtifactTarget &target,
                                               StringRef path,
                                               std::string &error,
                                               unsigned optLevel) {
  // A destination that is not a regular file (/dev/null, a pipe) is written
  // into: renaming the linked library over it would replace it.
  llvm::sys::fs::file_status destination;
  bool exists = !llvm::sys::fs::status(path, destination) &&
                llvm::sys::fs::exists(destination);
  if (exists && llvm::sys::fs::is_directory(destination)) {
    error = ("cannot write " + path + ": it is a directory").str();
    return failure();
  }
  bool intoSpecialFile = exists && !llvm::sys::fs::is_regular_file(destination);
  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> llvmModule = translateArtifact(module, context);
  if (!llvmModule) {
    error = "translating the kernels to LLVM IR failed";
    return failure();
  }
  if (!llvm::is_contained(artifactCpuNames(), target.cpu)) {
    error = "cannot compile for CPU '" + target.cpu + "'; expected one of " +
            llvm::join(artifactCpuNames(), ", ");
    return failure();
  }

  // The module in parts (its functions spread over them), compiled at the
  // same time, then linked.
  unsigned partCount =
      std::clamp(std::thread::hardware_concurrency(), 1u, kMaxParallelParts);
  // Splitting gives the private symbols that parts share external names;
  // they stay hidden, so the library exports what it exported before.
  llvm::StringSet<> privateSymbols;
  for (llvm::GlobalValue &symbol : llvmModule->global_values())
    if (symbol.hasLocalLinkage())
      privateSymbols.insert(symbol.getName());
  SmallVector<std::unique_ptr<llvm::Module>> parts;
  llvm::SplitModule(
      *llvmModule, partCount, [&](std::unique_ptr<llvm::Module> part) {
        for (llvm::GlobalValue &symbol : part->global_values())
          if (!symbol.hasLocalLinkage() &&
              privateSymbols.contains(symbol.getName()))
            symbol.setVisibility(llvm::GlobalValue::HiddenVisibility);
        parts.push_back(std::move(part));
      });
  auto fail = [&](const Twine &message) {
    error = message.str();
    return failure();
  };
  // Each part in its own context (a context is one thread's), compiled on
  // its own thread into its own object file.
  SmallVector<SmallVector<char, 0>> bitcodes(parts.size());
  for (auto [part, bitcode] : llvm::zip(parts, bitcodes)) {
    llvm::raw_svector_ostream out(bitcode);
    llvm::WriteBitcodeToFile(*part, out);
  }
  parts.clear();
  unsigned level = std::min(optLevel, 3u);
  SmallVector<std::string> objectPaths, partErrors(bitcodes.size());
  std::vector<llvm::FileRemover> removers;
  removers.reserve(bitcodes.size());
  for (size_t index = 0; index < bitcodes.size(); ++index) {
    llvm::SmallString<128> object;
    if (std::error_code code =
            llvm::sys::fs::createTemporaryFile("energy-artifact", "o", object))
      return fail("cannot create a temporary file: " + code.message());
    removers.emplace_back(object);
    objectPaths.push_back(object.str().str());
  }
  auto compilePart = [&](size_t index) {
    std::string &partError = partErrors[index];
    llvm::LLVMContext partContext;
    auto part = llvm::parseBitcodeFile(
        llvm::MemoryBufferRef(
            StringRef(bitcodes[index].data(), bitcodes[index].size()),
            "energy-artifact"),
        partContext);
    if (!part) {
      partError = llvm::toString(part.takeError());
      return;
    }
    FailureOr<std::unique_ptr<llvm::TargetMachine>> machine =
        codegen::createKernelTargetMachine(target.cpu, level,
                                           /*positionIndependent=*/true,
                                           partError);
    SmallVector<char, 0> object;
    if (failed(machine) || failed(codegen::emitObjectCode(
                               **part, **machine, level, object, partError)))
      return;
    std::error_code code;
    llvm::raw_fd_ostream out(objectPaths[index], code);
    if (code) {
      partError = "cannot write " + objectPaths[index] + ": " + code.message();
      return;
    }
    out << StringRef(object.data(), object.size());
  };
  std::vector<std::thread> compilers;
  for (size_t index = 1; index < bitcodes.size(); ++index)
    compilers.emplace_back(compilePart, index);
  compilePart(0);
  for (std::thread &compiler : compilers)
    compiler.join();
  for (const std::string &partError : partErrors)
    if (!partError.empty())
      return fail("compiling the kernels for " + target.cpu +
                  " failed: " + partError);

  std::string message;
  std::string temporary = (path + ".tmp").str();
  if (intoSpecialFile) {
    llvm::SmallString<128> created;
    if (std::error_code code = llvm::sys::fs::createTemporaryFile(
            "energy-artifact", "so", created))
      return fail("cannot create a temporary file: " + code.message());
    temporary = created.str().str();
  }
  llvm::FileRemover removeTemporary(temporary);
  const std::string &supportLibrary = kernelSupportLibrary();
  SmallVector<StringRef> arguments = {ENERGY_CLANG_PATH, "-shared", "-o",
                                      temporary};
  if (lldBesideClang())
    arguments.push_back("-fuse-ld=lld");
  for (const std::string &object : objectPaths)
    arguments.push_back(object);
  arguments.append({supportLibrary, "-lstdc++", "-lm", "-lpthread"});
  int status = llvm::sys::ExecuteAndWait(ENERGY_CLANG_PATH, arguments,
                                         std::nullopt, {}, 0, 0, &message);
  if (status != 0)
    return fail("linking the kernels with " + Twine(ENERGY_CLANG_PATH) +
                " failed" + (message.empty() ? "" : ": " + message));
  if (intoSpecialFile) {
    auto linked = llvm::MemoryBuffer::getFile(temporary);
    if (!linked)
      return fail("cannot read " + temporary + ": " +
                  linked.getError().message());
    std::error_code code;
    llvm::raw_fd_ostream out(path, code);
    if (!code) {
      out << (*linked)->getBuffer();
      out.close();
      code = out.error();
    }
    if (code)
      return fail("cannot write " + path + ": " + code.message());
    return success();
  }
  if (std::error_code code = llvm::sys::fs::rename(temporary, path))
    return fail("cannot write " + path + ": " + code.message());
  return success();
}
