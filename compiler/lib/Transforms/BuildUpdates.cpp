//===- BuildUpdates.cpp - The dynamics as one step program ----------------===//
//
// Builds `energy.update_program` from `energy.dynamics`: groups of gradient
// rules through the optimizer registry, explicit rules as stores.
//
//===----------------------------------------------------------------------===//

#include "energy/Dynamics/ClosedForms.h"
#include "energy/Dynamics/OptimizerRegistry.h"
#include "energy/Transforms/Gradients.h"
#include "energy/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::energy {
#define GEN_PASS_DEF_ENERGYBUILDUPDATES
#include "energy/Transforms/Passes.h.inc"
} // namespace mlir::energy

using namespace mlir;
using namespace mlir::energy;

namespace {

/// Copies the body of `region` at the builder's insertion point and returns
/// the copy of the value it yields.
Value cloneBody(OpBuilder &builder, Region &region) {
  IRMapping mapping;
  Block &block = region.front();
  for (Operation &op : block.without_terminator())
    builder.clone(op, mapping);
  return mapping.lookupOrDefault(
      cast<YieldOp>(block.back()).getValues().front());
}

class ProgramUpdateBuilder : public UpdateBuilder {
public:
  ProgramUpdateBuilder(OpBuilder &builder, UpdateOp rule, TensorOp node,
                       const ::energy::plugin::OptimizerSignature &signature,
                       ModelOp model, SymbolTable &symbols)
      : UpdateBuilder(builder, rule, node), signature(signature), model(model),
        symbols(symbols) {}

  Value option(StringRef name) override {
    for (auto [optionName, region] :
         llvm::zip(rule.getOptionNames(), rule.getOptions()))
      if (cast<StringAttr>(optionName).getValue() == name)
        return cloneBody(builder, region);
    const ::energy::plugin::OptimizerOption *known = signature.findOption(name);
    assert(known && known->defaultValue && "options are checked up front");
    return ConstantOp::create(builder, getLoc(), *known->defaultValue);
  }

  bool hasOption(StringRef name) override {
    return llvm::any_of(rule.getOptionNames(), [&](Attribute option) {
      return cast<StringAttr>(option).getValue() == name;
    });
  }

  std::optional<double> literalOption(StringRef name) override {
    for (auto [optionName, region] :
         llvm::zip(rule.getOptionNames(), rule.getOptions())) {
      if (cast<StringAttr>(optionName).getValue() != name)
        continue;
      Block &block = region.front();
      auto constant = dyn_cast<ConstantOp>(block.front());
      if (constant && block.getOperations().size() == 2)
        return constant.getValue().convertToDouble();
      rule.emitError() << "option '" << name << "' must be a number";
      return std::nullopt;
    }
    return signature.findOption(name)->defaultValue;
  }

  Value hessianVectorProduct(Value direction) override {
    std::string term = (node.getSymName() + ".curvature").str();
    StringRef directionTensor = stateTensor("direction", /*scalar=*/false);
    if (!symbols.lookup<TermOp>(term)) {
      FailureOr<GradientOp> gradient =
          getOrDeriveGradient(model, node.getSymName());
      if (failed(gradient))
        return {};
      symbols.insert(buildDirectionalTerm(*gradient, directionTensor, term));
    }
    store(directionTensor, direction);
    return GradOp::create(builder, getLoc(), node.getArrayType(),
                          FlatSymbolRefAttr::get(node),
                          FlatSymbolRefAttr::get(builder.getContext(), term))
        ->getResult(0);
  }

  StringRef choice(StringRef name) override {
    if (auto value = rule.getStringOptions().getAs<StringAttr>(name))
      return value.getValue();
    assert(signature.positionalName == name &&
           !signature.positionalChoices.empty() &&
           "options are checked up front");
    return signature.positionalChoices.front();
  }

  Value gradient(StringRef name) override {
    auto tensor = symbols.lookup<TensorOp>(name);
    return GradOp::create(builder, getLoc(), tensor.getArrayType(),
                          FlatSymbolRefAttr::get(builder.getContext(), name),
                          FlatSymbolRefAttr())
        ->getResult(0);
  }

  Value read(StringRef name) override {
    auto tensor = symbols.lookup<TensorOp>(name);
    return ReadOp::create(
        builder, getLoc(), tensor.getArrayType(),
        FlatSymbolRefAttr::get(builder.getContext(), name),
        AffineMapAttr::get(AffineMap::get(builder.getContext())), ValueRange());
  }

  void store(StringRef name, Value value) override {
    StoreOp::create(builder, getLoc(), value,
                    FlatSymbolRefAttr::get(builder.getContext(), name));
  }

  StringRef stateTensor(StringRef suffix, bool scalar) override {
    std::string name = (node.getSymName() + "." + suffix).str();
    if (auto existing = symbols.lookup<TensorOp>(name))
      return existing.getSymName();
    OpBuilder declarations(node);
    declarations.setInsertionPointAfter(node);
    auto tensor = TensorOp::create(
        declarations, node.getLoc(), name, Role::state,
        scalar ? declarations.getArrayAttr({}) : node.getShape(),
        InitKindAttr::get(builder.getContext(), InitKind::zeros),
        DenseF64ArrayAttr(), FlatSymbolRefAttr());
    tensor.setOptimizerStateAttr(FlatSymbolRefAttr::get(node));
    symbols.insert(tensor);
    return tensor.getSymName();
  }

private:
  const ::energy::plugin::OptimizerSignature &signature;
  ModelOp model;
  SymbolTable &symbols;
};

struct BuildUpdatesPass
    : public mlir::energy::impl::EnergyBuildUpdatesBase<BuildUpdatesPass> {
  void runOnOperation() override {
    ModelOp model = getOperation();
    DynamicsOp dynamics = model.getDynamics();
    if (!dynamics || !model.getBody().front().getOps<UpdateProgramOp>().empty())
      return;
    SymbolTable symbols(model);
    OpBuilder builder = OpBuilder::atBlockEnd(&model.getBody().front());
    auto program = UpdateProgramOp::create(builder, dynamics.getLoc());
    builder.setInsertionPointToStart(&program.getBody().emplaceBlock());

    // Adjacent gradient rules form one group, adjacent stationary rules one
    // EM M-step; at most one of the two is open at a time.
    SmallVector<UpdateOp> group, stationary;
    auto flush = [&]() -> LogicalResult {
      if (failed(buildGroup(builder, group, model, symbols)) ||
          failed(buildStationaryGroup(builder, stationary, model)))
        return failure();
      stationary.clear();
      return success();
    };
    for (Operation &rule : dynamics.getRules().front()) {
      if (auto update = dyn_cast<UpdateOp>(rule)) {
        if (failed(checkRule(update)))
          return signalPassFailure();
        bool closedForm = update.getOptimizer() == "stationary";
        if ((closedForm ? !group.empty() : !stationary.empty()) &&
            failed(flush()))
          return signalPassFailure();
        (closedForm ? stationary : group).push_back(update);
        if (dynamics.getOrder() == Order::sequential && failed(flush()))
          return signalPassFailure();
        continue;
      }
      if (failed(flush()))
        return signalPassFailure();
      auto assign = cast<AssignOp>(rule);
      StoreOp::create(builder, assign.getLoc(),
                      cloneBody(builder, assign.getBody()),
                      assign.getNodeAttr());
    }
    if (failed(flush()))
      return signalPassFailure();
  }

  /// Checks that the rule's optimizer is in the optimizer table, with an
  /// update registered, and that its options are the optimizer's, with every
  /// required one given.
  LogicalResult checkRule(UpdateOp rule) {
    if (rule.getOptimizer() == "stationary") {
      if (!rule.getOptionNames().empty() || !rule.getStringOptions().empty())
        return rule.emitError() << "`stationary` takes no options";
      return success();
    }
    const ::energy::plugin::OptimizerTable &table =
        ::energy::plugin::getOptimizerTable();
    const ::energy::plugin::OptimizerSignature *signature =
        table.lookup(rule.getOptimizer());
    if (!signature ||
        signature->category != ::energy::plugin::OptimizerCategory::Gradient) {
      SmallVector<StringRef> known;
      for (const ::energy::plugin::OptimizerSignature &candidate :
           table.getOptimizers())
        known.push_back(candidate.name);
      return rule.emitError()
             << "the optimizer table has no gradient optimizer '"
             << rule.getOptimizer() << "'; it has: " << llvm::join(known, ", ");
    }
    if (!OptimizerRegistry::get().lookup(rule.getOptimizer()))
      return rule.emitError() << "optimizer '" << rule.getOptimizer()
                              << "' has no update registered";
    StringRef name = signature->name;
    llvm::StringSet<> given;
    for (Attribute option : rule.getOptionNames()) {
      StringRef text = cast<StringAttr>(option).getValue();
      given.insert(text);
      if (text == signature->positionalName)
        return rule.emitError()
               << "option '" << text << "' of optimizer '" << name
               << "' is one of "
               << llvm::join(signature->positionalChoices, ", ")
               << ", not an expression";
      if (!signature->findOption(text))
        return rule.emitError()
               << "optimizer '" << name << "' has no option '" << text << "'";
    }
    for (NamedAttribute named : rule.getStringOptions()) {
      StringRef text = named.getName().getValue();
      if (text != signature->positionalName ||
          signature->positionalChoices.empty())
        return rule.emitError() << "optimizer '" << name
                                << "' has no choice option '" << text << "'";
      StringRef value = cast<StringAttr>(named.getValue()).getValue();
      if (!llvm::is_contained(signature->positionalChoices, value))
        return rule.emitError()
               << "option '" << text << "' of optimizer '" << name
               << "' is one of "
               << llvm::join(signature->positionalChoices, ", ") << ", not '"
               << value << "'";
    }
    for (const ::energy::plugin::OptimizerOption &option : signature->options)
      if (option.required() && !given.contains(option.name))
        return rule.emitError() << "optimizer '" << name << "' needs option '"
                                << option.name << "'";
    return success();
  }

  /// Builds a group of gradient rules: entry values, every `prepare`, one
  /// gradient per node, every `apply`. Empties the group.
  LogicalResult buildGroup(OpBuilder &builder, SmallVector<UpdateOp> &group,
                           ModelOp model, SymbolTable &symbols) {
    std::vector<std::unique_ptr<ProgramUpdateBuilder>> updates;
    SmallVector<const OptimizerDefinition *> definitions;
    SmallVector<Value> entries, gradients;
    for (UpdateOp rule : group) {
      const OptimizerDefinition *definition =
          OptimizerRegistry::get().lookup(rule.getOptimizer());
      auto node = symbols.lookup<TensorOp>(rule.getNode());
      definitions.push_back(definition);
      updates.push_back(std::make_unique<ProgramUpdateBuilder>(
          builder, rule, node,
          *::energy::plugin::getOptimizerTable().lookup(rule.getOptimizer()),
          model, symbols));
      entries.push_back(updates.back()->read(rule.getNode()));
    }
    for (auto [update, definition] : llvm::zip(updates, definitions))
      if (definition->prepare && failed(definition->prepare(*update)))
        return failure();
    for (auto &update : updates)
      gradients.push_back(update->gradient(update->getNode().getSymName()));
    for (auto [update, definition, entry, gradient] :
         llvm::zip(updates, definitions, entries, gradients))
      if (failed(definition->apply(*update, entry, gradient)))
        return failure();
    group.clear();
    return success();
  }
};
} // namespace
