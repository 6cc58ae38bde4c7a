//===- OptimizerRegistry.cpp - How gradient rules update nodes ------------===//
//
// The registry of optimizers and its global instance.
//
//===----------------------------------------------------------------------===//

#include "energy/Dynamics/OptimizerRegistry.h"

#include <cstdlib>

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
  if (!::energy::plugin::getOptimizerTable().lookup(definition.name))
    return llvm::createStringError(
        "the update of optimizer '" + definition.name +
        "' is registered, but the optimizer table has no '" + definition.name +
        "' (register both with registerOptimizer)");
  definitions.push_back(std::move(definition));
  return llvm::Error::success();
}

llvm::Error mlir::energy::registerOptimizer(
    ::energy::plugin::Registration &registration,
    ::energy::plugin::OptimizerSignature signature,
    std::function<LogicalResult(UpdateBuilder &)> prepare,
    std::function<LogicalResult(UpdateBuilder &, Value, Value)> apply) {
  OptimizerRegistry &updates = optimizerUpdates(registration);
  std::string name = signature.name;
  if (updates.lookup(name))
    return llvm::createStringError("the update of optimizer '" + name +
                                   "' is registered twice");
  if (llvm::Error error = registration.optimizers().add(std::move(signature)))
    return error;
  return updates.add({name, std::move(prepare), std::move(apply)});
}

const OptimizerDefinition *OptimizerRegistry::lookup(StringRef name) const {
  for (const OptimizerDefinition &definition : definitions)
    if (definition.name == name)
      return &definition;
  return nullptr;
}

OptimizerRegistry &
mlir::energy::optimizerUpdates(::energy::plugin::Registration &registration) {
  return *static_cast<OptimizerRegistry *>(
      registration.getCompilerRegistries());
}

llvm::Error mlir::energy::loadPlugins(ArrayRef<std::string> paths) {
  SmallVector<std::string> all(paths.begin(), paths.end());
  if (const char *listed = std::getenv("ENERGY_PLUGINS")) {
    SmallVector<StringRef> parts;
    StringRef(listed).split(parts, ':', -1, /*KeepEmpty=*/false);
    for (StringRef part : parts)
      all.push_back(part.str());
  }
  ::energy::plugin::Registration registration(&OptimizerRegistry::get());
  for (const std::string &path : all) {
    llvm::Expected<::energy::plugin::LoadedPlugin> loaded =
        ::energy::plugin::loadPlugin(path, registration);
    if (!loaded)
      return loaded.takeError();
  }
  return llvm::Error::success();
}
