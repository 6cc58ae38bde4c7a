//===- Plugin.h - The entry point of an energy plugin -----------*- C++ -*-===//
//
// A plugin is a shared library that exports `energyGetPluginInfo`, in the
// manner of MLIR's pass and dialect plugins: it returns the plugin API
// version it was built for, its name and version, and a callback that
// registers its extensions (functions, aggregations, optimizers) in the
// registries every layer reads. `loadPlugin` opens one, checks it and registers
// it.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_PLUGIN_PLUGIN_H
#define ENERGY_PLUGIN_PLUGIN_H

#include "energy/Plugin/FunctionTable.h"
#include "energy/Plugin/OptimizerTable.h"

#include <cstdint>
#include <string>

/// The version of this API; a plugin built for another is refused.
#define ENERGY_PLUGIN_API_VERSION 1

namespace energy {
namespace plugin {

/// What a plugin registers into. The compiler's part of a registry (how an
/// optimizer builds its update) is reached through the compiler's header
/// (OptimizerRegistry.h: `optimizerUpdates(Registration &)`).
class Registration {
public:
  explicit Registration(void *compilerRegistries = nullptr)
      : compilerRegistries(compilerRegistries) {}

  /// The optimizers' names, options and defaults.
  OptimizerTable &optimizers() { return getOptimizerTable(); }
  /// Functions and similarities.
  FunctionTable &functions() { return getFunctionTable(); }
  /// Aggregations of energy reductions.
  AggregationTable &aggregations() { return getAggregationTable(); }

  /// Run-time code of the plugin being registered: `symbols` exported by
  /// its run-time library `libraryFile`, a path relative to the plugin's
  /// own directory (or absolute).
  RuntimeCode runtimeCode(llvm::StringRef libraryFile,
                          std::vector<std::string> symbols) const;

  /// Set by the loader while a plugin registers.
  void setCurrentPlugin(std::string path, std::string name,
                        std::string version) {
    pluginPath = std::move(path);
    pluginName = std::move(name);
    pluginVersion = std::move(version);
  }
  /// The compiler's registries, or null where no compiler is loaded.
  void *getCompilerRegistries() { return compilerRegistries; }

private:
  void *compilerRegistries;
  std::string pluginPath, pluginName, pluginVersion;
};

/// What `energyGetPluginInfo` returns.
struct PluginInfo {
  uint32_t apiVersion;
  const char *name;
  const char *version;
  /// Registers the plugin's extensions; an error names what went wrong (a
  /// name already registered).
  llvm::Error (*registerExtensions)(Registration &registration);
};

/// A plugin that was loaded.
struct LoadedPlugin {
  std::string path, name, version;
};

/// Opens the plugin at `path`, checks its entry point and API version and
/// registers its extensions. Errors name the file (and the name, for a
/// name registered twice).
llvm::Expected<LoadedPlugin> loadPlugin(const std::string &path,
                                        Registration &registration);

/// Whether loadPlugin opened a plugin in this process (what compiles then
/// may depend on code outside the compiler).
bool anyPluginLoaded();

} // namespace plugin
} // namespace energy

/// The entry point every plugin defines.
extern "C" ::energy::plugin::PluginInfo energyGetPluginInfo();

#endif // ENERGY_PLUGIN_PLUGIN_H
