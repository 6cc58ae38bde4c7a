//===- OptimizerTableTest.cpp - One optimizer table, builders by name -----===//
//
// The front end and the compiler read one optimizer table (the plugin API's);
// the compiler's registry holds, under the same names, how each gradient
// optimizer builds its update. Every gradient optimizer of the table has an
// update and every update an entry; a name is registered once; a plugin
// registers both in one call.
//
//===----------------------------------------------------------------------===//

#include "energy/Plugin/OptimizerTable.h"
#include "energy/Dynamics/OptimizerRegistry.h"

#include <doctest/doctest.h>

#include <string>

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
  // An update joins its signature by name: none without one.
  llvm::Error unknown = registry.add({"adam", nullptr, nullptr});
  CHECK(llvm::toString(std::move(unknown)) ==
        "the update of optimizer 'adam' is registered, but the optimizer "
        "table has no 'adam' (register both with registerOptimizer)");
  CHECK(!registry.lookup("adam"));
}

TEST_CASE("a plugin registers an optimizer's signature and update at once") {
  plugin::Registration registration(&OptimizerRegistry::get());
  auto apply = [](UpdateBuilder &, mlir::Value, mlir::Value) {
    return mlir::success();
  };
  llvm::cantFail(registerOptimizer(
      registration, {"unit_test_descent", "a test optimizer"}, nullptr, apply));
  CHECK(plugin::getOptimizerTable().lookup("unit_test_descent"));
  const OptimizerDefinition *definition =
      OptimizerRegistry::get().lookup("unit_test_descent");
  REQUIRE(definition);
  CHECK(definition->apply);
  // Twice, or under a name the table has: refused, nothing half-registered.
  llvm::Error twice = registerOptimizer(
      registration, {"unit_test_descent", "again"}, nullptr, apply);
  CHECK(llvm::toString(std::move(twice)) ==
        "the update of optimizer 'unit_test_descent' is registered twice");
  llvm::Error taken = registerOptimizer(
      registration, {"stationary", "not the closed form"}, nullptr, apply);
  CHECK(llvm::toString(std::move(taken)).find("'stationary'") !=
        std::string::npos);
  CHECK(!OptimizerRegistry::get().lookup("stationary"));
  CHECK(plugin::getOptimizerTable().lookup("stationary")->category ==
        plugin::OptimizerCategory::Stationary);
}
