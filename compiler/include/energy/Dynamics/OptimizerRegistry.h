//===- OptimizerRegistry.h - How gradient rules update nodes ----*- C++ -*-===//
//
// How each optimizer (GD form) of the plugin API's optimizer table builds
// its update, by name, for `energy-build-updates`: two build phases. The
// names, options and defaults are the table's (energy/Plugin/
// OptimizerTable.h); built-in optimizers register through the same API a
// plugin uses.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_DYNAMICS_OPTIMIZERREGISTRY_H
#define ENERGY_DYNAMICS_OPTIMIZERREGISTRY_H

#include "energy/IR/EnergyOps.h"
#include "energy/Plugin/OptimizerTable.h"
#include "energy/Plugin/Plugin.h"

#include "mlir/IR/Builders.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mlir::energy {

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
  /// The optimizer's name in the optimizer table.
  std::string name;
  std::function<LogicalResult(UpdateBuilder &)> prepare;
  std::function<LogicalResult(UpdateBuilder &, Value entry, Value gradient)>
      apply;
};

class OptimizerRegistry {
public:
  /// The registry the compiler uses, with the built-in optimizers.
  static OptimizerRegistry &get();

  /// Adds `definition`; an error naming it when one of the same name is
  /// there, or when the optimizer table has no optimizer of that name (a
  /// builder is joined to its signature by it).
  llvm::Error add(OptimizerDefinition definition);
  const OptimizerDefinition *lookup(StringRef name) const;
  const std::vector<OptimizerDefinition> &getDefinitions() const {
    return definitions;
  }

private:
  std::vector<OptimizerDefinition> definitions;
};

/// Adds the updates of the gradient optimizers of BuiltinOptimizers.def
/// (gd, momentum, nesterov, newton, precond, ode) to `registry`.
void registerBuiltinOptimizers(OptimizerRegistry &registry);

/// The registry of updates a plugin registers its optimizers' builders in,
/// from the registration `loadPlugins` hands it.
OptimizerRegistry &
optimizerUpdates(::energy::plugin::Registration &registration);

/// Registers an optimizer in one call, what a plugin's registration
/// callback does: its signature in the optimizer table (the names, options
/// and defaults rules are checked against) and how it builds its update,
/// under the signature's name. An error naming it, and neither registered,
/// when the table or the registry has that name.
llvm::Error registerOptimizer(
    ::energy::plugin::Registration &registration,
    ::energy::plugin::OptimizerSignature signature,
    std::function<LogicalResult(UpdateBuilder &)> prepare,
    std::function<LogicalResult(UpdateBuilder &, Value entry, Value gradient)>
        apply);

/// Loads the plugins at `paths` and those `ENERGY_PLUGINS` lists
/// (colon-separated) into the optimizer table and registry; an error names
/// the plugin file and what is wrong.
llvm::Error loadPlugins(ArrayRef<std::string> paths);

} // namespace mlir::energy

#endif // ENERGY_DYNAMICS_OPTIMIZERREGISTRY_H
