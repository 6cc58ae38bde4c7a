//===- InterpreterTest.cpp - Evaluating energy IR -------------------------===//
//
// The reference interpreter on small models: ops against hand-computed
// values, the paper models' energies against direct loops, reductions'
// domains and predicates, values kept above the loops they do not read,
// lets, outputs, bindings and run-time errors (arrays too large for memory
// among them).
//
//===----------------------------------------------------------------------===//

#include "support/ParsedModel.h"

#include "energy/IR/EnergyDialect.h"
#include "energy/IR/EnergyOps.h"
#include "energy/Interpreter/Interpreter.h"
#include "energy/Runtime/Tensor.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <doctest/doctest.h>

#include <cmath>
#include <random>

using namespace mlir;
using namespace mlir::energy;

namespace {
using Model = ::energy::testing::ParsedModel;

ArrayValue randomTensor(std::vector<int64_t> shape, std::mt19937_64 &rng) {
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  ArrayValue tensor(std::move(shape));
  for (double &value : tensor.data)
    value = uniform(rng);
  return tensor;
}

double logSumExp(const std::vector<double> &values) {
  double sum = 0;
  for (double value : values)
    sum += std::exp(value);
  return std::log(sum);
}

/// A model whose term @e yields `body`'s %r, over a vector @v : [N] and a
/// matrix @M : [N, N].
std::string scalarModel(StringRef body) {
  return (R"(energy.model @m {
  energy.dim @N = 2
  energy.tensor @v : param [@N]
  energy.tensor @M : param [@N, @N]
  energy.term @e {
    %v = energy.read @v : !energy.array<N>
    %M = energy.read @M : !energy.array<N, N>
)" + body +
          R"(
    energy.yield %r : !energy.array<>
  }
})")
      .str();
}

/// The value of the term of scalarModel(body) at v and M.
double scalarValue(StringRef body, std::vector<double> v,
                   std::vector<double> m) {
  Model model(scalarModel(body));
  Bindings bindings;
  bindings.setTensor("v", ArrayValue({2}, std::move(v)));
  bindings.setTensor("M", ArrayValue({2, 2}, std::move(m)));
  FailureOr<double> value = model.energy(bindings);
  REQUIRE_MESSAGE(succeeded(value), model.diagnostics);
  return *value;
}
} // namespace

TEST_CASE("ops against hand-computed values") {
  std::vector<double> v = {0.3, -1.2}, m = {2.0, 0.5, 0.5, 1.0};
  // logdet of a symmetric 2 × 2: log(ad - b²).
  CHECK(scalarValue("%r = energy.logdet %M : !energy.array<N, N>", v, m) ==
        doctest::Approx(std::log(2.0 - 0.25)));
  // softmax sums to 1 and its first entry is e^{v0} / (e^{v0} + e^{v1}).
  CHECK(scalarValue(R"(%s = energy.softmax %v : !energy.array<N>
    %r = energy.reduce_elements sum %s : !energy.array<N>)",
                    v, m) == doctest::Approx(1.0));
  CHECK(scalarValue(R"(%s = energy.softmax %v : !energy.array<N>
    %r = energy.dot %s, %v : !energy.array<N>)",
                    v, m) ==
        doctest::Approx((0.3 * std::exp(0.3) - 1.2 * std::exp(-1.2)) /
                        (std::exp(0.3) + std::exp(-1.2))));
  CHECK(scalarValue("%r = energy.reduce_elements lse %v : !energy.array<N>", v,
                    m) == doctest::Approx(logSumExp(v)));
  CHECK(scalarValue("%r = energy.reduce_elements mean %M : !energy.array<N, N>",
                    v, m) == doctest::Approx(1.0));
  CHECK(scalarValue("%r = energy.reduce_elements norm %v : !energy.array<N>", v,
                    m) == doctest::Approx(std::sqrt(0.09 + 1.44)));
  CHECK(scalarValue("%r = energy.reduce_elements maxabs %v : !energy.array<N>",
                    v, m) == doctest::Approx(1.2));
  CHECK(scalarValue("%r = energy.quad %v, %M : !energy.array<N>, "
                    "!energy.array<N, N>",
                    v, m) ==
        doctest::Approx(2.0 * 0.09 + 2 * 0.5 * 0.3 * -1.2 + 1.44));
  // (M⁻¹ v)·v with M⁻¹ = [[1, -0.5], [-0.5, 2]] / 1.75.
  CHECK(scalarValue(R"(%i = energy.inverse %M : !energy.array<N, N>
    %w = energy.matmul %i, %v : !energy.array<N, N>, !energy.array<N>
    %r = energy.dot %w, %v : !energy.array<N>)",
                    v, m) ==
        doctest::Approx((0.09 + 2 * 0.5 * 0.3 * 1.2 + 2 * 1.44) / 1.75));
  // (Mᵀ @ M)[0, 1] summed with diag and outer.
  CHECK(scalarValue(R"(%t = energy.transpose %M : !energy.array<N, N>
    %p = energy.matmul %t, %M : !energy.array<N, N>, !energy.array<N, N>
    %d = energy.diag_part %p : !energy.array<N, N>
    %r = energy.reduce_elements sum %d : !energy.array<N>)",
                    v, m) == doctest::Approx(4.25 + 1.25));
  CHECK(scalarValue(
            R"(%o = energy.outer %v, %v : !energy.array<N>, !energy.array<N>
    %s = energy.sum_last %o : !energy.array<N, N>
    %r = energy.dot %s, %v : !energy.array<N>)",
            v, m) == doctest::Approx((0.3 - 1.2) * 1.53));
  CHECK(scalarValue(R"(%g = energy.gelu %v : !energy.array<N>
    %c = energy.constant 1.0
    %b = energy.broadcast %c : !energy.array<> to !energy.array<N>
    %g1 = energy.gelu %b : !energy.array<N>
    %r = energy.reduce_elements maxabs %g1 : !energy.array<N>)",
                    v, m) == doctest::Approx(0.8413447460685429));
  CHECK(scalarValue(R"(%p = energy.pow %v, -2 : !energy.array<N>
    %r = energy.reduce_elements sum %p : !energy.array<N>)",
                    v, m) == doctest::Approx(1 / 0.09 + 1 / 1.44));
  CHECK(scalarValue(R"(%l = energy.layernorm %v : !energy.array<N>
    %r = energy.reduce_elements sqnorm %l : !energy.array<N>)",
                    v, m) ==
        doctest::Approx(2 * 0.5625 / (0.5625 + 1e-5)).epsilon(1e-12));
  CHECK(scalarValue(R"(%d = energy.diag %v : !energy.array<N>
    %e = energy.eye @N : !energy.array<N, N>
    %s = energy.add %d, %e : !energy.array<N, N>, !energy.array<N, N>
    %x = energy.maximum %s, %M : !energy.array<N, N>, !energy.array<N, N>
    %r = energy.reduce_elements sum %x : !energy.array<N, N>)",
                    v, m) == doctest::Approx(2.0 + 0.5 + 0.5 + 1.0));
}

TEST_CASE("hopfield energy against a direct loop") {
  Model model(R"(energy.model @hopfield {
  energy.dim @N
  energy.dim @K
  energy.dim @D = 64
  energy.tensor @x : state [@N, @D]
  energy.tensor @m : input [@K, @D]
  energy.const @beta = 1.0
  energy.term @retrieval {
    %e = energy.reduce sum (%i : @N) {
      %l = energy.reduce lse (%mu : @K) {
        %xi = energy.read @x[%i] : !energy.array<D>
        %mm = energy.read @m[%mu] : !energy.array<D>
        %d = energy.dot %xi, %mm : !energy.array<D>
        %b = energy.read @beta : !energy.array<>
        %s = energy.mul %b, %d : !energy.array<>, !energy.array<>
        energy.yield %s : !energy.array<>
      } : !energy.array<>
      energy.yield %l : !energy.array<>
    } : !energy.array<>
    %n = energy.neg %e : !energy.array<>
    energy.yield %n : !energy.array<>
  }
})");
  std::mt19937_64 rng(7);
  const int64_t n = 4, k = 3, d = 5;
  const double beta = 0.8;
  ArrayValue x = randomTensor({n, d}, rng), m = randomTensor({k, d}, rng);
  Bindings bindings;
  bindings.setDim("N", n).setDim("K", k).setDim("D", d).setConst("beta", beta);
  bindings.setTensor("x", x).setTensor("m", m);
  double expected = 0;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<double> scores;
    for (int64_t mu = 0; mu < k; ++mu) {
      double dot = 0;
      for (int64_t j = 0; j < d; ++j)
        dot += x.data[i * d + j] * m.data[mu * d + j];
      scores.push_back(beta * dot);
    }
    expected -= logSumExp(scores);
  }
  FailureOr<double> energy = model.energy(bindings);
  REQUIRE_MESSAGE(succeeded(energy), model.diagnostics);
  CHECK(*energy == doctest::Approx(expected).epsilon(1e-13));
}

TEST_CASE("values kept above the loops they do not read, per position of "
          "those they do") {
  // Σ_k Σ_i lse_j(x[i]·m[j]) · Σ_j m[k]·m[j]: the lse reads i but not k (kept
  // above the loop over k, one per i), the sum reads k but not i (kept above
  // the loop over i, one per k); a value kept under the wrong positions
  // would give every row or component the first one's.
  Model model(R"(energy.model @kept {
  energy.dim @N
  energy.dim @K
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @m : input [@K, @D]
  energy.term @e {
    %e = energy.reduce sum (%k : @K) {
      %r = energy.reduce sum (%i : @N) {
        %l = energy.reduce lse (%j : @K) {
          %xi = energy.read @x[%i] : !energy.array<D>
          %mj = energy.read @m[%j] : !energy.array<D>
          %s = energy.dot %xi, %mj : !energy.array<D>
          energy.yield %s : !energy.array<>
        } : !energy.array<>
        %c = energy.reduce sum (%j : @K) {
          %mk = energy.read @m[%k] : !energy.array<D>
          %mj = energy.read @m[%j] : !energy.array<D>
          %s = energy.dot %mk, %mj : !energy.array<D>
          energy.yield %s : !energy.array<>
        } : !energy.array<>
        %t = energy.mul %l, %c : !energy.array<>, !energy.array<>
        energy.yield %t : !energy.array<>
      } : !energy.array<>
      energy.yield %r : !energy.array<>
    } : !energy.array<>
    energy.yield %e : !energy.array<>
  }
})");
  std::mt19937_64 rng(5);
  const int64_t n = 4, k = 3, d = 2;
  ArrayValue x = randomTensor({n, d}, rng), m = randomTensor({k, d}, rng);
  Bindings bindings;
  bindings.setDim("N", n).setDim("K", k).setDim("D", d);
  bindings.setTensor("x", x).setTensor("m", m);
  auto dot = [&](const ArrayValue &a, int64_t row, const ArrayValue &b,
                 int64_t column) {
    double sum = 0;
    for (int64_t c = 0; c < d; ++c)
      sum += a.data[row * d + c] * b.data[column * d + c];
    return sum;
  };
  double expected = 0;
  for (int64_t kk = 0; kk < k; ++kk)
    for (int64_t i = 0; i < n; ++i) {
      std::vector<double> scores;
      double overlap = 0;
      for (int64_t j = 0; j < k; ++j) {
        scores.push_back(dot(x, i, m, j));
        overlap += dot(m, kk, m, j);
      }
      expected += logSumExp(scores) * overlap;
    }
  FailureOr<double> energy = model.energy(bindings);
  REQUIRE_MESSAGE(succeeded(energy), model.diagnostics);
  CHECK(*energy == doctest::Approx(expected).epsilon(1e-13));
}

namespace {
/// Σ_i lse_{j ≤ i; T} x[i]·h[j], a causal attention energy with temperature.
const char *kCausalModel = R"(energy.model @causal {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @h : input [@N, @D]
  energy.const @tau = 8.0
  energy.term @attn {
    %tau = energy.read @tau : !energy.array<>
    %e = energy.reduce sum (%i : @N) {
      %l = energy.reduce lse (%j : @N) where {
        %ok = arith.cmpi sle, %j, %i : index
        energy.yield %ok : i1
      } temp(%tau : !energy.array<>) {
        %xi = energy.read @x[%i] : !energy.array<D>
        %hj = energy.read @h[%j] : !energy.array<D>
        %s = energy.dot %xi, %hj : !energy.array<D>
        energy.yield %s : !energy.array<>
      } : !energy.array<>
      energy.yield %l : !energy.array<>
    } : !energy.array<>
    energy.yield %e : !energy.array<>
  }
})";
} // namespace

TEST_CASE("causal lse with temperature against a direct loop") {
  Model model(kCausalModel);
  std::mt19937_64 rng(11);
  const int64_t n = 5, d = 3;
  const double tau = 0.6;
  ArrayValue x = randomTensor({n, d}, rng), h = randomTensor({n, d}, rng);
  Bindings bindings;
  bindings.setDim("N", n).setDim("D", d).setConst("tau", tau);
  bindings.setTensor("x", x).setTensor("h", h);
  double expected = 0;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<double> scaled;
    for (int64_t j = 0; j <= i; ++j) {
      double dot = 0;
      for (int64_t c = 0; c < d; ++c)
        dot += x.data[i * d + c] * h.data[j * d + c];
      scaled.push_back(dot / tau);
    }
    expected += tau * logSumExp(scaled);
  }
  FailureOr<double> energy = model.energy(bindings);
  REQUIRE_MESSAGE(succeeded(energy), model.diagnostics);
  CHECK(*energy == doctest::Approx(expected).epsilon(1e-13));
}

TEST_CASE("domains: empty, mean over admitted positions, affine offsets") {
  Model model(R"(energy.model @m {
  energy.dim @T
  energy.tensor @x : param [@T]
  energy.term @chain {
    %s = energy.reduce sum (%t : @T - 1) {
      %a = energy.read @x[%t] : !energy.array<>
      %b = energy.read @x[%t + 1] : !energy.array<>
      %p = energy.mul %a, %b : !energy.array<>, !energy.array<>
      energy.yield %p : !energy.array<>
    } : !energy.array<>
    energy.yield %s : !energy.array<>
  }
  energy.term @tail_mean {
    %m = energy.reduce mean (%t : @T) where {
      %one = arith.constant 1 : index
      %ok = arith.cmpi sge, %t, %one : index
      energy.yield %ok : i1
    } {
      %a = energy.read @x[%t] : !energy.array<>
      energy.yield %a : !energy.array<>
    } : !energy.array<>
    energy.yield %m : !energy.array<>
  }
  energy.term @never {
    %l = energy.reduce lse (%t : @T) where {
      %n = energy.size @T : index
      %ok = arith.cmpi sge, %t, %n : index
      energy.yield %ok : i1
    } {
      %a = energy.read @x[%t + 100] : !energy.array<>
      energy.yield %a : !energy.array<>
    } : !energy.array<>
    energy.yield %l : !energy.array<>
  }
})");
  auto evaluate = [&](StringRef term, std::vector<double> values) -> double {
    Bindings bindings;
    bindings.setDim("T", values.size());
    bindings.setTensor("x", ArrayValue({static_cast<int64_t>(values.size())},
                                       std::move(values)));
    FailureOr<Interpreter> interpreter =
        Interpreter::create(model.model, bindings);
    REQUIRE_MESSAGE(succeeded(interpreter), model.diagnostics);
    FailureOr<double> value =
        interpreter->evaluateTerm(model.lookup<TermOp>(term));
    REQUIRE_MESSAGE(succeeded(value), model.diagnostics);
    return *value;
  };
  CHECK(evaluate("chain", {1, 2, 3, 4}) == doctest::Approx(2 + 6 + 12));
  CHECK(evaluate("chain", {5}) == 0.0);
  CHECK(evaluate("tail_mean", {100, 1, 2, 6}) == doctest::Approx(3.0));
  CHECK(evaluate("tail_mean", {100}) == 0.0);
  // The excluded positions would read out of range: they are never
  // evaluated.
  CHECK(evaluate("never", {1, 2}) == 0.0);
}

TEST_CASE("lets, outputs, step and size") {
  Model model(R"(energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.dim @L = 3
  energy.tensor @x : state [@N, @D]
  energy.tensor @W : param [@L, @D, @D]
  energy.tensor @y : state [@N, @D] = @x
  energy.let @q [%c : @N] : !energy.array<D> {
    %s = energy.step : index
    %w = energy.read @W[%s] : !energy.array<D, D>
    %xc = energy.read @x[%c] : !energy.array<D>
    %q = energy.matmul %w, %xc : !energy.array<D, D>, !energy.array<D>
    energy.yield %q : !energy.array<D>
  }
  energy.term @e {
    %e = energy.reduce sum (%c : @N) {
      %q = energy.read @q[%c] : !energy.array<D>
      %y = energy.read @y[%c] : !energy.array<D>
      %d = energy.dot %q, %y : !energy.array<D>
      energy.yield %d : !energy.array<>
    } : !energy.array<>
    energy.yield %e : !energy.array<>
  }
  energy.output @F [%t : @N, %j : @D] : !energy.array<> {
    %q = energy.read @q[%t, %j] : !energy.array<>
    %n = energy.size @N - 1 : index
    %r = energy.to_real %n : !energy.array<>
    %v = energy.add %q, %r : !energy.array<>, !energy.array<>
    energy.yield %v : !energy.array<>
  }
})");
  std::mt19937_64 rng(3);
  const int64_t n = 3, d = 2, step = 2;
  ArrayValue x = randomTensor({n, d}, rng), w = randomTensor({3, d, d}, rng);
  Bindings bindings;
  bindings.setDim("N", n).setDim("D", d).setStep(step);
  bindings.setTensor("x", x).setTensor("W", w);
  FailureOr<Interpreter> interpreter =
      Interpreter::create(model.model, bindings);
  REQUIRE_MESSAGE(succeeded(interpreter), model.diagnostics);

  ArrayValue q({n, d});
  double expected = 0;
  for (int64_t c = 0; c < n; ++c)
    for (int64_t i = 0; i < d; ++i) {
      for (int64_t j = 0; j < d; ++j)
        q.data[c * d + i] += w.data[(step * d + i) * d + j] * x.data[c * d + j];
      expected += q.data[c * d + i] * x.data[c * d + i];
    }
  FailureOr<ArrayValue> let =
      interpreter->evaluateLet(model.lookup<LetOp>("q"));
  REQUIRE_MESSAGE(succeeded(let), model.diagnostics);
  CHECK(let->shape == std::vector<int64_t>{n, d});
  for (int64_t i = 0; i < n * d; ++i)
    CHECK(let->data[i] == doctest::Approx(q.data[i]));
  FailureOr<double> energy = interpreter->evaluateEnergy();
  REQUIRE_MESSAGE(succeeded(energy), model.diagnostics);
  CHECK(*energy == doctest::Approx(expected));
  FailureOr<ArrayValue> output =
      interpreter->evaluateOutput(model.lookup<OutputOp>("F"));
  REQUIRE_MESSAGE(succeeded(output), model.diagnostics);
  CHECK(output->shape == std::vector<int64_t>{n, d});
  for (int64_t i = 0; i < n * d; ++i)
    CHECK(output->data[i] == doctest::Approx(q.data[i] + (n - 1)));
}

TEST_CASE("deterministic initialisers and dims") {
  Model model(R"(energy.model @m {
  energy.dim @D = 2
  energy.dim @H = 2
  energy.dim @Dh = @D / @H
  energy.tensor @P : param [@H, @D, @D] = eye
  energy.tensor @o : param [@Dh] = ones
  energy.term @e {
    %p = energy.read @P : !energy.array<H, D, D>
    %s = energy.reduce_elements sum %p : !energy.array<H, D, D>
    %o = energy.read @o : !energy.array<Dh>
    %t = energy.reduce_elements sum %o : !energy.array<Dh>
    %r = energy.add %s, %t : !energy.array<>, !energy.array<>
    energy.yield %r : !energy.array<>
  }
})");
  FailureOr<double> energy = model.energy(Bindings().setDim("D", 4));
  REQUIRE_MESSAGE(succeeded(energy), model.diagnostics);
  CHECK(*energy == doctest::Approx(2 * 4 + 2));
  CHECK(failed(model.energy(Bindings().setDim("D", 3))));
  CHECK(model.diagnostics.find("dim @Dh cannot be derived") !=
        std::string::npos);
}

TEST_CASE("errors name what is wrong") {
  auto errorOf = [](StringRef text, const Bindings &bindings) {
    Model model(text);
    CHECK(failed(model.energy(bindings)));
    return model.diagnostics;
  };
  const char *readNext = R"(energy.model @m {
  energy.dim @T
  energy.tensor @x : param [@T]
  energy.term @e {
    %s = energy.reduce sum (%t : @T) {
      %a = energy.read @x[%t + 1] : !energy.array<>
      energy.yield %a : !energy.array<>
    } : !energy.array<>
    energy.yield %s : !energy.array<>
  }
})";
  Bindings three;
  three.setDim("T", 3).setTensor("x", ArrayValue({3}, 1.0));
  std::string message = errorOf(readNext, three);
  CHECK(message.find(
            "reads @x (axis @T) at index 3 of axis 0, whose size is 3") !=
        std::string::npos);

  Bindings wrongShape;
  wrongShape.setDim("T", 3).setTensor("x", ArrayValue({4}, 1.0));
  CHECK(errorOf(readNext, wrongShape)
            .find("tensor @x is bound with shape [4] but is declared [T] = "
                  "[3]") != std::string::npos);
  CHECK(errorOf(readNext, Bindings().setTensor("x", ArrayValue({3})))
            .find("dim @T is not bound") != std::string::npos);
  CHECK(
      errorOf(readNext, Bindings(three).setDim("Q", 1)).find("binds dim @Q") !=
      std::string::npos);

  CHECK(errorOf(R"(energy.model @m {
  energy.dim @D = 2
  energy.tensor @w : param [@D] = normal(0.0, 1.0)
  energy.term @e {
    %w = energy.read @w : !energy.array<D>
    %r = energy.reduce_elements sum %w : !energy.array<D>
    energy.yield %r : !energy.array<>
  }
})",
                Bindings())
            .find("tensor @w is not bound and its initialiser 'normal'") !=
        std::string::npos);

  std::string model =
      scalarModel("%r = energy.logdet %M : !energy.array<N, N>");
  Bindings indefinite;
  indefinite.setTensor("v", ArrayValue({2}))
      .setTensor("M", ArrayValue({2, 2}, {1.0, 2.0, 2.0, 1.0}));
  CHECK(errorOf(model, indefinite).find("not symmetric positive definite") !=
        std::string::npos);
  CHECK(errorOf(scalarModel(R"(%i = energy.inverse %M : !energy.array<N, N>
    %r = energy.reduce_elements sum %i : !energy.array<N, N>)"),
                Bindings(indefinite)
                    .setTensor("M", ArrayValue({2, 2}, {1.0, 2.0, 2.0, 4.0})))
            .find("inverts a singular matrix") != std::string::npos);
  CHECK(
      errorOf(scalarModel(R"(%l = energy.log %v : !energy.array<N>
    %r = energy.reduce_elements sum %l : !energy.array<N>)"),
              Bindings(indefinite).setTensor("v", ArrayValue({2}, {-1.0, 1.0})))
          .find("'energy.log' op produced NaN") != std::string::npos);
}

TEST_CASE("arrays beyond the machine's memory are errors, not aborts") {
  auto errorOf = [](StringRef text, const Bindings &bindings) {
    Model model(text);
    CHECK(failed(model.energy(bindings)));
    return model.diagnostics;
  };
  const std::string memory =
      ::energy::byteCountText(::energy::machineMemoryBytes());
  const char *zeros = R"(energy.model @m {
  energy.dim @N
  energy.dim @D = 16
  energy.tensor @x : param [@N, @D] = zeros
  energy.term @e {
    %x = energy.read @x : !energy.array<N, D>
    %r = energy.reduce_elements sum %x : !energy.array<N, D>
    energy.yield %r : !energy.array<>
  }
})";
  CHECK(errorOf(zeros, Bindings().setDim("N", 1'000'000'000'000))
            .find("tensor @x [N, D]: cannot allocate 128000000000000 bytes "
                  "(128.0 TB) for F64 [1000000000000, 16]: more than the "
                  "memory this machine has, " +
                  memory) != std::string::npos);
  CHECK(errorOf(zeros, Bindings().setDim("N", 1ll << 60))
            .find("tensor @x [N, D]: cannot allocate F64 "
                  "[1152921504606846976, 16]: its size in bytes overflows 64 "
                  "bits") != std::string::npos);
  // An op whose result is larger than its operands.
  CHECK(errorOf(R"(energy.model @m {
  energy.dim @N
  energy.term @e {
    %e = energy.eye @N : !energy.array<N, N>
    %r = energy.reduce_elements sum %e : !energy.array<N, N>
    energy.yield %r : !energy.array<>
  }
})",
                Bindings().setDim("N", 10'000'000))
            .find("cannot allocate 800000000000000 bytes (800.0 TB) for F64 "
                  "[10000000, 10000000]: more than the memory this machine "
                  "has") != std::string::npos);
}

TEST_CASE("grad is not evaluable before derivation") {
  Model model(R"(energy.model @m {
  energy.dim @D = 2
  energy.tensor @x : state [@D] = ones
  energy.term @e {
    %x = energy.read @x : !energy.array<D>
    %r = energy.reduce_elements sum %x : !energy.array<D>
    energy.yield %r : !energy.array<>
  }
  energy.dynamics steps 1 {
    energy.update @x gd(lr = 0.1)
  } until {
    %g = energy.grad @x : !energy.array<D>
    %n = energy.reduce_elements maxabs %g : !energy.array<D>
    %eps = energy.constant 1.0e-5
    %done = energy.cmp lt, %n, %eps : !energy.array<>
    %e = energy.read @x : !energy.array<D>
    %s = energy.reduce_elements sum %e : !energy.array<D>
    %two = energy.constant 2.0
    %small = energy.cmp le, %s, %two : !energy.array<>
    energy.yield %done : i1
  }
})");
  FailureOr<Interpreter> interpreter = Interpreter::create(model.model, {});
  REQUIRE_MESSAGE(succeeded(interpreter), model.diagnostics);
  CHECK(*interpreter->evaluateEnergy() == 2.0);
  Block &until = model.model.getDynamics().getUntil().front();
  auto done = cast<YieldOp>(until.getTerminator()).getValues()[0];
  CHECK(failed(interpreter->evaluate(done)));
  CHECK(model.diagnostics.find("gradient of @x is not derived; run "
                               "energy-derive-gradients first") !=
        std::string::npos);
  Value small = std::prev(until.end(), 2)->getResult(0);
  FailureOr<ArrayValue> isSmall = interpreter->evaluate(small);
  REQUIRE(succeeded(isSmall));
  CHECK(isSmall->data[0] == 1.0);
}

TEST_CASE("integer ops follow the index rule: rounding, overflow an error") {
  // -7 floordiv 2 = -4, ceildiv = -3; divsi rounds toward zero (-3) and
  // remsi keeps the dividend's sign (-1): read at 1, 2, 2 and 0.
  Model rounding(R"(energy.model @m {
  energy.dim @T = 3
  energy.tensor @x : param [@T]
  energy.term @e {
    %m7 = arith.constant -7 : index
    %c2 = arith.constant 2 : index
    %c5 = arith.constant 5 : index
    %c1 = arith.constant 1 : index
    %f = arith.floordivsi %m7, %c2 : index
    %g = arith.ceildivsi %m7, %c2 : index
    %d = arith.divsi %m7, %c2 : index
    %r = arith.remsi %m7, %c2 : index
    %i0 = arith.addi %f, %c5 : index
    %i1 = arith.addi %g, %c5 : index
    %i2 = arith.addi %d, %c5 : index
    %i3 = arith.addi %r, %c1 : index
    %a = energy.read @x[%i0] : !energy.array<>
    %b = energy.read @x[%i1] : !energy.array<>
    %c = energy.read @x[%i2] : !energy.array<>
    %e = energy.read @x[%i3] : !energy.array<>
    %s1 = energy.add %a, %b : !energy.array<>, !energy.array<>
    %s2 = energy.add %s1, %c : !energy.array<>, !energy.array<>
    %s3 = energy.add %s2, %e : !energy.array<>, !energy.array<>
    energy.yield %s3 : !energy.array<>
  }
})");
  Bindings values;
  values.setTensor("x", ArrayValue({3}, {1.0, 10.0, 100.0}));
  FailureOr<double> sum = rounding.energy(values);
  REQUIRE_MESSAGE(succeeded(sum), rounding.diagnostics);
  CHECK(*sum == 10.0 + 100.0 + 100.0 + 1.0);

  // Signed overflow is an error on the op, not a wrapped index.
  Model overflow(R"(energy.model @m {
  energy.dim @T = 3
  energy.tensor @x : param [@T]
  energy.term @e {
    %big = arith.constant 9223372036854775807 : index
    %c1 = arith.constant 1 : index
    %i = arith.addi %big, %c1 : index
    %a = energy.read @x[%i] : !energy.array<>
    energy.yield %a : !energy.array<>
  }
})");
  CHECK(failed(overflow.energy(values)));
  CHECK(overflow.diagnostics.find(
            "computes 9223372036854775807 and 1, which overflows") !=
        std::string::npos);
}
