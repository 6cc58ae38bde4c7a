//===- DescentTest.cpp - gd with a small step lowers the energy -----------===//
//
// For an energy whose Hessian is bounded above by L·I on the whole space,
// the descent lemma gives, for one gd step x' = x − lr g (g = ∇E(x)),
//   E(x') ≤ E(x) − lr (1 − L lr / 2) |g|²,
// so every lr ≤ 1/L lowers the energy by at least lr/2 |g|² per step. Each
// test derives such an L from the bound tensors (a bound the energy must
// obey, not a fit) and checks that inequality at every step of the run, not
// just that the energy went down.
//
//===----------------------------------------------------------------------===//

#include "DynamicsTestSupport.h"

#include <doctest/doctest.h>

#include <cmath>

using namespace ::energy::testing;

namespace {

/// Steps `compiled` from `bindings` to the end of its run and checks the
/// descent lemma above at every step for gd rules on `node` with step `lr`
/// and Hessian bound `hessianBound` (lr · L ≤ 1 is required).
void checkDescent(CompiledModel &compiled, const Bindings &bindings,
                  llvm::StringRef node, double lr, double hessianBound) {
  REQUIRE(lr * hessianBound <= 1.0);
  std::unique_ptr<DynamicsRun> run = DynamicsRun::start(compiled, bindings);
  REQUIRE_MESSAGE(run, compiled.diagnostics);
  std::optional<int64_t> count = run->stepCount();
  REQUIRE_MESSAGE(count, compiled.diagnostics);
  REQUIRE(*count >= 5);
  for (int64_t k = 0; k < *count; ++k) {
    std::optional<double> before = run->energy();
    std::optional<ArrayValue> g = run->gradient(node);
    REQUIRE_MESSAGE((before && g), compiled.diagnostics);
    REQUIRE_MESSAGE(run->step(), compiled.diagnostics);
    std::optional<double> after = run->energy();
    REQUIRE_MESSAGE(after, compiled.diagnostics);
    double guaranteed = lr * (1 - hessianBound * lr / 2) * squaredNorm(g->data);
    // The energies are sums of O(N·K) terms of size O(1) evaluated in
    // double precision: their rounding error is ~1e-15·|E|, far below the
    // slack 1e-12·max(1, |E|); the guaranteed decrease must exceed the
    // slack a thousandfold, so the check is not vacuous.
    double slack = 1e-12 * std::max(1.0, std::fabs(*before));
    INFO("step " << k << ": E " << *before << " -> " << *after
                 << ", guaranteed decrease " << guaranteed);
    CHECK(guaranteed > 1e3 * slack);
    CHECK(*after <= *before - guaranteed + slack);
  }
}

} // namespace

TEST_CASE("gd lowers the hopfield energy at every step (concave: any lr)") {
  // E = −Σ_i lse_μ β x_i·m_μ. Its Hessian in x is −β² times a covariance of
  // the m_μ under the softmax weights: negative semidefinite, so L = 0 and
  // the file's lr = 1 lowers E by at least lr |g|² per step.
  std::unique_ptr<CompiledModel> compiled =
      compileExample("hopfield", /*wrtAll=*/false, Pipeline::Update);
  REQUIRE_MESSAGE(compiled->model, compiled->diagnostics);
  RandomBindingOptions options;
  options.dims = {{"N", 3}, {"K", 4}, {"D", 3}};
  options.scale = 0.5;
  checkDescent(*compiled, bindRandom(compiled->model, options), "x",
               /*lr=*/1.0, /*hessianBound=*/0.0);
}

TEST_CASE("gd lowers the self_attention energy at every step") {
  // E = −Σ_c lse_p x_cᵀ A x_p with A = Wqᵀ Wk. The lse's own curvature enters
  // with a minus sign (negative semidefinite); the rest is −(Π⊗A + Πᵀ⊗Aᵀ)
  // for the row-stochastic softmax weights Π, whose norm is at most
  // 2 |Π|₂ |A|₂ ≤ 2 √N |A|_F (|Π|₂ ≤ √(|Π|₁ |Π|∞) ≤ √N). So
  // L = 2 √N |WqᵀWk|_F, and the file's lr = 0.1 must satisfy lr L ≤ 1.
  std::unique_ptr<CompiledModel> compiled =
      compileExample("self_attention", /*wrtAll=*/false, Pipeline::Update);
  REQUIRE_MESSAGE(compiled->model, compiled->diagnostics);
  RandomBindingOptions options;
  options.dims = {{"N", 4}, {"D", 3}};
  options.seed = 7;
  Bindings bindings = bindRandom(compiled->model, options);
  const Vector &wq = bound(bindings, "Wq").data,
               &wk = bound(bindings, "Wk").data;
  int64_t d = 3, n = 4;
  Vector a(d * d, 0.0);
  for (int64_t r = 0; r < d; ++r)
    for (int64_t c = 0; c < d; ++c)
      for (int64_t k = 0; k < d; ++k)
        a[r * d + c] += wq[k * d + r] * wk[k * d + c];
  double hessianBound = 2 * std::sqrt(static_cast<double>(n)) * frobenius(a);
  checkDescent(*compiled, bindings, "x", /*lr=*/0.1, hessianBound);
}

TEST_CASE("gd on the means of a gmm lowers its energy at every step") {
  // The gmm of energy-language.md with `mu: gd`; prec and w have no rule,
  // so they are held fixed. With responsibilities r_ik, the Hessian in mu
  // is blockdiag_k(Σ_i r_ik P_k) minus a positive semidefinite term (the
  // lse's curvature), so L = N max_k |P_k|_F. lr = eta = 1/L (a const
  // option, set at bind time).
  const char *source = R"(model gmm_gd {
  dim N, K, D;
  input x : [N, D];
  state mu : [K, D], prec : [K, D, D] = eye, w : [K] = zeros;
  const eta = 0.01;
  energy fit = -sum(i: N) lse(k: K) (log_softmax(w)[k] + 0.5 * logdet(prec[k]) - 0.5 * quad(x[i] - mu[k], prec[k]));
  dynamics { mu: gd(lr = eta); steps 20; }
}
)";
  std::unique_ptr<CompiledModel> compiled =
      compileSource(source, {}, "gmm_gd.energy", Pipeline::Update);
  REQUIRE_MESSAGE(compiled->model, compiled->diagnostics);
  RandomBindingOptions options;
  options.dims = {{"N", 6}, {"K", 2}, {"D", 2}};
  options.scale = 1.0;
  options.spd = {"prec"};
  Bindings bindings = bindRandom(compiled->model, options);
  const ArrayValue &prec = bound(bindings, "prec");
  double largest = 0;
  for (int64_t k = 0; k < 2; ++k)
    largest =
        std::max(largest, frobenius(Vector(prec.data.begin() + 4 * k,
                                           prec.data.begin() + 4 * (k + 1))));
  double hessianBound = 6 * largest, lr = 1 / hessianBound;
  bindings.setConst("eta", lr);
  checkDescent(*compiled, bindings, "mu", lr, hessianBound);

  // A state node without a rule is held fixed.
  std::unique_ptr<DynamicsRun> run = DynamicsRun::start(*compiled, bindings);
  REQUIRE_MESSAGE(run, compiled->diagnostics);
  REQUIRE_MESSAGE(run->run(), compiled->diagnostics);
  CHECK(run->stepsTaken() == 20);
  for (const char *fixed : {"prec", "w"}) {
    std::optional<ArrayValue> value = run->value(fixed);
    REQUIRE(value);
    CHECK(value->data == bound(bindings, fixed).data);
  }
  std::optional<ArrayValue> mu = run->value("mu");
  REQUIRE(mu);
  CHECK(mu->data != bound(bindings, "mu").data);
}
