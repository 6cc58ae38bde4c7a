//===- FusedLanes.cpp - Element-wise ops on vectors of lanes --------------===//
//
// Lowers element-wise ops (ElementwiseOpInterface) on vectors of lanes, or
// one element at a time where they have no vector form; an element-wise
// value whose one user is element-wise too is computed in that user's loop,
// lane by lane, and never stored.
//
//===----------------------------------------------------------------------===//

#include "KernelLowering.h"

using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::codegen;

namespace {
/// The kernel's builders as element-wise ops build their lanes with
/// (ElementwiseOpInterface.h).
class KernelLanes : public LaneBuilder {
public:
  explicit KernelLanes(KernelBuilder &kernel) : kernel(kernel) {}
  OpBuilder &getBuilder() override { return kernel.b; }
  Location getLoc() override { return kernel.loc; }
  Value constant(double value, Value like) override {
    auto lanes = dyn_cast<VectorType>(like.getType());
    return kernel.splat(kernel.real(value), lanes ? lanes.getNumElements() : 1);
  }
  Value add(Value lhs, Value rhs) override { return kernel.add(lhs, rhs); }
  Value sub(Value lhs, Value rhs) override { return kernel.sub(lhs, rhs); }
  Value mul(Value lhs, Value rhs) override { return kernel.mul(lhs, rhs); }
  Value div(Value lhs, Value rhs) override { return kernel.div(lhs, rhs); }
  Value maximum(Value lhs, Value rhs) override {
    return kernel.maximum(lhs, rhs);
  }
  Value exp(Value x) override { return kernel.exp(x); }
  Value log(Value x) override { return kernel.log(x); }
  Value compare(arith::CmpFPredicate predicate, Value lhs, Value rhs) override {
    return kernel.cmp(predicate, lhs, rhs);
  }
  Value select(Value condition, Value whenTrue, Value whenFalse) override {
    return kernel.select(condition, whenTrue, whenFalse);
  }

private:
  KernelBuilder &kernel;
};
} // namespace

Value KernelLowering::elementwise(Operation *op, ValueRange operands) {
  KernelLanes lanes(*this);
  return cast<ElementwiseOpInterface>(op).buildLanes(lanes, operands);
}

bool KernelLowering::isLaneWise(Operation *op) {
  auto elementwise = dyn_cast<ElementwiseOpInterface>(op);
  if (!elementwise || !elementwise.takesVectors())
    return false;
  auto type = cast<ArrayType>(op->getResult(0).getType());
  return llvm::all_of(op->getOperands(), [&](Value operand) {
    auto operandType = cast<ArrayType>(operand.getType());
    return operandType == type || operandType.isScalar();
  });
}

/// Whether anything from `first` up to `last` (not included), in one block,
/// writes memory or holds a loop.
static bool writesBetween(Operation *first, Operation *last) {
  for (Operation *between = first; between != last;
       between = between->getNextNode())
    if (between->getNumRegions() != 0 ||
        isa<AccumulateOp, StoreOp, GradOp>(between))
      return true;
  return false;
}

Operation *KernelLowering::fusionLoop(Operation *op) {
  while (isFusedIntoUser(op))
    op = *op->getResult(0).getUsers().begin();
  return op;
}

bool KernelLowering::isFusedIntoUser(Operation *op) {
  auto known = state.fusedDecisions.find(op);
  if (known != state.fusedDecisions.end())
    return known->second;
  // Users come later in the block: the recursion ends.
  bool fused = decideFusedIntoUser(op);
  state.fusedDecisions[op] = fused;
  return fused;
}

bool KernelLowering::decideFusedIntoUser(Operation *op) {
  if (!isLaneWise(op))
    return false;
  Value result = op->getResult(0);
  if (cast<ArrayType>(result.getType()).isScalar() || result.use_empty())
    return false;
  if (!llvm::all_equal(result.getUsers())) {
    if (!deviceLoops())
      return false;
    // Several element-wise users whose lanes one loop computes.
    Operation *loop = nullptr;
    for (Operation *user : result.getUsers()) {
      if (user->getBlock() != op->getBlock() || !isLaneWise(user) ||
          user->getResult(0).getType() != result.getType())
        return false;
      Operation *reached = fusionLoop(user);
      if (loop && reached != loop)
        return false;
      loop = reached;
    }
    return loop->getBlock() == op->getBlock() && op->isBeforeInBlock(loop) &&
           !writesBetween(op->getNextNode(), loop);
  }
  Operation *user = *result.getUsers().begin();
  bool laneWiseUser =
      isLaneWise(user) && user->getResult(0).getType() == result.getType();
  bool dotOfLanes = isa<DotOp>(user) && user->getOperand(0).getType() ==
                                            user->getOperand(1).getType();
  auto reduce = dyn_cast<ReduceElementsOp>(user);
  bool sumOfLanes = reduce && reduce.getKind() != ElementsKind::maxabs &&
                    reduce.getKind() != ElementsKind::lse;
  if (user->getBlock() != op->getBlock() ||
      !(laneWiseUser || dotOfLanes || sumOfLanes ||
        isa<AccumulateOp, StoreOp>(user)))
    return false;
  return !writesBetween(op->getNextNode(), user);
}

Value KernelLowering::laneValue(Value value, Value offset, int lanes) {
  if (!state.fusedIntoUser.contains(value))
    return lanesAt(get(value), offset, lanes);
  auto known = state.fusedLanes.find({value, offset});
  if (known != state.fusedLanes.end())
    return known->second;
  Value computed = laneOp(value.getDefiningOp(), offset, lanes);
  state.fusedLanes[{value, offset}] = computed;
  return computed;
}

Value KernelLowering::laneOp(Operation *op, Value offset, int lanes) {
  // An operand read twice (x · x) is computed once.
  SmallVector<Value, 2> operands;
  for (auto [position, operand] : llvm::enumerate(op->getOperands())) {
    auto earlier = llvm::find(op->getOperands().take_front(position), operand);
    operands.push_back(earlier != op->getOperands().begin() + position
                           ? operands[earlier - op->getOperands().begin()]
                           : laneValue(operand, offset, lanes));
  }
  return elementwise(op, operands);
}

void codegen::populateFusedLaneLowerings(KernelLoweringPatterns &patterns) {
  patterns.addGeneric(
      kFusedBenefit,
      [](Operation *op, KernelLowering &kernel) {
        return kernel.isFusedIntoUser(op);
      },
      [](Operation *op, KernelLowering &kernel) {
        kernel.markFused(op->getResult(0));
        return success();
      });
  // Element-wise functions and arithmetic, scalars included, on vectors of
  // lanes (their operands computed in the same loop where fused).
  patterns.addGeneric(
      kLaneWiseBenefit,
      [](Operation *op, KernelLowering &) {
        return KernelLowering::isLaneWise(op);
      },
      [](Operation *op, KernelLowering &kernel) {
        auto type = cast<ArrayType>(op->getResult(0).getType());
        kernel.setLowered(op->getResult(0),
                          kernel.buildLanes(
                              type,
                              [&](Value offset, int lanes) {
                                return kernel.laneOp(op, offset, lanes);
                              },
                              kernel.destinationOf(op)));
        return success();
      });
  // Element-wise ops without vector lanes (∫ silu calls the support
  // library) one element at a time.
  patterns.addGeneric(
      kElementwiseBenefit,
      [](Operation *op, KernelLowering &) {
        return isa<ElementwiseOpInterface>(op);
      },
      [](Operation *op, KernelLowering &kernel) {
        auto type = cast<ArrayType>(op->getResult(0).getType());
        SmallVector<Lowered> operands;
        for (Value operand : op->getOperands())
          operands.push_back(kernel.get(operand));
        kernel.setLowered(
            op->getResult(0), kernel.build(type, [&](Value position) {
              SmallVector<Value, 2> elements;
              for (const Lowered &operand : operands)
                elements.push_back(kernel.elementAt(operand, position));
              return kernel.elementwise(op, elements);
            }));
        return success();
      });
}
