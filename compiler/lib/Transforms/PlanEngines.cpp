//===- PlanEngines.cpp - What computes each softmax contraction -----------===//
//
// Chooses, for the artifact's target, the engine of every softmax
// contraction (generated loops, the support library's CPU or GPU kernels,
// cuDNN's fused attention), so that code generation only reads it.
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
    : public mlir::energy::impl::EnergyPlanEnginesBase<PlanEnginesPass> {
  using EnergyPlanEnginesBase::EnergyPlanEnginesBase;

  LogicalResult initialize(MLIRContext *context) override {
    if (target != "cpu" && target != "cuda")
      return emitError(UnknownLoc::get(context))
             << "energy-plan-engines: target '" << target
             << "'; expected cpu or cuda";
    return success();
  }

  StringRef engineOf(SoftmaxContractOp contract) {
    ContractForm form = contract.getForm();
    if (target == "cpu")
      return form == ContractForm::bilinear ? kCpuEngine : kLoopsEngine;
    if (form == ContractForm::quadratic)
      return kCudaEngine;
    if (form != ContractForm::bilinear)
      return kLoopsEngine;
    // The GPU kernels take neither pair terms nor value factors (they would
    // hand the contraction to the host's threads, CudaContract.cpp): the
    // generated loops run it on the GPU.
    std::string reason;
    FailureOr<BilinearContract> bilinear = contract.matchBilinear(reason);
    auto plain = [](ArrayRef<Value> factors) {
      return llvm::all_of(factors, [](Value factor) { return !factor; });
    };
    if (failed(bilinear) || !bilinear->pairTerms.empty() ||
        !plain(bilinear->rowValueFactors) || !plain(bilinear->colValueFactors))
      return kLoopsEngine;
    if (!bf16Products)
      return kCudaEngine;
    return succeeded(contract.checkFusedAttention(reason))
               ? kCudnnEngine
               : kCudaTensorCoresEngine;
  }

  void runOnOperation() override {
    if (target == "cuda" || deviceLoops)
      getOperation()->setAttr(kDeviceLoopsAttr,
                              UnitAttr::get(getOperation().getContext()));
    getOperation().walk([&](SoftmaxContractOp contract) {
      if (!contract.getEngine())
        contract.setEngine(engineOf(contract));
    });
  }
};
} // namespace
