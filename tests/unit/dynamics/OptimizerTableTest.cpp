//===- OptimizerTableTest.cpp - One optimizer table, builders by name -----===//
//
// The front end and the compiler read one optimizer table (the plugin API's);
// the compiler's registry holds, under the same names, how each gradient
// optimizer builds its update. Every gradient optimizer of the table has an
// update and every update an entry; a name is registered once.
//
//===----------------------------------------------------------------------===//

#include "energy/Plugin/OptimizerTable.h"
#include "energy/Dynamics/OptimizerRegistry.h"

#include <doctest/doctest.h>

using namespace mlir::energy;
namespace plugin = ::energy::plugin;

TEST_CASE("every gradient optimizer of the table has an update, and back") {
  const plugin::OptimizerTable &table = plugin::getOptimizerTable();
  const OptimizerRegistry &registry = OptimizerRegistry::get();
  size_t gradients = 0;
  for (const plugin::OptimizerSignature &signature : table.getOptimizers()) {
    CAPTURE(signature.name);
    if (signature.category != plugin::OptimizerCategory::Gradient)
      continue;
    ++gradients;
    const OptimizerDefinition *definition = registry.lookup(signature.name);
    REQUIRE(definition);
    CHECK(definition->apply);
  }
  CHECK(registry.getDefinitions().size() == gradients);
  for (const OptimizerDefinition &definition : registry.getDefinitions())
    CHECK(table.lookup(definition.name));
  CHECK(table.lookup("stationary")->category ==
        plugin::OptimizerCategory::Stationary);
  // Defaults the dynamics lowering uses come from the table.
  CHECK(*table.lookup("momentum")->findOption("beta")->defaultValue == 0.9);
  CHECK(*table.lookup("newton")->findOption("cg")->defaultValue == 10.0);
  CHECK(table.lookup("ode")->positionalChoices.front() == "euler");
  CHECK(table.lookup("gd")->findOption("lr")->required());
}

TEST_CASE("an optimizer's update is registered once") {
  OptimizerRegistry registry;
  registerBuiltinOptimizers(registry);
  llvm::Error twice = registry.add({"gd", nullptr, nullptr});
  CHECK(llvm::toString(std::move(twice)) ==
        "the update of optimizer 'gd' is registered twice");
  llvm::cantFail(registry.add({"adam", nullptr, nullptr}));
  CHECK(registry.lookup("adam"));
}
