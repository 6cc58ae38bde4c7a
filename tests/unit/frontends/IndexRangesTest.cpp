//===- IndexRangesTest.cpp - Tests of the index checks left to run time ---===//
//
// Fourier–Motzkin elimination (Feasibility.h) against enumerating the
// integer points of small systems, and the checker's index checks: what it
// proves, what it refuses, and the conditions it leaves to the runtime.
//
//===----------------------------------------------------------------------===//

#include "TestSupport.h"

#include "energy/Frontend/Feasibility.h"

#include <doctest/doctest.h>

#include <random>

using namespace energy::frontend;
using namespace energy::frontend::testing;

namespace {

/// The value of `e` with `values` for its symbols.
int64_t valueOf(const AffineExpr &e,
                const std::map<std::string, int64_t> &values) {
  int64_t result = e.constant;
  for (const auto &[symbol, coefficient] : e.terms)
    result += coefficient * values.at(symbol);
  return result;
}

/// Whether some integer i, j in [-8, 8] satisfy every inequality of
/// `system` with dim N = `n`.
bool integerSolution(const std::vector<AffineExpr> &system, int64_t n) {
  for (int64_t i = -8; i <= 8; ++i)
    for (int64_t j = -8; j <= 8; ++j) {
      std::map<std::string, int64_t> values = {{"i", i}, {"j", j}, {"N", n}};
      bool all = true;
      for (const AffineExpr &inequality : system)
        all &= valueOf(inequality, values) >= 0;
      if (all)
        return true;
    }
  return false;
}

/// Whether every condition of `answer` holds with N = `n`.
bool conditionsHold(const Feasibility &answer, int64_t n) {
  if (answer.kind == Feasibility::Kind::Never)
    return false;
  for (const AffineExpr &condition : answer.conditions)
    if (valueOf(condition, {{"N", n}}) < 0)
      return false;
  return true;
}

AffineExpr symbol(const char *name) { return AffineExpr::getSymbol(name); }
AffineExpr constant(int64_t value) { return AffineExpr::getConstant(value); }

/// The index checks of `source`, which must check without errors.
std::vector<IndexRangeCheck> indexChecksOf(llvm::StringRef source) {
  std::unique_ptr<Compilation> compilation = compile(source);
  INFO(compilation->printed);
  REQUIRE(!compilation->diagnostics.hasErrors());
  return compilation->model->indexChecks;
}

} // namespace

TEST_CASE("elimination agrees with the integer points of difference "
          "constraints") {
  // Systems of bounds 0 <= i, j <= N - 1 (boxed within [-8, 8] by N <= 6)
  // and random constraints ±i ± j + a·N + c >= 0: totally unimodular, so
  // the rational answer is the integer one, for every N.
  std::mt19937 random(7);
  std::uniform_int_distribution<int> sign(0, 1), offset(-4, 4), scale(-1, 1);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<AffineExpr> system = {
        symbol("i"), symbol("N") - constant(1) - symbol("i"), symbol("j"),
        symbol("N") - constant(1) - symbol("j")};
    for (int k = 0; k < 3; ++k)
      system.push_back(symbol("i").scaled(sign(random) ? 1 : -1) +
                       symbol("j").scaled(scale(random)) +
                       symbol("N").scaled(scale(random)) +
                       constant(offset(random)));
    Feasibility answer = eliminate(system, {"j", "i"}, {{"N", 1}});
    REQUIRE(answer.kind != Feasibility::Kind::Unknown);
    for (int64_t n = 1; n <= 6; ++n) {
      INFO("trial " << trial << ", N = " << n);
      CHECK(conditionsHold(answer, n) == integerSolution(system, n));
    }
  }
}

TEST_CASE("elimination never misses an integer solution") {
  // Coefficients up to 3: the rational answer may admit more, never less.
  std::mt19937 random(11);
  std::uniform_int_distribution<int> coefficient(-3, 3), offset(-6, 6);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<AffineExpr> system = {
        symbol("i") + constant(8), constant(8) - symbol("i"),
        symbol("j") + constant(8), constant(8) - symbol("j")};
    for (int k = 0; k < 3; ++k)
      system.push_back(symbol("i").scaled(coefficient(random)) +
                       symbol("j").scaled(coefficient(random)) +
                       symbol("N").scaled(coefficient(random)) +
                       constant(offset(random)));
    Feasibility answer = eliminate(system, {"i", "j"}, {{"N", 1}});
    REQUIRE(answer.kind != Feasibility::Kind::Unknown);
    for (int64_t n = 1; n <= 6; ++n)
      if (integerSolution(system, n)) {
        INFO("trial " << trial << ", N = " << n);
        CHECK(conditionsHold(answer, n));
      }
  }
}

TEST_CASE("indices in range for every size need no check") {
  CHECK(indexChecksOf(R"(model m {
  dim N, D, R = 2 * N - 1;
  input x : [N, D];
  param bias : [R], t : [N];
  state s : [N, D] = x;
  energy e = -sum(i: N) lse(j: N) (dot(s[i], x[j]) + bias[i - j + N - 1]);
  energy c = -sum(i: N) lse(j: N where j <= i) (dot(s[i], x[j]) + bias[i - j]);
  energy w = -sum(i: N) lse(j: N where j <= i and j > i - 4) t[i - j];
})")
            .empty());
}

TEST_CASE("an index out of range for every size is an error") {
  std::unique_ptr<Compilation> compilation = compile(R"(model m {
  dim N, D, R = 2 * N - 1;
  input x : [N, D];
  param bias : [R];
  state s : [N, D] = x;
  energy e = -sum(i: N) lse(j: N) (dot(s[i], x[j]) + bias[i - j + N]);
})");
  CHECK(compilation->firstError() ==
        "6:59: index is out of range whatever the dims: it can reach `R`, "
        "the size of its axis");
}

TEST_CASE("indices out of range for some sizes are left to the runtime") {
  std::vector<IndexRangeCheck> checks = indexChecksOf(R"(model m {
  dim N, L;
  input v : [N];
  param W : [L];
  state s : [N] = v;
  energy e = sum(i: N, j: N) v[i - j] * s[j] + W[step] * sum(k: N) s[k];
  dynamics { s: gd(lr = 0.1); steps 1; }
})");
  REQUIRE(checks.size() == 2);
  // v[i - j] < 0 takes i = 0, j = 1: N ≥ 2.
  REQUIRE(checks[0].below);
  CHECK(!checks[0].above);
  REQUIRE(checks[0].below->size() == 1);
  CHECK((*checks[0].below)[0].str() == "N - 2");
  // W[step] ≥ L: step ≥ L, at run time whatever the declared step count.
  CHECK(!checks[1].below);
  REQUIRE(checks[1].above);
  REQUIRE(checks[1].above->size() == 1);
  CHECK((*checks[1].above)[0].str() == "-L + step");
}

TEST_CASE("a predicate the inequalities do not capture leaves no check") {
  // `j != i` admits fewer pairs than the bounds: no condition could be
  // exact, so none is left (nor a false error).
  CHECK(indexChecksOf(R"(model m {
  dim N;
  input v : [N];
  state s : [N] = v;
  energy e = sum(i: N) lse(j: N where j != i) v[i - j] * s[j];
})")
            .empty());
}
