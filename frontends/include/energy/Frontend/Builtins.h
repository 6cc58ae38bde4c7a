//===- Builtins.h - Builtin functions and their shape rules -----*- C++ -*-===//
//
// The table of builtin functions of the .energy language (`dot`, `softmax`,
// `exp`, ...): each has an arity and a shape rule. The checker computes a
// call's result shape from its argument shapes with `inferBuiltinShape`;
// emission can switch on `BuiltinFunction::id`.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_FRONTEND_BUILTINS_H
#define ENERGY_FRONTEND_BUILTINS_H

#include "energy/Frontend/Shape.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace energy {
namespace frontend {

enum class BuiltinId {
  // Elementwise.
  Exp,
  Log,
  Tanh,
  Sigmoid,
  Silu,
  Softplus,
  Gelu,
  Relu,
  Sqrt,
  Abs,
  SiluInt,
  // Whole-tensor reductions to a scalar.
  Sum,
  Mean,
  Maxabs,
  Lse,
  Sqnorm,
  Norm,
  // Along the last axis.
  Softmax,
  LogSoftmax,
  Rmsnorm,
  Layernorm,
  // Other shapes.
  SoftmaxRows,
  Dot,
  Quad,
  Outer,
  Diag,
  Eye,
  Logdet,
  Inverse,
};

/// How a builtin's result shape follows from its arguments.
enum class ShapeRule {
  Elementwise,    ///< any shape -> same shape
  ReduceAll,      ///< rank >= 1 -> scalar
  LastAxis,       ///< rank >= 1 -> same shape
  Rows,           ///< [m, n] -> [m, n]
  Dot,            ///< [n], [n] -> scalar
  Quad,           ///< [n], [n, n] -> scalar
  Outer,          ///< [m], [n] -> [m, n]
  Diag,           ///< [n] -> [n, n]
  Eye,            ///< dim D -> [D, D] (the argument is a dim, not a tensor)
  SquareToScalar, ///< [n, n] -> scalar
  Square,         ///< [n, n] -> [n, n]
};

struct BuiltinFunction {
  llvm::StringRef name;
  BuiltinId id;
  unsigned arity;
  ShapeRule rule;
};

/// The builtin named `name`, or null.
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
