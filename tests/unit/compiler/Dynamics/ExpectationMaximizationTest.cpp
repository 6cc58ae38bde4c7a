//===- ExpectationMaximizationTest.cpp - The gmm example's EM vs sklearn --===//
//
// The gmm example's dynamics (mu, prec, w: stationary) are full EM. From
// the initial parameters scikit-learn's GaussianMixture(covariance_type=
// 'full', reg_covar=1e-6) was given, 20 steps must reproduce its means,
// precisions, weights and mean log-likelihood after every iteration
// (gmm_reference.json, made by gmm_reference.py with Debian's
// python3-sklearn). The model's w are log weights: softmax(w) are sklearn's
// weights_. The model's energy leaves out the Gaussian normaliser, so the
// mean log-likelihood is −E/N − (D/2) log 2π.
//
//===----------------------------------------------------------------------===//

#include "DynamicsTestSupport.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <doctest/doctest.h>

#include <cmath>

using namespace ::energy::testing;

namespace {
/// The numbers of a nested JSON array, flattened row-major.
void flatten(const llvm::json::Value &value, Vector &out) {
  if (const llvm::json::Array *array = value.getAsArray()) {
    for (const llvm::json::Value &element : *array)
      flatten(element, out);
    return;
  }
  out.push_back(*value.getAsNumber());
}

Vector numbers(const llvm::json::Object &object, llvm::StringRef key) {
  Vector out;
  flatten(*object.get(key), out);
  return out;
}
} // namespace

TEST_CASE("the gmm example's EM reproduces scikit-learn's GaussianMixture") {
  auto file = llvm::MemoryBuffer::getFile(ENERGY_DYNAMICS_TEST_DIR
                                          "/gmm_reference.json");
  REQUIRE(file);
  llvm::Expected<llvm::json::Value> parsed =
      llvm::json::parse((*file)->getBuffer());
  REQUIRE(bool(parsed));
  const llvm::json::Object &reference = *parsed->getAsObject();
  int64_t n = *reference.getInteger("N"), d = *reference.getInteger("D"),
          k = *reference.getInteger("K");
  const llvm::json::Object &init = *reference.getObject("init");

  std::unique_ptr<CompiledModel> compiled =
      compileExample("gmm", /*wrtAll=*/false, Pipeline::Update);
  REQUIRE_MESSAGE(compiled->model, compiled->diagnostics);
  Bindings bindings;
  bindings.setDim("N", n).setDim("K", k).setDim("D", d);
  bindings.setTensor("x", ArrayValue({n, d}, numbers(reference, "x")));
  bindings.setTensor("mu", ArrayValue({k, d}, numbers(init, "means")));
  bindings.setTensor("prec",
                     ArrayValue({k, d, d}, numbers(init, "precisions")));
  Vector logWeights = numbers(init, "weights");
  for (double &w : logWeights)
    w = std::log(w);
  bindings.setTensor("w", ArrayValue({k}, logWeights));

  std::unique_ptr<DynamicsRun> run = DynamicsRun::start(*compiled, bindings);
  REQUIRE_MESSAGE(run, compiled->diagnostics);
  auto meanLogLikelihood = [&]() {
    std::optional<double> energy = run->energy();
    REQUIRE_MESSAGE(energy, compiled->diagnostics);
    return -*energy / n - 0.5 * d * std::log(2 * M_PI);
  };
  double previous = meanLogLikelihood();
  CHECK(previous ==
        doctest::Approx(*reference.getNumber("initial_mean_log_likelihood"))
            .epsilon(1e-12));

  const llvm::json::Array &iterations = *reference.getArray("iterations");
  for (size_t step = 0; step < iterations.size(); ++step) {
    CAPTURE(step);
    REQUIRE_MESSAGE(run->step(), compiled->diagnostics);
    REQUIRE_FALSE(run->stopped());
    const llvm::json::Object &expected = *iterations[step].getAsObject();
    std::optional<ArrayValue> mu = run->value("mu"), prec = run->value("prec"),
                              w = run->value("w");
    REQUIRE((mu && prec && w));
    Vector weights(w->data.size());
    double total = 0;
    for (size_t i = 0; i < weights.size(); ++i)
      total += weights[i] = std::exp(w->data[i]);
    for (double &weight : weights)
      weight /= total;
    // Both sides compute the same EM step in double precision in different
    // orders (sklearn through Cholesky factors, we through inverses); the
    // clusters are well separated and the scatter matrices well conditioned,
    // so the steps agree to ~1e-13 and 20 contracting EM steps keep that
    // below 1e-9. A wrong formula (a missing ridge, old means in the
    // scatter, unnormalised weights) is off by 1e-6 or more.
    CHECK(relativeError(*mu, numbers(expected, "means")) <= 1e-9);
    CHECK(relativeError(*prec, numbers(expected, "precisions")) <= 1e-9);
    CHECK(relativeError(ArrayValue({k}, weights),
                        numbers(expected, "weights")) <= 1e-9);
    double likelihood = meanLogLikelihood();
    CHECK(likelihood ==
          doctest::Approx(*expected.getNumber("mean_log_likelihood"))
              .epsilon(1e-9));
    // EM never decreases the likelihood (up to rounding).
    CHECK(likelihood >= previous - 1e-12);
    previous = likelihood;
  }
}

// With a precision per point (M depends on i) the M-step of the means is a
// linear solve per component. Its result must satisfy the first-order
// condition of the responsibility-weighted objective, checked here directly:
// Σ_i r_ik M̄_i (x_i − μ_k) = 0 with r at the entry values and
// M̄ = (M + Mᵀ)/2. Rounding of a 2×2 solve over 12 points stays near 1e-14
// relative to the terms' scale; 1e-10 leaves margin.
TEST_CASE("a stationary mean under per-point precisions solves its system") {
  std::unique_ptr<CompiledModel> compiled = compileSource(
      R"(model het {
  dim N, K, D;
  input x : [N, D], L : [N, D, D];
  state mu : [K, D];
  energy fit = -sum(i: N) lse(k: K) (-0.5 * quad(x[i] - mu[k], L[i]));
  dynamics { mu: stationary; steps 1; }
}
)",
      {}, "het.energy", Pipeline::Update);
  REQUIRE_MESSAGE(compiled->model, compiled->diagnostics);
  RandomBindingOptions options;
  options.dims = {{"N", 12}, {"K", 3}, {"D", 2}};
  options.scale = 1.0;
  options.spd = {"L"};
  Bindings bindings = bindRandom(compiled->model, options);
  const Vector &x = bound(bindings, "x").data, &l = bound(bindings, "L").data;
  Vector mu0 = bound(bindings, "mu").data;

  std::unique_ptr<DynamicsRun> run = DynamicsRun::start(*compiled, bindings);
  REQUIRE_MESSAGE(run, compiled->diagnostics);
  REQUIRE_MESSAGE(run->step(), compiled->diagnostics);
  std::optional<ArrayValue> mu = run->value("mu");
  REQUIRE(mu);

  const int n = 12, k = 3, d = 2;
  auto sym = [&](int i, int a, int b) {
    return 0.5 * (l[(i * d + a) * d + b] + l[(i * d + b) * d + a]);
  };
  // Responsibilities at the entry means.
  std::vector<double> r(n * k);
  for (int i = 0; i < n; ++i) {
    std::vector<double> e(k);
    double top = -INFINITY;
    for (int c = 0; c < k; ++c) {
      double q = 0;
      for (int a = 0; a < d; ++a)
        for (int b = 0; b < d; ++b)
          q += (x[i * d + a] - mu0[c * d + a]) * sym(i, a, b) *
               (x[i * d + b] - mu0[c * d + b]);
      e[c] = -0.5 * q;
      top = std::max(top, e[c]);
    }
    double total = 0;
    for (int c = 0; c < k; ++c)
      total += std::exp(e[c] - top);
    for (int c = 0; c < k; ++c)
      r[i * k + c] = std::exp(e[c] - top) / total;
  }
  for (int c = 0; c < k; ++c) {
    double residual[2] = {0, 0}, scale = 0;
    for (int i = 0; i < n; ++i)
      for (int a = 0; a < d; ++a)
        for (int b = 0; b < d; ++b) {
          double term = r[i * k + c] * sym(i, a, b) *
                        (x[i * d + b] - mu->data[c * d + b]);
          residual[a] += term;
          scale += std::fabs(term);
        }
    CAPTURE(c);
    CHECK(std::fabs(residual[0]) <= 1e-10 * std::max(1.0, scale));
    CHECK(std::fabs(residual[1]) <= 1e-10 * std::max(1.0, scale));
  }
}
