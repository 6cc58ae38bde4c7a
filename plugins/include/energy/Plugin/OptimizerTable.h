//===- OptimizerTable.h - The optimizers a dynamics rule may name -*- C++
//-*-===//
//
// The one table of optimizers (GD forms): which names a rule may use
// (`x: gd(lr = 0.1);`), their options, defaults and what each option's value
// must be. The front end checks rules against it and the compiler builds
// updates from it; the built-in optimizers are in it from the start and a
// plugin adds its own. Needs no MLIR: the front end and its sanitizer build
// read it. How an optimizer builds its update is the compiler's part
// (OptimizerRegistry.h); a built-in's signature and update functions are one
// entry of BuiltinOptimizers.def.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_PLUGIN_OPTIMIZERTABLE_H
#define ENERGY_PLUGIN_OPTIMIZERTABLE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace energy {
namespace plugin {

/// What a numeric option's value must be.
enum class OptionValueKind {
  Scalar,         ///< a scalar expression over consts, params and dims
  Integer,        ///< a non-negative integer literal (an iteration count)
  LastAxisMatrix, ///< an [n, n] matrix, n = the node's last axis
};

/// A numeric option: `lr`, `beta`, `P`, ...
struct OptimizerOption {
  std::string name;
  std::string description;
  OptionValueKind valueKind = OptionValueKind::Scalar;
  /// The value when a rule does not give the option; none: it is required.
  std::optional<double> defaultValue = std::nullopt;

  bool required() const { return !defaultValue; }
};

/// The required step size `lr` of gradient optimizers.
inline OptimizerOption stepSizeOption() {
  return {"lr", "step size (required)"};
}

/// How a rule of an optimizer updates its node.
enum class OptimizerCategory {
  Gradient,   ///< uses dE/dnode; adjacent ones form a simultaneous group
  Stationary, ///< EM M-step: a closed-form solve with responsibilities fixed
};

struct OptimizerSignature {
  std::string name;
  std::string summary;
  OptimizerCategory category = OptimizerCategory::Gradient;
  /// The accepted bare-identifier first argument (`heun` in
  /// `ode(heun, ...)`), the default first; empty if the optimizer takes none.
  std::vector<std::string> positionalChoices = {};
  /// What the positional argument is (`method`).
  std::string positionalName = "";
  std::vector<OptimizerOption> options = {};

  const OptimizerOption *findOption(llvm::StringRef option) const;
};

class OptimizerTable {
public:
  /// Adds `signature`; an error naming it when the table has that name.
  llvm::Error add(OptimizerSignature signature);
  /// The optimizer named `name`, or null.
  const OptimizerSignature *lookup(llvm::StringRef name) const;
  const std::vector<OptimizerSignature> &getOptimizers() const {
    return optimizers;
  }

private:
  std::vector<OptimizerSignature> optimizers;
};

/// The built-in optimizers of BuiltinOptimizers.def: gd{lr},
/// momentum{lr, beta = 0.9}, nesterov{lr, beta = 0.9},
/// newton{lr, cg = 10, taylor}, precond{lr, P},
/// ode{method: euler|heun, dt, rtol, atol}, stationary.
OptimizerTable builtinOptimizerTable();

/// The table every layer reads: the built-in optimizers and those plugins
/// have added.
OptimizerTable &getOptimizerTable();

} // namespace plugin
} // namespace energy

#endif // ENERGY_PLUGIN_OPTIMIZERTABLE_H
