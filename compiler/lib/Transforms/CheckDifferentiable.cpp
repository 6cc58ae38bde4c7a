//===- CheckDifferentiable.cpp - Ops without derivative rules -------------===//
//
// Reports, before any gradient is derived, every op inside an energy term
// that produces an energy value but has no derivative rule.
//
//===----------------------------------------------------------------------===//

#include "energy/Transforms/Passes.h"

namespace mlir::energy {
#define GEN_PASS_DEF_ENERGYCHECKDIFFERENTIABLE
#include "energy/Transforms/Passes.h.inc"
} // namespace mlir::energy

using namespace mlir;
using namespace mlir::energy;

namespace {
bool isArray(Type type) { return isa<ArrayType>(type); }

/// Whether a derivative must flow through `op` for the energy: it produces
/// an energy array from energy arrays (operands or a body), and is not inside
/// a reduction's predicate. Leaves (constants, reads) need no rule.
bool needsRule(Operation *op) {
  if (!llvm::any_of(op->getResultTypes(), isArray))
    return false;
  if (!llvm::any_of(op->getOperandTypes(), isArray) && op->getNumRegions() == 0)
    return false;
  for (Operation *parent = op->getParentOp(); parent && !isa<TermOp>(parent);
       parent = parent->getParentOp())
    if (auto reduce = dyn_cast<ReduceOp>(parent);
        reduce && reduce.getPredicate().isAncestor(op->getParentRegion()))
      return false;
  return true;
}

struct CheckDifferentiablePass
    : public mlir::energy::impl::EnergyCheckDifferentiableBase<
          CheckDifferentiablePass> {
  void runOnOperation() override {
    bool failedAny = false;
    for (TermOp term : getOperation().getBody().front().getOps<TermOp>()) {
      term.walk([&](Operation *op) {
        if (!needsRule(op))
          return;
        auto rule = dyn_cast<DerivativeOpInterface>(op);
        if (rule && rule.hasDerivativeRule())
          return;
        op->emitOpError() << "has no derivative rule; energy term @"
                          << term.getSymName() << " depends on it";
        failedAny = true;
      });
    }
    if (failedAny)
      signalPassFailure();
  }
};
} // namespace
