//===- JsonValue.cpp - A JSON document as a tree of values ----------------===//
//
// Recursion follows the document's nesting, which json::Reader bounds.
//
//===----------------------------------------------------------------------===//

#include "JsonValue.h"

using namespace energy;
using namespace energy::json;

Expected<Value> Value::parse(std::string_view text) {
  Reader reader(text);
  Value value;
  if (Status status = read(reader, value); !status)
    return status;
  if (Status status = reader.expectEnd(); !status)
    return status;
  return value;
}

Status Value::read(Reader &reader, Value &out) {
  std::optional<Kind> kind = reader.peekKind();
  if (!kind)
    return reader.skipValue(); // Reports what is there instead of a value.
  out.valueKind = *kind;
  switch (*kind) {
  case Kind::Null:
    return reader.readNull();
  case Kind::Bool:
    return reader.readBool(out.boolValue);
  case Kind::Number:
    return reader.readNumber(out.numberValue, out.integerValue);
  case Kind::String:
    return reader.readString(out.stringValue);
  case Kind::Array:
    return reader.readArray([&] {
      out.arrayElements.emplace_back();
      return read(reader, out.arrayElements.back());
    });
  case Kind::Object:
    return reader.readObject([&](std::string key) {
      if (out.find(key)) {
        std::string message = "duplicate key ";
        appendQuoted(message, key);
        return Status::error(message);
      }
      out.objectMembers.emplace_back(std::move(key), Value());
      return read(reader, out.objectMembers.back().second);
    });
  }
  return Status::success();
}

const char *Value::kindName(Kind kind) {
  switch (kind) {
  case Kind::Null:
    return "null";
  case Kind::Bool:
    return "a boolean";
  case Kind::Number:
    return "a number";
  case Kind::String:
    return "a string";
  case Kind::Array:
    return "an array";
  case Kind::Object:
    return "an object";
  }
  return "a value";
}

const Value *Value::find(std::string_view key) const {
  for (const auto &[name, value] : objectMembers)
    if (name == key)
      return &value;
  return nullptr;
}
