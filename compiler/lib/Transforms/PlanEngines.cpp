//===- PlanEngines.cpp - What computes each softmax contraction -----------===//
//
// Chooses, for the artifact's target, the engine of every softmax
// contraction (generated loops, the support library's CPU or GPU kernels,
// cuDNN's fused attention), so that code generation only reads it; with
// bf16 products on CUDA, a contraction whose row side alone cuDNN computes
// is split so that it does.
//
//===----------------------------------------------------------------------===//

#include "ContractBuilder.h"

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
    // The GPU kernels take neither pair terms, value factors, a pair bias
    // nor a sum of bilinear forms (they would hand the contraction to the
    // host's threads, CudaContract.cpp, or widen its features on the
    // host): the generated loops run it on the GPU.
    std::string reason;
    FailureOr<BilinearContract> bilinear = contract.matchBilinear(reason);
    auto plain = [](ArrayRef<Value> factors) {
      return llvm::all_of(factors, [](Value factor) { return !factor; });
    };
    if (failed(bilinear) || !bilinear->pairTerms.empty() ||
        bilinear->pairBias || !bilinear->moreProducts.empty() ||
        !plain(bilinear->rowValueFactors) || !plain(bilinear->colValueFactors))
      return kLoopsEngine;
    if (!bf16Products)
      return kCudaEngine;
    return succeeded(contract.checkFusedAttention(reason))
               ? kCudnnEngine
               : kCudaTensorCoresEngine;
  }

  /// With bf16 products on CUDA, a contraction with both sides whose row
  /// side alone cuDNN's fused attention computes becomes two: that row side
  /// (its normaliser and row sums), then the column sums given its
  /// normaliser (which the tensor-core kernel takes). Each side makes one
  /// pass over the pairs either way. Returns the contractions that stand
  /// for `contract`: the two, or itself, unchanged.
  SmallVector<SoftmaxContractOp>
  splitForFusedAttention(SoftmaxContractOp contract) {
    std::string reason;
    if (target != "cuda" || !bf16Products || contract.getColOutputs().empty() ||
        contract.getRowOutputs().empty() ||
        failed(contract.checkFusedAttention(reason, /*rowSideOnly=*/true)))
      return {contract};
    OpBuilder builder(contract);
    SoftmaxContractOp rows =
        rebuildContract(builder, contract, {contract}, {}, Value());
    SoftmaxContractOp cols =
        rebuildContract(builder, contract, {}, {contract}, rows.getLse());
    contract.getLse().replaceAllUsesWith(rows.getLse());
    contract.erase();
    return {rows, cols};
  }

  void runOnOperation() override {
    if (target == "cuda" || deviceLoops)
      getOperation()->setAttr(kDeviceLoopsAttr,
                              UnitAttr::get(getOperation().getContext()));
    SmallVector<SoftmaxContractOp> contracts;
    getOperation().walk([&](SoftmaxContractOp contract) {
      if (!contract.getEngine())
        contracts.push_back(contract);
    });
    for (SoftmaxContractOp contract : contracts)
      for (SoftmaxContractOp part : splitForFusedAttention(contract))
        part.setEngine(engineOf(part));
  }
};
} // namespace
