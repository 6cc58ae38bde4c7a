//===- CheckBackward.cpp - Checking of the `backward` statement -----------===//
//
// `backward implicit(cg = N, tol = X);` in a dynamics block takes a loss's
// gradient at the fixed point of the run instead of through its steps. The
// fixed point is where the energy's gradient vanishes, so every rule must
// minimise the energy: gradient or `stationary` rules, not explicit ones.
//
//===----------------------------------------------------------------------===//

#include "CheckerImpl.h"

#include "energy/Frontend/Diagnostics.h"

#include <cmath>

using namespace energy::frontend;
using namespace energy::frontend::detail;

namespace {
constexpr int64_t kMaxSolverIterations = 100000;

/// The value of a number literal, or none.
std::optional<double> numberLiteral(const Expr &expr) {
  if (const auto *number = llvm::dyn_cast<NumberExpr>(&expr))
    return number->getValue();
  return std::nullopt;
}
} // namespace

void Checker::checkBackward(ModelSpec &model) {
  BackwardClause &clause = *model.dynamics->backward;
  if (clause.mode != "implicit" && clause.mode != "unrolled") {
    diagnostics.error(clause.modeRange.Start,
                      "unknown backward mode " + quote(clause.mode) +
                          "; expected `implicit` or `unrolled`",
                      {clause.modeRange});
    return;
  }
  clause.implicit = clause.mode == "implicit";
  llvm::StringMap<const OptimizerOption *> seen;
  for (const OptimizerOption &option : clause.options) {
    if (!clause.implicit) {
      diagnostics.error(option.nameRange.Start,
                        "`backward unrolled` takes no options",
                        {option.nameRange});
      continue;
    }
    if (!seen.try_emplace(option.name, &option).second) {
      diagnostics.error(option.nameRange.Start,
                        "duplicate option " + quote(option.name),
                        {option.nameRange});
      continue;
    }
    std::optional<double> value = numberLiteral(*option.value);
    if (option.name == "cg") {
      if (!value || *value != std::floor(*value) || *value < 1 ||
          *value > kMaxSolverIterations) {
        diagnostics.error(option.value->getLoc(),
                          "option `cg` (the most conjugate-gradient rounds) "
                          "must be an integer literal from 1 to " +
                              std::to_string(kMaxSolverIterations),
                          {option.value->getRange()});
        continue;
      }
      clause.iterations = static_cast<int64_t>(*value);
    } else if (option.name == "tol") {
      if (!value || *value <= 0 || *value >= 1) {
        diagnostics.error(option.value->getLoc(),
                          "option `tol` (the residual to stop at, relative "
                          "to the right-hand side) must be a number literal "
                          "between 0 and 1",
                          {option.value->getRange()});
        continue;
      }
      clause.tolerance = *value;
    } else {
      diagnostics.error(option.nameRange.Start,
                        "unknown option " + quote(option.name) +
                            " of `backward implicit`; options are `cg` and "
                            "`tol`",
                        {option.nameRange});
    }
  }
  if (!clause.implicit)
    return;

  DynamicsBlock &dynamics = *model.dynamics;
  for (const UpdateRule &rule : dynamics.rules) {
    if (rule.kind != UpdateRule::Kind::Explicit)
      continue;
    diagnostics.error(rule.range.Start,
                      "`backward implicit` differentiates at a point where "
                      "the energy's gradient is zero, so every rule must "
                      "minimise the energy; " +
                          quote(rule.node) + " has an explicit rule",
                      {rule.range});
    diagnostics.note(clause.range.Start, "`backward implicit` is here");
  }
  if (dynamics.rules.empty())
    diagnostics.error(clause.range.Start,
                      "`backward implicit` needs gradient rules to have a "
                      "fixed point to differentiate at",
                      {clause.range});
  if (!dynamics.steps || !dynamics.steps->until)
    diagnostics.warning(clause.range.Start,
                        "`backward implicit` takes the last step for a fixed "
                        "point; without `until` the run may stop before it "
                        "gets there",
                        {clause.range});
}
