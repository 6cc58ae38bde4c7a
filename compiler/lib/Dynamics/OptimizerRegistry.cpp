//===- OptimizerRegistry.cpp - How gradient rules update nodes ------------===//
//
// The registry of optimizers and its global instance.
//
//===----------------------------------------------------------------------===//

#include "energy/Dynamics/OptimizerRegistry.h"

using namespace mlir;
using namespace mlir::energy;

UpdateBuilder::~UpdateBuilder() = default;

OptimizerRegistry &OptimizerRegistry::get() {
  static OptimizerRegistry *registry = [] {
    auto *instance = new OptimizerRegistry();
    registerBuiltinOptimizers(*instance);
    return instance;
  }();
  return *registry;
}

llvm::Error OptimizerRegistry::add(OptimizerDefinition definition) {
  if (lookup(definition.name))
    return llvm::createStringError("the update of optimizer '" +
                                   definition.name + "' is registered twice");
  definitions.push_back(std::move(definition));
  return llvm::Error::success();
}

const OptimizerDefinition *OptimizerRegistry::lookup(StringRef name) const {
  for (const OptimizerDefinition &definition : definitions)
    if (definition.name == name)
      return &definition;
  return nullptr;
}
