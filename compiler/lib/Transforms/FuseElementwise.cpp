//===- FuseElementwise.cpp - Elementwise statements as one table ----------===//
//
// A statement of arithmetic on whole arrays (the update of a state and its
// optimiser's state, the adjoints a backward step carries) is one pass over
// memory per op, each on one thread. Where such ops feed only each other,
// the whole expression is one table over every axis of the result but the
// last: one pass, its rows shared out among threads. Operands are arrays of
// the result's type (read by row) and scalars; values with other uses stay
// arrays of their own, which the expression reads by row.
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"
#include "Slices.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// Whether `op` is elementwise arithmetic on arrays of its result's type
/// and scalars, of rank two or more (rows to share out).
bool isFusable(Operation *op) {
  if (!isa<AddOp, SubOp, MulOp, DivOp, NegOp, ExpOp, LogOp>(op) ||
      !isStatement(op))
    return false;
  auto type = cast<ArrayType>(op->getResult(0).getType());
  return type.getRank() >= 2 &&
         llvm::all_of(op->getOperands(), [&](Value operand) {
           return operand.getType() == type || isScalar(operand);
         });
}

/// Whether the value of `op`, fusable, is computed inside the expression of
/// its one user instead of an array of its own.
bool fusesIntoUser(Operation *op) {
  if (!op->hasOneUse())
    return false;
  Operation *user = *op->getUsers().begin();
  return user->getBlock() == op->getBlock() && isFusable(user);
}

/// The ops of the expression whose value `root` computes, operands first.
void collectExpression(Operation *root, SmallVectorImpl<Operation *> &ops) {
  for (Value operand : root->getOperands())
    if (Operation *def = operand.getDefiningOp();
        def && isFusable(def) && fusesIntoUser(def))
      collectExpression(def, ops);
  ops.push_back(root);
}

/// Replaces the expression that ends at `root` by a table of its rows.
void tabulateExpression(Operation *root) {
  SmallVector<Operation *> ops;
  collectExpression(root, ops);
  if (ops.size() < 2)
    return;
  auto type = cast<ArrayType>(root->getResult(0).getType());
  Location loc = root->getLoc();
  OpBuilder builder(root);
  RowTable table(builder, loc, type);
  OpBuilder &inside = table.getBodyBuilder();
  auto rowType = ArrayType::get(type.getContext(), type.getShape().take_back());
  llvm::SmallPtrSet<Operation *, 8> fused(ops.begin(), ops.end());
  IRMapping rows;
  for (Operation *op : ops) {
    SmallVector<Value> operands;
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (def && fused.contains(def))
        operands.push_back(rows.lookup(operand));
      else if (isScalar(operand))
        operands.push_back(operand);
      else
        operands.push_back(table.rowOf(operand, op->getLoc()));
    }
    OperationState state(op->getLoc(), op->getName());
    state.addOperands(operands);
    state.addTypes(rowType);
    state.addAttributes(op->getAttrs());
    rows.map(op->getResult(0), inside.create(state)->getResult(0));
  }
  root->getResult(0).replaceAllUsesWith(
      table.finish(rows.lookup(root->getResult(0)), loc).getResult());
  for (Operation *op : llvm::reverse(ops))
    op->erase();
}

} // namespace

void mlir::energy::fuseElementwise(ModelOp model) {
  SmallVector<Operation *> roots;
  model.walk([&](Operation *op) {
    if (isFusable(op) && !fusesIntoUser(op))
      roots.push_back(op);
  });
  for (Operation *root : roots)
    tabulateExpression(root);
}
