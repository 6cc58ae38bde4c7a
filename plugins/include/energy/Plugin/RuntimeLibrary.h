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

#include <algorithm>
#include <cstdlib>
#include <dlfcn.h>
#include <string>
#include <vector>

namespace energy {
namespace plugin {

/// The directories of ENERGY_PLUGIN_PATH (colon-separated), where a
/// run-time library is looked for by its file name first.
inline std::vector<std::string> pluginSearchPath() {
  std::vector<std::string> directories;
  const char *searchPath = std::getenv("ENERGY_PLUGIN_PATH");
  std::string list = searchPath ? searchPath : "";
  for (size_t start = 0; start < list.size();) {
    size_t end = std::min(list.find(':', start), list.size());
    if (end > start)
      directories.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  return directories;
}

/// Opens `path` (kept open for the life of the process) and reads its entry
/// point into `info`. Returns the handle, or null with `error` set to a
/// message naming the file: it cannot be loaded, it is no run-time library,
/// or it was built for another run-time interface.
inline void *openRuntimeLibraryFile(const std::string &path,
                                    EnergyPluginRuntimeInfo &info,
                                    std::string &error) {
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *reason = dlerror();
    error = "cannot load run-time library " + path + ": " +
            (reason ? reason : "unknown error");
    return nullptr;
  }
  using InfoFunction = EnergyPluginRuntimeInfo (*)();
  auto entry = reinterpret_cast<InfoFunction>(
      dlsym(handle, "energyGetPluginRuntimeInfo"));
  if (!entry) {
    error = path + " has no entry point energyGetPluginRuntimeInfo (is it a "
                   "plugin's run-time library?)";
    return nullptr;
  }
  info = entry();
  if (info.runtimeVersion != ENERGY_PLUGIN_RUNTIME_VERSION) {
    error = path + " was built for run-time interface " +
            std::to_string(info.runtimeVersion) + "; this is " +
            std::to_string(ENERGY_PLUGIN_RUNTIME_VERSION);
    return nullptr;
  }
  return handle;
}

/// Opens `path` as openRuntimeLibraryFile does and checks that it is the
/// run-time library of plugin `plugin` at `version`. Returns the handle, or
/// null with `error` set to a message naming the plugin and file.
inline void *openRuntimeLibrary(const std::string &path,
                                const std::string &plugin,
                                const std::string &version,
                                std::string &error) {
  std::string wanted = "plugin '" + plugin + "' " + version;
  EnergyPluginRuntimeInfo found{};
  void *handle = openRuntimeLibraryFile(path, found, error);
  if (!handle) {
    error = wanted + ": " + error;
    return nullptr;
  }
  std::string name = found.name ? found.name : "";
  std::string foundVersion = found.version ? found.version : "";
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
