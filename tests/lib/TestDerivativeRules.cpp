//===- TestDerivativeRules.cpp - Exercises derivative rules in lit tests --===//
//
// A test pass: for every op tagged `test.adjoint`, builds the op's adjoint
// rule with a seed of ones and records the operand adjoints in a
// `test.adjoints` marker so that lit tests can check what the rule built.
//
//===----------------------------------------------------------------------===//

#include "energy/IR/EnergyOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace mlir::energy;

namespace {
struct TestDerivativeRulesPass
    : public PassWrapper<TestDerivativeRulesPass, OperationPass<ModelOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestDerivativeRulesPass)

  StringRef getArgument() const final { return "energy-test-derivative-rules"; }
  StringRef getDescription() const final {
    return "Builds the adjoint rule of every op tagged 'test.adjoint'";
  }

  void runOnOperation() override {
    SmallVector<Operation *> tagged;
    getOperation().walk([&](Operation *op) {
      if (op->hasAttr("test.adjoint"))
        tagged.push_back(op);
    });
    for (Operation *op : tagged) {
      auto rule = dyn_cast<DerivativeOpInterface>(op);
      if (!rule) {
        op->emitOpError("has no derivative rule");
        return signalPassFailure();
      }
      OpBuilder builder(op->getContext());
      builder.setInsertionPointAfter(op);
      SmallVector<Value> seeds;
      for (Value result : op->getResults()) {
        Value one = ConstantOp::create(builder, op->getLoc(), 1.0);
        auto type = cast<ArrayType>(result.getType());
        seeds.push_back(type.isScalar() ? one
                                        : BroadcastOp::create(
                                              builder, op->getLoc(), type, one)
                                              .getResult());
      }
      SmallVector<Value> adjoints;
      if (failed(rule.buildAdjoints(builder, seeds, adjoints)))
        return signalPassFailure();
      if (adjoints.size() != op->getNumOperands()) {
        op->emitOpError() << "rule built " << adjoints.size()
                          << " adjoints for " << op->getNumOperands()
                          << " operands";
        return signalPassFailure();
      }
      for (auto [operand, adjoint] : llvm::zip(op->getOperands(), adjoints)) {
        if (adjoint && adjoint.getType() != operand.getType()) {
          op->emitOpError()
              << "rule built an adjoint of type " << adjoint.getType()
              << " for an operand of type " << operand.getType();
          return signalPassFailure();
        }
      }
      SmallVector<Value> present;
      for (Value adjoint : adjoints)
        if (adjoint)
          present.push_back(adjoint);
      // Keep the adjoints alive and visible: a marker op that uses them.
      OperationState marker(op->getLoc(), "test.adjoints");
      marker.addOperands(present);
      builder.create(marker);
    }
  }
};
} // namespace

namespace mlir::energy::test {
void registerTestDerivativeRulesPass() {
  PassRegistration<TestDerivativeRulesPass>();
}
} // namespace mlir::energy::test
