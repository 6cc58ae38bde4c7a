//===- OptimizerTableTest.cpp - The front end's table follows the registry ===//
//
// The tools check rules in the front end against a table built from the
// optimizer registry. The MLIR-free front end also has a default table of
// its own (for the sanitizer build and the fuzzer); it must describe the
// same optimizers and options as the registry, or the two would drift.
//
//===----------------------------------------------------------------------===//

#include "energy/Frontend/OptimizerTable.h"
#include "energy/Dynamics/FrontendOptimizers.h"

#include <doctest/doctest.h>

using namespace mlir::energy;
namespace fe = ::energy::frontend;

TEST_CASE("the front end's default optimizers are the registry's") {
  fe::OptimizerTable fromRegistry =
      buildFrontendOptimizerTable(OptimizerRegistry::get());
  const fe::OptimizerTable &defaults = fe::getDefaultOptimizerTable();
  CHECK(fromRegistry.getOptimizers().size() == defaults.getOptimizers().size());
  for (const fe::OptimizerInfo &expected : fromRegistry.getOptimizers()) {
    CAPTURE(expected.name);
    const fe::OptimizerInfo *actual = defaults.lookup(expected.name);
    REQUIRE(actual);
    CHECK(actual->category == expected.category);
    CHECK(actual->positionalChoices == expected.positionalChoices);
    CHECK(actual->positionalName == expected.positionalName);
    REQUIRE(actual->options.size() == expected.options.size());
    for (const fe::OptimizerOptionInfo &option : expected.options) {
      CAPTURE(option.name);
      const fe::OptimizerOptionInfo *match = actual->findOption(option.name);
      REQUIRE(match);
      CHECK(match->valueKind == option.valueKind);
      CHECK(match->required == option.required);
    }
  }
}

TEST_CASE("an optimizer a plugin registers is accepted by the front end") {
  OptimizerRegistry registry;
  registerBuiltinOptimizers(registry);
  registry.add({"adam",
                "a plugin's optimizer",
                {{"lr", "", std::nullopt}},
                nullptr,
                nullptr});
  fe::OptimizerTable table = buildFrontendOptimizerTable(registry);
  const fe::OptimizerInfo *adam = table.lookup("adam");
  REQUIRE(adam);
  REQUIRE(adam->findOption("lr"));
  CHECK(adam->findOption("lr")->required);
  CHECK(table.lookup("stationary"));
}
