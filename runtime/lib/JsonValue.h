//===- JsonValue.h - A JSON document as a tree of values --------*- C++ -*-===//
//
// Internal to the runtime library. The whole of a small JSON document (an
// artifact's manifest) as a tree, read with the strict json::Reader, so that
// the code that checks the document can look members up by name and say
// which one is missing or of the wrong kind.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_RUNTIME_LIB_JSONVALUE_H
#define ENERGY_RUNTIME_LIB_JSONVALUE_H

#include "Json.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace energy::json {

/// One JSON value and, for arrays and objects, everything inside it.
class Value {
public:
  using Kind = Reader::ValueKind;

  /// The document `text` (one value and nothing but whitespace after it);
  /// an object with a repeated key is an error.
  static Expected<Value> parse(std::string_view text);

  Kind kind() const { return valueKind; }
  bool is(Kind kind) const { return valueKind == kind; }
  /// "an object", "a string", ...: for messages.
  static const char *kindName(Kind kind);

  bool boolean() const { return boolValue; }
  /// A number's value (the nearest double).
  double number() const { return numberValue; }
  /// A number written as an integer that fits in int64_t; nothing otherwise.
  std::optional<int64_t> integer() const { return integerValue; }
  const std::string &string() const { return stringValue; }
  const std::vector<Value> &elements() const { return arrayElements; }
  const std::vector<std::pair<std::string, Value>> &members() const {
    return objectMembers;
  }
  /// The member `key` of an object; null when there is none.
  const Value *find(std::string_view key) const;

private:
  static Status read(Reader &reader, Value &out);

  Kind valueKind = Kind::Null;
  bool boolValue = false;
  double numberValue = 0;
  std::optional<int64_t> integerValue;
  std::string stringValue;
  std::vector<Value> arrayElements;
  std::vector<std::pair<std::string, Value>> objectMembers;
};

} // namespace energy::json

#endif // ENERGY_RUNTIME_LIB_JSONVALUE_H
