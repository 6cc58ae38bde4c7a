//===- CommandLineValues.h - Values of the runtime tools' options -*- C++
//-*-===//
//
// The numbers and NAME=VALUE settings that energy-exec and energy-train read
// from their command lines, parsed one way for both (no LLVM: the tools link
// only the runtime).
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TOOLS_COMMON_COMMANDLINEVALUES_H
#define ENERGY_TOOLS_COMMON_COMMANDLINEVALUES_H

#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

namespace energy::tools {

/// A whole integer, or nothing.
inline std::optional<int64_t> integerOf(const std::string &text) {
  char *end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end)
    return std::nullopt;
  return value;
}

/// A number, or nothing.
inline std::optional<double> numberOf(const std::string &text) {
  char *end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end)
    return std::nullopt;
  return value;
}

/// Reads `value` (of option --`option`) as NAME=VALUE into `into`, the value
/// parsed by `parse`; an error message, or "".
template <typename T, typename Parse>
std::string readSetting(const std::string &option, const std::string &value,
                        Parse parse, std::map<std::string, T> &into) {
  size_t equals = value.find('=');
  std::optional<T> parsed = equals == std::string::npos
                                ? std::nullopt
                                : parse(value.substr(equals + 1));
  if (!parsed || equals == 0)
    return "--" + option + " " + value + ": expected NAME=VALUE";
  into[value.substr(0, equals)] = *parsed;
  return "";
}

} // namespace energy::tools

#endif // ENERGY_TOOLS_COMMON_COMMANDLINEVALUES_H
