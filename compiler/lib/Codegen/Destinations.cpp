//===- Destinations.cpp - Arrays computed where they end up ---------------===//
//
// A table or a product that a program stores into a whole tensor right
// away is computed in the tensor's buffer; one that a kept value keeps, in
// the row of its cache; a table's, a let's or an output's element, a table
// or an element-wise op's, in its row of the comprehension: no scratch
// array of its own, no copy after it.
//
//===----------------------------------------------------------------------===//

#include "KernelLowering.h"

using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::codegen;

namespace {
/// Whether the array `value` may be a view of tensor `tensor`'s buffer: a
/// read of it, or a slice of one.
bool mayViewTensor(Value value, StringRef tensor) {
  while (Operation *producer = value.getDefiningOp()) {
    if (auto read = dyn_cast<ReadOp>(producer))
      return read.getSource() == tensor;
    auto extract = dyn_cast<ExtractOp>(producer);
    if (!extract)
      return false;
    value = extract->getOperand(0);
  }
  return false;
}

/// Whether `op` may read tensor `tensor`: it or an op inside it reads it,
/// directly or through a view, or it calls a gradient program.
bool mayRead(Operation *op, StringRef tensor) {
  WalkResult walk = op->walk([&](Operation *inner) {
    if (isa<GradOp>(inner))
      return WalkResult::interrupt();
    if (auto read = dyn_cast<ReadOp>(inner); read && read.getSource() == tensor)
      return WalkResult::interrupt();
    for (Value operand : inner->getOperands())
      if (!op->isAncestor(operand.getParentBlock()->getParentOp()) &&
          mayViewTensor(operand, tensor))
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return walk.wasInterrupted();
}
} // namespace

StoreOp KernelLowering::storedInPlace(Operation *op) {
  if (!state.isProgram || insideLoop() || op->getNumResults() != 1 ||
      !isa<TabulateOp, BatchMatmulOp>(op))
    return StoreOp();
  Value result = op->getResult(0);
  auto store = dyn_cast_or_null<StoreOp>(op->getNextNode());
  if (!store || !result.hasOneUse() || store.getValue() != result)
    return StoreOp();
  auto tensor = context.model.lookupSymbol<TensorOp>(store.getTensorAttr());
  if (!tensor || tensor.getArrayType() != result.getType() ||
      mayRead(op, store.getTensor()))
    return StoreOp();
  return store;
}

Value KernelLowering::arrayBuffer(Operation *op) {
  auto type = cast<ArrayType>(op->getResult(0).getType());
  if (Value destination = state.destinations.lookup(op))
    return destination;
  if (StoreOp store = storedInPlace(op)) {
    state.inTensorBuffers.insert(op->getResult(0));
    return bufferPointer(store.getTensor());
  }
  return allocate(type);
}

Operation *KernelLowering::computeInto(Block &body, Value value,
                                       function_ref<Value()> destination) {
  Operation *producer = value.getDefiningOp();
  if (!producer || producer->getBlock() != &body ||
      cast<ArrayType>(value.getType()).isScalar())
    return nullptr;
  if (!isa<TabulateOp, BatchMatmulOp>(producer) &&
      !(isLaneWise(producer) && !isFusedIntoUser(producer)))
    return nullptr;
  state.destinations[producer] = destination();
  return producer;
}

void KernelLowering::computedInto(Operation *producer) {
  if (producer)
    state.destinations.erase(producer);
}
