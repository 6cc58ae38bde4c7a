//===- DiagnosticsTest.cpp - Energies without a derivative rule -----------===//
//
// An energy that reaches a differentiated tensor only through an op with no
// derivative rule is a compile error naming the op and its place in the
// .energy source; one that does not reach it there compiles.
//
//===----------------------------------------------------------------------===//

#include "GradientTestSupport.h"

#include <doctest/doctest.h>

using namespace ::energy::testing;

namespace {
const char *kMaxModel = R"(model m {
  dim N;
  state x : [N];
  input y : [N];
  energy e = max(i: N) x[i];
  dynamics { x: gd(lr = 0.1); steps 1; }
}
)";
} // namespace

TEST_CASE("an energy reaching a node only through max is an error") {
  std::unique_ptr<CompiledModel> compiled =
      compileSource(kMaxModel, {}, "max.energy");
  CHECK_FALSE(compiled->model);
  INFO(compiled->diagnostics);
  CHECK(llvm::StringRef(compiled->diagnostics)
            .contains("max.energy:5:14: error: 'energy.reduce' op has no "
                      "derivative rule; the energy reaches @x through it"));
  // The source line and a caret follow.
  CHECK(llvm::StringRef(compiled->diagnostics)
            .contains("  energy e = max(i: N) x[i];\n             ^"));
}

TEST_CASE("max over tensors that are not differentiated is fine") {
  const char *source = R"(model m {
  dim N;
  state x : [N];
  input y : [N];
  energy e = (max(i: N) y[i]) + sum(i: N) x[i] ^ 2;
  dynamics { x: gd(lr = 0.1); steps 1; }
}
)";
  std::unique_ptr<CompiledModel> compiled = compileSource(source);
  REQUIRE_MESSAGE(compiled->model, compiled->diagnostics);
  RandomBindingOptions options;
  Bindings bindings = bindRandom(compiled->model, options);
  std::optional<ArrayValue> gradient = compiled->gradient(bindings, "x");
  REQUIRE_MESSAGE(gradient, compiled->diagnostics);
  const ArrayValue &x = bindings.getTensors().find("x")->second;
  for (size_t i = 0; i < x.data.size(); ++i)
    CHECK(gradient->data[i] == doctest::Approx(2 * x.data[i]));

  // Asking for y's gradient (wrt) reaches it through max: an error there.
  std::unique_ptr<CompiledModel> withY =
      compileSource(source, {"y"}, "max2.energy");
  CHECK_FALSE(withY->model);
  CHECK_MESSAGE(llvm::StringRef(withY->diagnostics)
                    .contains("max2.energy:5:15: error: 'energy.reduce' op "
                              "has no derivative rule; the energy reaches "
                              "@y through it"),
                withY->diagnostics);
}
