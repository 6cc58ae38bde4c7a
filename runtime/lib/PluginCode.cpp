//===- PluginCode.cpp - Binding plugins' run-time code to an artifact -----===//
//
// Opens the run-time library of every plugin an artifact's manifest names
// and stores the addresses of its symbols in the artifact's slots, or
// refuses the artifact with an error that names the missing plugin.
//
//===----------------------------------------------------------------------===//

#include "ModelState.h"

#include "energy/Plugin/RuntimeLibrary.h"
#include "energy/Runtime/ArtifactABI.h"

using namespace energy;

namespace {
/// Where to look for `library`: the directories of ENERGY_PLUGIN_PATH by
/// file name, then the path the compiler recorded.
std::vector<std::string> candidatePaths(const std::string &library) {
  std::vector<std::string> paths;
  std::string fileName = library.substr(library.rfind('/') + 1);
  for (const std::string &directory : ::energy::plugin::pluginSearchPath())
    paths.push_back(directory + "/" + fileName);
  paths.push_back(library);
  return paths;
}
} // namespace

Status detail::bindPluginCode(const Manifest &manifest,
                              const Model::SymbolLookup &lookup,
                              const std::string &label) {
  for (const ManifestPlugin &plugin : manifest.plugins) {
    void *handle = nullptr;
    std::string error;
    for (const std::string &path : candidatePaths(plugin.library)) {
      std::string attempt;
      handle = ::energy::plugin::openRuntimeLibrary(path, plugin.name,
                                                    plugin.version, attempt);
      if (handle)
        break;
      if (error.empty())
        error = attempt;
    }
    if (!handle)
      return Status::error(label + " needs " + error +
                           " (install the plugin, point ENERGY_PLUGIN_PATH at "
                           "its directory, or recompile the model)");
    for (const std::string &symbol : plugin.symbols) {
      void *address = ::energy::plugin::runtimeSymbol(handle, symbol,
                                                      plugin.library, error);
      if (!address)
        return Status::error(label + ": plugin '" + plugin.name +
                             "': " + error);
      // A symbol the kernels never call has no slot.
      if (auto *slot = static_cast<void **>(
              lookup(ENERGY_ARTIFACT_PLUGIN_SLOT_PREFIX + symbol)))
        *slot = address;
    }
  }
  return Status::success();
}
