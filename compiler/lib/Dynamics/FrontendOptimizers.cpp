//===- FrontendOptimizers.cpp - The registry as the front end sees it -----===//
//
// Converts registry definitions to the front end's optimizer table.
//
//===----------------------------------------------------------------------===//

#include "energy/Dynamics/FrontendOptimizers.h"

using namespace mlir::energy;
namespace fe = ::energy::frontend;

fe::OptimizerTable
mlir::energy::buildFrontendOptimizerTable(const OptimizerRegistry &registry) {
  fe::OptimizerTable table;
  for (const OptimizerDefinition &definition : registry.getDefinitions()) {
    fe::OptimizerInfo info;
    info.name = definition.name;
    info.category = fe::OptimizerCategory::Gradient;
    for (const OptimizerOption &option : definition.options) {
      if (option.isChoice()) {
        info.positionalChoices = option.choices;
        info.positionalName = option.name;
        continue;
      }
      fe::OptionValueKind kind = option.shape == OptionShape::Integer
                                     ? fe::OptionValueKind::Integer
                                 : option.shape == OptionShape::LastAxisMatrix
                                     ? fe::OptionValueKind::LastAxisMatrix
                                     : fe::OptionValueKind::Scalar;
      info.options.push_back(
          {option.name, kind, /*required=*/!option.defaultValue});
    }
    table.add(std::move(info));
  }
  table.add({"stationary", fe::OptimizerCategory::Stationary, {}, "", {}});
  return table;
}

const fe::OptimizerTable &mlir::energy::getRegistryOptimizerTable() {
  static const fe::OptimizerTable table =
      buildFrontendOptimizerTable(OptimizerRegistry::get());
  return table;
}
