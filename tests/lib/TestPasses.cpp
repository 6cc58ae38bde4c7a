//===- TestPasses.cpp - Registers the test-only passes --------------------===//
//
// The passes energy-opt offers for lit tests only.
//
//===----------------------------------------------------------------------===//

namespace mlir::energy::test {
void registerTestDerivativeRulesPass();
void registerTestBrokenPlanStepPass();

void registerTestPasses() {
  registerTestDerivativeRulesPass();
  registerTestBrokenPlanStepPass();
}
} // namespace mlir::energy::test
