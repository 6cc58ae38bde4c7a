//===- OptimizerTable.h - Known optimizers and their options ----*- C++ -*-===//
//
// The one place that says which optimizers a dynamics rule may name
// (`x: gd(lr = 0.1);`), which options each takes, which are required, and
// what each option's value must look like. The checker consults an
// OptimizerTable; `getDefaultOptimizerTable()` holds the built-in ones, and a
// plugin registry can build its own table (copy the default, `add` more).
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_FRONTEND_OPTIMIZERTABLE_H
#define ENERGY_FRONTEND_OPTIMIZERTABLE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

namespace energy {
namespace frontend {

/// What an option's value must be.
enum class OptionValueKind {
  Scalar,         ///< a scalar expression over consts, params and dims
  Integer,        ///< a non-negative integer literal
  LastAxisMatrix, ///< an [n, n] matrix, n = the node's last axis
};

struct OptimizerOptionInfo {
  std::string name;
  OptionValueKind valueKind;
  bool required;
};

/// How a rule of this optimizer updates its node.
enum class OptimizerCategory {
  Gradient,   ///< uses dE/dnode; adjacent ones form a simultaneous group
  Stationary, ///< EM M-step: a closed-form solve with responsibilities fixed
};

struct OptimizerInfo {
  std::string name;
  OptimizerCategory category;
  /// The accepted bare-identifier first argument (`heun` in
  /// `ode(heun, ...)`), empty if the optimizer takes none.
  std::vector<std::string> positionalChoices;
  std::string positionalName; ///< what the positional argument means
  std::vector<OptimizerOptionInfo> options;

  const OptimizerOptionInfo *findOption(llvm::StringRef option) const;
};

class OptimizerTable {
public:
  /// Adds or replaces the optimizer named `info.name`.
  void add(OptimizerInfo info);
  /// The optimizer named `name`, or null.
  const OptimizerInfo *lookup(llvm::StringRef name) const;
  const std::vector<OptimizerInfo> &getOptimizers() const { return optimizers; }

private:
  std::vector<OptimizerInfo> optimizers;
};

/// gd{lr}, momentum{lr, beta}, nesterov{lr, beta}, newton{lr, cg, taylor},
/// precond{lr, P}, ode{method: euler|heun, dt, rtol, atol}, stationary.
const OptimizerTable &getDefaultOptimizerTable();

} // namespace frontend
} // namespace energy

#endif // ENERGY_FRONTEND_OPTIMIZERTABLE_H
