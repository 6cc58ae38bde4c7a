//===- OptimizerTable.cpp - The optimizer table and the built-ins ---------===//
//
// The optimizer table, with the built-in optimizers' signatures read from
// BuiltinOptimizers.def (whose entries also name their update functions).
//
//===----------------------------------------------------------------------===//

#include "energy/Plugin/OptimizerTable.h"

using namespace energy::plugin;

const OptimizerOption *
OptimizerSignature::findOption(llvm::StringRef option) const {
  for (const OptimizerOption &candidate : options)
    if (candidate.name == option)
      return &candidate;
  return nullptr;
}

llvm::Error OptimizerTable::add(OptimizerSignature signature) {
  if (lookup(signature.name))
    return llvm::createStringError(
        "optimizer '" + signature.name +
        "' is registered twice (a plugin's name must be new)");
  optimizers.push_back(std::move(signature));
  return llvm::Error::success();
}

const OptimizerSignature *OptimizerTable::lookup(llvm::StringRef name) const {
  for (const OptimizerSignature &signature : optimizers)
    if (signature.name == name)
      return &signature;
  return nullptr;
}

OptimizerTable energy::plugin::builtinOptimizerTable() {
  OptimizerTable table;
#define ENERGY_OPTIMIZER(Prepare, Apply, ...)                                  \
  llvm::cantFail(table.add(OptimizerSignature{__VA_ARGS__}));
#include "energy/Plugin/BuiltinOptimizers.def"
  return table;
}

OptimizerTable &energy::plugin::getOptimizerTable() {
  static OptimizerTable table = builtinOptimizerTable();
  return table;
}
