//===- OptimizerRegistry.h - How gradient rules update nodes ----*- C++ -*-===//
//
// The registry of optimizers (GD forms) that `energy-build-updates` looks
// names up in. Built-in optimizers register through the same API a plugin
// uses: a definition with documented options and two build phases.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_DYNAMICS_OPTIMIZERREGISTRY_H
#define ENERGY_DYNAMICS_OPTIMIZERREGISTRY_H

#include "energy/IR/EnergyOps.h"

#include "mlir/IR/Builders.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mlir::energy {

/// What the value of a numeric option is.
enum class OptionShape {
  Scalar,         ///< a scalar expression over consts, params and dims
  Integer,        ///< a literal integer (an iteration count)
  LastAxisMatrix, ///< an [n, n] matrix, n the node's last axis
};

/// An option of an optimizer: `lr`, `beta`, ... A numeric option is an
/// expression; a choice option (`method` of `ode`) is one of `choices`.
struct OptimizerOption {
  std::string name;
  std::string description;
  /// The value used when the rule does not give a numeric option; none
  /// means the option is required.
  std::optional<double> defaultValue;
  /// The accepted values of a choice option, the default first; empty for
  /// a numeric option.
  std::vector<std::string> choices = {};
  OptionShape shape = OptionShape::Scalar;

  bool isChoice() const { return !choices.empty(); }
};

/// What an optimizer builds with, for one rule, at the insertion point of
/// the update program.
class UpdateBuilder {
public:
  virtual ~UpdateBuilder();

  OpBuilder &getBuilder() { return builder; }
  Location getLoc() { return rule.getLoc(); }
  UpdateOp getRule() { return rule; }
  /// The node the rule updates.
  TensorOp getNode() { return node; }

  /// The value of option `name` (the rule's expression, or the default).
  virtual Value option(StringRef name) = 0;
  /// The literal number given for option `name` (or its default); an error
  /// on the rule, and none, when the rule gives an expression instead.
  virtual std::optional<double> literalOption(StringRef name) = 0;
  /// Whether the rule gives option `name`.
  virtual bool hasOption(StringRef name) = 0;
  /// The Hessian of the global energy with respect to the node, at the
  /// current values, applied to `direction` (of the node's shape): the
  /// gradient, with respect to the node, of ⟨∇E, v⟩ with v = `direction`.
  /// Null after an error.
  virtual Value hessianVectorProduct(Value direction) = 0;
  /// The value of choice option `name` (the rule's, or the default).
  virtual StringRef choice(StringRef name) = 0;
  /// The gradient of the global energy with respect to tensor `name` at the
  /// current values (after the stores built so far).
  virtual Value gradient(StringRef name) = 0;
  /// The current value of the tensor `name` (the node, or a state tensor).
  virtual Value read(StringRef name) = 0;
  /// Stores `value` as the new value of tensor `name`.
  virtual void store(StringRef name, Value value) = 0;
  /// Declares (once per node) an optimizer state tensor of the node's shape
  /// (a scalar when `scalar`), starting at zero and carried across steps,
  /// and returns its name. It is a state tensor of the model, so runs save
  /// and resume it.
  virtual StringRef stateTensor(StringRef suffix, bool scalar = false) = 0;

protected:
  UpdateBuilder(OpBuilder &builder, UpdateOp rule, TensorOp node)
      : builder(builder), rule(rule), node(node) {}

  OpBuilder &builder;
  UpdateOp rule;
  TensorOp node;
};

/// How a gradient rule updates its node. Adjacent gradient rules form a
/// group that is built in two phases: every rule's `prepare` (before the
/// group's gradient is taken, e.g. moving the node to a look-ahead point),
/// then every rule's `apply` with the node's value at the group's entry and
/// the gradient taken after all `prepare`s (one joint evaluation).
struct OptimizerDefinition {
  std::string name;
  std::string summary;
  std::vector<OptimizerOption> options;
  std::function<LogicalResult(UpdateBuilder &)> prepare;
  std::function<LogicalResult(UpdateBuilder &, Value entry, Value gradient)>
      apply;

  const OptimizerOption *findOption(StringRef option) const;
};

class OptimizerRegistry {
public:
  /// The registry the compiler uses, with the built-in optimizers.
  static OptimizerRegistry &get();

  /// Adds `definition`, replacing one of the same name.
  void add(OptimizerDefinition definition);
  const OptimizerDefinition *lookup(StringRef name) const;
  const std::vector<OptimizerDefinition> &getDefinitions() const {
    return definitions;
  }

private:
  std::vector<OptimizerDefinition> definitions;
};

/// Adds `gd`, `momentum`, `nesterov`, `precond`, `ode` and `newton` to
/// `registry`.
void registerBuiltinOptimizers(OptimizerRegistry &registry);

} // namespace mlir::energy

#endif // ENERGY_DYNAMICS_OPTIMIZERREGISTRY_H
