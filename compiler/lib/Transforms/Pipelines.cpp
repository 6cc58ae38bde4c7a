//===- Pipelines.cpp - Pass pipelines the tools share ---------------------===//
//
// The pipelines of energyc (--emit=grad, update, plan) and energy-run.
//
//===----------------------------------------------------------------------===//

#include "energy/Transforms/Pipelines.h"
#include "energy/IR/EnergyOps.h"
#include "energy/Transforms/InternalErrors.h"
#include "energy/Transforms/Passes.h"
#include "energy/Transforms/PlanStats.h"

#include "PlanKernels.h"

#include "mlir/IR/Verifier.h"

#include "mlir/Transforms/Passes.h"

void mlir::energy::buildGradientPipeline(OpPassManager &modelPasses,
                                         const std::vector<std::string> &wrt) {
  EnergyDeriveGradientsOptions options;
  options.wrt.assign(wrt.begin(), wrt.end());
  modelPasses.addPass(createEnergyOrderLseRows());
  modelPasses.addPass(createEnergyJoinGradients());
  modelPasses.addPass(createEnergyDeriveGradients(options));
  modelPasses.addPass(createCanonicalizerPass());
  modelPasses.addPass(createCSEPass());
  modelPasses.addPass(createLoopInvariantCodeMotionPass());
  modelPasses.addPass(createEnergyGatherGradients());
  modelPasses.addPass(createCanonicalizerPass());
  modelPasses.addPass(createCSEPass());
  modelPasses.addPass(createEnergyFactorOuterSums());
  modelPasses.addPass(createCanonicalizerPass());
  modelPasses.addPass(createCSEPass());
  modelPasses.addPass(createLoopInvariantCodeMotionPass());
}

void mlir::energy::buildUpdatePipeline(OpPassManager &modelPasses,
                                       const std::vector<std::string> &wrt,
                                       const UpdatePipelineOptions &options) {
  if (options.shardedRank) {
    EnergyExchangedTensorsOptions copies;
    for (const auto &[tensor, copy] : options.shardedRank->copies)
      copies.copies.push_back(tensor + "=" + copy);
    modelPasses.addPass(createEnergyExchangedTensors(copies));
  }
  // Sums over lse rows in one order before the updates read their lse
  // (and again ahead of the gradients, for the pipeline alone).
  modelPasses.addPass(createEnergyOrderLseRows());
  // One value per computation, so that what an update matches (the same
  // difference inside a quadratic form twice) is one value.
  modelPasses.addPass(createCSEPass());
  modelPasses.addPass(createEnergyBuildUpdates());
  if (options.changeOfVariables && !options.shardedRank)
    modelPasses.addPass(createEnergyChangeOfVariables());
  // Reversed joined, the gradients of one step share one directional term.
  modelPasses.addPass(createEnergyJoinGradients());
  if (options.callerCotangents)
    modelPasses.addPass(createEnergyCallerCotangents());
  modelPasses.addPass(createEnergyBuildBackward());
  if (options.shardedRank && options.shardedRank->suppliedGradients) {
    EnergySuppliedGradientsOptions rank;
    rank.rowsDim = options.shardedRank->rowsDim;
    for (const auto &[tensor, copy] : options.shardedRank->copies)
      rank.copies.push_back(tensor + "=" + copy);
    modelPasses.addPass(createEnergySuppliedGradients(rank));
  }
  buildGradientPipeline(modelPasses, wrt);
}

namespace {

/// The plan's steps ahead of energy-plan-exchange-sums.
void addPlanStepsBeforeExchange(mlir::OpPassManager &modelPasses) {
  using namespace mlir::energy;
  modelPasses.addPass(createEnergyPlanSliceTables());
  modelPasses.addPass(createEnergyPlanIndexMaps());
  modelPasses.addPass(createEnergyPlanOutputTables());
  modelPasses.addPass(createEnergyPlanAggregations());
  modelPasses.addPass(createEnergyPlanTransposeMaps());
  modelPasses.addPass(createEnergyPlanLinearMaps());
  // A let's slice whose inner product the linear maps took out of its sum.
  modelPasses.addPass(createEnergyPlanSliceTables());
}

/// energy-plan-exchange-sums and the steps after it.
void addPlanStepsFromExchange(mlir::OpPassManager &modelPasses,
                              bool exchangeWithoutColumnPass) {
  using namespace mlir;
  using namespace mlir::energy;
  EnergyPlanExchangeSumsOptions exchange;
  exchange.withoutColumnPass = exchangeWithoutColumnPass;
  modelPasses.addPass(createEnergyPlanExchangeSums(exchange));
  modelPasses.addPass(createEnergyPlanSoftmaxContracts());
  modelPasses.addPass(createEnergyPlanContractTables());
  // The sums of the contractions' outputs: their maps out of them, per head
  // where a head selects the map, and the maps that widen weighted rows (a
  // weight times an outer product with a row), before the products are
  // batched.
  EnergyPlanLinearMapsOptions widening;
  widening.widening = true;
  modelPasses.addPass(createEnergyPlanLinearMaps(widening));
  modelPasses.addPass(createEnergyPlanBatchedProducts());
  modelPasses.addPass(createEnergyPlanWholeProducts());
  modelPasses.addPass(createEnergyPlanLoopTables());
  modelPasses.addPass(createEnergyPlanPrefixSums());
  // The loop tables let more contractions form, with tables and products
  // of their own.
  modelPasses.addPass(createEnergyPlanSoftmaxContracts());
  modelPasses.addPass(createEnergyPlanContractTables());
  modelPasses.addPass(createEnergyPlanBatchedProducts());
  // Contractions formed from the loop tables with those formed before, now
  // that their scores read the same products, and the rows of bilinear ones
  // whose columns need the other's results (their forms marked again).
  modelPasses.addPass(createEnergyPlanMergeContracts());
  // Loops that add over indices their slots ignore, as sums, and the linear
  // maps of what they add out of those sums; the products that leaves.
  modelPasses.addPass(createEnergyPlanLoopSums());
  EnergyPlanLinearMapsOptions everyTerm;
  everyTerm.maxTerms = 4;
  everyTerm.scaled = true;
  modelPasses.addPass(createEnergyPlanLinearMaps(everyTerm));
  // What the sums that leaves compute per position of their own indices
  // only, once.
  modelPasses.addPass(createEnergyPlanLoopTables());
  modelPasses.addPass(createEnergyPlanPrefixSums());
  // The sums those linear maps leave may be contractions now.
  modelPasses.addPass(createEnergyPlanSoftmaxContracts());
  modelPasses.addPass(createEnergyPlanContractTables());
  modelPasses.addPass(createEnergyPlanIndexProducts());
  modelPasses.addPass(createEnergyPlanBatchedProducts());
  modelPasses.addPass(createEnergyPlanContractTables());
  modelPasses.addPass(createEnergyPlanFactorContractOutputs());
  modelPasses.addPass(createEnergyPlanReassociateProducts());
  modelPasses.addPass(createEnergyPlanCombineProducts());
  // The sums of contraction outputs that combined products leave, and the
  // tables of what they sum.
  modelPasses.addPass(createEnergyPlanFactorContractOutputs());
  modelPasses.addPass(createEnergyPlanContractTables());
  modelPasses.addPass(createEnergyPlanSeparateScores());
  // The outputs that splitting values left: a value yielded twice, outputs
  // that one table adds up.
  modelPasses.addPass(createEnergyPlanFactorContractOutputs());
  modelPasses.addPass(createEnergyPlanContractTables());
  // The contractions formed since the first merge with the ones formed
  // before, now that separated scores are bilinear: the column sums of a
  // parent side that the linear maps left join the column pass that has
  // the weights, the row sums of a second derivative's the row pass.
  modelPasses.addPass(createEnergyPlanMergeContracts());
  modelPasses.addPass(createEnergyPlanFactorContractOutputs());
  modelPasses.addPass(createEnergyPlanContractTables());
  modelPasses.addPass(createEnergyPlanRowTables());
  // Loops over heads (or any index their slots ignore) that the tables and
  // contractions formed since leave adding per-head products: sums whose
  // linear maps come out, the heads' products then summed as one.
  modelPasses.addPass(createEnergyPlanLoopSums());
  modelPasses.addPass(createEnergyPlanLinearMaps(everyTerm));
  modelPasses.addPass(createEnergyPlanLoopTables());
  modelPasses.addPass(createEnergyPlanBatchedProducts());
  modelPasses.addPass(createEnergyPlanContractTables());
  modelPasses.addPass(createEnergyPlanShareProducts());
  // The sums of outer products of rows that reading shared tables leaves.
  modelPasses.addPass(createEnergyPlanBatchedProducts());
  modelPasses.addPass(createEnergyPlanAccumulateProducts());
  // A row's normalisation backward once for every term that reads the row.
  modelPasses.addPass(createEnergyPlanJoinLinearLoops());
  // Tables that products read in the order of the arrays they read.
  modelPasses.addPass(createEnergyPlanTableOrder());
  // One value per computation, so that an expression's ops feed one user.
  modelPasses.addPass(createCSEPass());
  // What that CSE exposed: a value a contraction's side yields twice, summed
  // once (the tables and products that read the two outputs then one);
  // sums of products sharing a factor, one product; products that only a
  // loop adds into a tensor, added in place; a row's normalisation
  // backward, once.
  modelPasses.addPass(createEnergyPlanFactorContractOutputs());
  modelPasses.addPass(createCSEPass());
  modelPasses.addPass(createEnergyPlanCombineProducts());
  modelPasses.addPass(createCSEPass());
  modelPasses.addPass(createEnergyPlanAccumulateProducts());
  modelPasses.addPass(createEnergyPlanJoinLinearLoops());
  modelPasses.addPass(createCSEPass());
  // The sums of rows that joined loops add up, and sums of one map of
  // them, as products of summed factors.
  EnergyPlanCombineProductsOptions sums;
  sums.sums = true;
  modelPasses.addPass(createEnergyPlanCombineProducts(sums));
  modelPasses.addPass(createCSEPass());
  modelPasses.addPass(createEnergyPlanFuseElementwise());
  modelPasses.addPass(createEnergyPlanInlineTables());
  modelPasses.addPass(createEnergyPlanMarkParallel());
}

/// What follows the steps (buildKernelPlanPipeline).
void addPlanFinish(mlir::OpPassManager &modelPasses,
                   const mlir::energy::KernelPlanTarget &target) {
  using namespace mlir;
  using namespace mlir::energy;
  modelPasses.addPass(createCanonicalizerPass());
  modelPasses.addPass(createCSEPass());
  modelPasses.addPass(createEnergyPlanPairBias());
  modelPasses.addPass(createEnergyPlanRowOrder());
  // Contractions that reading their pair bias from a table, or their rows in
  // another order, made bilinear: the row sums of one whose column sums
  // need another's join it; one over the same rows in another order reads
  // the earlier one's results.
  EnergyPlanMergeContractsOptions acrossRowOrders;
  acrossRowOrders.acrossRowOrders = true;
  modelPasses.addPass(createEnergyPlanMergeContracts(acrossRowOrders));
  modelPasses.addPass(createEnergyShareScores());
  modelPasses.addPass(createEnergyPlanDropGatherLets());
  EnergyPlanEnginesOptions engines;
  engines.target = target.cuda ? "cuda" : "cpu";
  engines.bf16Products = target.bf16Products;
  engines.deviceLoops = target.deviceLoops;
  modelPasses.addPass(createEnergyPlanEngines(engines));
  modelPasses.addPass(createEnergyPlanPairSums());
  if (target.runCaches && !target.cuda)
    modelPasses.addPass(createEnergyPlanRunCaches());
  modelPasses.addPass(createEnergyPlanAccumulateAdjoints());
  if (target.deferProducts)
    modelPasses.addPass(createEnergyPlanDeferInvariantProducts());
  if (target.runCaches && !target.cuda)
    modelPasses.addPass(createEnergyPlanPackInvariantOperands());
}

} // namespace

void mlir::energy::buildPlanStepPipeline(OpPassManager &modelPasses,
                                         bool exchangeWithoutColumnPass) {
  addPlanStepsBeforeExchange(modelPasses);
  addPlanStepsFromExchange(modelPasses, exchangeWithoutColumnPass);
}

void mlir::energy::buildKernelPlanPipeline(OpPassManager &modelPasses,
                                           const KernelPlanTarget &target,
                                           bool exchangeWithoutColumnPass) {
  buildPlanStepPipeline(modelPasses, exchangeWithoutColumnPass);
  addPlanFinish(modelPasses, target);
}

namespace mlir::energy {
namespace {

/// Runs the passes `build` adds (per model) on `module`.
LogicalResult
runModelPasses(ModuleOp module, function_ref<void(OpPassManager &)> build,
               function_ref<LogicalResult(PassManager &)> prepare) {
  PassManager passes(module.getContext(), ModuleOp::getOperationName());
  build(passes.nest<ModelOp>());
  passes.enableVerifier(false);
  reportCrashesByPass(passes);
  if (prepare && failed(prepare(passes)))
    return failure();
  return passes.run(module);
}

/// Whether energy-plan-exchange-sums with without-column-pass would
/// exchange more in `model` than without (tried on copies).
bool exchangesMoreWithoutColumnPass(ModelOp model) {
  OwningOpRef<ModelOp> copy = cast<ModelOp>(model->clone());
  exchangeSums(*copy);
  OperationFingerPrint before(*copy);
  exchangeSums(*copy, /*withoutColumnPass=*/true);
  return OperationFingerPrint(*copy) != before;
}

/// How much less work the plan with sums exchanged where they make a
/// column pass of their own must estimate to be kept.
constexpr double kExchangedPlanShare = 0.95;

} // namespace
} // namespace mlir::energy

mlir::LogicalResult mlir::energy::runKernelPlanPipeline(
    mlir::ModuleOp module, const KernelPlanTarget &target,
    function_ref<LogicalResult(PassManager &)> prepare) {
  if (failed(runModelPasses(module, addPlanStepsBeforeExchange, prepare)))
    return failure();
  // Sums exchanged where no column pass exists for them to join save work
  // a pair in some plans (a causal attention's key gradient) and cost a
  // pass in others: where there are such sums, a CPU model is planned both
  // ways from here, and the plan of less estimated work kept.
  OwningOpRef<ModuleOp> exchanged;
  if (!target.cuda &&
      llvm::any_of(module.getOps<ModelOp>(), exchangesMoreWithoutColumnPass))
    exchanged = module.clone();
  auto rest = [&](ModuleOp planned, bool exchangeWithoutColumnPass) {
    if (failed(runModelPasses(
            planned,
            [&](OpPassManager &modelPasses) {
              addPlanStepsFromExchange(modelPasses, exchangeWithoutColumnPass);
              addPlanFinish(modelPasses, target);
            },
            prepare)))
      return failure();
    return verify(planned);
  };
  if (failed(rest(module, false)))
    return failure();
  if (!exchanged)
    return success();
  if (failed(rest(*exchanged, true)))
    return failure();
  SmallVector<ModelOp> plans(module.getOps<ModelOp>());
  SmallVector<ModelOp> exchangedPlans(exchanged->getOps<ModelOp>());
  for (auto [plan, exchangedPlan] : llvm::zip_equal(plans, exchangedPlans)) {
    if (estimatedPlanWork(exchangedPlan) >=
        kExchangedPlanShare * estimatedPlanWork(plan))
      continue;
    // In place: callers hold the model op.
    plan.getBody().takeBody(exchangedPlan.getBody());
    plan->setAttrs(exchangedPlan->getAttrDictionary());
  }
  return success();
}
