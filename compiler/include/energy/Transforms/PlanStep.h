//===- PlanStep.h - Plan steps that leave verified IR or none ---*- C++ -*-===//
//
// Every step of the kernel plan runs through runPlanStep: the model is
// verified after the step (unless the step left it unchanged), and a step that
// left it invalid is undone (the model put back as it was, so the generic
// lowering still applies) and reported as an internal error located at the term
// it broke. A plugin's or a test's own plan step can run the same way.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TRANSFORMS_PLANSTEP_H
#define ENERGY_TRANSFORMS_PLANSTEP_H

#include "energy/IR/EnergyOps.h"

namespace mlir::energy {

/// Runs `step` on `model`. When the model does not verify afterwards, puts
/// it back as it was before the step and emits, at the first op of the
/// model that fails, "internal error in `stepName` on <term>: <the
/// verifier's message>; please report it with this file". Sets `*changed`
/// (where given) to whether the step changed the model.
LogicalResult runPlanStep(ModelOp model, StringRef stepName,
                          function_ref<void(ModelOp)> step,
                          bool *changed = nullptr);

/// How diagnostics name a top-level op of a model: "term `attn`", "the
/// gradient of `x`", "the step program", ...
std::string describeModelPart(Operation *op);

} // namespace mlir::energy

#endif // ENERGY_TRANSFORMS_PLANSTEP_H
