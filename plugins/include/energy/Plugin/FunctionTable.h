//===- FunctionTable.h - The functions a spec may call ----------*- C++ -*-===//
//
// The one table of functions of the .energy language: the built-ins (`exp`,
// `dot`, `softmax`, ...) with their shape rules, and the element-wise
// functions and similarities plugins add, whose value and derivatives are
// run-time code (RuntimeCode.h). The front end checks calls against it; the
// compiler, the interpreter and kernels evaluate plugin entries from it.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_PLUGIN_FUNCTIONTABLE_H
#define ENERGY_PLUGIN_FUNCTIONTABLE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace energy {
namespace plugin {

/// The built-in functions, which the compiler lowers to dialect ops.
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
  Sin,
  Cos,
  Elu,
  /// leaky_relu(x, a): x with the slope a below 0.
  LeakyRelu,
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
  /// Not a built-in: a plugin's function (FunctionKind says which).
  None,
};

/// How a function's result shape follows from its arguments.
enum class ShapeRule {
  Elementwise,           ///< any shape -> same shape
  ElementwiseWithScalar, ///< any shape, scalar -> the first's shape
  ReduceAll,             ///< rank >= 1 -> scalar
  LastAxis,              ///< rank >= 1 -> same shape
  Rows,                  ///< [m, n] -> [m, n]
  Dot,                   ///< [n], [n] -> scalar (also every similarity)
  Quad,                  ///< [n], [n, n] -> scalar
  Outer,                 ///< [m], [n] -> [m, n]
  Diag,                  ///< [n] -> [n, n]
  Eye,            ///< dim D -> [D, D] (the argument is a dim, not a tensor)
  SquareToScalar, ///< [n, n] -> scalar
  Square,         ///< [n, n] -> [n, n]
};

enum class FunctionKind {
  Builtin,
  /// x -> f(x) on every element; run-time code f, f', optionally f''.
  Elementwise,
  /// Two vectors of one length -> a scalar; run-time code s and its
  /// gradient with respect to both vectors.
  Similarity,
};

/// Where a plugin's run-time code lives and what it is called.
struct RuntimeCode {
  /// The plugin's name and version, recorded in artifacts that call it.
  std::string plugin, version;
  /// The run-time library (RuntimeCode.h) that exports `symbols`.
  std::string library;
  /// Elementwise: f, f', f'' (the last optional). Similarity: value,
  /// gradient. Aggregation: value, weights.
  std::vector<std::string> symbols;
  /// Their addresses once the library is loaded (for the interpreter and
  /// the JIT); filled when the entry is added, unless given already (code
  /// linked into the registering binary).
  std::vector<void *> addresses = {};
};

struct FunctionInfo {
  std::string name;
  std::string summary;
  FunctionKind kind = FunctionKind::Builtin;
  unsigned arity = 1;
  ShapeRule rule = ShapeRule::Elementwise;
  BuiltinId id = BuiltinId::None;
  /// For plugin functions.
  RuntimeCode code = {};

  bool isPlugin() const { return kind != FunctionKind::Builtin; }
};

class FunctionTable {
public:
  /// Adds `function`; an error naming it when the table has that name.
  /// Plugin entries get their arity and shape rule from their kind.
  llvm::Error add(FunctionInfo function);
  /// The function named `name`, or null.
  const FunctionInfo *lookup(llvm::StringRef name) const;
  const std::vector<FunctionInfo> &getFunctions() const { return functions; }

private:
  std::vector<FunctionInfo> functions;
};

/// The table every layer reads: the built-ins and what plugins added.
FunctionTable &getFunctionTable();

/// How an energy reduction over an index domain combines its values.
enum class AggregationKind { Sum, Mean, Max, Min, Lse, Plugin };

/// An aggregation: `lse(p: N) e`, or a plugin's `sparsemax(p: N) e`,
/// whose value and gradient weights are run-time code.
struct AggregationInfo {
  std::string name;
  std::string summary;
  AggregationKind kind = AggregationKind::Plugin;
  RuntimeCode code = {};
};

class AggregationTable {
public:
  /// Adds `aggregation`; an error naming it when the table has that name.
  llvm::Error add(AggregationInfo aggregation);
  /// The aggregation named `name`, or null.
  const AggregationInfo *lookup(llvm::StringRef name) const;
  const std::vector<AggregationInfo> &getAggregations() const {
    return aggregations;
  }

private:
  std::vector<AggregationInfo> aggregations;
};

/// The table every layer reads: sum, mean, max, lse and plugins'.
AggregationTable &getAggregationTable();

/// Loads `code.library`, checks that it is the run-time library of
/// `code.plugin` at `code.version` and resolves `code.symbols` into
/// `code.addresses`; errors name the library and the missing symbol.
llvm::Error loadRuntimeCode(RuntimeCode &code);

} // namespace plugin
} // namespace energy

#endif // ENERGY_PLUGIN_FUNCTIONTABLE_H
