//===- PlanKernels.cpp - The energy-plan-kernels pass ---------------------===//
//
// Runs the planning steps in order: softmax contractions, tables ahead of
// them (and their forms), parallel loops; then drops the lets that only the
// parent side of a contraction read.
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"
#include "energy/Transforms/Passes.h"

#include "mlir/IR/SymbolTable.h"

namespace mlir::energy {
#define GEN_PASS_DEF_ENERGYPLANKERNELS
#include "energy/Transforms/Passes.h.inc"
} // namespace mlir::energy

using namespace mlir;
using namespace mlir::energy;

namespace {
struct PlanKernelsPass
    : public energy::impl::EnergyPlanKernelsBase<PlanKernelsPass> {
  void runOnOperation() override {
    ModelOp model = getOperation();
    formSoftmaxContracts(model);
    hoistContractTables(model);
    markParallelLoops(model);
    eraseUnreadGatherLets(model);
  }

  /// The lets energy-gather-gradients made for the parent side of an lse
  /// term are read by nothing once that side is a contraction.
  static void eraseUnreadGatherLets(ModelOp model) {
    for (LetOp let :
         llvm::make_early_inc_range(model.getBody().front().getOps<LetOp>()))
      if (let.getSymName().ends_with(".gather") &&
          SymbolTable::symbolKnownUseEmpty(let, model))
        let.erase();
  }
};
} // namespace
