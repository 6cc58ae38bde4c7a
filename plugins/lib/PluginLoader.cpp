//===- PluginLoader.cpp - Opening plugins ---------------------------------===//
//
// dlopen through LLVM's DynamicLibrary (the library stays loaded for the
// life of the process), then the checks of the entry point's record
// (PluginCheck.h) before anything it points to is called.
//
//===----------------------------------------------------------------------===//

#include "energy/Plugin/Plugin.h"
#include "energy/Plugin/PluginCheck.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/DynamicLibrary.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>

using namespace energy::plugin;

/// The bytes of `text` before its NUL when there are at most `limit`, read
/// without looking past text[limit]; nothing when there are more.
static std::optional<llvm::StringRef> boundedString(const char *text,
                                                    size_t limit) {
  size_t length = strnlen(text, limit + 1);
  if (length > limit)
    return std::nullopt;
  return llvm::StringRef(text, length);
}

static bool isPluginName(llvm::StringRef name) {
  return !name.empty() && llvm::all_of(name, [](char c) {
    return llvm::isAlnum(c) || c == '_' || c == '-' || c == '.';
  });
}

llvm::Error energy::plugin::checkPluginInfo(const PluginInfo &info,
                                            llvm::StringRef path) {
  std::string plugin = "plugin " + path.str();
  std::optional<llvm::StringRef> name =
      info.name ? boundedString(info.name, maxPluginNameBytes) : std::nullopt;
  bool validName = name && isPluginName(*name);
  if (validName)
    plugin += " ('" + name->str() + "')";
  if (info.apiVersion != ENERGY_PLUGIN_API_VERSION)
    return llvm::createStringError(plugin + " was built for plugin API " +
                                   std::to_string(info.apiVersion) +
                                   "; this is API " +
                                   std::to_string(ENERGY_PLUGIN_API_VERSION) +
                                   ": rebuild it against this version");
  if (!info.name)
    return llvm::createStringError(plugin + " has no name");
  if (!validName) {
    size_t shown = strnlen(info.name, maxPluginNameBytes + 1);
    std::string text;
    llvm::raw_string_ostream os(text);
    llvm::printEscapedString(
        llvm::StringRef(info.name, std::min(shown, maxPluginNameBytes)), os);
    if (shown > maxPluginNameBytes)
      os << "...";
    return llvm::createStringError(plugin + ": its name \"" + text +
                                   "\" is not a plugin name (1 to " +
                                   std::to_string(maxPluginNameBytes) +
                                   " letters, digits, '_', '-' or '.')");
  }
  if (info.version) {
    std::optional<llvm::StringRef> version =
        boundedString(info.version, maxPluginNameBytes);
    if (!version || !llvm::all_of(*version, llvm::isPrint))
      return llvm::createStringError(
          plugin + ": its version is not printable text of at most " +
          std::to_string(maxPluginNameBytes) + " characters");
  }
  if (!info.registerExtensions)
    return llvm::createStringError(plugin + " registers nothing");
  return llvm::Error::success();
}

/// Set once a plugin's library is open.
static std::atomic<bool> pluginLoaded{false};

bool energy::plugin::anyPluginLoaded() { return pluginLoaded.load(); }

llvm::Expected<LoadedPlugin>
energy::plugin::loadPlugin(const std::string &path,
                           Registration &registration) {
  std::string message;
  llvm::sys::DynamicLibrary library =
      llvm::sys::DynamicLibrary::getPermanentLibrary(path.c_str(), &message);
  if (!library.isValid())
    return llvm::createStringError("cannot load plugin " + path + ": " +
                                   message);
  pluginLoaded = true;
  using EntryPoint = PluginInfo (*)();
  auto entry = reinterpret_cast<EntryPoint>(
      library.getAddressOfSymbol("energyGetPluginInfo"));
  if (!entry)
    return llvm::createStringError(
        "plugin " + path +
        " has no entry point energyGetPluginInfo (is it an energy plugin?)");
  PluginInfo info = entry();
  if (llvm::Error error = checkPluginInfo(info, path))
    return std::move(error);
  std::string name = info.name;
  std::string version = info.version ? info.version : "";
  registration.setCurrentPlugin(path, name, version);
  if (llvm::Error error = info.registerExtensions(registration))
    return llvm::createStringError("plugin " + path + " ('" + name +
                                   "'): " + llvm::toString(std::move(error)));
  return LoadedPlugin{path, name, version};
}

RuntimeCode Registration::runtimeCode(llvm::StringRef libraryFile,
                                      std::vector<std::string> symbols) const {
  llvm::SmallString<256> library(libraryFile);
  if (!llvm::sys::path::is_absolute(library)) {
    library = llvm::sys::path::parent_path(pluginPath);
    llvm::sys::path::append(library, libraryFile);
  }
  return RuntimeCode{pluginName, pluginVersion, library.str().str(),
                     std::move(symbols)};
}
