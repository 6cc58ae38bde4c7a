//===- DiagnosticsTest.cpp - Rules that cannot be built -------------------===//
//
// A rule naming an optimizer that is not registered, an option the optimizer
// does not have, a missing required option, or `stationary` (not built yet)
// fails to compile with an error at the rule's file:line:col in the
// .energy source, followed by the source line.
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

TEST_CASE("stationary is an error: closed forms are not built yet") {
  // Where no closed form can exist, the checker says why.
  checkRejected("stationary",
                "rules.energy:7:17: error: no closed form for `stationary` "
                "node `y`: it does not appear inside an `lse` of any energy");
  // Where one could (the gmm of energy-language.md), energy-build-updates
  // reports that it is not built yet, at the first stationary rule.
  std::unique_ptr<CompiledModel> compiled =
      compileExample("gmm", /*wrtAll=*/false, Pipeline::Update);
  CHECK_FALSE(compiled->model);
  CHECK_MESSAGE(llvm::StringRef(compiled->diagnostics)
                    .contains("gmm.energy:7:14: error: closed-form "
                              "(stationary) updates are not built yet"),
                compiled->diagnostics);
}
