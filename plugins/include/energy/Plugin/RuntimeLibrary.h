//===- RuntimeLibrary.h - Opening a plugin's run-time library ---*- C++ -*-===//
//
// dlopen of a run-time library (RuntimeCode.h) and the check that it is the
// one an artifact or a registration names. Header-only and free of LLVM, so
// that the runtime and the plugin loader share it.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_PLUGIN_RUNTIMELIBRARY_H
#define ENERGY_PLUGIN_RUNTIMELIBRARY_H

#include "energy/Plugin/RuntimeCode.h"

#include <dlfcn.h>
#include <string>

namespace energy {
namespace plugin {

/// Opens `path` (kept open for the life of the process) and checks that it
/// is the run-time library of plugin `plugin` at `version`. Returns the
/// handle, or null with `error` set to a message naming the plugin and file.
inline void *openRuntimeLibrary(const std::string &path,
                                const std::string &plugin,
                                const std::string &version,
                                std::string &error) {
  std::string wanted = "plugin '" + plugin + "' " + version;
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *reason = dlerror();
    error = wanted + ": cannot load its run-time library " + path + ": " +
            (reason ? reason : "unknown error");
    return nullptr;
  }
  using InfoFunction = EnergyPluginRuntimeInfo (*)();
  auto info = reinterpret_cast<InfoFunction>(
      dlsym(handle, "energyGetPluginRuntimeInfo"));
  if (!info) {
    error = wanted + ": " + path +
            " has no entry point energyGetPluginRuntimeInfo (is it the "
            "plugin's run-time library?)";
    return nullptr;
  }
  EnergyPluginRuntimeInfo found = info();
  std::string name = found.name ? found.name : "";
  std::string foundVersion = found.version ? found.version : "";
  if (found.runtimeVersion != ENERGY_PLUGIN_RUNTIME_VERSION) {
    error = wanted + ": " + path + " was built for run-time interface " +
            std::to_string(found.runtimeVersion) + "; this is " +
            std::to_string(ENERGY_PLUGIN_RUNTIME_VERSION);
    return nullptr;
  }
  if (name != plugin || foundVersion != version) {
    error = wanted + ": " + path + " is the run-time library of plugin '" +
            name + "' " + foundVersion;
    return nullptr;
  }
  return handle;
}

/// The address of `symbol` in an opened run-time library, or null with
/// `error` naming it.
inline void *runtimeSymbol(void *handle, const std::string &symbol,
                           const std::string &library, std::string &error) {
  void *address = dlsym(handle, symbol.c_str());
  if (!address)
    error = "run-time library " + library + " does not export " + symbol;
  return address;
}

} // namespace plugin
} // namespace energy

#endif // ENERGY_PLUGIN_RUNTIMELIBRARY_H
