//===- MomentumTest.cpp - momentum and nesterov follow paper 000 ----------===//
//
// On the quadratic bowl E = ½ (y − c)ᵀ A (y − c), A SPD, ∇E(y) = A (y − c)
// in closed form, so paper 000's recurrences can be iterated in plain C++:
//   eq. 9  (momentum): p ← β p + ∇E(y),         y ← y − lr p,
//   eq. 10 (nesterov): p ← β p + ∇E(y − β p),   y ← y − lr p,   p₀ = 0.
// The interpreted step program must give the same y and the same velocity
// state tensor `@y.velocity` after every step.
//
//===----------------------------------------------------------------------===//

#include "DynamicsTestSupport.h"

#include <doctest/doctest.h>

using namespace ::energy::testing;

namespace {

struct Case {
  const char *rule;
  double lr, beta;
  bool nesterov;
  /// A run-time value of the const `eta`, when the case sets one.
  std::optional<double> eta;
};

} // namespace

TEST_CASE("momentum and nesterov match paper 000 eqs. 9-10 exactly") {
  const Case cases[] = {
      {"momentum(lr = 0.1)", 0.1, 0.9, false, {}},
      {"nesterov(lr = 0.1)", 0.1, 0.9, true, {}},
      {"momentum(lr = 0.2, beta = 0.5)", 0.2, 0.5, false, {}},
      {"nesterov(lr = 0.15, beta = 0.6)", 0.15, 0.6, true, {}},
      // Options are expressions over consts: the declared value, and one
      // set at run time.
      {"momentum(lr = eta / 2)", 0.15, 0.9, false, {}},
      {"nesterov(lr = eta / 2, beta = 0.8)", 0.125, 0.8, true, 0.25},
  };
  for (const Case &test : cases) {
    CAPTURE(test.rule);
    std::unique_ptr<CompiledModel> compiled = compileSource(
        bowlSource(test.rule, "steps 10"), {}, "bowl.energy", Pipeline::Update);
    REQUIRE_MESSAGE(compiled->model, compiled->diagnostics);
    Bindings bindings = bindBowl(compiled->model);
    if (test.eta)
      bindings.setConst("eta", *test.eta);
    const Vector &a = bound(bindings, "A").data, &c = bound(bindings, "c").data;
    auto gradient = [&](const Vector &y) {
      return matVec(a, axpy(y, -1.0, c));
    };

    std::unique_ptr<DynamicsRun> run = DynamicsRun::start(*compiled, bindings);
    REQUIRE_MESSAGE(run, compiled->diagnostics);
    HeavyBall reference{bound(bindings, "y").data, {}};
    bool ran = run->run([&](int64_t k) {
      heavyBallStep(reference, test.lr, test.beta, test.nesterov, gradient);
      std::optional<ArrayValue> y = run->value("y"),
                                p = run->value("y.velocity");
      REQUIRE_MESSAGE((y && p), compiled->diagnostics);
      // Both sides do the same O(D) operations per step in a possibly
      // different order; the iteration is stable (lr λmax(A) < 2 (1 + β)),
      // so rounding stays a few ulps (~1e-15 relative) over 10 steps. 1e-12
      // leaves three orders of margin and catches any error in the recurrence
      // (a wrong sign or coefficient changes y at the 1e-2 level).
      INFO("step " << k);
      CHECK(relativeError(*y, reference.y) <= 1e-12);
      CHECK(relativeError(*p, reference.p) <= 1e-12);
    });
    REQUIRE_MESSAGE(ran, compiled->diagnostics);
    CHECK(run->stepsTaken() == 10);
  }
}
