//===- CompileCache.cpp - Object code kept between compilations -----------===//
//
// The key (a SHA-256 of the compiler's build, the host CPU, the options and
// the printed module), the entries (object code behind a magic number and a
// checksum, written whole or not at all), a lock file per entry so that
// processes compiling the same model at once (the ranks of a sharded run)
// compile it once, and LLVM's cache pruning.
//
//===----------------------------------------------------------------------===//

#include "energy/Codegen/CompileCache.h"
#include "energy/Plugin/Plugin.h"
#include "energy/Transforms/InternalErrors.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CachePruning.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/LockFileManager.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/xxhash.h"
#include "llvm/TargetParser/Host.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

using namespace mlir;
using namespace mlir::energy;

namespace {
/// What an entry starts with (the format's version is its last digit).
constexpr char kEntryMagic[8] = {'E', 'N', 'E', 'R', 'G', 'Y', 'O', '1'};
/// Entries are named with this prefix, the one llvm::pruneCache removes.
constexpr StringLiteral kEntryPrefix = "llvmcache-";
/// How long a process waits for another compiling the same entry.
constexpr std::chrono::seconds kLockWait(600);
} // namespace

std::string mlir::energy::compileCacheDirectory() {
  if (const char *chosen = std::getenv("ENERGY_CACHE_DIR"))
    return chosen;
  SmallString<256> directory;
  if (!llvm::sys::path::cache_directory(directory))
    return "";
  llvm::sys::path::append(directory, "energy");
  return std::string(directory);
}

/// The GNU build id of the loaded object that contains `address`; else its
/// path, size and modification time; empty when neither is known.
static std::string loadedObjectIdentity(const void *address) {
  Dl_info info;
  if (!dladdr(address, &info) || !info.dli_fbase)
    return "";
  struct Search {
    uintptr_t base;
    std::string buildId;
  } search{reinterpret_cast<uintptr_t>(info.dli_fbase), ""};
  dl_iterate_phdr(
      [](dl_phdr_info *object, size_t, void *data) -> int {
        auto *search = static_cast<Search *>(data);
        uintptr_t lowest = UINTPTR_MAX;
        for (int i = 0; i < object->dlpi_phnum; ++i)
          if (object->dlpi_phdr[i].p_type == PT_LOAD)
            lowest = std::min<uintptr_t>(lowest, object->dlpi_phdr[i].p_vaddr);
        if (lowest == UINTPTR_MAX || object->dlpi_addr + lowest != search->base)
          return 0;
        for (int i = 0; i < object->dlpi_phnum; ++i) {
          const ElfW(Phdr) &segment = object->dlpi_phdr[i];
          if (segment.p_type != PT_NOTE)
            continue;
          const char *note = reinterpret_cast<const char *>(object->dlpi_addr +
                                                            segment.p_vaddr);
          const char *end = note + segment.p_memsz;
          while (note + sizeof(ElfW(Nhdr)) <= end) {
            const auto *header = reinterpret_cast<const ElfW(Nhdr) *>(note);
            const char *name = note + sizeof(ElfW(Nhdr));
            const char *description = name + llvm::alignTo(header->n_namesz, 4);
            if (description + header->n_descsz > end)
              break;
            if (header->n_type == NT_GNU_BUILD_ID && header->n_namesz == 4 &&
                std::memcmp(name, "GNU", 4) == 0) {
              search->buildId =
                  llvm::toHex(StringRef(description, header->n_descsz));
              return 1;
            }
            note = description + llvm::alignTo(header->n_descsz, 4);
          }
        }
        return 1;
      },
      &search);
  if (!search.buildId.empty())
    return "build-id " + search.buildId;
  struct stat status;
  if (!info.dli_fname || stat(info.dli_fname, &status) != 0)
    return "";
  return std::string("file ") + info.dli_fname + " " +
         std::to_string(status.st_size) + " " + std::to_string(status.st_mtime);
}

/// The compiler as it runs: the builds of the code of this file, of MLIR and
/// of LLVM; empty when one is unknown (no cache then).
static const std::string &compilerIdentity() {
  static std::string identity = [] {
    std::string text = "LLVM " LLVM_VERSION_STRING;
    const void *objects[] = {
        reinterpret_cast<const void *>(&compileModelInProcess),
        reinterpret_cast<const void *>(
            static_cast<LogicalResult (*)(Operation *, bool)>(&mlir::verify)),
        reinterpret_cast<const void *>(
            static_cast<uint64_t (*)(ArrayRef<uint8_t>)>(&llvm::xxh3_64bits))};
    for (const void *object : objects) {
      std::string id = loadedObjectIdentity(object);
      if (id.empty())
        return std::string();
      text += "; " + id;
    }
    return text;
  }();
  return identity;
}

/// The name of the entry of `energyModule` compiled with `options`.
static std::string entryNameOf(ModuleOp energyModule,
                               const ArtifactOptions &options) {
  llvm::SHA256 hash;
  auto add = [&](StringRef text) {
    uint64_t size = text.size();
    hash.update(ArrayRef(reinterpret_cast<const uint8_t *>(&size), 8));
    hash.update(text);
  };
  auto addNumber = [&](uint64_t number) { add(std::to_string(number)); };
  add(StringRef(kEntryMagic, sizeof(kEntryMagic)));
  add(compilerIdentity());
  add(llvm::sys::getProcessTriple());
  add(llvm::sys::getHostCPUName());
  llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
  SmallVector<std::string> enabled;
  for (const auto &feature : features)
    if (feature.second)
      enabled.push_back(feature.first().str());
  llvm::sort(enabled);
  for (const std::string &feature : enabled)
    add(feature);
  addNumber(options.optLevel);
  add(options.dtype);
  add(options.target.arch);
  add(options.target.cpu);
  for (const std::string &feature : options.target.features)
    add(feature);
  add(options.target.device);
  for (const std::string &arch : options.target.deviceArchs)
    add(arch);
  if (options.target.device == "cuda") {
    const char *toolkit = std::getenv("ENERGY_CUDA_TOOLKIT");
    add(toolkit ? toolkit : "(default toolkit)");
  }
  add(options.sourceName);
  add(options.sourceText);
  addNumber(options.runCaches);
  addNumber(options.changeOfVariables);
  addNumber(options.deviceLoops);
  addNumber(options.callerCotangents);
  addNumber(options.shardedRank.has_value());
  if (const std::optional<ShardedRankOptions> &rank = options.shardedRank) {
    add(rank->rowsDim);
    for (const auto &[tensor, copy] : rank->copies) {
      add(tensor);
      add(copy);
    }
    addNumber(rank->suppliedGradients);
    addNumber(rank->backwardStepAlone);
  }
  std::string printed;
  llvm::raw_string_ostream stream(printed);
  energyModule->print(stream, OpPrintingFlags()
                                  .enableDebugInfo(/*enable=*/true,
                                                   /*prettyForm=*/false)
                                  .printGenericOpForm());
  add(printed);
  return (kEntryPrefix + llvm::toHex(hash.final(), /*LowerCase=*/true)).str();
}

/// The object code of the entry at `path`, if it is whole.
static std::optional<SmallVector<char, 0>> readEntry(StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return std::nullopt;
  StringRef contents = (*buffer)->getBuffer();
  size_t header = sizeof(kEntryMagic) + sizeof(uint64_t);
  if (contents.size() <= header ||
      !contents.starts_with(StringRef(kEntryMagic, sizeof(kEntryMagic))))
    return std::nullopt;
  uint64_t checksum;
  std::memcpy(&checksum, contents.data() + sizeof(kEntryMagic), 8);
  StringRef object = contents.drop_front(header);
  if (llvm::xxh3_64bits(object) != checksum)
    return std::nullopt;
  return SmallVector<char, 0>(object.begin(), object.end());
}

/// Writes the entry at `path` whole (a temporary file renamed), then
/// prunes the cache `directory` to its limits; failures leave no entry.
static void writeEntry(StringRef directory, StringRef path,
                       ArrayRef<char> object) {
  StringRef code(object.data(), object.size());
  uint64_t checksum = llvm::xxh3_64bits(code);
  llvm::Error written = llvm::writeToOutput(path, [&](raw_ostream &out) {
    out.write(kEntryMagic, sizeof(kEntryMagic));
    out.write(reinterpret_cast<const char *>(&checksum), sizeof(checksum));
    out << code;
    return llvm::Error::success();
  });
  if (written) {
    llvm::consumeError(std::move(written));
    return;
  }
  llvm::CachePruningPolicy policy;
  policy.MaxSizeBytes = uint64_t(1) << 30;
  llvm::pruneCache(directory, policy);
}

/// Compiles `energyModule` without the cache: the pipeline (errors on the
/// module), then the JIT (errors in `error`). Sets `quiet` to whether
/// nothing emitted a diagnostic.
static FailureOr<SmallVector<char, 0>>
compileObject(ModuleOp energyModule, const ArtifactOptions &options,
              std::string &error, bool &quiet) {
  quiet = true;
  ScopedDiagnosticHandler watch(energyModule.getContext(), [&](Diagnostic &) {
    quiet = false;
    return failure();
  });
  FailureOr<OwningOpRef<ModuleOp>> lowered =
      compileToArtifactModule(energyModule, options);
  if (failed(lowered))
    return failure();
  FailureOr<SmallVector<char, 0>> object = failure();
  (void)guardCompilation("JIT compilation", energyModule.getLoc(), [&] {
    object = compileToObject(**lowered, error, options.optLevel);
    return success(succeeded(object));
  });
  return object;
}

FailureOr<JitArtifact>
mlir::energy::compileModelInProcess(ModuleOp energyModule,
                                    const ArtifactOptions &options,
                                    std::string &error, CompileCacheUse use) {
  auto load = [&](ArrayRef<char> object) -> FailureOr<JitArtifact> {
    FailureOr<JitArtifact> artifact = failure();
    (void)guardCompilation("JIT compilation", energyModule.getLoc(), [&] {
      artifact = loadObject(object, error);
      return success(succeeded(artifact));
    });
    return artifact;
  };
  std::string directory = use == CompileCacheUse::Use &&
                                  !::energy::plugin::anyPluginLoaded() &&
                                  !compilerIdentity().empty()
                              ? compileCacheDirectory()
                              : std::string();
  bool quiet = true;
  if (directory.empty() || llvm::sys::fs::create_directories(directory)) {
    FailureOr<SmallVector<char, 0>> object =
        compileObject(energyModule, options, error, quiet);
    if (failed(object))
      return failure();
    return load(*object);
  }
  SmallString<256> path(directory);
  llvm::sys::path::append(path, entryNameOf(energyModule, options));
  if (std::optional<SmallVector<char, 0>> kept = readEntry(path))
    return load(*kept);
  // Another process compiling the same entry (a rank of the same run):
  // wait for it, then read what it kept.
  llvm::LockFileManager lock(path);
  llvm::Expected<bool> owned = lock.tryLock();
  if (!owned)
    llvm::consumeError(owned.takeError());
  else if (!*owned) {
    if (lock.waitForUnlockFor(kLockWait) == llvm::WaitForUnlockResult::Success)
      if (std::optional<SmallVector<char, 0>> kept = readEntry(path))
        return load(*kept);
  }
  FailureOr<SmallVector<char, 0>> object =
      compileObject(energyModule, options, error, quiet);
  if (failed(object))
    return failure();
  if (quiet)
    writeEntry(directory, path, *object);
  return load(*object);
}
