//===- Pipelines.h - Pass pipelines the tools share -------------*- C++ -*-===//
//
// The sequences of passes that energyc, energy-run and the tests run, kept in
// one place so that every tool derives the same program.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TRANSFORMS_PIPELINES_H
#define ENERGY_TRANSFORMS_PIPELINES_H

#include "mlir/Pass/PassManager.h"

#include <string>
#include <vector>

namespace mlir::energy {

/// Derives gradients (for every updated node, plus `wrt`) and simplifies
/// them: canonicalization, CSE, loop-invariant code motion, gathering of
/// accumulations into sums. `modelPasses`
/// is a pass manager nested on `energy.model`.
void buildGradientPipeline(OpPassManager &modelPasses,
                           const std::vector<std::string> &wrt = {});

/// Builds the step program of the dynamics (energy-build-updates), then the
/// gradient pipeline: what energy-run executes and `energyc --emit=update`
/// prints.
void buildUpdatePipeline(OpPassManager &modelPasses,
                         const std::vector<std::string> &wrt = {});

/// The steps of the kernel plan, `energy-plan-aggregations` to
/// `energy-plan-mark-parallel`, in order (what `energy-plan-kernels` runs).
void buildPlanStepPipeline(OpPassManager &modelPasses);

/// Plans the kernels (the plan steps) and simplifies the plan:
/// canonicalization, CSE and energy-share-scores; then the engines
/// (energy-plan-engines: with `fusedAttention`, for bf16 CUDA artifacts,
/// the contractions cuDNN's fused attention computes); last, with
/// `runCaches` (CPU artifacts), energy-plan-run-caches. What code
/// generators lower, and what `energyc --emit=plan` prints.
void buildKernelPlanPipeline(OpPassManager &modelPasses,
                             bool fusedAttention = false,
                             bool runCaches = true);

} // namespace mlir::energy

#endif // ENERGY_TRANSFORMS_PIPELINES_H
