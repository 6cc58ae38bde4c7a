//===- CompileCache.h - Object code kept between compilations ---*- C++ -*-===//
//
// In-process compilation of a model through a cache of native object code,
// keyed by everything the code depends on, so that the same model compiled
// again by the same compiler on the same CPU skips the pass pipelines.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_CODEGEN_COMPILECACHE_H
#define ENERGY_CODEGEN_COMPILECACHE_H

#include "energy/Codegen/Artifact.h"

namespace mlir::energy {

/// Where compileModelInProcess keeps object code: ENERGY_CACHE_DIR where it
/// is set (set and empty: no cache), else `energy` in the user's cache
/// directory ($XDG_CACHE_HOME, else ~/.cache); empty when there is none.
std::string compileCacheDirectory();

/// Whether compileModelInProcess may read and write the cache.
enum class CompileCacheUse { Use, Bypass };

/// Compiles the one model of `energyModule` in process for `options`
/// (compileToArtifactModule, then compileInProcess at options.optLevel).
/// With `use` and a cache directory, an earlier compilation of the same
/// module (as printed, with locations) with the same options, by the same
/// build of the compiler and LLVM for the same host CPU, is loaded instead;
/// and what is compiled is kept there unless it emitted a diagnostic. No
/// cache once a plugin was loaded into the process. Errors of the pipeline
/// are emitted on the module (with `error` empty), those of the JIT in
/// `error`.
FailureOr<JitArtifact>
compileModelInProcess(ModuleOp energyModule, const ArtifactOptions &options,
                      std::string &error,
                      CompileCacheUse use = CompileCacheUse::Use);

} // namespace mlir::energy

#endif // ENERGY_CODEGEN_COMPILECACHE_H
