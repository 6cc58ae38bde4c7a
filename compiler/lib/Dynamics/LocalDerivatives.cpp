//===- LocalDerivatives.cpp - Derivatives within one block ----------------===//
//
// The reverse sweep of DeriveGradients for straight-line code: adjoints are
// values, summed per operand, from the output back to the input.
//
//===----------------------------------------------------------------------===//

#include "LocalDerivatives.h"

#include "energy/Interfaces/DerivativeOpInterface.h"

#include "llvm/ADT/DenseSet.h"

using namespace mlir;
using namespace mlir::energy;

/// The values of `block` computed from `input`, in one pass in block order
/// (an op with a region is active when anything it uses from outside is).
static llvm::DenseSet<Value> valuesComputedFrom(Block &block, Value input) {
  llvm::DenseSet<Value> active = {input};
  for (Operation &op : block) {
    bool uses = false;
    op.walk([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        uses |= active.contains(operand);
    });
    if (uses)
      for (Value result : op.getResults())
        active.insert(result);
  }
  return active;
}

FailureOr<Value> mlir::energy::buildLocalGradient(Block &block, Value output,
                                                  Value input) {
  llvm::DenseSet<Value> active = valuesComputedFrom(block, input);
  if (!active.contains(output))
    return Value();
  // The ops computed from the input, in block order; the sweep skips those
  // whose result no adjoint reaches.
  SmallVector<Operation *> path;
  for (Operation &op : block)
    if (op.getNumResults() == 1 && active.contains(op.getResult(0)))
      path.push_back(&op);
  OpBuilder builder(input.getContext());
  if (Operation *terminator = block.empty() ? nullptr : &block.back();
      terminator && terminator->hasTrait<OpTrait::IsTerminator>())
    builder.setInsertionPoint(terminator);
  else
    builder.setInsertionPointToEnd(&block);
  DenseMap<Value, Value> adjoints;
  auto add = [&](Value value, Value contribution, Location loc) {
    Value &slot = adjoints[value];
    slot = slot ? AddOp::create(builder, loc, slot, contribution).getResult()
                : contribution;
  };
  add(output, ConstantOp::create(builder, output.getLoc(), 1.0),
      output.getLoc());
  for (Operation *op : llvm::reverse(path)) {
    Value adjoint = adjoints.lookup(op->getResult(0));
    if (!adjoint)
      continue;
    if (op->getNumRegions() != 0)
      return op->emitOpError()
             << "is a reduction over an index that the derivative would "
                "have to pass through; a closed form needs the energy of one "
                "child and parent without one";
    auto rule = dyn_cast<DerivativeOpInterface>(op);
    if (!rule || !rule.hasDerivativeRule())
      return op->emitOpError() << "has no derivative rule";
    SmallVector<Value> operandAdjoints;
    if (failed(rule.buildAdjoints(builder, {adjoint}, operandAdjoints)))
      return failure();
    for (auto [operand, contribution] :
         llvm::zip(op->getOperands(), operandAdjoints))
      if (contribution && active.contains(operand))
        add(operand, contribution, op->getLoc());
  }
  Value gradient = adjoints.lookup(input);
  if (!gradient)
    return Value();
  return gradient;
}
