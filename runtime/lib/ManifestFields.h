//===- ManifestFields.h - Reading a manifest's JSON fields ------*- C++ -*-===//
//
// Private to runtime/lib: checked reads of the members of a manifest's JSON
// objects, whose errors name the field ("buffer 'x': shape: expected an
// array, found a string").
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_RUNTIME_LIB_MANIFESTFIELDS_H
#define ENERGY_RUNTIME_LIB_MANIFESTFIELDS_H

#include "JsonValue.h"

#include "energy/Runtime/Manifest.h"
#include "energy/Runtime/Status.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace energy::manifest {

/// `where` followed by `key`: "buffer 'x': shape".
std::string path(const std::string &where, std::string_view key);

/// The error that `found` at `where` is not `expected`.
Status wrongKind(const std::string &where, const char *expected,
                 const json::Value &found);

/// The member `key` of `object` (described by `where`), which must have
/// kind `kind`; null when it is null and `nullable`, or missing and
/// `optional`.
Expected<const json::Value *>
field(const json::Value &object, const std::string &where, std::string_view key,
      json::Value::Kind kind, bool nullable = false, bool optional = false);

/// A string member.
Status readString(const json::Value &object, const std::string &where,
                  std::string_view key, std::string &out,
                  bool optional = false);

/// A string-or-null member.
Status readOptionalString(const json::Value &object, const std::string &where,
                          std::string_view key,
                          std::optional<std::string> &out);

/// An integer value.
Expected<int64_t> readInteger(const json::Value &value,
                              const std::string &where);

/// `object[key]`, an array of strings (`what` names them in errors),
/// appended to `out`.
Status readStrings(const json::Value &object, const std::string &where,
                   const char *key, const char *what,
                   std::vector<std::string> &out);

/// A dim expression: a non-empty, well-formed array of dim names,
/// operators and integer literals.
Expected<DimExpr> readDimExpr(const json::Value &value,
                              const std::string &where);

/// The manifest's `index_checks` (optional) into `manifest`
/// (ManifestIndexChecks.cpp).
Status readIndexChecks(const json::Value &root, Manifest &manifest);

} // namespace energy::manifest

#endif // ENERGY_RUNTIME_LIB_MANIFESTFIELDS_H
