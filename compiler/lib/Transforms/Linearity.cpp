//===- Linearity.cpp - Which values are linear maps of which --------------===//
//
// The linearity of each op, in one table, and the decomposition of a value
// into linear maps of the values it is built from.
//
//===----------------------------------------------------------------------===//

#include "Linearity.h"

using namespace mlir;
using namespace mlir::energy;

Linearity mlir::energy::linearityOf(Operation *op) {
  if (isa<AddOp, SubOp, NegOp, TransposeOp, SumLastOp, BroadcastOp, DiagOp,
          DiagPartOp, ExtractOp, EmbedOp>(op))
    return Linearity::Joint;
  if (auto elements = dyn_cast<ReduceElementsOp>(op))
    return elements.getKind() == ElementsKind::sum ||
                   elements.getKind() == ElementsKind::mean
               ? Linearity::Joint
               : Linearity::None;
  if (isa<MulOp, MatmulOp, DotOp, OuterOp, DivOp>(op))
    return Linearity::Separate;
  return Linearity::None;
}

bool mlir::energy::isLinearInOperand(Operation *op, unsigned index) {
  switch (linearityOf(op)) {
  case Linearity::None:
    return false;
  case Linearity::Joint:
    return isa<ArrayType>(op->getOperand(index).getType());
  case Linearity::Separate:
    // A quotient is linear in its dividend only.
    return !isa<DivOp>(op) || index == 0;
  }
  return false;
}

namespace {
class Decomposer {
public:
  Decomposer(Block &body, function_ref<bool(Value)> invariant)
      : body(body), invariant(invariant) {}

  void visit(Value value) {
    Operation *op = value.getDefiningOp();
    if (invariant(value) || !op || op->getBlock() != &body ||
        op->getNumResults() != 1) {
      result.atoms.insert(value);
      return;
    }
    // The operands that vary: the op is a linear map of them when it is
    // linear in all of them together, or in the one that varies alone.
    SmallVector<unsigned> varying;
    for (auto [index, operand] : llvm::enumerate(op->getOperands()))
      if (!invariant(operand))
        varying.push_back(index);
    Linearity linearity = linearityOf(op);
    bool linear = !varying.empty() && llvm::all_of(varying, [&](unsigned i) {
      return isLinearInOperand(op, i);
    }) && (linearity == Linearity::Joint || varying.size() == 1);
    if (!linear) {
      result.atoms.insert(value);
      return;
    }
    if (!result.maps.insert(op))
      return;
    for (unsigned index : varying)
      visit(op->getOperand(index));
    // Joint maps add their fixed array operands (x + c): those are summed
    // as terms of their own.
    if (linearity == Linearity::Joint)
      for (Value operand : op->getOperands())
        if (invariant(operand) && isa<ArrayType>(operand.getType()))
          result.atoms.insert(operand);
  }

  LinearDecomposition result;

private:
  Block &body;
  function_ref<bool(Value)> invariant;
};
} // namespace

LinearDecomposition
mlir::energy::decomposeLinearly(Value value, Block &body,
                                function_ref<bool(Value)> invariant) {
  Decomposer decomposer(body, invariant);
  decomposer.visit(value);
  return std::move(decomposer.result);
}
