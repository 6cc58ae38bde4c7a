//===- Pipelines.h - Pass pipelines the tools share -------------*- C++ -*-===//
//
// The sequences of passes that energyc, energy-run and the tests run, kept in
// one place so that every tool derives the same program.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TRANSFORMS_PIPELINES_H
#define ENERGY_TRANSFORMS_PIPELINES_H

#include "mlir/Pass/PassManager.h"

#include "energy/Transforms/ShardedRankOptions.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::energy {

/// Derives gradients (for every updated node, plus `wrt`) and simplifies
/// them: canonicalization, CSE, loop-invariant code motion, gathering of
/// accumulations into sums. `modelPasses`
/// is a pass manager nested on `energy.model`.
void buildGradientPipeline(OpPassManager &modelPasses,
                           const std::vector<std::string> &wrt = {});

/// What the update pipeline builds besides the step and backward programs.
struct UpdatePipelineOptions {
  /// Seed the backward program with the caller's cotangents of the final
  /// states instead of the model's losses (energy-caller-cotangents).
  bool callerCotangents = false;
  /// The programs of one rank of a sharded run: the step program reads the
  /// gradient the ranks put together instead of computing it, the backward
  /// program the cotangents they gather (energy-supplied-gradients).
  std::optional<ShardedRankOptions> shardedRank;
  /// Run gd on a state read through one linear map in that map's image
  /// (energy-change-of-variables): what artifacts run; the interpreter runs
  /// the steps as the model writes them.
  bool changeOfVariables = false;
};

/// Builds the step program of the dynamics (energy-build-updates), the
/// backward program (energy-build-backward), then the gradient pipeline:
/// what energy-run executes and `energyc --emit=update` prints.
void buildUpdatePipeline(OpPassManager &modelPasses,
                         const std::vector<std::string> &wrt = {},
                         const UpdatePipelineOptions &options = {});

/// The steps of the kernel plan, `energy-plan-aggregations` to
/// `energy-plan-mark-parallel`, in order (what `energy-plan-kernels` runs);
/// `exchangeWithoutColumnPass`: energy-plan-exchange-sums'
/// without-column-pass.
void buildPlanStepPipeline(OpPassManager &modelPasses,
                           bool exchangeWithoutColumnPass = false);

/// What the kernel plan is for: a CPU or CUDA, bf16 products on tensor
/// cores (`--dtype bf16`, CUDA only), and whether run-invariant values may
/// be kept across calls (CPU artifacts; `energyc --no-run-caches` turns it
/// off).
struct KernelPlanTarget {
  bool cuda = false;
  bool bf16Products = false;
  bool runCaches = true;
  /// energy-plan-defer-invariant-products (off where the runtime calls a
  /// backward step without the finish).
  bool deferProducts = true;
  /// Kernels whose loops call no host function where code can be generated
  /// instead (energy-plan-engines' device-loops): what CUDA artifacts need
  /// for their loops to run on the GPU; on a CPU, to test that code.
  bool deviceLoops = false;
};

/// Plans the kernels (the plan steps) and simplifies the plan:
/// canonicalization, CSE and energy-share-scores; then the engines of the
/// contractions for `target` (energy-plan-engines); with run caches on a
/// CPU, energy-plan-run-caches; last the adjoints' accumulation and the
/// deferred products. What code generators lower, and what `energyc
/// --emit=plan` prints.
void buildKernelPlanPipeline(OpPassManager &modelPasses,
                             const KernelPlanTarget &target = {},
                             bool exchangeWithoutColumnPass = false);

/// Runs buildKernelPlanPipeline on the models of `module` (after
/// `prepare`, where given, has set up the pass manager). The plan steps
/// verify what they change (runPlanStep) and the passes between them are
/// MLIR's canonicalizer and CSE or set attributes, so the pass manager's
/// verifier is off and the plan is verified once, at the end. For a CPU,
/// where energy-plan-exchange-sums' without-column-pass would exchange
/// more sums, the steps from it on also run on a copy with that option, and
/// the copy's plan is kept where estimatedPlanWork finds it at least 5 %
/// less work.
LogicalResult
runKernelPlanPipeline(ModuleOp module, const KernelPlanTarget &target,
                      function_ref<LogicalResult(PassManager &)> prepare = {});

} // namespace mlir::energy

#endif // ENERGY_TRANSFORMS_PIPELINES_H
