//===- PlanStep.cpp - Plan steps that leave verified IR or none -----------===//
//
// Verifies the model after a plan step; undoes a step that broke it and
// reports where.
//
//===----------------------------------------------------------------------===//

#include "energy/Transforms/PlanStep.h"
#include "energy/Transforms/InternalErrors.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::energy;

std::string mlir::energy::describeModelPart(Operation *op) {
  auto named = [](StringRef kind, StringRef name) {
    return (kind + " `" + name + "`").str();
  };
  if (auto term = dyn_cast<TermOp>(op))
    return named(term.getLoss() ? "loss" : "term", term.getSymName());
  if (auto gradient = dyn_cast<GradientOp>(op)) {
    std::string text = "the gradient of";
    llvm::interleave(
        gradient.getTensors(),
        [&](FlatSymbolRefAttr tensor) {
          text += (" `" + tensor.getValue() + "`").str();
        },
        [&] { text += " and"; });
    if (gradient.getOfAttr())
      text += (" (term `" + gradient.getOfAttr().getValue() + "`)").str();
    return text;
  }
  if (auto let = dyn_cast<LetOp>(op))
    return named("let", let.getSymName());
  if (auto output = dyn_cast<OutputOp>(op))
    return named("output", output.getSymName());
  if (auto model = dyn_cast<ModelOp>(op))
    return named("model", model.getSymName());
  if (isa<UpdateProgramOp>(op))
    return "the step program";
  if (isa<BackwardProgramOp>(op))
    return "the backward program";
  return ("'" + op->getName().getStringRef() + "'").str();
}

LogicalResult mlir::energy::runPlanStep(ModelOp model, StringRef stepName,
                                        function_ref<void(ModelOp)> step) {
  OperationFingerPrint unchanged(model);
  OwningOpRef<ModelOp> before = cast<ModelOp>(model->clone());
  step(model);
  // Most steps find nothing to do in most models: what they left as it was
  // verified before.
  if (OperationFingerPrint(model) == unchanged)
    return success();

  // The first top-level op that does not verify, and the first message.
  std::string message;
  Operation *broken = nullptr;
  {
    GuardedDiagnosticHandler capture(model.getContext(), [&](Diagnostic &diag) {
      if (message.empty())
        message = diag.str();
      return success();
    });
    for (Operation &op : model.getBody().front())
      if (failed(verify(&op))) {
        broken = &op;
        break;
      }
    // The model's own invariants (its symbols, their uses) over ops that
    // verified above.
    if (!broken && failed(verify(model, /*verifyRecursively=*/false)))
      broken = model;
  }
  if (!broken)
    return success();
  Location location = broken->getLoc();
  std::string part = describeModelPart(broken);
  model.getBody().takeBody(before->getBody());
  return emitError(location)
         << "internal error in " << stepName << " on " << part << ": "
         << message << "; please report it with this file";
}
