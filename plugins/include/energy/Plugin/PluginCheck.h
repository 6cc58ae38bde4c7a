//===- PluginCheck.h - Checking a plugin's entry-point record ---*- C++ -*-===//
//
// What loadPlugin checks of the PluginInfo that a plugin's
// energyGetPluginInfo returns, before it calls anything the record points
// to: the API version, a name and a version that are short printable text,
// and a registration callback. A function of its own so that the fuzzer
// (tools/fuzz/plugin-info-fuzzer.cpp) runs the loader's checks on records
// built from arbitrary bytes.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_PLUGIN_PLUGINCHECK_H
#define ENERGY_PLUGIN_PLUGINCHECK_H

#include "energy/Plugin/Plugin.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstddef>

namespace energy {
namespace plugin {

/// The most bytes of a plugin's name and of its version.
constexpr size_t maxPluginNameBytes = 64;

/// Checks `info`, returned by the plugin at `path`: the API version is
/// ENERGY_PLUGIN_API_VERSION; the name is 1 to maxPluginNameBytes letters,
/// digits, '_', '-' or '.'; the version is null or at most
/// maxPluginNameBytes printable ASCII characters; registerExtensions is
/// set. Reads at most maxPluginNameBytes + 1 bytes of each string. Errors
/// name the file and, once it is known to be valid, the plugin: "plugin
/// p.so ('future') was built for plugin API 999; this is API 1: rebuild it
/// against this version".
llvm::Error checkPluginInfo(const PluginInfo &info, llvm::StringRef path);

} // namespace plugin
} // namespace energy

#endif // ENERGY_PLUGIN_PLUGINCHECK_H
