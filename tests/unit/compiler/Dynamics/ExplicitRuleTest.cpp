//===- ExplicitRuleTest.cpp - Explicit rules: hopfield attention ----------===//
//
// examples/hopfield_attention.energy (paper 002 eq. 10) is stepped by two
// explicit rules, in the order written, with per-layer weights W[step]:
//   H ← a' H + (1 − a') S,   S[i, j] = (Wq[l] x_i)·(Wk[l] x_j) / √D,
//   x ← a x + (1 − a) softmax_rows(H) (x Wv[l]ᵀ).
// With a = a' = 0 this is standard softmax attention layer by layer:
// x_{l+1} = softmax_rows(Q Kᵀ / √D) V with Q = x Wq[l]ᵀ, K = x Wk[l]ᵀ,
// V = x Wv[l]ᵀ. The reference below computes exactly that, in plain loops,
// with a and a' as parameters so that the carried state is checked too.
//
//===----------------------------------------------------------------------===//

#include "DynamicsTestSupport.h"

#include <doctest/doctest.h>

#include <cmath>

using namespace ::energy::testing;

namespace {

constexpr int64_t kN = 4, kD = 3, kL = 3;

/// x Wᵀ for x of shape [N, D] and the layer-`l` slice of W : [L, D, D].
Vector projectRows(const Vector &x, const Vector &w, int64_t l) {
  Vector result(kN * kD, 0.0);
  for (int64_t i = 0; i < kN; ++i)
    for (int64_t d = 0; d < kD; ++d)
      for (int64_t e = 0; e < kD; ++e)
        result[i * kD + d] += x[i * kD + e] * w[(l * kD + d) * kD + e];
  return result;
}

/// One layer of paper 002's attention with carried scores: updates `h`
/// ([N, N]) and `x` ([N, D]).
void attentionLayer(Vector &x, Vector &h, const Bindings &bindings, int64_t l,
                    double a, double a2) {
  Vector q = projectRows(x, bound(bindings, "Wq").data, l),
         k = projectRows(x, bound(bindings, "Wk").data, l),
         v = projectRows(x, bound(bindings, "Wv").data, l);
  for (int64_t i = 0; i < kN; ++i)
    for (int64_t j = 0; j < kN; ++j) {
      double score = 0;
      for (int64_t d = 0; d < kD; ++d)
        score += q[i * kD + d] * k[j * kD + d];
      h[i * kN + j] = a2 * h[i * kN + j] +
                      (1 - a2) * score / std::sqrt(static_cast<double>(kD));
    }
  Vector next(kN * kD, 0.0);
  for (int64_t i = 0; i < kN; ++i) {
    double largest = -INFINITY, total = 0;
    for (int64_t j = 0; j < kN; ++j)
      largest = std::max(largest, h[i * kN + j]);
    Vector weights(kN);
    for (int64_t j = 0; j < kN; ++j)
      total += weights[j] = std::exp(h[i * kN + j] - largest);
    for (int64_t d = 0; d < kD; ++d) {
      double mixed = 0;
      for (int64_t j = 0; j < kN; ++j)
        mixed += weights[j] / total * v[j * kD + d];
      next[i * kD + d] = a * x[i * kD + d] + (1 - a) * mixed;
    }
  }
  x = next;
}

} // namespace

TEST_CASE("hopfield_attention follows softmax attention layer by layer") {
  std::unique_ptr<CompiledModel> compiled =
      compileExample("hopfield_attention", /*wrtAll=*/false, Pipeline::Update);
  REQUIRE_MESSAGE(compiled->model, compiled->diagnostics);
  // a = a' = 0: standard attention; the file's a = a' = 0.5: the carried
  // scores H.
  for (std::pair<double, double> mixing :
       {std::pair(0.0, 0.0), std::pair(0.5, 0.5)}) {
    double a = mixing.first, a2 = mixing.second;
    CAPTURE(a);
    CAPTURE(a2);
    RandomBindingOptions options;
    options.dims = {{"N", kN}, {"D", kD}, {"L", kL}};
    options.scale = 0.8;
    options.consts = {{"a", a}, {"a2", a2}};
    // H starts at its initialiser, zeros.
    options.unbound = {"H"};
    Bindings bindings = bindRandom(compiled->model, options);
    Vector x = bound(bindings, "x").data, h(kN * kN, 0.0);
    std::unique_ptr<DynamicsRun> run = DynamicsRun::start(*compiled, bindings);
    REQUIRE_MESSAGE(run, compiled->diagnostics);
    bool ran = run->run([&](int64_t l) {
      attentionLayer(x, h, bindings, l, a, a2);
      std::optional<ArrayValue> gotX = run->value("x"), gotH = run->value("H");
      REQUIRE_MESSAGE((gotX && gotH), compiled->diagnostics);
      // O(D) dot products, a softmax over N and an O(N) mix per entry,
      // summed in a possibly different order: ~1e-15 relative per layer.
      // 1e-12 leaves a wide margin; a wrong layer's weights or a transposed
      // Wv changes x at the 1e-2 level.
      INFO("layer " << l);
      CHECK(relativeError(*gotX, x) <= 1e-12);
      CHECK(relativeError(*gotH, h) <= 1e-12);
    });
    REQUIRE_MESSAGE(ran, compiled->diagnostics);
    CHECK(run->stepsTaken() == kL);
  }
}
