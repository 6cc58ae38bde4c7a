//===- Json.h - The strict JSON of safetensors headers ----------*- C++ -*-===//
//
// Internal to the runtime library, for safetensors headers and artifact
// manifests. A pull reader for JSON text that never reads out of bounds,
// rejects anything RFC 8259 does not allow (including invalid UTF-8 and lone
// surrogates) and limits nesting, so that any header bytes give either
// values or an error; and the quoting of strings for the writer. The reader
// builds no tree: the caller asks for the value it expects (an object, an
// array, a string, a number) or skips it (JsonValue.h builds a tree on it).
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_RUNTIME_LIB_JSON_H
#define ENERGY_RUNTIME_LIB_JSON_H

#include "energy/Runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace energy::json {

/// Whether `text` is well-formed UTF-8 (no overlong forms, no surrogates,
/// nothing above U+10FFFF).
bool isValidUtf8(std::string_view text);

/// Appends `text` (valid UTF-8) to `out` as a JSON string literal, quotes
/// included; `"`, `\` and control characters are escaped.
void appendQuoted(std::string &out, std::string_view text);

/// Reads JSON values from a text, one at a time. Errors name the byte
/// offset in the text ("at byte 17: expected ':'").
class Reader {
public:
  /// Nesting deeper than this is an error.
  static constexpr int maxDepth = 64;

  explicit Reader(std::string_view text) : text(text) {}

  /// The kinds of JSON values.
  enum class ValueKind { Object, Array, String, Number, Bool, Null };
  /// The kind of the next value, judged by its first character (after
  /// whitespace) without reading it; nothing at the end of the text or
  /// before a character that starts no value.
  std::optional<ValueKind> peekKind();

  /// Reads an object, calling `readMember(key)` after each key and its
  /// colon; `readMember` must read (or skip) the member's value.
  Status readObject(const std::function<Status(std::string key)> &readMember);
  /// Reads an array, calling `readElement()` to read (or skip) each element.
  Status readArray(const std::function<Status()> &readElement);
  /// Reads a string, escapes decoded, into `out`.
  Status readString(std::string &out);
  /// Reads an integer (no fraction or exponent) that fits in int64_t.
  Status readInteger(int64_t &out);
  /// Reads a number of any form into `value` (the nearest double); when it
  /// is written as an integer (no fraction or exponent) that fits in
  /// int64_t, also into `integer`, else `integer` is reset.
  Status readNumber(double &value, std::optional<int64_t> &integer);
  /// Reads `true` or `false`.
  Status readBool(bool &out);
  /// Reads `null`.
  Status readNull();
  /// Skips one value of any kind.
  Status skipValue();
  /// Succeeds if only whitespace is left.
  Status expectEnd();

private:
  void skipWhitespace();
  /// Whether the next character (after whitespace) is `c`; consumes it if so.
  bool consume(char c);
  Status errorHere(const std::string &message) const;
  /// Reads the four hex digits of a \u escape.
  Status readHexQuad(uint32_t &codePoint);
  /// Skips a number of any form (sign, fraction, exponent).
  Status skipNumber();
  /// Reads a literal (true, false, null).
  Status skipLiteral(std::string_view literal);
  /// Depth accounting for objects and arrays.
  Status enterNesting();

  std::string_view text;
  size_t position = 0;
  int depth = 0;
};

} // namespace energy::json

#endif // ENERGY_RUNTIME_LIB_JSON_H
