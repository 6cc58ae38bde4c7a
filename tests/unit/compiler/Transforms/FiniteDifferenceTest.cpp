//===- FiniteDifferenceTest.cpp - Derived gradients vs finite differences -===//
//
// For every example model with an energy, the gradient derived by
// energy-derive-gradients (with every tensor in `wrt`: updated nodes,
// params and inputs) and run by the reference interpreter matches central
// finite differences of the interpreted energy along random directions and
// at sampled coordinates. hopfield_attention and free_energy_mixer have no
// energy and are not checked. Tolerances are justified in
// compareWithFiniteDifferences.
//
//===----------------------------------------------------------------------===//

#include "GradientTestSupport.h"

#include <doctest/doctest.h>

using namespace ::energy::testing;

namespace {
/// Compiles examples/`stem`.energy differentiating with respect to every
/// tensor, binds it at random as `options` says, and checks every gradient.
void checkExample(llvm::StringRef stem, RandomBindingOptions options) {
  std::unique_ptr<CompiledModel> compiled = compileExample(stem);
  REQUIRE_MESSAGE(compiled->model, compiled->diagnostics);
  Bindings bindings = bindRandom(compiled->model, options);
  std::vector<std::string> names = compiled->tensorNames();
  REQUIRE(!names.empty());
  for (const std::string &name : names) {
    INFO("model ", stem.str(), ", gradient of @", name);
    std::optional<ArrayValue> gradient = compiled->gradient(bindings, name);
    REQUIRE_MESSAGE(gradient, compiled->diagnostics);
    FiniteDifferenceReport report = compareWithFiniteDifferences(
        *compiled, bindings, name, *gradient, options.seed + 17);
    CHECK_MESSAGE(report.ok(), report.worst);
  }
}

RandomBindingOptions
withDims(std::initializer_list<std::pair<const char *, int64_t>> dims,
         uint64_t seed) {
  RandomBindingOptions options;
  options.seed = seed;
  for (const auto &[name, value] : dims)
    options.dims[name] = value;
  return options;
}
} // namespace

TEST_CASE("finite differences: cem_mlp (x, W, V, h)") {
  checkExample("cem_mlp", withDims({{"N", 3}, {"D", 3}, {"Dv", 4}}, 11));
}

TEST_CASE("finite differences: cross_attention (xq, xk, Wq, Wk)") {
  checkExample("cross_attention",
               withDims({{"NQ", 3}, {"NK", 4}, {"D", 3}}, 12));
}

TEST_CASE("finite differences: gmm (mu, prec, w, x)") {
  RandomBindingOptions options = withDims({{"N", 4}, {"K", 3}, {"D", 3}}, 13);
  options.spd = {"prec"};
  checkExample("gmm", options);
}

TEST_CASE("finite differences: hopfield (x, m)") {
  checkExample("hopfield", withDims({{"N", 3}, {"K", 4}, {"D", 3}}, 14));
}

TEST_CASE("finite differences: linear_attention (z, W, gamma, hs)") {
  checkExample("linear_attention", withDims({{"N", 3}, {"D", 3}}, 15));
}

TEST_CASE("finite differences: nag_attention at step 1 (x, Wq, Wk)") {
  RandomBindingOptions options = withDims({{"N", 3}, {"D", 3}, {"L", 2}}, 16);
  options.step = 1;
  checkExample("nag_attention", options);
}

TEST_CASE("finite differences: predictive_coding (mu, W1, b1, x)") {
  checkExample("predictive_coding",
               withDims({{"N", 3}, {"K", 2}, {"D", 3}, {"Z", 2}}, 17));
}

TEST_CASE("finite differences: quadratic_bowl (y, A, c)") {
  checkExample("quadratic_bowl", withDims({{"D", 4}}, 18));
}

TEST_CASE("finite differences: self_attention (x, Wq, Wk)") {
  checkExample("self_attention", withDims({{"N", 4}, {"D", 3}}, 19));
}

TEST_CASE("finite differences: slds (x, A, b, logpi, prec)") {
  RandomBindingOptions options = withDims({{"T", 5}, {"K", 2}, {"D", 3}}, 20);
  options.spd = {"prec"};
  checkExample("slds", options);
}

TEST_CASE("finite differences: slot_attention (mu, Wk, Wq, x)") {
  checkExample("slot_attention", withDims({{"N", 4}, {"S", 3}, {"D", 3}}, 21));
}

TEST_CASE("finite differences: tied_mha (x, Wq, Wk, h)") {
  // Dh = D / H = 3; a temperature below 1 keeps the causal softmax far
  // from uniform at these scales.
  RandomBindingOptions options = withDims({{"N", 4}, {"D", 6}, {"H", 2}}, 22);
  options.consts["tau"] = 0.7;
  checkExample("tied_mha", options);
}

TEST_CASE("finite differences: the check detects a wrong gradient") {
  std::unique_ptr<CompiledModel> compiled = compileExample("self_attention");
  REQUIRE_MESSAGE(compiled->model, compiled->diagnostics);
  RandomBindingOptions options = withDims({{"N", 4}, {"D", 3}}, 19);
  Bindings bindings = bindRandom(compiled->model, options);
  std::optional<ArrayValue> gradient = compiled->gradient(bindings, "x");
  REQUIRE_MESSAGE(gradient, compiled->diagnostics);
  CHECK(compareWithFiniteDifferences(*compiled, bindings, "x", *gradient, 5)
            .ok());
  // An error of 1e-3 in one entry (the first, which is always sampled):
  // with the same samples, the check fails by orders of magnitude.
  gradient->data.front() += 1e-3;
  FiniteDifferenceReport report =
      compareWithFiniteDifferences(*compiled, bindings, "x", *gradient, 5);
  CHECK_FALSE(report.ok());
  CHECK(report.worstRatio > 1e3);
}
