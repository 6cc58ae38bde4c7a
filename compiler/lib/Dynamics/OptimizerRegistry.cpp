//===- OptimizerRegistry.cpp - How gradient rules update nodes ------------===//
//
// The registry of optimizers and its global instance.
//
//===----------------------------------------------------------------------===//

#include "energy/Dynamics/OptimizerRegistry.h"

using namespace mlir;
using namespace mlir::energy;

UpdateBuilder::~UpdateBuilder() = default;

const OptimizerOption *OptimizerDefinition::findOption(StringRef option) const {
  for (const OptimizerOption &candidate : options)
    if (candidate.name == option)
      return &candidate;
  return nullptr;
}

OptimizerRegistry &OptimizerRegistry::get() {
  static OptimizerRegistry *registry = [] {
    auto *instance = new OptimizerRegistry();
    registerBuiltinOptimizers(*instance);
    return instance;
  }();
  return *registry;
}

void OptimizerRegistry::add(OptimizerDefinition definition) {
  for (OptimizerDefinition &existing : definitions)
    if (existing.name == definition.name) {
      existing = std::move(definition);
      return;
    }
  definitions.push_back(std::move(definition));
}

const OptimizerDefinition *OptimizerRegistry::lookup(StringRef name) const {
  for (const OptimizerDefinition &definition : definitions)
    if (definition.name == name)
      return &definition;
  return nullptr;
}
