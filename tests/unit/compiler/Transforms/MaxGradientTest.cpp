//===- MaxGradientTest.cpp - The subgradient of a maximum -----------------===//
//
// A maximum over an index domain differentiates into the indicator of the
// positions at the maximum, shared evenly where they tie: checked against
// that closed form through the interpreter.
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
  energy e = (max(i: N) x[i]) + max(i: N) 2 * y[i];
  dynamics { x: gd(lr = 0.1); steps 1; }
}
)";

/// The gradient of `scale` max_i v[i]: `scale` / (the number of positions
/// at the maximum) there, 0 elsewhere.
std::vector<double> maxGradient(const std::vector<double> &values,
                                double scale) {
  double largest = *std::max_element(values.begin(), values.end());
  double ties = std::count(values.begin(), values.end(), largest);
  std::vector<double> gradient;
  for (double value : values)
    gradient.push_back(value == largest ? scale / ties : 0.0);
  return gradient;
}
} // namespace

TEST_CASE("the gradient of a max is the indicator of the maximum") {
  std::unique_ptr<CompiledModel> compiled =
      compileSource(kMaxModel, {"x", "y"}, "max.energy");
  REQUIRE_MESSAGE(compiled->model, compiled->diagnostics);
  RandomBindingOptions options;
  Bindings bindings = bindRandom(compiled->model, options);
  for (const char *name : {"x", "y"}) {
    std::optional<ArrayValue> gradient = compiled->gradient(bindings, name);
    REQUIRE_MESSAGE(gradient, compiled->diagnostics);
    const ArrayValue &value = bindings.getTensors().find(name)->second;
    std::vector<double> values(value.data.begin(), value.data.end());
    std::vector<double> expected =
        maxGradient(values, llvm::StringRef(name) == "x" ? 1.0 : 2.0);
    for (size_t i = 0; i < expected.size(); ++i)
      CHECK(gradient->data[i] == expected[i]);
  }
}

TEST_CASE("positions that tie at the maximum share its gradient") {
  std::unique_ptr<CompiledModel> compiled =
      compileSource(kMaxModel, {"x"}, "max.energy");
  REQUIRE_MESSAGE(compiled->model, compiled->diagnostics);
  Bindings bindings;
  bindings.setDim("N", 5);
  std::vector<double> x = {0.5, 2.0, -1.0, 2.0, 2.0};
  bindings.setTensor("x", ArrayValue({5}, x));
  bindings.setTensor("y", ArrayValue({5}, 0.0));
  std::optional<ArrayValue> gradient = compiled->gradient(bindings, "x");
  REQUIRE_MESSAGE(gradient, compiled->diagnostics);
  std::vector<double> expected = maxGradient(x, 1.0);
  REQUIRE(expected[1] == doctest::Approx(1.0 / 3));
  for (size_t i = 0; i < x.size(); ++i)
    CHECK(gradient->data[i] == doctest::Approx(expected[i]).epsilon(1e-15));
}
