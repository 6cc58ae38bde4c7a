//===- Builtins.h - Builtin functions and their shape rules -----*- C++ -*-===//
//
// The functions of the .energy language (`dot`, `softmax`, `exp`, ... and
// plugins'), from the plugin API's function table: each has an arity and a
// shape rule. The checker computes a
// call's result shape from its argument shapes with `inferBuiltinShape`;
// emission can switch on `BuiltinFunction::id`.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_FRONTEND_BUILTINS_H
#define ENERGY_FRONTEND_BUILTINS_H

#include "energy/Frontend/Shape.h"
#include "energy/Plugin/FunctionTable.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace energy {
namespace frontend {

using plugin::BuiltinId;
using plugin::FunctionKind;
using plugin::ShapeRule;
/// A function a spec may call: a built-in or a plugin's (FunctionTable.h).
using BuiltinFunction = plugin::FunctionInfo;

/// The function named `name` in the function table, or null.
const BuiltinFunction *lookupBuiltin(llvm::StringRef name);

/// The result shape of `function` applied to `args` (for ShapeRule::Eye,
/// pass the dim's symbol as a rank-1 "shape" [D]). On a mismatch returns
/// nullopt and sets `error` to a message such as
/// "shape mismatch in `dot`: [D] vs [K]".
std::optional<Shape> inferBuiltinShape(const BuiltinFunction &function,
                                       llvm::ArrayRef<Shape> args,
                                       std::string &error);

} // namespace frontend
} // namespace energy

#endif // ENERGY_FRONTEND_BUILTINS_H
