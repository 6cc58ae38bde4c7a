//===- StoppingAndStepTest.cpp - `until` and `step` as an index -----------===//
//
// A stopping rule is checked after each step, with `grad` the gradient at
// the values the step produced: the run ends after the first step at which
// it holds. `step` counts steps from 0 and indexes per-step parameters:
// step k of nag_attention uses Wq[k] and Wk[k].
//
//===----------------------------------------------------------------------===//

#include "DynamicsTestSupport.h"

#include <doctest/doctest.h>

#include <cmath>

using namespace ::energy::testing;

TEST_CASE("until maxabs(grad) < tol stops gd at the first step it holds") {
  constexpr double kLr = 0.1, kTol = 1e-3;
  constexpr int64_t kSteps = 500;
  std::unique_ptr<CompiledModel> compiled = compileSource(
      bowlSource("gd(lr = 0.1)", "steps 500 until maxabs(grad) < 1e-3"), {},
      "bowl.energy", Pipeline::Update);
  REQUIRE_MESSAGE(compiled->model, compiled->diagnostics);
  Bindings bindings = bindBowl(compiled->model);
  const Vector &a = bound(bindings, "A").data, &c = bound(bindings, "c").data;
  auto gradient = [&](const Vector &y) { return matVec(a, axpy(y, -1.0, c)); };

  // The reference: gd is the β = 0 case of the heavy-ball recurrence. The
  // rule must hold first after step `expected` (1-based), and no step's
  // maxabs may lie within 1e-6 relative of tol, where rounding could flip
  // the comparison.
  HeavyBall reference{bound(bindings, "y").data, {}};
  std::vector<Vector> trajectory;
  int64_t expected = 0;
  while (expected < kSteps) {
    heavyBallStep(reference, kLr, 0.0, /*nesterov=*/false, gradient);
    trajectory.push_back(reference.y);
    ++expected;
    double largest = maxAbs(gradient(reference.y));
    REQUIRE(std::fabs(largest - kTol) > 1e-6 * kTol);
    if (largest < kTol)
      break;
  }
  // A real early stop, after more than one step.
  REQUIRE(expected > 1);
  REQUIRE(expected < kSteps);

  std::unique_ptr<DynamicsRun> run = DynamicsRun::start(*compiled, bindings);
  REQUIRE_MESSAGE(run, compiled->diagnostics);
  bool ran = run->run([&](int64_t k) {
    REQUIRE(k < static_cast<int64_t>(trajectory.size()));
    std::optional<ArrayValue> y = run->value("y");
    REQUIRE_MESSAGE(y, compiled->diagnostics);
    // Same operations as the reference, possibly reordered; gd contracts
    // here (lr λmax(A) < 1), so the error stays ~1e-15.
    CHECK(relativeError(*y, trajectory[k]) <= 1e-12);
    // Not stopped before the reference's step.
    CHECK(run->stopped() == (k + 1 == expected));
  });
  REQUIRE_MESSAGE(ran, compiled->diagnostics);
  CHECK(run->stopped());
  CHECK(run->stepsTaken() == expected);
}

namespace {

constexpr int64_t kN = 3, kD = 3, kL = 4;

/// The gradient of nag_attention's energy
///   E = −Σ_c lse_p (Wq[l] x_c)·(Wk[l] x_p) / √D
/// at layer l: with q = Wq[l] x, k = Wk[l] x and π_c = softmax_p(s_cp),
///   ∂E/∂x_m = −(Σ_p π_mp Wq[l]ᵀ k_p + Σ_c π_cm Wk[l]ᵀ q_c) / √D.
/// Also returns E through `energy`.
Vector nagGradient(const Vector &x, const Bindings &bindings, int64_t l,
                   double *energy = nullptr) {
  const Vector &wq = bound(bindings, "Wq").data,
               &wk = bound(bindings, "Wk").data;
  double scale = 1 / std::sqrt(static_cast<double>(kD));
  auto project = [&](const Vector &w) {
    Vector result(kN * kD, 0.0);
    for (int64_t i = 0; i < kN; ++i)
      for (int64_t d = 0; d < kD; ++d)
        for (int64_t e = 0; e < kD; ++e)
          result[i * kD + d] += w[(l * kD + d) * kD + e] * x[i * kD + e];
    return result;
  };
  Vector q = project(wq), k = project(wk);
  Vector pi(kN * kN), g(kN * kD, 0.0);
  double total = 0;
  for (int64_t c = 0; c < kN; ++c) {
    double largest = -INFINITY, sum = 0;
    for (int64_t p = 0; p < kN; ++p) {
      double s = 0;
      for (int64_t d = 0; d < kD; ++d)
        s += q[c * kD + d] * k[p * kD + d];
      pi[c * kN + p] = s * scale;
      largest = std::max(largest, s * scale);
    }
    for (int64_t p = 0; p < kN; ++p)
      sum += pi[c * kN + p] = std::exp(pi[c * kN + p] - largest);
    for (int64_t p = 0; p < kN; ++p)
      pi[c * kN + p] /= sum;
    total -= largest + std::log(sum);
  }
  if (energy)
    *energy = total;
  for (int64_t c = 0; c < kN; ++c)
    for (int64_t p = 0; p < kN; ++p)
      for (int64_t d = 0; d < kD; ++d)
        for (int64_t e = 0; e < kD; ++e) {
          double weight = pi[c * kN + p] * scale;
          // From x_c (the query side) and from x_p (the key side).
          g[c * kD + e] -= weight * wq[(l * kD + d) * kD + e] * k[p * kD + d];
          g[p * kD + e] -= weight * wk[(l * kD + d) * kD + e] * q[c * kD + d];
        }
  return g;
}

} // namespace

TEST_CASE("step k of nag_attention uses Wq[k] and Wk[k]") {
  std::unique_ptr<CompiledModel> compiled =
      compileExample("nag_attention", /*wrtAll=*/false, Pipeline::Update);
  REQUIRE_MESSAGE(compiled->model, compiled->diagnostics);
  RandomBindingOptions options;
  options.dims = {{"N", kN}, {"D", kD}, {"L", kL}};
  options.scale = 0.5;
  Bindings bindings = bindRandom(compiled->model, options);
  Vector start = bound(bindings, "x").data;

  // nesterov(lr = 1.0, beta = 0.9), layer k at step k; and, to show the
  // check can tell layers apart, the same run with layer 0 throughout.
  HeavyBall reference{start, {}}, layerZero{start, {}};
  std::unique_ptr<DynamicsRun> run = DynamicsRun::start(*compiled, bindings);
  REQUIRE_MESSAGE(run, compiled->diagnostics);
  bool ran = run->run([&](int64_t k) {
    heavyBallStep(reference, 1.0, 0.9, /*nesterov=*/true,
                  [&](const Vector &x) { return nagGradient(x, bindings, k); });
    heavyBallStep(layerZero, 1.0, 0.9, /*nesterov=*/true,
                  [&](const Vector &x) { return nagGradient(x, bindings, 0); });
    std::optional<ArrayValue> x = run->value("x");
    REQUIRE_MESSAGE(x, compiled->diagnostics);
    // Softmax weights and O(N·D²) sums per step, reordered: ~1e-15
    // relative per step, over 4 steps; 1e-12 leaves a wide margin.
    INFO("step " << k);
    CHECK(relativeError(*x, reference.y) <= 1e-12);
    if (k > 0)
      CHECK(relativeError(*x, layerZero.y) > 1e-6);
  });
  REQUIRE_MESSAGE(ran, compiled->diagnostics);
  CHECK(run->stepsTaken() == kL);

  // After the run the energy is evaluated with `step` the last step taken.
  double expected = 0;
  nagGradient(reference.y, bindings, kL - 1, &expected);
  std::optional<double> energy = run->energy();
  REQUIRE_MESSAGE(energy, compiled->diagnostics);
  CHECK(std::fabs(*energy - expected) <=
        1e-12 * std::max(1.0, std::fabs(expected)));
}
