//===- DiagnosticsTest.cpp - Rules that cannot be built -------------------===//
//
// A rule naming an optimizer that is not registered, an option the optimizer
// does not have, a missing required option, or `stationary` on a node with
// no closed form fails to compile with an error at the rule's file:line:col in
// the .energy source, followed by the source line.
//
//===----------------------------------------------------------------------===//

#include "DynamicsTestSupport.h"

#include <doctest/doctest.h>

using namespace ::energy::testing;

namespace {

/// Compiles the bowl with `rule` and checks that it fails with `expected`
/// (a `file:line:col: error: message` prefix) among its diagnostics.
void checkRejected(llvm::StringRef rule, llvm::StringRef expected) {
  CAPTURE(rule.str());
  std::unique_ptr<CompiledModel> compiled = compileSource(
      bowlSource(rule, "steps 3"), {}, "rules.energy", Pipeline::Update);
  CHECK_FALSE(compiled->model);
  CHECK_MESSAGE(llvm::StringRef(compiled->diagnostics).contains(expected),
                compiled->diagnostics);
  // The source line follows the message (line 7 is the dynamics).
  std::string line = "  dynamics { y: " + rule.str() + "; steps 3; }\n";
  CHECK_MESSAGE(llvm::StringRef(compiled->diagnostics).contains(line),
                compiled->diagnostics);
}

} // namespace

TEST_CASE("an optimizer that is not registered is an error naming it") {
  // The front end's optimizer table rejects it at the name. (A name the
  // table knows but the registry lacks, as `newton` was before it was
  // registered, is rejected by energy-build-updates: "the optimizer
  // registry has no 'newton'; registered: ..."; that path is covered by
  // tests/lit/Transforms/build-updates-invalid.mlir.)
  checkRejected("adam(lr = 0.1)",
                "rules.energy:7:17: error: unknown optimizer `adam`");
}

TEST_CASE("an option the optimizer does not have is an error") {
  checkRejected("gd(lr = 0.1, beta = 0.5)",
                "rules.energy:7:30: error: unknown option `beta` for "
                "optimizer `gd`");
}

TEST_CASE("a missing required option is an error") {
  checkRejected("momentum(beta = 0.9)",
                "rules.energy:7:17: error: optimizer `momentum` requires "
                "option `lr`");
}

TEST_CASE("stationary without a closed form is an error") {
  // Where no closed form can exist, the checker says why.
  checkRejected("stationary",
                "rules.energy:7:17: error: no closed form for `stationary` "
                "node `y`: it does not appear inside an `lse` of any energy");
  // A node inside an lse whose energy, with responsibilities fixed, is
  // linear in it has no minimiser: energy-build-updates says so at the rule.
  std::unique_ptr<CompiledModel> compiled = compileSource(
      R"(model slots {
  dim N, K, D;
  input x : [N, D];
  state mu : [K, D];
  energy e = -sum(i: N) lse(k: K) dot(x[i], mu[k]);
  dynamics { mu: stationary; steps 1; }
}
)",
      {}, "slots.energy", Pipeline::Update);
  CHECK_FALSE(compiled->model);
  CHECK_MESSAGE(llvm::StringRef(compiled->diagnostics)
                    .contains("slots.energy:6:14: error: no closed form for "
                              "stationary node @mu: with responsibilities "
                              "fixed its energy is not one of the closed "
                              "forms"),
                compiled->diagnostics);
}
