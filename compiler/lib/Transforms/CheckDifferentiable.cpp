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
/// Whether the value of `op` can reach the energy: it produces an energy
/// array and is not inside a reduction's predicate.
bool contributesToEnergy(Operation *op) {
  if (!llvm::any_of(op->getResultTypes(),
                    [](Type type) { return isa<ArrayType>(type); }))
    return false;
  for (Operation *parent = op->getParentOp(); parent && !isa<TermOp>(parent);
       parent = parent->getParentOp())
    if (auto reduce = dyn_cast<ReduceOp>(parent);
        reduce && reduce.getPredicate().isAncestor(op->getParentRegion()))
      return false;
  return true;
}

struct CheckDifferentiablePass
    : public energy::impl::EnergyCheckDifferentiableBase<CheckDifferentiablePass> {
  void runOnOperation() override {
    bool failedAny = false;
    for (TermOp term : getOperation().getBody().front().getOps<TermOp>()) {
      term.walk([&](Operation *op) {
        if (!contributesToEnergy(op))
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
