//===- InterpretedGradients.cpp - The interpreter's gradient programs -----===//
//
// The reference interpreter's execution of gradient programs: their loops,
// accumulations and the gradients they compute.
//
//===----------------------------------------------------------------------===//

#include "InterpreterInternals.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::interpreter;

//===----------------------------------------------------------------------===//
// Gradient programs
//===----------------------------------------------------------------------===//

FailureOr<ArrayValue> Interpreter::evaluateGradient(StringRef tensorName) {
  for (GradientOp gradient : model.getOps<GradientOp>())
    if (gradient.getTensor() == tensorName && !gradient.getOf() &&
        !gradient.isJoint())
      return evaluateGradient(gradient);
  return model.emitError() << "gradient of @" << tensorName
                           << " is not derived; run energy-derive-gradients "
                              "first";
}

FailureOr<SmallVector<ArrayValue>> Interpreter::evaluateGradOp(GradOp grad) {
  if (GradientOp gradient = grad.getGradient())
    return evaluateGradients(gradient);
  return grad.emitOpError()
         << "gradient of " << grad.getTensorAttr()
         << " is not derived; run energy-derive-gradients first";
}

FailureOr<ArrayValue> Interpreter::evaluateGradient(GradientOp gradient) {
  FailureOr<SmallVector<ArrayValue>> gradients = evaluateGradients(gradient);
  if (failed(gradients))
    return failure();
  return gradients->front();
}

FailureOr<SmallVector<ArrayValue>>
Interpreter::evaluateGradients(GradientOp gradient) {
  if (gradient->getParentOp() != model)
    return gradient.emitOpError("is not a gradient of the interpreted model");
  SmallVector<FlatSymbolRefAttr> names = gradient.getTensors();
  std::string key;
  for (FlatSymbolRefAttr name : names)
    key += name.getValue().str() + " ";
  if (std::optional<StringRef> term = gradient.getOf())
    key += "of " + term->str();
  auto cached = gradientCache.find(key);
  if (cached != gradientCache.end())
    return cached->second;
  GradientBuffers buffers;
  for (FlatSymbolRefAttr name : names) {
    auto tensor =
        SymbolTable::lookupNearestSymbolFrom<TensorOp>(gradient, name);
    if (!tensor)
      return gradient.emitOpError() << "differentiates " << name
                                    << ", which is not a tensor of the model";
    FailureOr<std::vector<int64_t>> shape =
        getShape(tensor.getArrayType(), gradient);
    if (failed(shape) ||
        failed(checkAllocation(gradient, *shape,
                               "the gradient of @" + name.getValue() + " " +
                                   tensor.getArrayType().shapeString())))
      return failure();
    buffers.try_emplace(name.getValue(), ArrayValue(*shape));
  }
  if (gradient.getBody().empty())
    return gradient.emitOpError("has no body");
  if (!inProgress.insert(gradient).second)
    return gradient.emitOpError()
           << "is evaluated while evaluating itself (through energy.grad "
           << gradient.getTensorAttr() << ")";
  Frame frame(&gradient.getBody(), nullptr);
  LogicalResult result =
      executeGradientBlock(gradient.getBody().front(), frame, buffers);
  inProgress.erase(gradient);
  if (failed(result))
    return failure();
  SmallVector<ArrayValue> gradients;
  for (FlatSymbolRefAttr name : names) {
    ArrayValue &buffer = buffers.find(name.getValue())->second;
    if (containsNaN(buffer))
      return gradient.emitOpError()
             << "produced NaN in the gradient of " << name;
    gradients.push_back(std::move(buffer));
  }
  return gradientCache[key] = std::move(gradients);
}

LogicalResult Interpreter::executeGradientBlock(Block &block, Frame &frame,
                                                GradientBuffers &gradients) {
  for (Operation &op : block) {
    LogicalResult result =
        llvm::TypeSwitch<Operation *, LogicalResult>(&op)
            .Case([&](ForeachOp loop) {
              return executeForeach(loop, frame, gradients);
            })
            .Case([&](AccumulateOp accumulate) {
              return executeAccumulate(accumulate, frame, gradients);
            })
            .Default([&](Operation *other) -> LogicalResult {
              // Pure values are computed (and memoised in their frame) when
              // an accumulation or a loop's predicate uses them, so values
              // nothing uses are never evaluated, as in a reduction.
              if (other->getNumResults() != 0)
                return success();
              return other->emitOpError(
                  "is not supported in a gradient program by the interpreter");
            });
    if (failed(result))
      return failure();
  }
  return success();
}

LogicalResult Interpreter::executeForeach(ForeachOp loop, Frame &frame,
                                          GradientBuffers &gradients) {
  FailureOr<std::vector<int64_t>> sizes = evaluateDomain(loop.getSizes(), loop);
  if (failed(sizes))
    return failure();
  if (loop.getBody().empty())
    return loop.emitOpError("has no body");
  Value admitted = yieldedValue(loop.getPredicate());
  if (loop.hasPredicate() && !admitted)
    return loop.emitOpError("has a predicate without a yielded value");

  Frame predicateFrame(&loop.getPredicate(), &frame);
  Frame bodyFrame(&loop.getBody(), &frame);
  Block &body = loop.getBody().front();
  return forEachPosition(*sizes, [&](ArrayRef<int64_t> position) {
    if (admitted) {
      predicateFrame.moveTo(position);
      FailureOr<int64_t> isAdmitted = evaluateInteger(admitted, predicateFrame);
      if (failed(isAdmitted))
        return failure();
      if (!*isAdmitted)
        return success();
    }
    bodyFrame.moveTo(position);
    return executeGradientBlock(body, bodyFrame, gradients);
  });
}

LogicalResult Interpreter::executeAccumulate(AccumulateOp accumulate,
                                             Frame &frame,
                                             GradientBuffers &gradients) {
  auto buffer = gradients.find(accumulate.getTensor());
  if (buffer == gradients.end())
    return accumulate.emitOpError()
           << "accumulates into " << accumulate.getTensorAttr()
           << " outside the gradient of that tensor";
  ArrayValue &gradient = buffer->second;
  FailureOr<std::vector<int64_t>> indices = evaluateIndices(
      accumulate, accumulate.getMap(), accumulate.getIndices(), frame);
  if (failed(indices))
    return failure();
  if (failed(checkInRange(accumulate, *indices, gradient.shape,
                          [&](InFlightDiagnostic &diag, size_t) {
                            diag << "accumulates into "
                                 << accumulate.getTensorAttr();
                          })))
    return failure();
  FailureOr<ArrayValue> value = evaluateArray(accumulate.getValue(), frame);
  if (failed(value))
    return failure();
  ArrayRef<int64_t> sliceShape =
      ArrayRef<int64_t>(gradient.shape).drop_front(indices->size());
  if (ArrayRef<int64_t>(value->shape) != sliceShape)
    return accumulate.emitOpError()
           << "adds a value of shape " << ArrayValue::shapeString(value->shape)
           << " into a slice of shape " << ArrayValue::shapeString(sliceShape);
  // Row-major: the slice at leading indices is a contiguous block.
  int64_t offset = 0;
  for (auto [axis, index] : llvm::enumerate(*indices))
    offset = offset * gradient.shape[axis] + index;
  offset *= value->size();
  for (int64_t i = 0; i < value->size(); ++i)
    gradient.data[offset + i] += value->data[i];
  return success();
}
