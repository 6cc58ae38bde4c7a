//===- PlanSteps.cpp - The kernel plan's steps as passes ------------------===//
//
// Each step of the kernel plan (PlanKernels.h) as a registered pass,
// `energy-plan-*`, run through runPlanStep so that it leaves verified IR or
// the model as it was; and `energy-plan-kernels`, which runs them all in
// the order of buildPlanStepPipeline.
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"
#include "energy/Transforms/Passes.h"
#include "energy/Transforms/Pipelines.h"
#include "energy/Transforms/PlanStep.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Pass/PassManager.h"

namespace mlir::energy {
#define GEN_PASS_DEF_ENERGYPLANSLICETABLES
#define GEN_PASS_DEF_ENERGYPLANINDEXMAPS
#define GEN_PASS_DEF_ENERGYPLANOUTPUTTABLES
#define GEN_PASS_DEF_ENERGYPLANAGGREGATIONS
#define GEN_PASS_DEF_ENERGYPLANLINEARMAPS
#define GEN_PASS_DEF_ENERGYPLANTRANSPOSEMAPS
#define GEN_PASS_DEF_ENERGYPLANEXCHANGESUMS
#define GEN_PASS_DEF_ENERGYPLANINDEXPRODUCTS
#define GEN_PASS_DEF_ENERGYPLANLOOPSUMS
#define GEN_PASS_DEF_ENERGYPLANSOFTMAXCONTRACTS
#define GEN_PASS_DEF_ENERGYPLANCONTRACTTABLES
#define GEN_PASS_DEF_ENERGYPLANPAIRBIAS
#define GEN_PASS_DEF_ENERGYPLANPAIRSUMS
#define GEN_PASS_DEF_ENERGYPLANROWORDER
#define GEN_PASS_DEF_ENERGYPLANBATCHEDPRODUCTS
#define GEN_PASS_DEF_ENERGYPLANWHOLEPRODUCTS
#define GEN_PASS_DEF_ENERGYPLANLOOPTABLES
#define GEN_PASS_DEF_ENERGYPLANROWTABLES
#define GEN_PASS_DEF_ENERGYPLANPREFIXSUMS
#define GEN_PASS_DEF_ENERGYPLANMERGECONTRACTS
#define GEN_PASS_DEF_ENERGYPLANFACTORCONTRACTOUTPUTS
#define GEN_PASS_DEF_ENERGYPLANREASSOCIATEPRODUCTS
#define GEN_PASS_DEF_ENERGYPLANCOMBINEPRODUCTS
#define GEN_PASS_DEF_ENERGYPLANSHAREPRODUCTS
#define GEN_PASS_DEF_ENERGYPLANACCUMULATEPRODUCTS
#define GEN_PASS_DEF_ENERGYPLANJOINLINEARLOOPS
#define GEN_PASS_DEF_ENERGYPLANTABLEORDER
#define GEN_PASS_DEF_ENERGYPLANFUSEELEMENTWISE
#define GEN_PASS_DEF_ENERGYPLANINLINETABLES
#define GEN_PASS_DEF_ENERGYPLANMARKPARALLEL
#define GEN_PASS_DEF_ENERGYPLANDROPGATHERLETS
#define GEN_PASS_DEF_ENERGYPLANRUNCACHES
#define GEN_PASS_DEF_ENERGYPLANACCUMULATEADJOINTS
#define GEN_PASS_DEF_ENERGYPLANDEFERINVARIANTPRODUCTS
#define GEN_PASS_DEF_ENERGYPLANPACKINVARIANTOPERANDS
#define GEN_PASS_DEF_ENERGYPLANSEPARATESCORES
#define GEN_PASS_DEF_ENERGYPLANKERNELS
#include "energy/Transforms/Passes.h.inc"
} // namespace mlir::energy

using namespace mlir;
using namespace mlir::energy;

namespace {

/// A plan step's pass over the generated base `Base`: runs the step through
/// runPlanStep; a failure fails the pass, and a model left as it was keeps
/// every analysis (and skips the pass manager's verifier).
template <typename Derived, template <typename> class Base>
struct PlanStepPass : public Base<Derived> {
  using Base<Derived>::Base;

protected:
  void runStep(function_ref<void(ModelOp)> step) {
    bool changed = true;
    if (failed(runPlanStep(this->getOperation(), this->getArgument(), step,
                           &changed)))
      this->signalPassFailure();
    else if (!changed)
      this->markAllAnalysesPreserved();
  }
};

/// The pass `energy-plan-<Step>` running the step function `function`.
#define ENERGY_PLAN_STEP_PASS(Step, function)                                  \
  struct Step##Pass                                                            \
      : public PlanStepPass<Step##Pass,                                        \
                            mlir::energy::impl::Energy##Step##Base> {          \
    void runOnOperation() override { runStep(function); }                      \
  };

ENERGY_PLAN_STEP_PASS(PlanSliceTables, tabulateSlices)
ENERGY_PLAN_STEP_PASS(PlanIndexMaps, writeIndexMaps)
ENERGY_PLAN_STEP_PASS(PlanOutputTables, tabulateOutputs)
ENERGY_PLAN_STEP_PASS(PlanAggregations, tabulateAggregations)
ENERGY_PLAN_STEP_PASS(PlanIndexProducts, formIndexProducts)
ENERGY_PLAN_STEP_PASS(PlanTransposeMaps,
                      static_cast<void (*)(ModelOp)>(transposeLinearMaps))
ENERGY_PLAN_STEP_PASS(PlanLoopSums, gatherLoopSums)
ENERGY_PLAN_STEP_PASS(PlanSoftmaxContracts, formSoftmaxContracts)
ENERGY_PLAN_STEP_PASS(PlanContractTables, hoistContractTables)
ENERGY_PLAN_STEP_PASS(PlanPairBias, tablePairBiases)
ENERGY_PLAN_STEP_PASS(PlanPairSums, sumPairsInKernels)
ENERGY_PLAN_STEP_PASS(PlanRowOrder, orderContractRows)
ENERGY_PLAN_STEP_PASS(PlanBatchedProducts, formBatchedProducts)
ENERGY_PLAN_STEP_PASS(PlanWholeProducts, formWholeProducts)
ENERGY_PLAN_STEP_PASS(PlanLoopTables, hoistLoopTables)
ENERGY_PLAN_STEP_PASS(PlanRowTables, hoistRowTables)
ENERGY_PLAN_STEP_PASS(PlanPrefixSums, formPrefixSums)
ENERGY_PLAN_STEP_PASS(PlanFactorContractOutputs, factorContractOutputs)
ENERGY_PLAN_STEP_PASS(PlanReassociateProducts, reassociateProducts)
ENERGY_PLAN_STEP_PASS(PlanSeparateScores, separateScoresToBilinear)
ENERGY_PLAN_STEP_PASS(PlanShareProducts, shareProducts)
ENERGY_PLAN_STEP_PASS(PlanAccumulateProducts, accumulateProductsInPlace)
ENERGY_PLAN_STEP_PASS(PlanJoinLinearLoops, joinLinearLoops)
ENERGY_PLAN_STEP_PASS(PlanTableOrder, orderTablesAsTheirReads)
ENERGY_PLAN_STEP_PASS(PlanFuseElementwise, fuseElementwise)
ENERGY_PLAN_STEP_PASS(PlanInlineTables, inlineTables)
ENERGY_PLAN_STEP_PASS(PlanMarkParallel, [](ModelOp model) {
  markParallelLoops(model);
  eraseUnreadGatherLets(model);
})
ENERGY_PLAN_STEP_PASS(PlanDropGatherLets, eraseUnreadGatherLets)
ENERGY_PLAN_STEP_PASS(PlanRunCaches, keepValuesBetweenCalls)
ENERGY_PLAN_STEP_PASS(PlanAccumulateAdjoints, accumulateAdjointsInPlace)
ENERGY_PLAN_STEP_PASS(PlanDeferInvariantProducts, deferInvariantProducts)
ENERGY_PLAN_STEP_PASS(PlanPackInvariantOperands, packInvariantOperands)

#undef ENERGY_PLAN_STEP_PASS

struct PlanCombineProductsPass
    : public PlanStepPass<PlanCombineProductsPass,
                          mlir::energy::impl::EnergyPlanCombineProductsBase> {
  using PlanStepPass::PlanStepPass;
  void runOnOperation() override {
    runStep([&](ModelOp model) { combineProducts(model, sums); });
  }
};

struct PlanMergeContractsPass
    : public PlanStepPass<PlanMergeContractsPass,
                          mlir::energy::impl::EnergyPlanMergeContractsBase> {
  using PlanStepPass::PlanStepPass;
  void runOnOperation() override {
    runStep([&](ModelOp model) {
      mergeAllSoftmaxContracts(model, /*rowsOfBilinear=*/true, acrossRowOrders);
    });
  }
};

struct PlanExchangeSumsPass
    : public PlanStepPass<PlanExchangeSumsPass,
                          mlir::energy::impl::EnergyPlanExchangeSumsBase> {
  using PlanStepPass::PlanStepPass;
  void runOnOperation() override {
    runStep([&](ModelOp model) { exchangeSums(model, withoutColumnPass); });
  }
};

struct PlanLinearMapsPass
    : public PlanStepPass<PlanLinearMapsPass,
                          mlir::energy::impl::EnergyPlanLinearMapsBase> {
  using PlanStepPass::PlanStepPass;
  void runOnOperation() override {
    runStep([&](ModelOp model) {
      factorLinearMaps(model, maxTerms, scaled, widening);
    });
  }
};

struct PlanKernelsPass
    : public mlir::energy::impl::EnergyPlanKernelsBase<PlanKernelsPass> {
  void runOnOperation() override {
    OpPassManager steps(ModelOp::getOperationName());
    buildPlanStepPipeline(steps);
    if (failed(runPipeline(steps, getOperation())))
      signalPassFailure();
  }
};

} // namespace
