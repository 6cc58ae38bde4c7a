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
#include "llvm/Support/xxhash.h"

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

/// What OperationFingerPrint hashes of every op in `model` (the op, its
/// parent, attributes, properties, blocks and their arguments, location,
/// operands, successors, result types), through xxh3 rather than SHA-1.
static llvm::XXH128_hash_t fingerprintOf(ModelOp model) {
  SmallVector<uint64_t> words;
  auto add = [&](const void *pointer) {
    words.push_back(reinterpret_cast<uintptr_t>(pointer));
  };
  model->walk([&](Operation *op) {
    add(op);
    add(op->getParentOp());
    add(op->getRawDictionaryAttrs().getAsOpaquePointer());
    words.push_back(op->hashProperties());
    for (Region &region : op->getRegions())
      for (Block &block : region) {
        add(&block);
        for (BlockArgument argument : block.getArguments()) {
          add(argument.getAsOpaquePointer());
          add(argument.getType().getAsOpaquePointer());
        }
      }
    add(op->getLoc().getAsOpaquePointer());
    for (Value operand : op->getOperands())
      add(operand.getAsOpaquePointer());
    for (Block *successor : op->getSuccessors())
      add(successor);
    for (Type type : op->getResultTypes())
      add(type.getAsOpaquePointer());
  });
  return llvm::xxh3_128bits(
      ArrayRef(reinterpret_cast<const uint8_t *>(words.data()),
               words.size() * sizeof(uint64_t)));
}

LogicalResult mlir::energy::runPlanStep(ModelOp model, StringRef stepName,
                                        function_ref<void(ModelOp)> step,
                                        bool *changed) {
  llvm::XXH128_hash_t unchanged = fingerprintOf(model);
  OwningOpRef<ModelOp> before = cast<ModelOp>(model->clone());
  step(model);
  // Most steps find nothing to do in most models: what they left as it was
  // verified before.
  bool stepChanged = !(fingerprintOf(model) == unchanged);
  if (changed)
    *changed = stepChanged;
  if (!stepChanged)
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
