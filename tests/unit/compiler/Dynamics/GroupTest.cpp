//===- GroupTest.cpp - Simultaneous groups and `order sequential` ---------===//
//
// On the coupled quadratic E = ½ |a − M b|², with r = a − M b,
// ∇_a E = r and ∇_b E = −Mᵀ r. Adjacent gradient rules form one group whose
// gradients are all taken at the group's entry values; `order sequential`
// makes each rule its own group, so b's gradient sees a's new value
// (block-coordinate descent). Both are checked exactly against C++, and the
// two references are checked to differ, so neither test passes by accident.
//
//===----------------------------------------------------------------------===//

#include "DynamicsTestSupport.h"

#include <doctest/doctest.h>

using namespace ::energy::testing;

namespace {

constexpr double kLrA = 0.3, kLrB = 0.2, kBeta = 0.7;
constexpr int64_t kP = 3, kQ = 4;

/// The coupled model with `rules` (and any `order`) in its dynamics.
std::string coupledSource(llvm::StringRef rules) {
  return (R"(model coupled {
  dim P, Q;
  input M : [P, Q];
  state a : [P], b : [Q];
  energy fit = 0.5 * sqnorm(a - M @ b);
  dynamics { )" +
          rules + " }\n}\n")
      .str();
}

/// How the C++ reference takes one step of the coupled model.
enum class Scheme {
  /// a: gd, b: gd, one group: both gradients at (a, b).
  Simultaneous,
  /// a: gd, b: gd, `order sequential`: b's gradient at (a', b).
  Sequential,
  /// a: nesterov, b: gd, one group: one joint gradient evaluation at the
  /// look-ahead (a − β p, b), then each rule applies its own update.
  NesterovInGroup,
};

struct Reference {
  Vector a, b, p;
};

void referenceStep(Reference &state, const Vector &m, Scheme scheme) {
  auto residual = [&](const Vector &a, const Vector &b) {
    return axpy(a, -1.0, matVec(m, b));
  };
  switch (scheme) {
  case Scheme::Simultaneous: {
    Vector r = residual(state.a, state.b);
    state.a = axpy(state.a, -kLrA, r);
    state.b = axpy(state.b, kLrB, matTVec(m, r));
    break;
  }
  case Scheme::Sequential: {
    state.a = axpy(state.a, -kLrA, residual(state.a, state.b));
    state.b = axpy(state.b, kLrB, matTVec(m, residual(state.a, state.b)));
    break;
  }
  case Scheme::NesterovInGroup: {
    Vector r = residual(axpy(state.a, -kBeta, state.p), state.b);
    for (size_t i = 0; i < state.p.size(); ++i)
      state.p[i] = kBeta * state.p[i] + r[i];
    state.a = axpy(state.a, -kLrA, state.p);
    state.b = axpy(state.b, kLrB, matTVec(m, r));
    break;
  }
  }
}

/// Runs `rules` on the coupled model and compares a and b after every step
/// with `scheme`; returns the reference's final state.
Reference checkScheme(llvm::StringRef rules, Scheme scheme) {
  std::unique_ptr<CompiledModel> compiled = compileSource(
      coupledSource(rules), {}, "coupled.energy", Pipeline::Update);
  REQUIRE_MESSAGE(compiled->model, compiled->diagnostics);
  RandomBindingOptions options;
  options.dims = {{"P", kP}, {"Q", kQ}};
  options.scale = 0.5;
  Bindings bindings = bindRandom(compiled->model, options);
  const Vector &m = bound(bindings, "M").data;
  Reference reference{bound(bindings, "a").data, bound(bindings, "b").data,
                      Vector(kP, 0.0)};
  std::unique_ptr<DynamicsRun> run = DynamicsRun::start(*compiled, bindings);
  REQUIRE_MESSAGE(run, compiled->diagnostics);
  bool ran = run->run([&](int64_t k) {
    referenceStep(reference, m, scheme);
    std::optional<ArrayValue> a = run->value("a"), b = run->value("b");
    REQUIRE_MESSAGE((a && b), compiled->diagnostics);
    // A few O(P·Q) sums per step, in a possibly different order: rounding
    // of ~1e-15 relative, against a tolerance of 1e-12; using the wrong
    // group's values changes a or b at the 1e-2 level.
    INFO("step " << k);
    CHECK(relativeError(*a, reference.a) <= 1e-12);
    CHECK(relativeError(*b, reference.b) <= 1e-12);
  });
  REQUIRE_MESSAGE(ran, compiled->diagnostics);
  CHECK(run->stepsTaken() == 6);
  return reference;
}

double distance(const Reference &x, const Reference &y) {
  return maxAbs(axpy(x.a, -1.0, y.a)) + maxAbs(axpy(x.b, -1.0, y.b));
}

} // namespace

TEST_CASE("a group of gd rules takes every gradient at the entry values") {
  Reference simultaneous = checkScheme(
      "a: gd(lr = 0.3); b: gd(lr = 0.2); steps 6;", Scheme::Simultaneous);
  Reference sequential =
      checkScheme("a: gd(lr = 0.3); b: gd(lr = 0.2); steps 6; order "
                  "sequential;",
                  Scheme::Sequential);
  // The two schemes are told apart by these tests.
  CHECK(distance(simultaneous, sequential) > 1e-3);
}

TEST_CASE("nesterov in a group: one joint gradient at the look-ahead") {
  checkScheme("a: nesterov(lr = 0.3, beta = 0.7); b: gd(lr = 0.2); steps 6;",
              Scheme::NesterovInGroup);
}
