//===- PlanEngines.cpp - Which engine computes each contraction -----------===//
//
// Gives the softmax contractions that cuDNN's fused flash attention computes
// (SoftmaxContractOp::checkFusedAttention) to it, `engine = "cudnn"`, when
// the artifact is for CUDA in bf16; the others stay on the built-in kernels.
//
//===----------------------------------------------------------------------===//

#include "energy/Transforms/Passes.h"

namespace mlir::energy {
#define GEN_PASS_DEF_ENERGYPLANENGINES
#include "energy/Transforms/Passes.h.inc"
} // namespace mlir::energy

using namespace mlir;
using namespace mlir::energy;

namespace {
struct PlanEnginesPass
    : public energy::impl::EnergyPlanEnginesBase<PlanEnginesPass> {
  using EnergyPlanEnginesBase::EnergyPlanEnginesBase;

  void runOnOperation() override {
    if (!fusedAttention)
      return;
    getOperation().walk([](SoftmaxContractOp contract) {
      std::string reason;
      if (!contract.getEngine() &&
          succeeded(contract.checkFusedAttention(reason)))
        contract.setEngine("cudnn");
    });
  }
};
} // namespace
