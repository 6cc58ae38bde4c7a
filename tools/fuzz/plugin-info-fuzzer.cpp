//===- plugin-info-fuzzer.cpp - libFuzzer target of plugin-info checks ----===//
//
// Builds the record a plugin's energyGetPluginInfo returns from each input
// and runs the loader's checks on it (checkPluginInfo). The first byte
// chooses the API version (this one, or the next four bytes) and which of
// the name, the version and the registration callback are null; the rest,
// split at its first NUL, gives the name and the version. Findings are
// crashes, sanitizer reports (a string read past its end), hangs and a
// broken contract: a record accepted with a name that is not a plugin name,
// or an error whose message does not name the file.
//
// Build and run: make fuzz (see docs/tools.md).
//
//===----------------------------------------------------------------------===//

#include "energy/Plugin/PluginCheck.h"

#include "llvm/ADT/StringExtras.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace energy::plugin;

static llvm::Error registerNothing(Registration &) {
  return llvm::Error::success();
}

/// Reports a broken contract and stops, so that libFuzzer keeps the input.
static void fail(const char *what) {
  std::fprintf(stderr, "plugin-info-fuzzer: %s\n", what);
  std::abort();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  uint8_t choices = data[0];
  ++data, --size;
  PluginInfo info;
  info.apiVersion = ENERGY_PLUGIN_API_VERSION;
  if (choices & 1) {
    uint32_t version = 0;
    size_t taken = size < 4 ? size : 4;
    for (size_t i = 0; i < taken; ++i)
      version |= static_cast<uint32_t>(data[i]) << (8 * i);
    info.apiVersion = version;
    data += taken, size -= taken;
  }
  // The strings in buffers of their exact size, so that a read past the
  // NUL is an ASan report.
  const uint8_t *split =
      static_cast<const uint8_t *>(std::memchr(data, 0, size));
  size_t nameLength = split ? static_cast<size_t>(split - data) : size;
  std::vector<char> name(data, data + nameLength);
  name.push_back('\0');
  std::vector<char> version;
  if (split)
    version.assign(split + 1, data + size);
  version.push_back('\0');
  info.name = choices & 2 ? nullptr : name.data();
  info.version = choices & 4 ? nullptr : version.data();
  info.registerExtensions = choices & 8 ? nullptr : registerNothing;

  const char *path = "fuzz/plugin.so";
  llvm::Error error = checkPluginInfo(info, path);
  if (!error) {
    std::string accepted = info.name;
    if (accepted.empty() || accepted.size() > maxPluginNameBytes)
      fail("a record accepted with a name that is not a plugin name");
    for (char c : accepted)
      if (!llvm::isAlnum(c) && c != '_' && c != '-' && c != '.')
        fail("a record accepted with a name that is not a plugin name");
    return 0;
  }
  std::string message = llvm::toString(std::move(error));
  if (message.find(path) == std::string::npos)
    fail("an error that does not name the plugin file");
  return 0;
}
