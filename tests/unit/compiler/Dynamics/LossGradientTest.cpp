//===- LossGradientTest.cpp - A loss's gradient through the steps ---------===//
//
// The backward program (energy-build-backward) run on the interpreter under
// the checkpoint schedule (runForwardBackward) gives the derivative of a
// loss after K steps of the dynamics with respect to params and initial
// states. The oracle is central finite differences of the same loss after
// the same K interpreted forward steps, along random directions and at
// single coordinates, for every kind of dynamics that has a backward form.
// Checkpointed and fully stored runs must give the same bits.
//
//===----------------------------------------------------------------------===//

#include "DynamicsTestSupport.h"

#include "energy/Interpreter/InterpretedBackprop.h"

#include <doctest/doctest.h>

#include <cmath>
#include <random>

using namespace mlir;
using namespace mlir::energy;
using namespace ::energy::testing;

namespace {

/// The step count of the model's dynamics (0 without dynamics).
int64_t stepsOf(ModelOp model, Interpreter &interpreter) {
  DynamicsOp dynamics = model.getDynamics();
  if (!dynamics)
    return 0;
  FailureOr<int64_t> count = dynamics.getSteps().evaluate(
      [&](StringRef name) { return interpreter.getDim(name); });
  REQUIRE(succeeded(count));
  return *count;
}

/// The sum of the losses after the forward run from `bindings`.
double lossAfterRun(CompiledModel &compiled, const Bindings &bindings) {
  FailureOr<Interpreter> interpreter =
      Interpreter::create(compiled.model, bindings);
  REQUIRE_MESSAGE(succeeded(interpreter), compiled.diagnostics);
  auto target = InterpretedBackprop::create(compiled.model, *interpreter);
  REQUIRE_MESSAGE(succeeded(target), compiled.diagnostics);
  int64_t steps = stepsOf(compiled.model, *interpreter);
  for (int64_t step = 0; step < steps; ++step) {
    bool stop = false;
    ::energy::Status ran = (*target)->forwardStep(step, stop);
    REQUIRE_MESSAGE(ran.ok(), ran.message() << "\n" << compiled.diagnostics);
    if (stop)
      break;
  }
  FailureOr<double> loss = (*target)->loss();
  REQUIRE_MESSAGE(succeeded(loss), compiled.diagnostics);
  return *loss;
}

/// The adjoint of every tensor that carries one, after a backward run.
llvm::StringMap<ArrayValue> lossGradients(CompiledModel &compiled,
                                          const Bindings &bindings,
                                          ::energy::BackpropStorage storage) {
  FailureOr<Interpreter> interpreter =
      Interpreter::create(compiled.model, bindings);
  REQUIRE_MESSAGE(succeeded(interpreter), compiled.diagnostics);
  auto target = InterpretedBackprop::create(compiled.model, *interpreter);
  REQUIRE_MESSAGE(succeeded(target), compiled.diagnostics);
  ::energy::BackpropSchedule schedule;
  schedule.maxSteps = stepsOf(compiled.model, *interpreter);
  schedule.storage = storage;
  ::energy::Expected<int64_t> taken =
      ::energy::runForwardBackward(**target, schedule);
  REQUIRE_MESSAGE(taken.ok(), taken.status().message() << "\n"
                                                       << compiled.diagnostics);
  llvm::StringMap<ArrayValue> gradients;
  for (const std::string &tensor : (*target)->differentiable()) {
    FailureOr<ArrayValue> adjoint =
        interpreter->getTensorValue(tensor + ".adjoint");
    REQUIRE(succeeded(adjoint));
    gradients[tensor] = *adjoint;
  }
  return gradients;
}

/// Compares the loss gradient of each tensor in `checked` with central
/// differences of lossAfterRun: along two random unit directions and at
/// three coordinates each. Step 1e-5 in double: truncation ~1e-10 · |L'''|,
/// rounding ~1e-16 · |L| / 1e-5; 1e-6 relative to the gradient's scale
/// leaves a wide margin over both and is far below a wrong term.
void checkAgainstFiniteDifferences(CompiledModel &compiled,
                                   const Bindings &bindings,
                                   const std::vector<std::string> &checked,
                                   double tolerance = 1e-6) {
  llvm::StringMap<ArrayValue> gradients = lossGradients(
      compiled, bindings, ::energy::BackpropStorage::Checkpointed);
  std::mt19937_64 random(7);
  const double h = 1e-5;
  for (const std::string &tensor : checked) {
    CAPTURE(tensor);
    REQUIRE(gradients.count(tensor));
    REQUIRE(bindings.getTensors().count(tensor));
    const ArrayValue &gradient = gradients[tensor];
    const ArrayValue &value = bindings.getTensors().lookup(tensor);
    REQUIRE(gradient.shape == value.shape);
    double scale = 1.0;
    for (double g : gradient.data)
      scale = std::max(scale, std::abs(g));
    std::vector<std::vector<double>> directions;
    std::normal_distribution<double> normal;
    for (int d = 0; d < 2; ++d) {
      std::vector<double> v(value.data.size());
      double norm = 0;
      for (double &x : v) {
        x = normal(random);
        norm += x * x;
      }
      for (double &x : v)
        x /= std::sqrt(norm);
      directions.push_back(v);
    }
    std::uniform_int_distribution<size_t> coordinate(0, value.data.size() - 1);
    for (int c = 0; c < 3; ++c) {
      std::vector<double> v(value.data.size(), 0.0);
      v[coordinate(random)] = 1.0;
      directions.push_back(v);
    }
    for (const std::vector<double> &v : directions) {
      auto shifted = [&](double by) {
        Bindings moved = bindings;
        ArrayValue x = value;
        for (size_t i = 0; i < x.data.size(); ++i)
          x.data[i] += by * v[i];
        moved.setTensor(tensor, x);
        return lossAfterRun(compiled, moved);
      };
      double difference = (shifted(h) - shifted(-h)) / (2 * h);
      double projected = 0;
      for (size_t i = 0; i < v.size(); ++i)
        projected += gradient.data[i] * v[i];
      CHECK_MESSAGE(std::abs(difference - projected) <= tolerance * scale,
                    "finite difference " << difference << " vs gradient "
                                         << projected);
    }
  }
}

std::unique_ptr<CompiledModel> compileLossModel(llvm::StringRef source) {
  std::unique_ptr<CompiledModel> compiled =
      compileSource(source, {}, "loss.energy", Pipeline::Update);
  REQUIRE_MESSAGE(compiled->model, compiled->diagnostics);
  return compiled;
}

/// Self-attention (paper 004 §6) stepped by `rule` for 3 steps, with a
/// squared-error loss on the final state.
std::string attentionSource(llvm::StringRef rule, llvm::StringRef extra = "") {
  return (R"(model attention {
  dim N = 3, D = 2;
  input y : [N, D];
  state x : [N, D];
  param Wq : [D, D], Wk : [D, D];
  )" + extra +
          R"(
  energy attn = -sum(c: N) lse(p: N) dot(Wq @ x[c], Wk @ x[p]);
  loss fit = 0.5 * sum(i: N) sqnorm(x[i] - y[i]);
  dynamics { x: )" +
          rule + R"(; steps 3; }
})")
      .str();
}

Bindings bindAttention(ModelOp model, uint64_t seed = 3, double scale = 0.5) {
  RandomBindingOptions options;
  options.seed = seed;
  options.scale = scale;
  return bindRandom(model, options);
}

} // namespace

TEST_CASE("loss gradients through gradient descent match finite differences") {
  auto compiled = compileLossModel(attentionSource("gd(lr = 0.3)"));
  Bindings bindings = bindAttention(compiled->model);
  checkAgainstFiniteDifferences(*compiled, bindings, {"Wq", "Wk", "x"});
}

TEST_CASE("loss gradients through momentum and nesterov match finite "
          "differences") {
  for (const char *rule :
       {"momentum(lr = 0.2, beta = 0.7)", "nesterov(lr = 0.2, beta = 0.6)"}) {
    CAPTURE(rule);
    auto compiled = compileLossModel(attentionSource(rule));
    Bindings bindings = bindAttention(compiled->model);
    checkAgainstFiniteDifferences(*compiled, bindings, {"Wq", "Wk", "x"});
  }
}

TEST_CASE("loss gradients through a product of parameter matrices match "
          "finite differences") {
  // The score x_cᵀ Wqᵀ Wk x_p written as one matrix, Wkᵀ Wq, applied to
  // x_c: the backward step multiplies each pair's outer products by Wq or
  // Wk, which energy-factor-outer-sums takes out of the sums over pairs.
  std::string source = attentionSource("momentum(lr = 0.2, beta = 0.7)");
  std::string from = "dot(Wq @ x[c], Wk @ x[p])";
  source.replace(source.find(from), from.size(),
                 "dot((Wk.T @ Wq) @ x[c], x[p])");
  auto compiled = compileLossModel(source);
  Bindings bindings = bindAttention(compiled->model);
  checkAgainstFiniteDifferences(*compiled, bindings, {"Wq", "Wk", "x"});
}

TEST_CASE("loss gradients through a let without indices match finite "
          "differences") {
  // `let M = Wk.T @ Wq;`: the backward step pulls M's cotangent back
  // through the let's body as one directional term, with no sum over an
  // index domain.
  std::string source =
      attentionSource("momentum(lr = 0.2, beta = 0.7)", "let M = Wk.T @ Wq;");
  std::string from = "dot(Wq @ x[c], Wk @ x[p])";
  source.replace(source.find(from), from.size(), "dot(M @ x[c], x[p])");
  auto compiled = compileLossModel(source);
  Bindings bindings = bindAttention(compiled->model);
  checkAgainstFiniteDifferences(*compiled, bindings, {"Wq", "Wk", "x"});
}

TEST_CASE("loss gradients through ode steps match finite differences") {
  for (const char *rule : {"ode(euler, dt = 0.2)", "ode(heun, dt = 0.3)"}) {
    CAPTURE(rule);
    auto compiled = compileLossModel(attentionSource(rule));
    Bindings bindings = bindAttention(compiled->model);
    checkAgainstFiniteDifferences(*compiled, bindings, {"Wq", "Wk", "x"});
  }
}

TEST_CASE("loss gradients through preconditioned steps reach the "
          "preconditioner's params") {
  auto compiled = compileLossModel(
      attentionSource("precond(lr = 0.2, P = diag(softplus(d)) + U @ U.T)",
                      "param d : [D], U : [D, D];"));
  Bindings bindings = bindAttention(compiled->model);
  checkAgainstFiniteDifferences(*compiled, bindings,
                                {"Wq", "Wk", "x", "d", "U"});
}

TEST_CASE("loss gradients through newton steps (third derivatives) match "
          "finite differences") {
  for (const char *rule :
       {"newton(lr = 0.5, cg = 2)", "newton(lr = 0.5, taylor = 1)"}) {
    CAPTURE(rule);
    auto compiled = compileLossModel(attentionSource(rule));
    Bindings bindings = bindAttention(compiled->model);
    checkAgainstFiniteDifferences(*compiled, bindings, {"Wq", "Wk", "x"});
  }
}

TEST_CASE("loss gradients through explicit rules with per-step params and a "
          "let match finite differences") {
  // Paper 002's attention with carried scores (examples/hopfield_attention):
  // the step reads the let S whole and Wq[step], Wk[step], Wv[step].
  auto compiled = compileLossModel(R"(model carried {
  dim N = 3, D = 2, L = 2;
  input y : [N, D];
  state x : [N, D];
  state H : [N, N] = zeros;
  param Wq : [L, D, D], Wk : [L, D, D], Wv : [L, D, D];
  const a = 0.5, a2 = 0.5;
  let S[i: N, j: N] = dot(Wq[step] @ x[i], Wk[step] @ x[j]) / sqrt(D);
  loss fit = 0.5 * sum(i: N) sqnorm(x[i] - y[i]);
  dynamics {
    H <- a2 * H + (1 - a2) * S;
    x <- a * x + (1 - a) * softmax_rows(H) @ (x @ Wv[step].T);
    steps L;
  }
})");
  RandomBindingOptions options;
  options.seed = 5;
  options.scale = 0.6;
  Bindings bindings = bindRandom(compiled->model, options);
  checkAgainstFiniteDifferences(*compiled, bindings, {"Wq", "Wk", "Wv", "x"});
}

TEST_CASE("loss gradients through a sequential group of two nodes") {
  auto compiled = compileLossModel(R"(model pair {
  dim N = 3, D = 2;
  input y : [N, D];
  state a : [N, D], b : [N, D];
  param W : [D, D];
  energy couple = -sum(c: N) lse(p: N) dot(W @ a[c], b[p]);
  energy prior = 0.5 * sum(i: N) (sqnorm(a[i]) + sqnorm(b[i]));
  loss fit = sum(i: N) dot(a[i] + b[i], y[i]);
  dynamics { a: gd(lr = 0.3); b: momentum(lr = 0.2); order sequential; steps 4; }
})");
  RandomBindingOptions options;
  options.seed = 11;
  options.scale = 0.5;
  Bindings bindings = bindRandom(compiled->model, options);
  checkAgainstFiniteDifferences(*compiled, bindings, {"W", "a", "b"});
}

/// A small energy Transformer (examples/training/char_transformer): the
/// energy reads x only through g = E.T tokens + P + x, and E and P only
/// through g, unless `beside` adds a term that reads x directly.
std::string residualSource(llvm::StringRef beside) {
  return (R"(model residual {
  dim N = 3, V = 4, D = 2, M = 3;
  input tokens : [N, V], target : [N, V];
  param E : [V, D], P : [N, D], Wq : [D, D], Wk : [D, D], W : [M, D];
  state x : [N, D] = zeros;
  let g[t: N] = E.T @ tokens[t] + P[t] + x[t];
  energy attn = -sum(i: N) lse(j: N where j <= i) dot(Wq @ g[i], Wk @ g[j]);
  energy mlp = -sum(i: N) sum(silu_int(W @ g[i]));
  )" + beside +
          R"(
  loss xent = -mean(t: N) dot(target[t], log_softmax(E @ layernorm(g[t])));
  dynamics { x: gd(lr = 0.4); steps 2; }
})")
      .str();
}

/// Whether the backward program takes gradients of `term`.
bool backwardDifferentiates(ModelOp model, llvm::StringRef term) {
  bool found = false;
  model.walk([&](BackwardProgramOp backward) {
    backward.walk([&](GradOp grad) {
      found |= grad.getOfAttr() && grad.getOfAttr().getValue() == term;
    });
  });
  return found;
}

TEST_CASE("through a residual let: E and P's adjoints as one pull-back per "
          "position match finite differences") {
  // With x read only through g, ∇_E ⟨∇_x E, c⟩ is the pull-back through g
  // of ∇_x ⟨∇_x E, c⟩ (g.backprop); with x read beside g as well, the
  // gradient of the directional term itself. Both must match.
  for (std::string beside :
       {"", "energy prior = 0.3 * sum(i: N) sqnorm(x[i]);"}) {
    CAPTURE(beside);
    auto compiled = compileLossModel(residualSource(beside));
    CHECK(backwardDifferentiates(compiled->model, "g.backprop") ==
          beside.empty());
    Bindings bindings = bindAttention(compiled->model, 17, 0.6);
    checkAgainstFiniteDifferences(*compiled, bindings,
                                  {"E", "P", "Wq", "Wk", "W"});
  }
}

TEST_CASE("through lets that read no state: E and P's adjoints as the "
          "pull-back of the lets' cotangents match finite differences") {
  // A conditional (causal) energy: queries from g = h + x, keys from the
  // layer's input h = E.T tokens + P, which reads no state. The directional
  // term is taken with h read from h.value, whose gradient is h's
  // cotangent.
  auto compiled = compileLossModel(R"(model conditional {
  dim N = 3, V = 4, D = 2, M = 3;
  input tokens : [N, V], target : [N, V];
  param E : [V, D], P : [N, D], Wq : [D, D], Wk : [D, D], W : [M, D];
  state x : [N, D] = zeros;
  let h[t: N] = E.T @ tokens[t] + P[t];
  let g[t: N] = h[t] + x[t];
  energy attn = -sum(i: N) lse(j: N where j <= i) dot(Wq @ g[i], Wk @ h[j]);
  energy mlp = -sum(i: N) sum(silu_int(W @ g[i]));
  loss xent = -mean(t: N) dot(target[t], log_softmax(E @ layernorm(g[t])));
  dynamics { x: momentum(lr = 0.4, beta = 0.5); steps 2; }
})");
  CHECK(backwardDifferentiates(compiled->model, "h.backprop"));
  Bindings bindings = bindAttention(compiled->model, 19, 0.6);
  checkAgainstFiniteDifferences(*compiled, bindings,
                                {"E", "P", "Wq", "Wk", "W"});
}

TEST_CASE("a state initialised from a param passes its adjoint on to it") {
  auto compiled = compileLossModel(R"(model init {
  dim N = 3, D = 2;
  input y : [N, D];
  param x0 : [N, D], W : [D, D];
  state x : [N, D] = x0;
  energy e = -sum(c: N) lse(p: N) dot(W @ x[c], x[p]);
  loss fit = 0.5 * sum(i: N) sqnorm(x[i] - y[i]);
  dynamics { x: gd(lr = 0.2); steps 2; }
})");
  RandomBindingOptions options;
  options.seed = 13;
  options.scale = 0.5;
  options.unbound = {"x"};
  Bindings bindings = bindRandom(compiled->model, options);
  checkAgainstFiniteDifferences(*compiled, bindings, {"x0", "W"});
}

TEST_CASE("checkpointed and fully stored backward runs give the same bits") {
  // 7 steps: checkpoints every 3 steps, segments of 3, 3 and 1.
  auto compiled = compileLossModel(R"(model long {
  dim N = 3, D = 2;
  input y : [N, D];
  state x : [N, D];
  param Wq : [D, D], Wk : [D, D];
  energy attn = -sum(c: N) lse(p: N) dot(Wq @ x[c], Wk @ x[p]);
  loss fit = 0.5 * sum(i: N) sqnorm(x[i] - y[i]);
  dynamics { x: nesterov(lr = 0.1); steps 7; }
})");
  Bindings bindings = bindAttention(compiled->model);
  CHECK(::energy::checkpointInterval(
            7, ::energy::BackpropStorage::Checkpointed) == 3);
  llvm::StringMap<ArrayValue> checkpointed = lossGradients(
      *compiled, bindings, ::energy::BackpropStorage::Checkpointed);
  llvm::StringMap<ArrayValue> full =
      lossGradients(*compiled, bindings, ::energy::BackpropStorage::Full);
  REQUIRE(checkpointed.size() == full.size());
  for (auto &entry : checkpointed) {
    CAPTURE(entry.getKey().str());
    CHECK(entry.getValue().data == full[entry.getKey()].data);
  }
  checkAgainstFiniteDifferences(*compiled, bindings, {"Wq", "x"});
}

namespace {
/// A model whose dynamics converge to the unique minimum of a strongly
/// convex energy in x (Hessian ⪰ I: a quadratic plus log-sum-exps of
/// functions affine in x), differentiated with `backward`.
std::string fixedPointSource(llvm::StringRef backward,
                             llvm::StringRef rule = "gd(lr = 0.5)") {
  return (R"(model fixed {
  dim N = 3, D = 2;
  input y : [N, D], u : [N, D];
  state x : [N, D];
  param Wq : [D, D], Wk : [D, D], b : [D];
  energy prior = 0.5 * sum(i: N) sqnorm(x[i] - u[i] - b);
  energy attn = 0.5 * sum(c: N) lse(p: N) dot(Wq @ x[c], Wk @ u[p]);
  loss fit = 0.5 * sum(i: N) sqnorm(x[i] - y[i]) + 0.1 * sqnorm(b);
  dynamics {
    x: )" +
          rule + R"(;
    steps 300 until maxabs(grad) < 1e-13;
    )" + backward +
          R"(
  }
})")
      .str();
}

/// Two states updated by different rules in a sequential group, coupled by
/// a small log-sum-exp term: the Hessian is joint over both.
std::string pairFixedPointSource(llvm::StringRef backward) {
  return (R"(model pair {
  dim N = 3, D = 2;
  input y : [N, D];
  state a : [N, D], c : [N, D];
  param W : [D, D], m : [D];
  energy couple = 0.3 * sum(i: N) lse(p: N) dot(W @ a[i], c[p]);
  energy prior = 0.5 * sum(i: N) (sqnorm(a[i] - m) + sqnorm(c[i] + m));
  loss fit = sum(i: N) dot(a[i] + 2 * c[i], y[i]);
  dynamics {
    a: gd(lr = 0.4);
    c: momentum(lr = 0.3, beta = 0.5);
    order sequential;
    steps 400 until maxabs(grad) < 1e-13;
    )" + backward +
          R"(
  }
})")
      .str();
}

/// Implicit and unrolled gradients at the fixed point: the run converges to
/// ~1e-13, where the steps' Jacobians multiply out to (I - lr H)^T and the
/// unrolled derivative with respect to the start vanishes; CG stops at a
/// residual of 1e-12 of the seed. 1e-9 of the gradient's scale allows
/// both and is far below any wrong term.
void checkImplicitAgainstUnrolled(llvm::StringRef implicitSource,
                                  llvm::StringRef unrolledSource,
                                  uint64_t seed) {
  auto implicit = compileLossModel(implicitSource);
  auto unrolled = compileLossModel(unrolledSource);
  // Bound alike: the tensors of the spec, not those of either backward
  // program, which the programs set before reading.
  RandomBindingOptions options;
  options.seed = seed;
  options.scale = 0.5;
  for (TensorOp tensor : implicit->model.getBody().front().getOps<TensorOp>())
    if (tensor.getAdjointOf() || tensor.getCotangentOf() ||
        tensor.getSolverOf())
      options.unbound.insert(tensor.getSymName().str());
  Bindings bindings = bindRandom(implicit->model, options);
  llvm::StringMap<ArrayValue> fromImplicit = lossGradients(
      *implicit, bindings, ::energy::BackpropStorage::Checkpointed);
  llvm::StringMap<ArrayValue> fromUnrolled = lossGradients(
      *unrolled, bindings, ::energy::BackpropStorage::Checkpointed);
  REQUIRE(fromImplicit.size() == fromUnrolled.size());
  for (auto &entry : fromImplicit) {
    CAPTURE(entry.getKey().str());
    const std::vector<double> &a = entry.getValue().data;
    const std::vector<double> &b = fromUnrolled[entry.getKey()].data;
    REQUIRE(a.size() == b.size());
    double scale = 1.0;
    for (double v : b)
      scale = std::max(scale, std::abs(v));
    for (size_t i = 0; i < a.size(); ++i)
      CHECK_MESSAGE(std::abs(a[i] - b[i]) <= 1e-9 * scale,
                    "implicit " << a[i] << " vs unrolled " << b[i]);
  }
}
} // namespace

TEST_CASE("implicit gradients at a fixed point match finite differences") {
  // The oracle differences the loss after runs that converge to ~1e-13:
  // the run's error moves the difference by ~1e-13 / 1e-5, far below 1e-6.
  auto compiled =
      compileLossModel(fixedPointSource("backward implicit(cg = 50, tol = "
                                        "1e-12);"));
  BackwardProgramOp backward =
      *compiled->model.getBody().front().getOps<BackwardProgramOp>().begin();
  REQUIRE(backward.getImplicit());
  Bindings bindings = bindAttention(compiled->model, 17);
  checkAgainstFiniteDifferences(*compiled, bindings, {"Wq", "Wk", "b", "x"});

  // Adaptive ode steps, which have no unrolled backward form.
  auto adaptive = compileLossModel(
      fixedPointSource("backward implicit(cg = 50, tol = 1e-12);",
                       "ode(heun, dt = 1.0, rtol = 1e-3, atol = 1e-6)"));
  Bindings adaptiveBindings = bindAttention(adaptive->model, 17);
  checkAgainstFiniteDifferences(*adaptive, adaptiveBindings, {"b"});

  auto pair = compileLossModel(
      pairFixedPointSource("backward implicit(cg = 50, tol = 1e-12);"));
  Bindings pairBindings = bindAttention(pair->model, 19);
  checkAgainstFiniteDifferences(*pair, pairBindings, {"W", "m", "a", "c"});
}

TEST_CASE("implicit gradients equal unrolled ones at convergence") {
  const char *implicit = "backward implicit(cg = 50, tol = 1e-12);";
  const char *unrolled = "backward unrolled;";
  checkImplicitAgainstUnrolled(fixedPointSource(implicit),
                               fixedPointSource(unrolled), 23);
  checkImplicitAgainstUnrolled(pairFixedPointSource(implicit),
                               pairFixedPointSource(unrolled), 29);
}

TEST_CASE("implicit gradients through EM's stationary rules match finite "
          "differences") {
  // A gmm (examples/gmm.energy) whose data moves with a param: EM converges
  // to a fixed point of its closed-form steps, where the energy's gradient
  // in mu, prec and w is zero but for the covariance ridge 1e-6 (a
  // precision's gradient is -N_k 1e-6 / 2 I there, docs/dynamics.md), and
  // the loss on the means is differentiated there. Two clusters of 3 points
  // with noise 0.3: the ridge is ~1e-5 of a covariance, so the implicit
  // gradient (at the energy's stationary point) is checked at 1e-4 of its
  // scale. 60 steps take EM to its fixed point to rounding on this data.
  auto compiled = compileLossModel(R"(model gmm {
  dim N = 6, K = 2, D = 2;
  input x : [N, D], target : [K, D];
  param shift : [N, D];
  state mu : [K, D], prec : [K, D, D] = eye, w : [K] = zeros;
  energy fit = -sum(i: N) lse(k: K) (log_softmax(w)[k] + 0.5 * logdet(prec[k]) - 0.5 * quad(x[i] + shift[i] - mu[k], prec[k]));
  loss near = 0.5 * sum(k: K) sqnorm(mu[k] - target[k]);
  dynamics {
    mu: stationary; prec: stationary; w: stationary;
    steps 60;
    backward implicit(cg = 100, tol = 1e-13);
  }
})");
  RandomBindingOptions options;
  options.seed = 31;
  options.scale = 0.3;
  options.unbound = {"prec", "w"};
  Bindings bindings = bindRandom(compiled->model, options);
  // Two well-separated clusters of three points, so that EM has a
  // well-posed fixed point: N(0, 0.3²) noise around (±1.5, ±1.5).
  ArrayValue x = bindings.getTensors().lookup("x");
  for (size_t i = 0; i < x.data.size(); ++i)
    x.data[i] += i < x.data.size() / 2 ? 1.5 : -1.5;
  bindings.setTensor("x", x);
  checkAgainstFiniteDifferences(*compiled, bindings, {"shift"}, 1e-4);
}
