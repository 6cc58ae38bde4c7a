//===- TestBrokenPlanStep.cpp - A plan step that breaks the IR ------------===//
//
// A test pass: runs, through runPlanStep, a step that breaks the first term
// of the model (its first op moves to just before the terminator, after
// its users), so that lit tests see the step undone and the internal error
// located at the term. The pass itself succeeds, so the IR is printed.
//
//===----------------------------------------------------------------------===//

#include "energy/Transforms/PlanStep.h"

#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace mlir::energy;

namespace {
struct TestBrokenPlanStepPass
    : public PassWrapper<TestBrokenPlanStepPass, OperationPass<ModelOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestBrokenPlanStepPass)

  StringRef getArgument() const final { return "energy-test-broken-plan-step"; }
  StringRef getDescription() const final {
    return "Runs a plan step that breaks the first term, through runPlanStep";
  }

  void runOnOperation() override {
    (void)runPlanStep(getOperation(), getArgument(), [](ModelOp model) {
      auto terms = model.getBody().front().getOps<TermOp>();
      if (terms.empty())
        return;
      Block &body = (*terms.begin()).getBody().front();
      if (&body.front() != body.getTerminator())
        body.front().moveBefore(body.getTerminator());
    });
  }
};
} // namespace

namespace mlir::energy::test {
void registerTestBrokenPlanStepPass() {
  PassRegistration<TestBrokenPlanStepPass>();
}
} // namespace mlir::energy::test
