//===- ClosedFormTest.cpp - Derived gradients vs the papers' closed forms -===//
//
// The gradients derived from the example models, run by the interpreter,
// against the closed forms printed in the papers, which are computed here
// independently with plain loops over the bound tensors (never through the
// interpreter's evaluation of IR). Where a printed equation has a known slip
// (shared/DESIGN.md §8) the corrected form is used and the comment says so;
// finite differences (FiniteDifferenceTest.cpp) decide any disagreement.
//
// Equation numbers follow the paper texts in shared/papers/. In 004 the GMM
// mean gradient is the unnumbered display after eq. 5, eqs. 7–8 are cross
// attention, 10–11 Hopfield, 13–14 slot attention and 16 self-attention.
//
//===----------------------------------------------------------------------===//

#include "support/DenseMath.h"
#include "GradientTestSupport.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

using namespace ::energy::testing;

namespace {
using Vec = std::vector<double>;

//===----------------------------------------------------------------------===//
// Plain linear algebra on row-major data
//===----------------------------------------------------------------------===//

/// The row-major sub-array of `t` at leading `indices`.
Vec at(const ArrayValue &t, std::vector<int64_t> indices) {
  return t.slice(indices).data;
}

Vec sub(const Vec &a, const Vec &b) {
  Vec result(a);
  for (size_t i = 0; i < a.size(); ++i)
    result[i] -= b[i];
  return result;
}

/// y += alpha · x.
void axpy(Vec &y, double alpha, const Vec &x) {
  for (size_t i = 0; i < y.size(); ++i)
    y[i] += alpha * x[i];
}

Vec softmax(const Vec &logits) {
  if (logits.empty())
    return {};
  double largest = *std::max_element(logits.begin(), logits.end());
  Vec weights(logits.size());
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i)
    sum += weights[i] = std::exp(logits[i] - largest);
  for (double &weight : weights)
    weight /= sum;
  return weights;
}

/// log det of a symmetric positive definite d × d matrix, by Cholesky.
double logDet(const Vec &m) {
  size_t d = static_cast<size_t>(std::lround(std::sqrt(m.size())));
  Vec l(d * d, 0.0);
  double result = 0;
  for (size_t j = 0; j < d; ++j) {
    double diagonal = m[j * d + j];
    for (size_t k = 0; k < j; ++k)
      diagonal -= l[j * d + k] * l[j * d + k];
    l[j * d + j] = std::sqrt(diagonal);
    result += 2 * std::log(l[j * d + j]);
    for (size_t i = j + 1; i < d; ++i) {
      double sum = m[i * d + j];
      for (size_t k = 0; k < j; ++k)
        sum -= l[i * d + k] * l[j * d + k];
      l[i * d + j] = sum / l[j * d + j];
    }
  }
  return result;
}

double silu(double u) { return u / (1 + std::exp(-u)); }

/// Adds `value` into the slice of `t` at leading `indices`.
void addAt(ArrayValue &t, std::vector<int64_t> indices, const Vec &value) {
  ArrayValue slice = t.slice(indices);
  for (size_t i = 0; i < value.size(); ++i)
    slice.data[i] += value[i];
  t.setSlice(indices, slice);
}

//===----------------------------------------------------------------------===//
// Harness
//===----------------------------------------------------------------------===//

/// A compiled example with its bindings.
struct Case {
  std::unique_ptr<CompiledModel> compiled;
  Bindings bindings;

  const ArrayValue &operator[](llvm::StringRef name) const {
    return bindings.getTensors().find(name)->second;
  }
  double dim(llvm::StringRef name) const {
    return static_cast<double>(bindings.getDims().lookup(name));
  }
  int64_t size(llvm::StringRef name) const {
    return bindings.getDims().lookup(name);
  }

  /// The derived ∂E/∂`name`.
  ArrayValue gradient(llvm::StringRef name) {
    std::optional<ArrayValue> value = compiled->gradient(bindings, name);
    REQUIRE_MESSAGE(value, compiled->diagnostics);
    return *value;
  }
  /// The derived −∂E/∂`name`, the papers' usual left-hand side.
  ArrayValue negativeGradient(llvm::StringRef name) {
    ArrayValue value = gradient(name);
    for (double &entry : value.data)
      entry = -entry;
    return value;
  }
};

Case prepare(std::unique_ptr<CompiledModel> compiled,
             const RandomBindingOptions &options) {
  REQUIRE_MESSAGE(compiled->model, compiled->diagnostics);
  Bindings bindings = bindRandom(compiled->model, options);
  return Case{std::move(compiled), std::move(bindings)};
}

Case prepareExample(llvm::StringRef stem, const RandomBindingOptions &options) {
  return prepare(compileExample(stem), options);
}

RandomBindingOptions
withDims(std::initializer_list<std::pair<const char *, int64_t>> dims,
         uint64_t seed) {
  RandomBindingOptions options;
  options.seed = seed;
  // Entries of 0.5·N(0, 1) keep the softmax weights away from uniform.
  options.scale = 0.5;
  for (const auto &[name, value] : dims)
    options.dims[name] = value;
  return options;
}

/// Both sides are exact computations in double precision that differ only
/// in rounding order, so they agree to ~1e-13 relative; 1e-10 leaves room.
void checkMatches(const ArrayValue &derived, const ArrayValue &expected,
                  llvm::StringRef what) {
  INFO(what.str());
  REQUIRE(derived.shape == expected.shape);
  double difference = maxAbsDifference(derived, expected);
  double scale = std::max(1.0, maxAbs(expected));
  CHECK_MESSAGE(difference <= 1e-10 * scale,
                "max |derived − closed form| = ", difference,
                " for max |closed form| = ", maxAbs(expected));
  // Guard against a vacuous comparison of zeros.
  CHECK(maxAbs(expected) > 1e-6);
}
} // namespace

//===----------------------------------------------------------------------===//
// Paper 004
//===----------------------------------------------------------------------===//

TEST_CASE("004 §2 GMM: gradient w.r.t. the means") {
  // −∂E/∂μ_k = Σ_i softmax_k(A_ik) Σ_k⁻¹ (x_i − μ_k) with Σ_k⁻¹ = prec[k]
  // (symmetric) and A_ik = log_softmax(w)_k + ½ logdet prec_k − ½ quad.
  RandomBindingOptions options = withDims({{"N", 5}, {"K", 3}, {"D", 3}}, 31);
  options.spd = {"prec"};
  Case c = prepareExample("gmm", options);
  const ArrayValue &x = c["x"], &mu = c["mu"], &prec = c["prec"], &w = c["w"];
  int64_t n = c.size("N"), k = c.size("K");
  Vec logWeights(k);
  double normaliser = 0;
  for (int64_t j = 0; j < k; ++j)
    normaliser += std::exp(w.data[j]);
  for (int64_t j = 0; j < k; ++j)
    logWeights[j] = w.data[j] - std::log(normaliser);
  ArrayValue expected(mu.shape);
  for (int64_t i = 0; i < n; ++i) {
    Vec logits(k);
    for (int64_t j = 0; j < k; ++j) {
      Vec r = sub(at(x, {i}), at(mu, {j}));
      Vec p = at(prec, {j});
      logits[j] = logWeights[j] + 0.5 * logDet(p) - 0.5 * dot(r, matVec(p, r));
    }
    Vec s = softmax(logits);
    for (int64_t j = 0; j < k; ++j) {
      Vec r = sub(at(x, {i}), at(mu, {j}));
      Vec pr = matVec(at(prec, {j}), r);
      Vec term(pr.size(), 0.0);
      axpy(term, s[j], pr);
      addAt(expected, {j}, term);
    }
  }
  checkMatches(c.negativeGradient("mu"), expected, "-dE/dmu");
}

TEST_CASE("004 §3 cross-attention: eqs. 7 and 8, chained to the tokens") {
  // −∂E/∂q_c = Σ_p softmax_p(q_cᵀk_p) k_p (eq. 7) and −∂E/∂k_p =
  // Σ_c softmax_p(q_cᵀk_p) q_c (eq. 8); the chain rule to the raw tokens
  // multiplies by W^Qᵀ and W^Kᵀ.
  Case c = prepareExample("cross_attention",
                          withDims({{"NQ", 3}, {"NK", 4}, {"D", 3}}, 32));
  const ArrayValue &xq = c["xq"], &xk = c["xk"], &wq = c["Wq"], &wk = c["Wk"];
  int64_t nq = c.size("NQ"), nk = c.size("NK");
  std::vector<Vec> q, k;
  for (int64_t i = 0; i < nq; ++i)
    q.push_back(matVec(wq.data, at(xq, {i})));
  for (int64_t p = 0; p < nk; ++p)
    k.push_back(matVec(wk.data, at(xk, {p})));
  ArrayValue expectedQ(xq.shape), expectedK(xk.shape);
  for (int64_t i = 0; i < nq; ++i) {
    Vec logits(nk);
    for (int64_t p = 0; p < nk; ++p)
      logits[p] = dot(q[i], k[p]);
    Vec s = softmax(logits);
    Vec dq(q[i].size(), 0.0);
    for (int64_t p = 0; p < nk; ++p) {
      axpy(dq, s[p], k[p]); // eq. 7
      Vec dk(k[p].size(), 0.0);
      axpy(dk, s[p], q[i]); // eq. 8
      addAt(expectedK, {p}, matTVec(wk.data, dk));
    }
    addAt(expectedQ, {i}, matTVec(wq.data, dq));
  }
  checkMatches(c.negativeGradient("xq"), expectedQ, "eq. 7: -dE/dxq");
  checkMatches(c.negativeGradient("xk"), expectedK, "eq. 8: -dE/dxk");
}

TEST_CASE("004 §4 Hopfield: eqs. 10 and 11") {
  // −∂E/∂x_i = Σ_μ softmax_μ(x_iᵀm_μ) m_μ; −∂E/∂m_μ = Σ_i softmax_μ(x_iᵀm_μ)
  // x_i (β = 1).
  Case c =
      prepareExample("hopfield", withDims({{"N", 3}, {"K", 4}, {"D", 3}}, 33));
  const ArrayValue &x = c["x"], &m = c["m"];
  int64_t n = c.size("N"), k = c.size("K");
  ArrayValue expectedX(x.shape), expectedM(m.shape);
  for (int64_t i = 0; i < n; ++i) {
    Vec logits(k);
    for (int64_t mu = 0; mu < k; ++mu)
      logits[mu] = dot(at(x, {i}), at(m, {mu}));
    Vec s = softmax(logits);
    for (int64_t mu = 0; mu < k; ++mu) {
      Vec child(x.shape[1], 0.0), parent(x.shape[1], 0.0);
      axpy(child, s[mu], at(m, {mu}));
      axpy(parent, s[mu], at(x, {i}));
      addAt(expectedX, {i}, child);
      addAt(expectedM, {mu}, parent);
    }
  }
  checkMatches(c.negativeGradient("x"), expectedX, "eq. 10: -dE/dx");
  checkMatches(c.negativeGradient("m"), expectedM, "eq. 11: -dE/dm");
}

TEST_CASE("004 §5 slot attention: eqs. 13 and 14") {
  // sim(x_j, μ_i) = (W_K x_j)ᵀ(W_Q μ_i);
  // −∂E/∂x_j = Σ_i softmax_i(sim) W_Kᵀ W_Q μ_i (eq. 13),
  // −∂E/∂μ_i = Σ_j softmax_i(sim) W_Qᵀ W_K x_j (eq. 14).
  Case c = prepareExample("slot_attention",
                          withDims({{"N", 4}, {"S", 3}, {"D", 3}}, 34));
  const ArrayValue &x = c["x"], &mu = c["mu"], &wk = c["Wk"], &wq = c["Wq"];
  int64_t n = c.size("N"), slots = c.size("S");
  ArrayValue expectedX(x.shape), expectedMu(mu.shape);
  for (int64_t j = 0; j < n; ++j) {
    Vec key = matVec(wk.data, at(x, {j}));
    Vec logits(slots);
    for (int64_t i = 0; i < slots; ++i)
      logits[i] = dot(key, matVec(wq.data, at(mu, {i})));
    Vec s = softmax(logits);
    for (int64_t i = 0; i < slots; ++i) {
      Vec toX(x.shape[1], 0.0), toMu(mu.shape[1], 0.0);
      axpy(toX, s[i], matTVec(wk.data, matVec(wq.data, at(mu, {i}))));
      axpy(toMu, s[i], matTVec(wq.data, key));
      addAt(expectedX, {j}, toX);
      addAt(expectedMu, {i}, toMu);
    }
  }
  checkMatches(c.negativeGradient("x"), expectedX, "eq. 13: -dE/dx");
  checkMatches(c.negativeGradient("mu"), expectedMu, "eq. 14: -dE/dmu");
}

TEST_CASE("004 §6 self-attention: eq. 16, child and parent terms") {
  // −∂E/∂x_i = Σ_p softmax_p((W^Q x_i)ᵀ(W^K x_p)) W_Qᵀ W_K x_p   (child)
  //          + Σ_c softmax_i((W^Q x_c)ᵀ(W^K x_i)) W_Kᵀ W_Q x_c   (parent).
  Case c = prepareExample("self_attention", withDims({{"N", 4}, {"D", 3}}, 35));
  const ArrayValue &x = c["x"], &wq = c["Wq"], &wk = c["Wk"];
  int64_t n = c.size("N");
  std::vector<Vec> q, k;
  for (int64_t i = 0; i < n; ++i) {
    q.push_back(matVec(wq.data, at(x, {i})));
    k.push_back(matVec(wk.data, at(x, {i})));
  }
  ArrayValue child(x.shape), parent(x.shape);
  for (int64_t ci = 0; ci < n; ++ci) {
    Vec logits(n);
    for (int64_t p = 0; p < n; ++p)
      logits[p] = dot(q[ci], k[p]);
    Vec s = softmax(logits);
    for (int64_t p = 0; p < n; ++p) {
      Vec toChild(x.shape[1], 0.0), toParent(x.shape[1], 0.0);
      axpy(toChild, s[p], matTVec(wq.data, k[p]));
      axpy(toParent, s[p], matTVec(wk.data, q[ci]));
      addAt(child, {ci}, toChild);
      addAt(parent, {p}, toParent);
    }
  }
  ArrayValue expected(x.shape);
  for (size_t i = 0; i < expected.data.size(); ++i)
    expected.data[i] = child.data[i] + parent.data[i];
  checkMatches(c.negativeGradient("x"), expected, "eq. 16: -dE/dx");
  // Neither term alone is the gradient: both roles are derived.
  CHECK(maxAbsDifference(c.negativeGradient("x"), child) > 1e-6);
  CHECK(maxAbsDifference(c.negativeGradient("x"), parent) > 1e-6);
}

TEST_CASE("004 §7 SLDS: gradients w.r.t. x, A and b (signs corrected)") {
  // With r = x_{t+1} − A_k x_t − b_k, α = softmax_k(log π_k − ½ rᵀΣ_k⁻¹r)
  // and Σ_k⁻¹ = prec[k] (symmetric). The paper prints −∂E/∂x_{t+1} and
  // −∂E/∂x_t with the wrong sign (DESIGN.md §8); the corrected forms are
  //   −∂E/∂x_{t+1} = −Σ_k α Σ_k⁻¹ r,   −∂E/∂x_t = +Σ_k α A_kᵀ Σ_k⁻¹ r,
  // and a time step gets both (it is the next state of t − 1 and the
  // current one of t). −∂E/∂A_k = Σ_t α Σ_k⁻¹ r x_tᵀ and −∂E/∂b_k =
  // Σ_t α Σ_k⁻¹ r are as printed.
  RandomBindingOptions options = withDims({{"T", 5}, {"K", 2}, {"D", 3}}, 36);
  options.spd = {"prec"};
  Case c = prepareExample("slds", options);
  const ArrayValue &x = c["x"], &a = c["A"], &b = c["b"], &logpi = c["logpi"],
                   &prec = c["prec"];
  int64_t steps = c.size("T"), k = c.size("K"), d = c.size("D");
  ArrayValue expectedX(x.shape), expectedA(a.shape), expectedB(b.shape);
  for (int64_t t = 0; t + 1 < steps; ++t) {
    std::vector<Vec> residual, weighted;
    Vec logits(k);
    for (int64_t j = 0; j < k; ++j) {
      Vec r =
          sub(sub(at(x, {t + 1}), matVec(at(a, {j}), at(x, {t}))), at(b, {j}));
      Vec pr = matVec(at(prec, {j}), r);
      logits[j] = logpi.data[j] - 0.5 * dot(r, pr);
      residual.push_back(r);
      weighted.push_back(pr);
    }
    Vec alpha = softmax(logits);
    for (int64_t j = 0; j < k; ++j) {
      Vec next(d, 0.0), current(d, 0.0), bias(d, 0.0);
      axpy(next, -alpha[j], weighted[j]);
      axpy(current, alpha[j], matTVec(at(a, {j}), weighted[j]));
      axpy(bias, alpha[j], weighted[j]);
      addAt(expectedX, {t + 1}, next);
      addAt(expectedX, {t}, current);
      addAt(expectedB, {j}, bias);
      Vec outer(d * d);
      for (int64_t r = 0; r < d; ++r)
        for (int64_t col = 0; col < d; ++col)
          outer[r * d + col] = alpha[j] * weighted[j][r] * x.at({t, col});
      addAt(expectedA, {j}, outer);
    }
  }
  checkMatches(c.negativeGradient("x"), expectedX, "-dE/dx (corrected)");
  checkMatches(c.negativeGradient("A"), expectedA, "-dE/dA");
  checkMatches(c.negativeGradient("b"), expectedB, "-dE/db");
}

TEST_CASE("004 §8 predictive coding: gradients w.r.t. mu and x (corrected)") {
  // f(μ) = tanh(W1 μ + b1), α_ik = softmax_k(−½‖x_i − f(μ_k)‖²). Corrected
  // forms (DESIGN.md §8): the μ-gradient needs the Jacobian transposed,
  //   −∂E/∂μ_k = Σ_i α_ik J_f(μ_k)ᵀ (x_i − f(μ_k)),  J_fᵀ u = W1ᵀ((1 − f²)∘u),
  // and the printed −∂E/∂x_i has the wrong sign: it is −Σ_k α_ik (x_i − f).
  Case c =
      prepareExample("predictive_coding",
                     withDims({{"N", 4}, {"K", 3}, {"D", 3}, {"Z", 2}}, 37));
  const ArrayValue &x = c["x"], &mu = c["mu"], &w1 = c["W1"], &b1 = c["b1"];
  int64_t n = c.size("N"), k = c.size("K"), d = c.size("D");
  std::vector<Vec> f;
  for (int64_t j = 0; j < k; ++j) {
    Vec pre = matVec(w1.data, at(mu, {j}));
    for (int64_t e = 0; e < d; ++e)
      pre[e] = std::tanh(pre[e] + b1.data[e]);
    f.push_back(pre);
  }
  ArrayValue expectedMu(mu.shape), expectedX(x.shape);
  for (int64_t i = 0; i < n; ++i) {
    Vec logits(k);
    for (int64_t j = 0; j < k; ++j) {
      Vec r = sub(at(x, {i}), f[j]);
      logits[j] = -0.5 * dot(r, r);
    }
    Vec alpha = softmax(logits);
    for (int64_t j = 0; j < k; ++j) {
      Vec r = sub(at(x, {i}), f[j]);
      Vec scaled(d);
      for (int64_t e = 0; e < d; ++e)
        scaled[e] = (1 - f[j][e] * f[j][e]) * r[e];
      Vec toMu(mu.shape[1], 0.0), toX(d, 0.0);
      axpy(toMu, alpha[j], matTVec(w1.data, scaled));
      axpy(toX, -alpha[j], r);
      addAt(expectedMu, {j}, toMu);
      addAt(expectedX, {i}, toX);
    }
  }
  checkMatches(c.negativeGradient("mu"), expectedMu,
               "-dE/dmu (transposed Jacobian)");
  checkMatches(c.negativeGradient("x"), expectedX, "-dE/dx (sign corrected)");
}

//===----------------------------------------------------------------------===//
// Paper 001
//===----------------------------------------------------------------------===//

TEST_CASE("001 eqs. 3-5: tied multi-head attention") {
  // ε(x_i | h_{1:i}) = −τ Σ_k log Σ_{j≤i} exp(β_kjᵀ x_i / τ), β_kj =
  // W_kᵀ^Q W_k^K h_j: the example reads h for keys and x for queries, so the
  // derived gradient w.r.t. x holds h fixed. Eq. 3:
  //   ∇_{x_i} ε = −Σ_k Σ_{j≤i} softmax_j(β_kjᵀ x_i / τ) β_kj.
  RandomBindingOptions options = withDims({{"N", 4}, {"D", 6}, {"H", 2}}, 38);
  options.consts["tau"] = 0.7;
  const double tau = 0.7;

  SUBCASE("eq. 3 at a point x != h") {
    Case c = prepareExample("tied_mha", options);
    const ArrayValue &x = c["x"], &h = c["h"], &wq = c["Wq"], &wk = c["Wk"];
    int64_t n = c.size("N"), heads = c.size("H");
    ArrayValue expected(x.shape);
    for (int64_t head = 0; head < heads; ++head)
      for (int64_t i = 0; i < n; ++i) {
        std::vector<Vec> beta;
        Vec logits;
        for (int64_t j = 0; j <= i; ++j) {
          beta.push_back(
              matTVec(at(wq, {head}), matVec(at(wk, {head}), at(h, {j}))));
          logits.push_back(dot(beta.back(), at(x, {i})) / tau);
        }
        Vec s = softmax(logits);
        Vec term(x.shape[1], 0.0);
        for (int64_t j = 0; j <= i; ++j)
          axpy(term, -s[j], beta[j]);
        addAt(expected, {i}, term);
      }
    checkMatches(c.gradient("x"), expected, "eq. 3: grad_x epsilon");
  }

  SUBCASE("eqs. 4-5: one step from x = h is tied MHA") {
    // h'_i = h_i − η ∇ε|_{x=h} with η = 1 equals h_i + Σ_k W_k^{Oᵀ}
    // Σ_{j≤i} α_ij^k v_j^k with q = W^Q h_i, k = v = W^K h_j, W^O = W^Q,
    // α = softmax_j(k_jᵀq_i / τ) (eq. 5's tying).
    options.copies = {{"x", "h"}};
    Case c = prepareExample("tied_mha", options);
    const ArrayValue &h = c["h"], &wq = c["Wq"], &wk = c["Wk"];
    int64_t n = c.size("N"), heads = c.size("H");
    ArrayValue mha = h;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t head = 0; head < heads; ++head) {
        Vec q = matVec(at(wq, {head}), at(h, {i}));
        std::vector<Vec> values;
        Vec logits;
        for (int64_t j = 0; j <= i; ++j) {
          values.push_back(matVec(at(wk, {head}), at(h, {j})));
          logits.push_back(dot(values.back(), q) / tau);
        }
        Vec alpha = softmax(logits);
        Vec mixed(values.front().size(), 0.0);
        for (int64_t j = 0; j <= i; ++j)
          axpy(mixed, alpha[j], values[j]);
        addAt(mha, {i}, matTVec(at(wq, {head}), mixed));
      }
    ArrayValue step = c.gradient("x");
    for (size_t e = 0; e < step.data.size(); ++e)
      step.data[e] = h.data[e] - step.data[e];
    checkMatches(step, mha, "eq. 4: h - grad = tied MHA(h)");
  }
}

TEST_CASE("001 eqs. 8-11: the element-wise energy gives a gated MLP") {
  // ξ(x_i | h_i) = −γ_iᵀ φ(V x_i), γ_i = W h_i, φ = silu_int so φ' = SiLU.
  // Eq. 8: ∇_{x_i} ξ = −Vᵀ(γ_i ∘ SiLU(V x_i)).
  RandomBindingOptions options = withDims({{"N", 3}, {"D", 3}, {"Dv", 4}}, 39);

  SUBCASE("eq. 8 at a point x != h") {
    Case c = prepareExample("cem_mlp", options);
    const ArrayValue &x = c["x"], &h = c["h"], &w = c["W"], &v = c["V"];
    ArrayValue expected(x.shape);
    for (int64_t i = 0; i < c.size("N"); ++i) {
      Vec gamma = matVec(w.data, at(h, {i}));
      Vec gate = matVec(v.data, at(x, {i}));
      for (size_t e = 0; e < gate.size(); ++e)
        gate[e] = -gamma[e] * silu(gate[e]);
      addAt(expected, {i}, matTVec(v.data, gate));
    }
    checkMatches(c.gradient("x"), expected, "eq. 8: grad_x xi");
  }

  SUBCASE("eqs. 9-11: one step from x = h is the tied gated MLP") {
    // h' = h − ∇ξ|_{x=h} = h + W^d((W^g h) ∘ σ(W^u h)) with W^d = Vᵀ,
    // W^u = V, W^g = W and σ = SiLU (eq. 11).
    options.copies = {{"x", "h"}};
    Case c = prepareExample("cem_mlp", options);
    const ArrayValue &h = c["h"], &w = c["W"], &v = c["V"];
    ArrayValue mlp = h;
    for (int64_t i = 0; i < c.size("N"); ++i) {
      Vec gated = matVec(w.data, at(h, {i}));
      Vec up = matVec(v.data, at(h, {i}));
      for (size_t e = 0; e < gated.size(); ++e)
        gated[e] *= silu(up[e]);
      addAt(mlp, {i}, matTVec(v.data, gated));
    }
    ArrayValue step = c.gradient("x");
    for (size_t e = 0; e < step.data.size(); ++e)
      step.data[e] = h.data[e] - step.data[e];
    checkMatches(step, mlp, "eq. 10: h - grad = gated MLP(h)");
  }
}

//===----------------------------------------------------------------------===//
// Paper 000
//===----------------------------------------------------------------------===//

TEST_CASE("000 Theorem 1 (corrected): a GD step on F~ is attention") {
  // As printed, Theorem 1 sets W_V = ηT·W, a stray factor T (DESIGN.md §8).
  // Corrected: one GD step of size η on F̃ = −T log Σ_i exp(zᵀW h_i / T)
  // gives z + η Σ_i softmax_i(zᵀW h_i / T) W h_i, i.e. attention with
  // W_Qᵀ W_K = W, temperature T and W_V = η W.
  const char *source = R"(model theorem1 {
  dim N, D;
  state z : [D];
  input h : [N, D];
  param W : [D, D];
  const T = 0.5;
  energy free = -T * lse(i: N) dot(z, W @ h[i]) / T;
  dynamics { z: gd(lr = 0.3); steps 1; }
}
)";
  const double eta = 0.3, temperature = 0.5;
  RandomBindingOptions options = withDims({{"N", 5}, {"D", 3}}, 40);
  options.scale = 1.0;
  Case c = prepare(compileSource(source, {"W"}, "theorem1.energy"), options);
  const ArrayValue &z = c["z"], &h = c["h"], &w = c["W"];
  int64_t n = c.size("N");
  Vec logits;
  std::vector<Vec> values;
  for (int64_t i = 0; i < n; ++i) {
    values.push_back(matVec(w.data, at(h, {i})));
    logits.push_back(dot(z.data, values.back()) / temperature);
  }
  Vec alpha = softmax(logits);
  ArrayValue attention = z;
  for (int64_t i = 0; i < n; ++i)
    axpy(attention.data, eta * alpha[i], values[i]);
  ArrayValue step = c.gradient("z");
  for (size_t e = 0; e < step.data.size(); ++e)
    step.data[e] = z.data[e] - eta * step.data[e];
  checkMatches(step, attention, "z - eta grad F~ = attention(z)");
}
