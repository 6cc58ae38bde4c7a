//===- SecondOrderTest.cpp - newton, precond and ode against C++ ----------===//
//
// On the quadratic bowl E = ½ (y − c)ᵀ A (y − c), A SPD, the gradient is
// A (y − c) and the Hessian A, so every rule's step has a closed form:
//   newton, cg:      y₁ = c (CG solves A s = ∇E exactly in D iterations);
//   newton, taylor:  y₁ = y − Σ_{k≤n} (I − A)^k ∇E(y);
//   precond:         y₁ = y − lr P ∇E(y);
//   ode euler/heun:  y₁ = y − dt k₁ / y − dt (k₁ + k₂)/2, k₂ = ∇E(y − dt k₁).
// And on a non-quadratic energy (hopfield) the Hessian-vector product that
// newton differentiates out of ⟨∇E, v⟩ matches central differences of ∇E.
//
//===----------------------------------------------------------------------===//

#include "DynamicsTestSupport.h"

#include <doctest/doctest.h>

using namespace ::energy::testing;
using mlir::energy::GradientOp;
using mlir::energy::Interpreter;

namespace {
/// Compiles the bowl with `rule`, takes one step, and returns y before and
/// after together with the bindings.
struct OneStep {
  Bindings bindings;
  Vector before, after;
};

OneStep stepBowl(llvm::StringRef source, llvm::StringRef extraTensor = {}) {
  std::unique_ptr<CompiledModel> compiled =
      compileSource(source, {}, "bowl.energy", Pipeline::Update);
  REQUIRE_MESSAGE(compiled->model, compiled->diagnostics);
  OneStep result{bindBowl(compiled->model), {}, {}};
  if (!extraTensor.empty()) {
    // A second SPD matrix: the bowl's A, shifted.
    ArrayValue p = bound(result.bindings, "A");
    for (int64_t i = 0; i < 4; ++i)
      p.data[i * 4 + i] += 0.5;
    result.bindings.setTensor(extraTensor, p);
  }
  result.before = bound(result.bindings, "y").data;
  std::unique_ptr<DynamicsRun> run =
      DynamicsRun::start(*compiled, result.bindings);
  REQUIRE_MESSAGE(run, compiled->diagnostics);
  REQUIRE_MESSAGE(run->step(), compiled->diagnostics);
  std::optional<ArrayValue> y = run->value("y");
  REQUIRE_MESSAGE(y, compiled->diagnostics);
  result.after = y->data;
  return result;
}

Vector bowlGradient(const Bindings &bindings, const Vector &y) {
  return matVec(bound(bindings, "A").data,
                axpy(y, -1.0, bound(bindings, "c").data));
}

ArrayValue asTensor(const Vector &v) {
  return ArrayValue({static_cast<int64_t>(v.size())}, v);
}
} // namespace

// The step s solves A s = A (y − c), so y₁ = c up to the rounding of four CG
// iterations on a matrix with condition number ≤ ~5: ~1e-14; 1e-9 leaves
// margin and still fails for any wrong step (off by O(1)).
TEST_CASE("newton with conjugate gradients minimises a quadratic in one step") {
  OneStep step = stepBowl(bowlSource("newton(lr = 1.0, cg = 4)", "steps 1"));
  CHECK(relativeError(asTensor(step.after), bound(step.bindings, "c").data) <=
        1e-9);
}

TEST_CASE("the quadratic_bowl example converges in one Newton step") {
  std::unique_ptr<CompiledModel> compiled =
      compileExample("quadratic_bowl", /*wrtAll=*/false, Pipeline::Update);
  REQUIRE_MESSAGE(compiled->model, compiled->diagnostics);
  Bindings bindings = bindBowl(compiled->model);
  std::unique_ptr<DynamicsRun> run = DynamicsRun::start(*compiled, bindings);
  REQUIRE_MESSAGE(run, compiled->diagnostics);
  REQUIRE_MESSAGE(run->run(), compiled->diagnostics);
  CHECK(run->stepsTaken() == 1);
  std::optional<ArrayValue> y = run->value("y");
  REQUIRE(y);
  CHECK(relativeError(*y, bound(bindings, "c").data) <= 1e-9);
}

// The series is a few matrix-vector products done in the same order on both
// sides: agreement to rounding (1e-12 relative).
TEST_CASE("newton with taylor = n takes the step of the series") {
  for (int order = 0; order <= 3; ++order) {
    CAPTURE(order);
    OneStep step = stepBowl(bowlSource(
        "newton(lr = 0.5, taylor = " + std::to_string(order) + ")", "steps 1"));
    const Vector &a = bound(step.bindings, "A").data;
    Vector g = bowlGradient(step.bindings, step.before);
    Vector term = g, total = g;
    for (int k = 1; k <= order; ++k) {
      term = axpy(term, -1.0, matVec(a, term));
      total = axpy(total, 1.0, term);
    }
    CHECK(relativeError(asTensor(step.after), axpy(step.before, -0.5, total)) <=
          1e-12);
  }
}

TEST_CASE("precond applies P to the gradient") {
  OneStep step = stepBowl(R"(model bowl {
  dim D;
  input A : [D, D], c : [D];
  param P : [D, D];
  state y : [D];
  energy bowl = 0.5 * quad(y - c, A);
  dynamics { y: precond(lr = 0.5, P = P); steps 1; }
}
)",
                          "P");
  Vector g = bowlGradient(step.bindings, step.before);
  Vector expected =
      axpy(step.before, -0.5, matVec(bound(step.bindings, "P").data, g));
  CHECK(relativeError(asTensor(step.after), expected) <= 1e-12);
}

TEST_CASE("ode takes Euler and Heun steps") {
  for (bool heun : {false, true}) {
    CAPTURE(heun);
    OneStep step = stepBowl(bowlSource(
        heun ? "ode(heun, dt = 0.2)" : "ode(euler, dt = 0.2)", "steps 1"));
    Vector k1 = bowlGradient(step.bindings, step.before);
    Vector expected = axpy(step.before, -0.2, k1);
    if (heun) {
      Vector k2 = bowlGradient(step.bindings, expected);
      expected = axpy(step.before, -0.1, axpy(k1, 1.0, k2));
    }
    CHECK(relativeError(asTensor(step.after), expected) <= 1e-12);
  }
}

// H v from differentiating ⟨∇E, v⟩ against (∇E(x + h v) − ∇E(x − h v)) / 2h
// on hopfield (not quadratic). With h = 1e-5 the central difference has
// truncation error O(h² ‖∇³E‖) ≈ 1e-10 and rounding O(ε ‖∇E‖ / h) ≈ 1e-11,
// so 1e-7 relative to the product's scale holds with margin.
/// Checks the Hessian-vector product newton's curvature term gives, for a
/// model of a state x : [N, D] and an input m : [K, D], against central
/// differences of the gradient along a fixed direction.
void checkHessianVectorProduct(llvm::StringRef source) {
  std::unique_ptr<CompiledModel> compiled =
      compileSource(source, {}, "hopfield.energy", Pipeline::Update);
  REQUIRE_MESSAGE(compiled->model, compiled->diagnostics);
  RandomBindingOptions options;
  options.dims = {{"N", 3}, {"K", 4}, {"D", 2}};
  options.scale = 1.0;
  Bindings bindings = bindRandom(compiled->model, options);
  ArrayValue x = bound(bindings, "x");
  ArrayValue v(x.shape);
  for (size_t i = 0; i < v.data.size(); ++i)
    v.data[i] = std::sin(1.0 + double(i));
  bindings.setTensor("x.direction", v);

  GradientOp product;
  for (GradientOp gradient : compiled->model.getOps<GradientOp>())
    if (gradient.getOf() == llvm::StringRef("x.curvature"))
      product = gradient;
  REQUIRE(product);
  mlir::FailureOr<Interpreter> interpreter =
      Interpreter::create(compiled->model, bindings);
  REQUIRE_MESSAGE(mlir::succeeded(interpreter), compiled->diagnostics);
  mlir::FailureOr<ArrayValue> hv = interpreter->evaluateGradient(product);
  REQUIRE_MESSAGE(mlir::succeeded(hv), compiled->diagnostics);

  const double h = 1e-5;
  auto gradientAt = [&](double scale) {
    Bindings shifted = bindings;
    ArrayValue moved = x;
    for (size_t i = 0; i < moved.data.size(); ++i)
      moved.data[i] += scale * v.data[i];
    shifted.setTensor("x", moved);
    mlir::FailureOr<Interpreter> at =
        Interpreter::create(compiled->model, shifted);
    REQUIRE(mlir::succeeded(at));
    mlir::FailureOr<ArrayValue> g = at->evaluateGradient("x");
    REQUIRE(mlir::succeeded(g));
    return g->data;
  };
  Vector difference = axpy(gradientAt(h), -1.0, gradientAt(-h));
  for (double &entry : difference)
    entry /= 2 * h;
  CHECK(maxAbs(difference) > 1e-3); // the product is not trivially zero
  CHECK(relativeError(*hv, difference) <= 1e-7);
}

TEST_CASE("Hessian-vector products match differences of the gradient") {
  checkHessianVectorProduct(R"(model hopfield {
  dim N, K, D;
  state x : [N, D];
  input m : [K, D];
  const beta = 1.0;
  energy retrieval = -sum(i: N) lse(mu: K) beta * dot(x[i], m[mu]);
  dynamics { x: newton(lr = 1.0, taylor = 1); steps 1; }
})");
  // A number inside the lse: recomputed in the directional term's loops,
  // it is a constant, not a value that depends on x.
  checkHessianVectorProduct(R"(model hopfield {
  dim N, K, D;
  state x : [N, D];
  input m : [K, D];
  energy retrieval = -sum(i: N) lse(mu: K) (0.5 * dot(x[i], m[mu]));
  dynamics { x: newton(lr = 1.0, taylor = 1); steps 1; }
})");
}

// dy/dt = −A (y − c) over dt = 0.5, integrated by adaptive Heun with
// rtol = atol = 1e-9, against classical RK4 with 20000 steps (a different
// method; its error, O(h⁴) with h = 2.5e-5, is below 1e-16). The adaptive
// steps keep each sub-step's Euler-Heun difference below ~1e-9, and Heun's
// own local error is of higher order, so over the few hundred sub-steps the
// global error stays near 1e-8; 1e-6 leaves margin, while a single fixed
// Heun step of 0.5 (local error ~ (0.5 λ)³ / 6 for the bowl's eigenvalues
// λ up to ~5) is off by far more, so the check does test the adaptivity.
TEST_CASE("ode with rtol and atol matches a tight reference solution") {
  OneStep step = stepBowl(
      bowlSource("ode(heun, dt = 0.5, rtol = 1e-9, atol = 1e-9)", "steps 1"));
  auto flow = [&](const Vector &y) {
    Vector g = bowlGradient(step.bindings, y);
    for (double &entry : g)
      entry = -entry;
    return g;
  };
  Vector y = step.before;
  const int steps = 20000;
  const double h = 0.5 / steps;
  for (int i = 0; i < steps; ++i) {
    Vector k1 = flow(y);
    Vector k2 = flow(axpy(y, h / 2, k1));
    Vector k3 = flow(axpy(y, h / 2, k2));
    Vector k4 = flow(axpy(y, h, k3));
    for (size_t j = 0; j < y.size(); ++j)
      y[j] += h / 6 * (k1[j] + 2 * k2[j] + 2 * k3[j] + k4[j]);
  }
  CHECK(relativeError(asTensor(step.after), y) <= 1e-6);
}
