//===- Pipelines.cpp - Pass pipelines the tools share ---------------------===//
//
// The pipelines of energyc (--emit=grad, update, plan) and energy-run.
//
//===----------------------------------------------------------------------===//

#include "energy/Transforms/Pipelines.h"
#include "energy/Transforms/Passes.h"

#include "mlir/Transforms/Passes.h"

void mlir::energy::buildGradientPipeline(OpPassManager &modelPasses,
                                         const std::vector<std::string> &wrt) {
  EnergyDeriveGradientsOptions options;
  options.wrt.assign(wrt.begin(), wrt.end());
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
                                       const std::vector<std::string> &wrt) {
  // One value per computation, so that what an update matches (the same
  // difference inside a quadratic form twice) is one value.
  modelPasses.addPass(createCSEPass());
  modelPasses.addPass(createEnergyBuildUpdates());
  modelPasses.addPass(createEnergyBuildBackward());
  buildGradientPipeline(modelPasses, wrt);
}

void mlir::energy::buildKernelPlanPipeline(OpPassManager &modelPasses) {
  modelPasses.addPass(createEnergyPlanKernels());
  modelPasses.addPass(createCanonicalizerPass());
  modelPasses.addPass(createCSEPass());
  modelPasses.addPass(createEnergyShareScores());
}
