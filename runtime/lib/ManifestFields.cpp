//===- ManifestFields.cpp - Reading a manifest's JSON fields --------------===//
//
// The checked reads of manifest fields that Manifest.cpp and
// ManifestIndexChecks.cpp share: presence, JSON kind, integers, strings and
// dim expressions, with errors that name the field.
//
//===----------------------------------------------------------------------===//

#include "ManifestFields.h"

#include <cstdio>

using namespace energy;
using json::Value;
using Kind = json::Value::Kind;

namespace energy::manifest {

/// `where` followed by `key`: "buffer 'x': shape".
std::string path(const std::string &where, std::string_view key) {
  return where.empty() ? std::string(key) : where + ": " + std::string(key);
}

Status wrongKind(const std::string &where, const char *expected,
                 const Value &found) {
  return Status::error(where + ": expected " + expected + ", found " +
                       Value::kindName(found.kind()));
}

/// The member `key` of `object` (described by `where`), which must have
/// kind `kind`; null when it is null and `nullable`, or missing and
/// `optional`.
Expected<const Value *> field(const Value &object, const std::string &where,
                              std::string_view key, Kind kind, bool nullable,
                              bool optional) {
  const Value *member = object.find(key);
  if (!member) {
    if (optional)
      return static_cast<const Value *>(nullptr);
    return Status::error(
        path(where, "missing field \"" + std::string(key) + "\""));
  }
  if (member->is(Kind::Null) && nullable)
    return static_cast<const Value *>(nullptr);
  if (!member->is(kind))
    return wrongKind(path(where, key), Value::kindName(kind), *member);
  return member;
}

/// A string member.
Status readString(const Value &object, const std::string &where,
                  std::string_view key, std::string &out, bool optional) {
  Expected<const Value *> member =
      field(object, where, key, Kind::String, false, optional);
  if (!member)
    return member.status();
  if (*member)
    out = (*member)->string();
  return Status::success();
}

/// A string-or-null member.
Status readOptionalString(const Value &object, const std::string &where,
                          std::string_view key,
                          std::optional<std::string> &out) {
  Expected<const Value *> member =
      field(object, where, key, Kind::String, true, true);
  if (!member)
    return member.status();
  if (*member)
    out = (*member)->string();
  return Status::success();
}

/// An integer value.
Expected<int64_t> readInteger(const Value &value, const std::string &where) {
  if (!value.is(Kind::Number))
    return wrongKind(where, "an integer", value);
  if (!value.integer()) {
    char number[32];
    std::snprintf(number, sizeof number, "%.17g", value.number());
    return Status::error(where + ": expected an integer, found " + number);
  }
  return *value.integer();
}

/// `object[key]`, an array of strings (`what` names them in errors),
/// appended to `out`.
Status readStrings(const Value &object, const std::string &where,
                   const char *key, const char *what,
                   std::vector<std::string> &out) {
  Expected<const Value *> list = field(object, where, key, Kind::Array);
  if (!list)
    return list.status();
  for (const Value &element : (*list)->elements()) {
    if (!element.is(Kind::String))
      return wrongKind(where + ": " + key, what, element);
    out.push_back(element.string());
  }
  return Status::success();
}

/// A dim expression: a non-empty, well-formed array of dim names,
/// operators and integer literals.
Expected<DimExpr> readDimExpr(const Value &value, const std::string &where) {
  if (!value.is(Kind::Array))
    return wrongKind(where, "an array (a dim expression)", value);
  std::vector<DimExpr::Token> tokens;
  for (const Value &element : value.elements()) {
    DimExpr::Token token;
    if (element.is(Kind::String)) {
      if (std::optional<DimExpr::Op> op =
              DimExpr::opFromName(element.string())) {
        token.kind = DimExpr::Token::Kind::Operator;
        token.op = *op;
      } else {
        token.kind = DimExpr::Token::Kind::Dim;
        token.dim = element.string();
      }
    } else {
      Expected<int64_t> literal = readInteger(element, where + ": an element");
      if (!literal)
        return literal.status();
      token.literal = *literal;
    }
    tokens.push_back(std::move(token));
  }
  if (!DimExpr::wellFormed(tokens))
    return Status::error(
        where + ": not a well-formed expression in reverse Polish notation");
  return DimExpr(std::move(tokens));
}

} // namespace energy::manifest
