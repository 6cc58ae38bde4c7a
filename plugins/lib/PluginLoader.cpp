//===- PluginLoader.cpp - Opening plugins ---------------------------------===//
//
// dlopen through LLVM's DynamicLibrary (the library stays loaded for the
// life of the process), then the checks of Plugin.h.
//
//===----------------------------------------------------------------------===//

#include "energy/Plugin/Plugin.h"

#include "llvm/Support/DynamicLibrary.h"

using namespace energy::plugin;

llvm::Expected<LoadedPlugin>
energy::plugin::loadPlugin(const std::string &path,
                           Registration &registration) {
  std::string message;
  llvm::sys::DynamicLibrary library =
      llvm::sys::DynamicLibrary::getPermanentLibrary(path.c_str(), &message);
  if (!library.isValid())
    return llvm::createStringError("cannot load plugin " + path + ": " +
                                   message);
  using EntryPoint = PluginInfo (*)();
  auto entry = reinterpret_cast<EntryPoint>(
      library.getAddressOfSymbol("energyGetPluginInfo"));
  if (!entry)
    return llvm::createStringError(
        "plugin " + path +
        " has no entry point energyGetPluginInfo (is it an energy plugin?)");
  PluginInfo info = entry();
  std::string name = info.name ? info.name : "";
  if (info.apiVersion != ENERGY_PLUGIN_API_VERSION)
    return llvm::createStringError(
        "plugin " + path + " ('" + name + "') was built for plugin API " +
        std::to_string(info.apiVersion) + "; this is API " +
        std::to_string(ENERGY_PLUGIN_API_VERSION) +
        ": rebuild it against this version");
  if (!info.registerExtensions)
    return llvm::createStringError("plugin " + path + " ('" + name +
                                   "') registers nothing");
  if (llvm::Error error = info.registerExtensions(registration))
    return llvm::createStringError("plugin " + path + " ('" + name +
                                   "'): " + llvm::toString(std::move(error)));
  return LoadedPlugin{path, name, info.version ? info.version : ""};
}
