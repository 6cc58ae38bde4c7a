//===- LoopTables.cpp - Work of an inner loop's own indices ahead of it ---===//
//
// A reduction or loop nested in another evaluates its body at every position
// of both; work in its body that depends on its own indices only (a
// component's log-determinant inside a sum over points and components) is
// computed once per position of those indices, into an `energy.tabulate`
// ahead of the outermost loop it does not depend on, and read back with
// `energy.extract`. Softmax contractions have their own tables
// (ContractTables.cpp).
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"
#include "Slices.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// The domain and body of a loop-like op whose body runs per position.
struct InnerLoop {
  Operation *op;
  ArrayAttr sizes;
  Block *body;
};

std::optional<InnerLoop> innerLoopOf(Operation *op) {
  if (auto reduce = dyn_cast<ReduceOp>(op); reduce && !reduce.hasPredicate())
    return InnerLoop{op, reduce.getSizes(), &reduce.getBody().front()};
  if (auto loop = dyn_cast<ForeachOp>(op); loop && !loop.hasPredicate())
    return InnerLoop{op, loop.getSizes(), &loop.getBody().front()};
  return std::nullopt;
}

/// Whether evaluating `op` costs more than addressing memory.
bool isComputation(Operation *op) {
  return !isa<ReadOp, ExtractOp, ConstantOp, StepOp, SizeOp, ToRealOp>(op) &&
         op->getDialect()->getNamespace() == "energy" &&
         op->getNumResults() == 1 && isa<ArrayType>(op->getResult(0).getType());
}

/// Whether `value` is available before `point`: defined in a block that
/// encloses `point`, before it.
bool availableBefore(Value value, Operation *point) {
  Region *region = value.getParentRegion();
  if (!region->isAncestor(point->getParentRegion()))
    return false;
  Operation *def = value.getDefiningOp();
  if (!def)
    return true;
  Operation *ancestor = def->getBlock()->findAncestorOpInBlock(*point);
  return ancestor && def->isBeforeInBlock(ancestor);
}

/// Hoists the values of `loop`'s body that depend on its indices only.
void hoistFrom(InnerLoop loop) {
  // Only a loop inside another runs its body more often than its domain.
  Operation *outer = loop.op->getParentOp();
  if (!isa<ReduceOp, ForeachOp, TabulateOp, SoftmaxContractOp>(outer) ||
      !hasPlainDims(loop.sizes))
    return;
  Block &body = *loop.body;
  // Ops of the body that depend on nothing but its indices and values from
  // outside the enclosing loop.
  llvm::DenseSet<Value> own;
  for (BlockArgument argument : body.getArguments())
    own.insert(argument);
  llvm::DenseSet<Operation *> candidates;
  for (Operation &op : body.without_terminator()) {
    if (op.getNumRegions())
      continue;
    bool local = llvm::all_of(op.getOperands(), [&](Value operand) {
      return own.contains(operand) || isDefinedOutside(operand, outer);
    });
    if (!local)
      continue;
    for (Value result : op.getResults())
      own.insert(result);
    candidates.insert(&op);
  }
  // Worth a table: computations used by something that depends on more.
  SmallVector<Operation *> hoisted;
  for (Operation &op : body.without_terminator()) {
    if (!candidates.contains(&op) || !isComputation(&op))
      continue;
    bool dependsOnIndex = false;
    op.walk([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        dependsOnIndex |= own.contains(operand);
    });
    bool usedByPairs = llvm::any_of(op.getUsers(), [&](Operation *user) {
      Operation *inBody = body.findAncestorOpInBlock(*user);
      return !inBody || !candidates.contains(inBody);
    });
    if (dependsOnIndex && usedByPairs)
      hoisted.push_back(&op);
  }
  if (hoisted.empty())
    return;
  // The outermost op around `loop` whose values the tables do not need.
  Operation *point = outer;
  while (!isa<ModelOp, TermOp, GradientOp, UpdateProgramOp, BackwardProgramOp,
              DynamicsOp, LetOp, OutputOp, RepeatOp>(point->getParentOp())) {
    Operation *next = point->getParentOp();
    bool available = true;
    for (Operation *op : hoisted) {
      llvm::SetVector<Operation *> slice;
      addToSlice(op->getResult(0), body, slice);
      for (Operation *member : slice)
        for (Value operand : member->getOperands())
          if (!own.contains(operand) && !availableBefore(operand, next))
            available = false;
    }
    if (!available)
      break;
    point = next;
  }
  MLIRContext *context = loop.op->getContext();
  for (Operation *op : hoisted) {
    Value value = op->getResult(0);
    auto elementType = cast<ArrayType>(value.getType());
    SmallVector<StringAttr> dims;
    for (Attribute size : loop.sizes)
      dims.push_back(
          StringAttr::get(context, *cast<DimExprAttr>(size).getDimName()));
    llvm::append_range(dims, elementType.getShape());
    OpBuilder builder(point);
    auto table = TabulateOp::create(builder, op->getLoc(),
                                    ArrayType::get(context, dims), loop.sizes);
    Block &tableBody = table.getBody().emplaceBlock();
    IRMapping mapping;
    addIndexArguments(tableBody, body, mapping);
    llvm::SetVector<Operation *> slice;
    addToSlice(value, body, slice);
    OpBuilder inside = OpBuilder::atBlockEnd(&tableBody);
    cloneSlice(body, slice, inside, mapping);
    YieldOp::create(inside, op->getLoc(), mapping.lookup(value));
    moveLoopInvariantCode(cast<LoopLikeOpInterface>(table.getOperation()));
    builder.setInsertionPoint(op);
    auto map =
        AffineMap::getMultiDimIdentityMap(body.getNumArguments(), context);
    Value row = ExtractOp::create(builder, op->getLoc(), elementType, table,
                                  AffineMapAttr::get(map), body.getArguments());
    value.replaceAllUsesWith(row);
  }
}

} // namespace

void mlir::energy::hoistLoopTables(ModelOp model) {
  SmallVector<InnerLoop> loops;
  model.walk([&](Operation *op) {
    if (std::optional<InnerLoop> loop = innerLoopOf(op))
      loops.push_back(*loop);
  });
  for (InnerLoop loop : loops)
    hoistFrom(loop);
}
