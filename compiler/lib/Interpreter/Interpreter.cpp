//===- Interpreter.cpp - Reference interpreter of the energy dialect ------===//
//
// Demand-driven evaluation of energy IR: a value is computed when asked for,
// from its operands, and memoised in the frame of the block it is defined
// in. A reduction opens a fresh frame per admitted position of its domain,
// so positions its predicate excludes are never evaluated. Every array
// result is checked against the concrete shape of its type and for NaN.
//
//===----------------------------------------------------------------------===//

#include "InterpreterInternals.h"
#include "energy/IR/PluginCode.h"
#include "energy/Interpreter/ArrayMath.h"
#include "energy/Plugin/FunctionTable.h"
#include "energy/Plugin/RuntimeCode.h"
#include "energy/Runtime/IndexArithmetic.h"
#include "energy/Runtime/Tensor.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::interpreter;
namespace plugin = ::energy::plugin;

/// Calls `visit` at every position of the box [0, sizes) in row-major order
/// (first index outermost); stops at the first failure.
LogicalResult interpreter::forEachPosition(
    ArrayRef<int64_t> sizes,
    function_ref<LogicalResult(ArrayRef<int64_t>)> visit) {
  for (int64_t size : sizes)
    if (size <= 0)
      return success();
  std::vector<int64_t> position(sizes.size(), 0);
  while (true) {
    if (failed(visit(position)))
      return failure();
    int axis = static_cast<int>(sizes.size()) - 1;
    while (axis >= 0 && ++position[axis] == sizes[axis])
      position[axis--] = 0;
    if (axis < 0)
      return success();
  }
}

/// The value yielded by the single block of `region`, or null.
Value interpreter::yieldedValue(Region &region) {
  if (region.empty())
    return {};
  auto yield = dyn_cast<YieldOp>(region.front().getTerminator());
  if (!yield || yield.getValues().size() != 1)
    return {};
  return yield.getValues().front();
}

LogicalResult interpreter::checkAllocation(Operation *op,
                                           ArrayRef<int64_t> shape,
                                           const Twine &what) {
  ::energy::Expected<uint64_t> bytes = ::energy::allocationBytes(
      ::energy::DType::F64, std::vector<int64_t>(shape.begin(), shape.end()));
  if (bytes)
    return success();
  InFlightDiagnostic diagnostic = op->emitError();
  if (!what.isTriviallyEmpty())
    diagnostic << what << ": ";
  return diagnostic << bytes.message();
}

namespace {
/// The `index`th function of `op`'s run-time code (see getPluginCode).
template <typename Function> Function pluginCode(Operation *op, size_t index) {
  return reinterpret_cast<Function>(getPluginCode(op)->addresses[index]);
}

/// Evaluates an affine expression over integer dims and symbols.
std::optional<int64_t> evaluateAffine(AffineExpr expr,
                                      ArrayRef<int64_t> dimValues,
                                      ArrayRef<int64_t> symbolValues) {
  if (auto constant = dyn_cast<AffineConstantExpr>(expr))
    return constant.getValue();
  if (auto dim = dyn_cast<AffineDimExpr>(expr))
    return dimValues[dim.getPosition()];
  if (auto symbol = dyn_cast<AffineSymbolExpr>(expr))
    return symbolValues[symbol.getPosition()];
  auto binary = cast<AffineBinaryOpExpr>(expr);
  std::optional<int64_t> lhs =
      evaluateAffine(binary.getLHS(), dimValues, symbolValues);
  std::optional<int64_t> rhs =
      evaluateAffine(binary.getRHS(), dimValues, symbolValues);
  if (!lhs || !rhs)
    return std::nullopt;
  ::energy::IndexOp op;
  switch (binary.getKind()) {
  case AffineExprKind::Add:
    op = ::energy::IndexOp::Add;
    break;
  case AffineExprKind::Mul:
    op = ::energy::IndexOp::Mul;
    break;
  case AffineExprKind::Mod:
    op = ::energy::IndexOp::Mod;
    break;
  case AffineExprKind::FloorDiv:
    op = ::energy::IndexOp::FloorDiv;
    break;
  case AffineExprKind::CeilDiv:
    op = ::energy::IndexOp::CeilDiv;
    break;
  default:
    return std::nullopt;
  }
  int64_t result = 0;
  if (::energy::applyIndexOp(op, *lhs, *rhs, result) !=
      ::energy::IndexFault::None)
    return std::nullopt;
  return result;
}

/// The row function of a normalisation along the last axis, if `op` is one.
std::optional<array::RowFunction> rowFunctionOf(Operation *op) {
  using Result = std::optional<array::RowFunction>;
  return llvm::TypeSwitch<Operation *, Result>(op)
      .Case([](SoftmaxOp) { return array::softmaxRow; })
      .Case([](LogSoftmaxOp) { return array::logSoftmaxRow; })
      .Case([](RmsNormOp) { return array::rmsNormRow; })
      .Case([](LayerNormOp) { return array::layerNormRow; })
      .Default([](Operation *) { return std::nullopt; });
}

bool isSquareMatrix(const ArrayValue &t) {
  return t.getRank() == 2 && t.shape[0] == t.shape[1];
}

/// Reports a shape the op cannot take (only reachable with unverified IR).
LogicalResult shapeError(Operation *op, ArrayRef<const ArrayValue *> operands) {
  InFlightDiagnostic diag = op->emitOpError("cannot take operands of shape");
  for (const ArrayValue *operand : operands)
    diag << ' ' << ArrayValue::shapeString(operand->shape);
  return diag;
}

/// Checks that `indices` address leading axes of `shape`; `describe` names
/// the indexed array in the error.
LogicalResult
checkInRange(Operation *op, ArrayRef<int64_t> indices, ArrayRef<int64_t> shape,
             function_ref<void(InFlightDiagnostic &, size_t axis)> describe) {
  if (indices.size() > shape.size())
    return op->emitOpError()
           << "has " << indices.size() << " indices for an array of shape "
           << ArrayValue::shapeString(shape);
  for (auto [axis, index] : llvm::enumerate(indices))
    if (index < 0 || index >= shape[axis]) {
      InFlightDiagnostic diag = op->emitOpError();
      describe(diag, axis);
      diag << " at index " << index << " of axis " << axis << ", whose size is "
           << shape[axis];
      return diag;
    }
  return success();
}

bool containsNaN(const ArrayValue &t) {
  return llvm::any_of(t.data, [](double value) { return std::isnan(value); });
}
} // namespace

//===----------------------------------------------------------------------===//
// Creation and bindings
//===----------------------------------------------------------------------===//

FailureOr<Interpreter> Interpreter::create(ModelOp model,
                                           const Bindings &bindings) {
  if (failed(verify(model)))
    return failure();
  Interpreter interpreter(model);
  interpreter.step = bindings.getStep();
  SymbolTable symbols(model);

  for (const auto &entry : bindings.getDims())
    if (!symbols.lookup<DimOp>(entry.getKey()))
      return model.emitError() << "binds dim @" << entry.getKey()
                               << ", which the model does not declare";
  for (DimOp dim : model.getOps<DimOp>()) {
    StringRef name = dim.getSymName();
    auto bound = bindings.getDims().find(name);
    bool isBound = bound != bindings.getDims().end();
    if (DimExprAttr derived = dim.getDerivedAttr()) {
      if (isBound)
        return dim.emitError()
               << "dim @" << name << " is derived and cannot be bound";
      bool complete = llvm::all_of(derived.getNames(), [&](StringAttr input) {
        return interpreter.dims.contains(input.getValue());
      });
      if (!complete)
        continue; // Reported where the dim is used.
      FailureOr<int64_t> value = interpreter.evaluateDimExpr(derived, dim);
      if (failed(value))
        return dim.emitError() << "dim @" << name << " cannot be derived";
      interpreter.dims[name] = *value;
      continue;
    }
    if (isBound) {
      if (bound->second < 0)
        return dim.emitError() << "dim @" << name << " is bound to "
                               << bound->second << "; sizes are >= 0";
      interpreter.dims[name] = bound->second;
    } else if (std::optional<int64_t> value = dim.getDefaultValue()) {
      interpreter.dims[name] = *value;
    }
  }

  for (ConstOp constant : model.getOps<ConstOp>())
    interpreter.consts[constant.getSymName()] =
        constant.getValue().convertToDouble();
  for (const auto &entry : bindings.getConsts()) {
    if (!symbols.lookup<ConstOp>(entry.getKey()))
      return model.emitError() << "binds const @" << entry.getKey()
                               << ", which the model does not declare";
    interpreter.consts[entry.getKey()] = entry.getValue();
  }

  for (const auto &entry : bindings.getTensors()) {
    auto tensor = symbols.lookup<TensorOp>(entry.getKey());
    if (!tensor)
      return model.emitError() << "binds tensor @" << entry.getKey()
                               << ", which the model does not declare";
    FailureOr<std::vector<int64_t>> shape =
        interpreter.getShape(tensor.getArrayType(), tensor);
    if (failed(shape))
      return failure();
    const ArrayValue &value = entry.getValue();
    if (value.shape != *shape ||
        value.size() != ArrayValue::elementCount(value.shape))
      return tensor.emitError()
             << "tensor @" << entry.getKey() << " is bound with shape "
             << ArrayValue::shapeString(value.shape) << " but is declared "
             << tensor.getArrayType().shapeString() << " = "
             << ArrayValue::shapeString(*shape);
    interpreter.tensors[entry.getKey()] = value;
  }
  return interpreter;
}

std::optional<int64_t> Interpreter::getDim(StringRef name) const {
  auto found = dims.find(name);
  if (found == dims.end())
    return std::nullopt;
  return found->second;
}

/// The error for a dim with no value.
static InFlightDiagnostic unboundDim(Operation *user, StringRef name) {
  return user->emitError() << "dim @" << name
                           << " is not bound: it has no default, so give it "
                              "a value (energy-run --dim "
                           << name << "=VALUE)";
}

FailureOr<int64_t> Interpreter::evaluateDimExpr(DimExprAttr expr,
                                                Operation *user) {
  for (StringAttr name : expr.getNames())
    if (!dims.contains(name.getValue()))
      return unboundDim(user, name.getValue());
  FailureOr<int64_t> value = expr.evaluate(
      [&](StringRef name) -> std::optional<int64_t> { return getDim(name); });
  if (failed(value))
    return user->emitError() << "dim expression " << expr
                             << " is not an exact integer for the bound dims "
                                "(a division with a remainder, or overflow)";
  return value;
}

FailureOr<std::vector<int64_t>> Interpreter::getShape(ArrayType type,
                                                      Operation *user) {
  std::vector<int64_t> shape;
  for (StringAttr dim : type.getShape()) {
    std::optional<int64_t> extent = getDim(dim.getValue());
    if (!extent)
      return unboundDim(user, dim.getValue());
    shape.push_back(*extent);
  }
  return shape;
}

FailureOr<const ArrayValue *> Interpreter::getTensor(TensorOp tensor,
                                                     Operation *user) {
  StringRef name = tensor.getSymName();
  auto found = tensors.find(name);
  if (found != tensors.end())
    return &found->second;
  std::optional<InitKind> init = tensor.getInit();
  if (!init || *init == InitKind::normal || *init == InitKind::uniform) {
    InFlightDiagnostic diag = user->emitError()
                              << "tensor @" << name << " is not bound";
    if (init)
      diag << " and its initialiser '" << stringifyInitKind(*init)
           << "' is random; bind it";
    return diag;
  }
  FailureOr<std::vector<int64_t>> shape = getShape(tensor.getArrayType(), user);
  if (failed(shape) ||
      failed(checkAllocation(tensor, *shape,
                             "tensor @" + name + " " +
                                 tensor.getArrayType().shapeString())))
    return failure();
  ArrayValue value(*shape);
  switch (*init) {
  case InitKind::zeros:
    break;
  case InitKind::ones:
    value = ArrayValue(*shape, 1.0);
    break;
  case InitKind::eye: {
    int64_t n = shape->back();
    for (int64_t i = 0; i < value.size(); ++i)
      value.data[i] = (i / n) % n == i % n ? 1.0 : 0.0;
    break;
  }
  case InitKind::copy: {
    auto source = SymbolTable::lookupNearestSymbolFrom<TensorOp>(
        tensor, tensor.getInitSourceAttr());
    if (!source || !inProgress.insert(tensor).second)
      return user->emitError()
             << "tensor @" << name << " is initialised from itself";
    FailureOr<const ArrayValue *> copied = getTensor(source, user);
    inProgress.erase(tensor);
    if (failed(copied))
      return failure();
    value = **copied;
    break;
  }
  case InitKind::normal:
  case InitKind::uniform:
    llvm_unreachable("random initialisers are reported above");
  }
  return &(tensors[name] = std::move(value));
}

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

FailureOr<ArrayValue> Interpreter::evaluate(Value value,
                                            ArrayRef<int64_t> indices) {
  Region *region = value.getParentRegion();
  Operation *owner = region ? region->getParentOp() : nullptr;
  if (!owner ||
      !isa<TermOp, LetOp, OutputOp, UpdateOp, AssignOp, DynamicsOp, GradientOp,
           UpdateProgramOp, BackwardProgramOp>(owner) ||
      owner->getParentOfType<ModelOp>() != model) {
    Operation *where = value.getDefiningOp();
    return (where ? where : model.getOperation())->emitError()
           << "the interpreter evaluates values at the top level of a body "
              "of this model only";
  }
  Block &block = region->front();
  if (block.getNumArguments() != indices.size())
    return owner->emitError() << "is evaluated with " << indices.size()
                              << " indices for a body of "
                              << block.getNumArguments() << " arguments";
  Frame frame(region, nullptr);
  for (auto [argument, index] : llvm::zip(block.getArguments(), indices))
    frame.integers[argument] = index;
  if (isa<ArrayType>(value.getType()))
    return evaluateArray(value, frame);
  FailureOr<int64_t> integer = evaluateInteger(value, frame);
  if (failed(integer))
    return failure();
  return ArrayValue::scalar(static_cast<double>(*integer));
}

void Interpreter::invalidateCaches() {
  letCache.clear();
  gradientCache.clear();
}

void Interpreter::setStep(int64_t newStep) {
  step = newStep;
  invalidateCaches();
}

FailureOr<ArrayValue> Interpreter::getTensorValue(StringRef name) {
  auto tensor = SymbolTable::lookupSymbolIn(model, name);
  if (!isa_and_nonnull<TensorOp>(tensor))
    return model.emitError() << "has no tensor @" << name;
  FailureOr<const ArrayValue *> value =
      getTensor(cast<TensorOp>(tensor), tensor);
  if (failed(value))
    return failure();
  return **value;
}

LogicalResult Interpreter::runUpdateProgram(UpdateProgramOp program) {
  return runProgram(program.getBody());
}

LogicalResult Interpreter::runProgram(Region &program) {
  Frame frame(&program, nullptr);
  return executeProgramBlock(program.front(), frame);
}

LogicalResult Interpreter::setTensorValue(StringRef name, ArrayValue value) {
  auto tensor =
      dyn_cast_or_null<TensorOp>(SymbolTable::lookupSymbolIn(model, name));
  if (!tensor)
    return model.emitError() << "has no tensor @" << name;
  FailureOr<const ArrayValue *> current = getTensor(tensor, tensor);
  if (failed(current))
    return failure();
  if ((*current)->shape != value.shape)
    return tensor.emitError() << "is set to a value of another shape";
  tensors[name] = std::move(value);
  invalidateCaches();
  return success();
}

LogicalResult Interpreter::executeProgramBlock(Block &block, Frame &frame) {
  for (Operation &op : block) {
    if (auto store = dyn_cast<StoreOp>(op)) {
      FailureOr<ArrayValue> value = evaluateArray(store.getValue(), frame);
      if (failed(value))
        return failure();
      tensors[store.getTensor()] = std::move(*value);
      invalidateCaches();
      continue;
    }
    if (auto repeat = dyn_cast<RepeatOp>(op)) {
      Block &body = repeat.getBody().front();
      for (int64_t round = 0;; ++round) {
        if (round == static_cast<int64_t>(repeat.getMaxIterations()))
          return repeat.emitOpError()
                 << "did not finish within " << round << " rounds";
        // Each round computes its values afresh.
        Frame roundFrame(&repeat.getBody(), &frame);
        if (failed(executeProgramBlock(body, roundFrame)))
          return failure();
        FailureOr<int64_t> done = evaluateInteger(
            cast<YieldOp>(body.getTerminator()).getValues()[0], roundFrame);
        if (failed(done))
          return failure();
        if (*done)
          break;
      }
      continue;
    }
    if (isa<YieldOp>(op))
      continue;
    // Gradients added into tensors: the sum is stored where the op stands.
    if (auto grad = dyn_cast<GradOp>(op); grad && grad.getIntoAttr()) {
      FailureOr<SmallVector<ArrayValue>> gradients = evaluateGradOp(grad);
      if (failed(gradients))
        return failure();
      std::vector<std::pair<StringRef, ArrayValue>> sums;
      for (auto [position, target] : llvm::enumerate(grad.getIntoTensors())) {
        const ArrayValue &gradient = (*gradients)[position];
        if (!target) {
          frame.arrays[grad.getResultOf(position)] = gradient;
          continue;
        }
        auto tensor = model.lookupSymbol<TensorOp>(target);
        if (!tensor)
          return grad.emitOpError() << "adds a gradient into " << target
                                    << ", which is not a tensor";
        FailureOr<const ArrayValue *> current = getTensor(tensor, grad);
        if (failed(current))
          return failure();
        if ((*current)->shape != gradient.shape)
          return grad.emitOpError()
                 << "adds a gradient into " << target << " of another shape";
        ArrayValue sum = **current;
        for (auto [element, added] : llvm::zip(sum.data, gradient.data))
          element += added;
        sums.emplace_back(target.getValue(), std::move(sum));
      }
      for (auto &[name, sum] : sums)
        tensors[name] = std::move(sum);
      invalidateCaches();
      continue;
    }
    // Evaluate every value where it stands, so that it sees the tensors as
    // they are at this point of the step.
    for (Value result : op.getResults()) {
      if (isa<ArrayType>(result.getType())) {
        if (failed(evaluateArray(result, frame)))
          return failure();
      } else if (failed(evaluateInteger(result, frame))) {
        return failure();
      }
    }
  }
  return success();
}

FailureOr<double> Interpreter::evaluateTerm(TermOp term) {
  Value energy = yieldedValue(term.getBody());
  if (!energy)
    return term.emitError("has no yielded energy");
  FailureOr<ArrayValue> value = evaluate(energy);
  if (failed(value))
    return failure();
  return value->data.front();
}

FailureOr<double> Interpreter::evaluateEnergy() {
  double total = 0;
  for (TermOp term : model.getOps<TermOp>()) {
    if (term.getAuxiliary())
      continue;
    FailureOr<double> value = evaluateTerm(term);
    if (failed(value))
      return failure();
    total += *value;
  }
  return total;
}

FailureOr<ArrayValue> Interpreter::evaluateComprehension(
    Operation *user, ArrayAttr domain, Type elementType,
    function_ref<FailureOr<ArrayValue>(ArrayRef<int64_t>)> element) {
  std::vector<int64_t> sizes;
  for (Attribute size : domain) {
    FailureOr<int64_t> extent = evaluateDimExpr(cast<DimExprAttr>(size), user);
    if (failed(extent))
      return failure();
    sizes.push_back(*extent);
  }
  FailureOr<std::vector<int64_t>> elementShape =
      getShape(cast<ArrayType>(elementType), user);
  if (failed(elementShape))
    return failure();
  std::vector<int64_t> shape = sizes;
  shape.insert(shape.end(), elementShape->begin(), elementShape->end());
  if (failed(checkAllocation(user, shape)))
    return failure();
  ArrayValue result(shape);
  if (failed(forEachPosition(sizes, [&](ArrayRef<int64_t> position) {
        FailureOr<ArrayValue> value = element(position);
        if (failed(value))
          return failure();
        result.setSlice(position, *value);
        return success();
      })))
    return failure();
  return result;
}

FailureOr<ArrayValue> Interpreter::evaluateOutput(OutputOp output) {
  Value element = yieldedValue(output.getBody());
  if (!element)
    return output.emitError("has no yielded element");
  return evaluateComprehension(
      output, output.getDomain(), output.getElementType(),
      [&](ArrayRef<int64_t> position) { return evaluate(element, position); });
}

FailureOr<ArrayValue> Interpreter::evaluateLet(LetOp let) {
  return evaluateComprehension(let, let.getDomain(), let.getElementType(),
                               [&](ArrayRef<int64_t> position) {
                                 return evaluateLetElement(let, position, let);
                               });
}

FailureOr<ArrayValue> Interpreter::evaluateLetElement(LetOp let,
                                                      ArrayRef<int64_t> indices,
                                                      Operation *user) {
  std::map<std::vector<int64_t>, ArrayValue> &cache = letCache[let];
  std::vector<int64_t> key(indices.begin(), indices.end());
  auto found = cache.find(key);
  if (found != cache.end())
    return found->second;
  Value element = yieldedValue(let.getBody());
  if (!element)
    return let.emitError("has no yielded element");
  if (!inProgress.insert(let).second)
    return user->emitError()
           << "let @" << let.getSymName() << " is defined in terms of itself";
  FailureOr<ArrayValue> value = evaluate(element, indices);
  inProgress.erase(let);
  if (failed(value))
    return failure();
  // `cache` may have been invalidated by lets evaluated meanwhile.
  letCache[let][key] = *value;
  return value;
}

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

Interpreter::Frame *Interpreter::findOwner(Value value, Frame &frame) {
  for (Frame *candidate = &frame; candidate; candidate = candidate->parent)
    if (candidate->region == value.getParentRegion())
      return candidate;
  return nullptr;
}

FailureOr<ArrayValue> Interpreter::evaluateArray(Value value, Frame &frame) {
  Frame *owner = findOwner(value, frame);
  Operation *op = value.getDefiningOp();
  if (!owner || !op)
    return (op ? op : model.getOperation())->emitError()
           << "uses a value the interpreter cannot see from here";
  auto memo = owner->arrays.find(value);
  if (memo != owner->arrays.end())
    return memo->second;

  // A joint gradient computes all its results at once.
  if (auto grad = dyn_cast<GradOp>(op)) {
    FailureOr<SmallVector<ArrayValue>> results = evaluateGradOp(grad);
    if (failed(results))
      return failure();
    for (auto [position, tensor] : llvm::enumerate(*results))
      if (Value result = grad.getResultOf(position))
        owner->arrays[result] = tensor;
    return owner->arrays[value];
  }
  // A contraction computes all its results at once.
  if (auto contract = dyn_cast<SoftmaxContractOp>(op)) {
    FailureOr<SmallVector<ArrayValue>> results =
        evaluateSoftmaxContract(contract, *owner);
    if (failed(results))
      return failure();
    for (auto [result, tensor] : llvm::zip(contract.getResults(), *results))
      owner->arrays[result] = tensor;
    return owner->arrays[value];
  }
  FailureOr<ArrayValue> result = evaluateArrayOp(op, *owner);
  if (failed(result))
    return failure();
  FailureOr<std::vector<int64_t>> shape =
      getShape(cast<ArrayType>(value.getType()), op);
  if (failed(shape))
    return failure();
  if (result->shape != *shape)
    return op->emitOpError()
           << "produced shape " << ArrayValue::shapeString(result->shape)
           << " for its type " << value.getType() << " = "
           << ArrayValue::shapeString(*shape);
  if (containsNaN(*result))
    return op->emitOpError("produced NaN");
  owner->arrays[value] = *result;
  return result;
}

FailureOr<int64_t> Interpreter::evaluateInteger(Value value, Frame &frame) {
  Frame *owner = findOwner(value, frame);
  Operation *op = value.getDefiningOp();
  if (!owner || (!op && !owner->integers.count(value)))
    return (op ? op : model.getOperation())->emitError()
           << "uses an index the interpreter cannot see from here";
  auto memo = owner->integers.find(value);
  if (memo != owner->integers.end())
    return memo->second;
  FailureOr<int64_t> result = evaluateIntegerOp(op, *owner);
  if (failed(result))
    return failure();
  owner->integers[value] = *result;
  return result;
}

//===----------------------------------------------------------------------===//
// Index and predicate ops
//===----------------------------------------------------------------------===//

FailureOr<int64_t> Interpreter::evaluateIntegerOp(Operation *op, Frame &frame) {
  auto operand = [&](unsigned i) {
    return evaluateInteger(op->getOperand(i), frame);
  };
  // Evaluates both operands of a binary op and combines them.
  auto binary = [&](function_ref<FailureOr<int64_t>(int64_t, int64_t)> combine)
      -> FailureOr<int64_t> {
    FailureOr<int64_t> lhs = operand(0);
    if (failed(lhs))
      return failure();
    FailureOr<int64_t> rhs = operand(1);
    if (failed(rhs))
      return failure();
    return combine(*lhs, *rhs);
  };
  auto divisor = [&](int64_t rhs) -> LogicalResult {
    if (rhs == 0)
      return op->emitOpError("divides by zero");
    return success();
  };
  return llvm::TypeSwitch<Operation *, FailureOr<int64_t>>(op)
      .Case([&](arith::ConstantOp constant) -> FailureOr<int64_t> {
        auto attr = dyn_cast<IntegerAttr>(constant.getValue());
        if (!attr)
          return op->emitOpError("is not an index or i1 constant");
        if (attr.getType().isInteger(1))
          return attr.getValue().getBoolValue() ? 1 : 0;
        return attr.getValue().getSExtValue();
      })
      .Case([&](arith::AddIOp) {
        return binary(
            [](int64_t a, int64_t b) -> FailureOr<int64_t> { return a + b; });
      })
      .Case([&](arith::SubIOp) {
        return binary(
            [](int64_t a, int64_t b) -> FailureOr<int64_t> { return a - b; });
      })
      .Case([&](arith::MulIOp) {
        return binary(
            [](int64_t a, int64_t b) -> FailureOr<int64_t> { return a * b; });
      })
      .Case([&](arith::DivSIOp) {
        return binary([&](int64_t a, int64_t b) -> FailureOr<int64_t> {
          if (failed(divisor(b)))
            return failure();
          return a / b;
        });
      })
      .Case([&](arith::RemSIOp) {
        return binary([&](int64_t a, int64_t b) -> FailureOr<int64_t> {
          if (failed(divisor(b)))
            return failure();
          return a % b;
        });
      })
      .Case([&](arith::AndIOp) {
        return binary(
            [](int64_t a, int64_t b) -> FailureOr<int64_t> { return a & b; });
      })
      .Case([&](arith::OrIOp) {
        return binary(
            [](int64_t a, int64_t b) -> FailureOr<int64_t> { return a | b; });
      })
      .Case([&](arith::XOrIOp) {
        return binary(
            [](int64_t a, int64_t b) -> FailureOr<int64_t> { return a ^ b; });
      })
      .Case([&](arith::CmpIOp cmp) {
        return binary([&](int64_t a, int64_t b) -> FailureOr<int64_t> {
          uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
          switch (cmp.getPredicate()) {
          case arith::CmpIPredicate::eq:
            return a == b;
          case arith::CmpIPredicate::ne:
            return a != b;
          case arith::CmpIPredicate::slt:
            return a < b;
          case arith::CmpIPredicate::sle:
            return a <= b;
          case arith::CmpIPredicate::sgt:
            return a > b;
          case arith::CmpIPredicate::sge:
            return a >= b;
          case arith::CmpIPredicate::ult:
            return ua < ub;
          case arith::CmpIPredicate::ule:
            return ua <= ub;
          case arith::CmpIPredicate::ugt:
            return ua > ub;
          case arith::CmpIPredicate::uge:
            return ua >= ub;
          }
          return op->emitOpError("has an unknown predicate");
        });
      })
      .Case([&](arith::SelectOp select) -> FailureOr<int64_t> {
        FailureOr<int64_t> condition = operand(0);
        if (failed(condition))
          return failure();
        return operand(*condition ? 1 : 2);
      })
      .Case([&](StepOp) -> FailureOr<int64_t> { return step; })
      .Case([&](SizeOp size) { return evaluateDimExpr(size.getSize(), op); })
      .Case([&](CmpOp cmp) -> FailureOr<int64_t> {
        FailureOr<ArrayValue> lhs = evaluateArray(cmp.getLhs(), frame);
        if (failed(lhs))
          return failure();
        FailureOr<ArrayValue> rhs = evaluateArray(cmp.getRhs(), frame);
        if (failed(rhs))
          return failure();
        double a = lhs->data.front(), b = rhs->data.front();
        switch (cmp.getPredicate()) {
        case CmpPredicate::lt:
          return a < b;
        case CmpPredicate::le:
          return a <= b;
        case CmpPredicate::gt:
          return a > b;
        case CmpPredicate::ge:
          return a >= b;
        case CmpPredicate::eq:
          return a == b;
        case CmpPredicate::ne:
          return a != b;
        }
        return op->emitOpError("has an unknown predicate");
      })
      .Default([&](Operation *) -> FailureOr<int64_t> {
        return op->emitOpError("is not supported by the interpreter");
      });
}

//===----------------------------------------------------------------------===//
// Array ops
//===----------------------------------------------------------------------===//

FailureOr<ArrayValue> Interpreter::evaluateArrayOp(Operation *op,
                                                   Frame &frame) {
  // Operands first: every array op here takes array operands only (a
  // reduction's temperature included), except to_real, indexed ops and
  // select (whose condition is an i1 and whose branches are taken lazily).
  SmallVector<ArrayValue> operands;
  if (!isa<ToRealOp, ReadOp, ExtractOp, EmbedOp, SelectOp>(op))
    for (Value operand : op->getOperands()) {
      FailureOr<ArrayValue> value = evaluateArray(operand, frame);
      if (failed(value))
        return failure();
      operands.push_back(std::move(*value));
    }

  if (auto elementwise = dyn_cast<ElementwiseOpInterface>(op)) {
    ScalarFunction function = elementwise.getScalarFunction();
    if (function.unary)
      return array::map(operands[0], function.unary);
    const ArrayValue &lhs = operands[0], &rhs = operands[1];
    if (lhs.shape != rhs.shape && !lhs.isScalar() && !rhs.isScalar())
      return shapeError(op, {&lhs, &rhs});
    return array::zip(lhs, rhs, function.binary);
  }
  if (std::optional<array::RowFunction> function = rowFunctionOf(op))
    return array::mapRows(operands[0], *function);

  using Result = FailureOr<ArrayValue>;
  return llvm::TypeSwitch<Operation *, Result>(op)
      .Case([&](ConstantOp constant) -> Result {
        return ArrayValue::scalar(constant.getValue().convertToDouble());
      })
      .Case([&](ReadOp read) { return evaluateRead(read, frame); })
      .Case([&](ToRealOp toReal) -> Result {
        FailureOr<int64_t> index = evaluateInteger(toReal.getIndex(), frame);
        if (failed(index))
          return failure();
        return ArrayValue::scalar(static_cast<double>(*index));
      })
      .Case([&](EyeOp eye) -> Result {
        std::optional<int64_t> n = getDim(eye.getDim());
        if (!n)
          return unboundDim(op, eye.getDim());
        if (failed(checkAllocation(op, {*n, *n})))
          return failure();
        return array::diag(ArrayValue({*n}, 1.0));
      })
      .Case([&](MatmulOp) -> Result {
        const ArrayValue &lhs = operands[0], &rhs = operands[1];
        if (lhs.getRank() != 2 || (rhs.getRank() != 1 && rhs.getRank() != 2) ||
            lhs.shape[1] != rhs.shape[0])
          return shapeError(op, {&lhs, &rhs});
        if (failed(checkAllocation(
                op, {lhs.shape[0], rhs.getRank() == 2 ? rhs.shape[1] : 1})))
          return failure();
        return array::matmul(lhs, rhs);
      })
      .Case([&](BatchMatmulOp product) -> Result {
        return evaluateBatchMatmul(product, operands[0], operands[1]);
      })
      .Case([&](PrefixSumOp prefix) -> Result {
        return evaluatePrefixSum(prefix, operands[0]);
      })
      .Case([&](TransposeOp) -> Result {
        if (operands[0].getRank() < 2)
          return shapeError(op, {&operands[0]});
        return array::transpose(operands[0]);
      })
      .Case([&](DotOp) -> Result {
        const ArrayValue &lhs = operands[0], &rhs = operands[1];
        if (lhs.getRank() != 1 || lhs.shape != rhs.shape)
          return shapeError(op, {&lhs, &rhs});
        return ArrayValue::scalar(array::dot(lhs, rhs));
      })
      .Case([&](QuadOp) -> Result {
        const ArrayValue &vector = operands[0], &matrix = operands[1];
        if (vector.getRank() != 1 || !isSquareMatrix(matrix) ||
            matrix.shape[0] != vector.shape[0])
          return shapeError(op, {&vector, &matrix});
        return ArrayValue::scalar(array::quad(vector, matrix));
      })
      .Case([&](OuterOp) -> Result {
        const ArrayValue &lhs = operands[0], &rhs = operands[1];
        if (lhs.getRank() != 1 || rhs.getRank() != 1)
          return shapeError(op, {&lhs, &rhs});
        if (failed(checkAllocation(op, {lhs.size(), rhs.size()})))
          return failure();
        return array::outer(lhs, rhs);
      })
      .Case([&](ReduceElementsOp reduce) -> Result {
        const std::vector<double> &values = operands[0].data;
        double sum = 0, sumOfSquares = 0, largest = 0;
        for (double value : values) {
          sum += value;
          sumOfSquares += value * value;
          largest = std::max(largest, std::fabs(value));
        }
        switch (reduce.getKind()) {
        case ElementsKind::sum:
          return ArrayValue::scalar(sum);
        case ElementsKind::mean:
          return ArrayValue::scalar(sum / values.size());
        case ElementsKind::maxabs:
          return ArrayValue::scalar(largest);
        case ElementsKind::lse:
          return ArrayValue::scalar(array::logSumExp(values));
        case ElementsKind::sqnorm:
          return ArrayValue::scalar(sumOfSquares);
        case ElementsKind::norm:
          return ArrayValue::scalar(std::sqrt(sumOfSquares));
        }
        return op->emitOpError("has an unknown kind");
      })
      .Case([&](SumLastOp) -> Result {
        if (operands[0].isScalar())
          return shapeError(op, {&operands[0]});
        return array::sumLast(operands[0]);
      })
      .Case([&](BroadcastOp broadcast) -> Result {
        FailureOr<std::vector<int64_t>> shape =
            getShape(cast<ArrayType>(broadcast.getType()), op);
        if (failed(shape))
          return failure();
        const ArrayValue &operand = operands[0];
        if (operand.getRank() > shape->size() ||
            !std::equal(operand.shape.begin(), operand.shape.end(),
                        shape->begin()))
          return shapeError(op, {&operand});
        if (failed(checkAllocation(op, *shape)))
          return failure();
        return array::broadcast(operand, *shape);
      })
      .Case([&](DiagOp) -> Result {
        if (operands[0].getRank() != 1)
          return shapeError(op, {&operands[0]});
        if (failed(
                checkAllocation(op, {operands[0].size(), operands[0].size()})))
          return failure();
        return array::diag(operands[0]);
      })
      .Case([&](DiagPartOp) -> Result {
        if (!isSquareMatrix(operands[0]))
          return shapeError(op, {&operands[0]});
        return array::diagPart(operands[0]);
      })
      .Case([&](LogDetOp) -> Result {
        if (!isSquareMatrix(operands[0]))
          return shapeError(op, {&operands[0]});
        std::optional<double> logDet = array::logDetSymmetric(operands[0]);
        if (!logDet)
          return op->emitOpError(
              "takes the log-determinant of a matrix that is not symmetric "
              "positive definite");
        return ArrayValue::scalar(*logDet);
      })
      .Case([&](ApplyOp apply) -> Result {
        auto code = pluginCode<EnergyElementwiseCode>(op, apply.getOrder());
        ArrayValue result = operands[0];
        for (double &value : result.data)
          value = code(value);
        return result;
      })
      .Case([&](SimilarityOp) -> Result {
        return ArrayValue::scalar(pluginCode<EnergySimilarityCode>(op, 0)(
            operands[0].size(), operands[0].data.data(),
            operands[1].data.data()));
      })
      .Case([&](SimilarityGradientOp gradient) -> Result {
        ArrayValue lhs = operands[0], rhs = operands[1];
        pluginCode<EnergySimilarityGradientCode>(op, 1)(
            lhs.size(), operands[0].data.data(), operands[1].data.data(),
            lhs.data.data(), rhs.data.data());
        return gradient.getArgument() == 0 ? lhs : rhs;
      })
      .Case([&](AggregateOp) -> Result {
        return ArrayValue::scalar(pluginCode<EnergyAggregationCode>(op, 0)(
            operands[0].size(), operands[0].data.data()));
      })
      .Case([&](AggregateWeightsOp) -> Result {
        ArrayValue weights = operands[0];
        pluginCode<EnergyAggregationWeightsCode>(op, 1)(
            operands[0].size(), operands[0].data.data(), weights.data.data());
        return weights;
      })
      .Case([&](InverseOp) -> Result {
        if (!isSquareMatrix(operands[0]))
          return shapeError(op, {&operands[0]});
        std::optional<ArrayValue> inverse = array::inverse(operands[0]);
        if (!inverse)
          return op->emitOpError("inverts a singular matrix");
        return std::move(*inverse);
      })
      .Case([&](ExtractOp extract) -> Result {
        FailureOr<ArrayValue> source =
            evaluateArray(extract.getSource(), frame);
        if (failed(source))
          return failure();
        FailureOr<std::vector<int64_t>> indices =
            evaluateIndices(op, extract.getMap(), extract.getIndices(), frame);
        if (failed(indices) ||
            failed(checkInRange(
                op, *indices, source->shape,
                [](InFlightDiagnostic &diag, size_t) { diag << "extracts"; })))
          return failure();
        return source->slice(*indices);
      })
      .Case([&](EmbedOp embed) -> Result {
        FailureOr<ArrayValue> value = evaluateArray(embed.getValue(), frame);
        if (failed(value))
          return failure();
        FailureOr<std::vector<int64_t>> shape =
            getShape(cast<ArrayType>(embed.getType()), op);
        if (failed(shape))
          return failure();
        FailureOr<std::vector<int64_t>> indices =
            evaluateIndices(op, embed.getMap(), embed.getIndices(), frame);
        if (failed(indices) ||
            failed(checkInRange(
                op, *indices, *shape,
                [](InFlightDiagnostic &diag, size_t) { diag << "embeds"; })) ||
            failed(checkAllocation(op, *shape)))
          return failure();
        ArrayValue result(*shape);
        if (!std::equal(value->shape.begin(), value->shape.end(),
                        shape->begin() + indices->size(), shape->end()))
          return shapeError(op, {&*value});
        result.setSlice(*indices, *value);
        return result;
      })
      .Case([&](ReduceOp reduce) { return evaluateReduce(reduce, frame); })
      .Case([&](TabulateOp table) { return evaluateTabulate(table, frame); })
      .Case([&](OnceOp once) {
        // Nothing is kept: the value is its body's.
        Frame inner(&once.getBody(), &frame);
        return evaluateArray(once.getBodyValue(), inner);
      })
      .Case([&](SelectOp select) -> Result {
        FailureOr<int64_t> condition =
            evaluateInteger(select.getCondition(), frame);
        if (failed(condition))
          return failure();
        return evaluateArray(
            *condition ? select.getTrueValue() : select.getFalseValue(), frame);
      })
      .Default([&](Operation *) -> Result {
        return op->emitOpError("is not supported by the interpreter");
      });
}

FailureOr<std::vector<int64_t>>
Interpreter::evaluateIndices(Operation *op, AffineMap map, ValueRange operands,
                             Frame &frame) {
  SmallVector<int64_t> operandValues;
  for (Value index : operands) {
    FailureOr<int64_t> value = evaluateInteger(index, frame);
    if (failed(value))
      return failure();
    operandValues.push_back(*value);
  }
  ArrayRef<int64_t> dimValues =
      ArrayRef<int64_t>(operandValues).take_front(map.getNumDims());
  ArrayRef<int64_t> symbolValues =
      ArrayRef<int64_t>(operandValues).drop_front(map.getNumDims());
  std::vector<int64_t> indices;
  for (AffineExpr expr : map.getResults()) {
    std::optional<int64_t> index =
        evaluateAffine(expr, dimValues, symbolValues);
    if (!index)
      return op->emitOpError("has an index that is not an integer");
    indices.push_back(*index);
  }
  return indices;
}

FailureOr<ArrayValue> Interpreter::evaluateRead(ReadOp read, Frame &frame) {
  FailureOr<std::vector<int64_t>> maybeIndices =
      evaluateIndices(read, read.getMap(), read.getIndices(), frame);
  if (failed(maybeIndices))
    return failure();
  std::vector<int64_t> indices = *maybeIndices;

  Operation *source =
      SymbolTable::lookupNearestSymbolFrom(read, read.getSourceAttr());
  StringAttr name = read.getSourceAttr().getAttr();
  if (auto constant = dyn_cast_or_null<ConstOp>(source))
    return ArrayValue::scalar(consts.lookup(name.getValue()));

  ArrayType wholeType;
  if (auto tensor = dyn_cast_or_null<TensorOp>(source))
    wholeType = tensor.getArrayType();
  else if (auto let = dyn_cast_or_null<LetOp>(source))
    wholeType = let.getArrayType();
  else
    return read.emitOpError() << "reads " << read.getSourceAttr()
                              << ", which is not a tensor, let or const";
  FailureOr<std::vector<int64_t>> wholeShape = getShape(wholeType, read);
  if (failed(wholeShape))
    return failure();
  if (failed(checkInRange(read, indices, *wholeShape,
                          [&](InFlightDiagnostic &diag, size_t axis) {
                            diag << "reads " << read.getSourceAttr()
                                 << " (axis @"
                                 << wholeType.getShape()[axis].getValue()
                                 << ")";
                          })))
    return failure();

  if (auto tensor = dyn_cast<TensorOp>(source)) {
    FailureOr<const ArrayValue *> value = getTensor(tensor, read);
    if (failed(value))
      return failure();
    return (*value)->slice(indices);
  }

  // A let: its element at the read's domain indices; a read that fixes only
  // some of the domain indices stacks the elements over the others.
  auto let = cast<LetOp>(source);
  size_t domainRank = let.getDomain().size();
  if (indices.size() >= domainRank) {
    ArrayRef<int64_t> all(indices);
    FailureOr<ArrayValue> element =
        evaluateLetElement(let, all.take_front(domainRank), read);
    if (failed(element))
      return failure();
    return element->slice(all.drop_front(domainRank));
  }
  std::vector<int64_t> freeSizes(wholeShape->begin() + indices.size(),
                                 wholeShape->begin() + domainRank);
  std::vector<int64_t> resultShape(wholeShape->begin() + indices.size(),
                                   wholeShape->end());
  if (failed(checkAllocation(read, resultShape)))
    return failure();
  ArrayValue result(resultShape);
  if (failed(forEachPosition(freeSizes, [&](ArrayRef<int64_t> position) {
        std::vector<int64_t> full = indices;
        full.insert(full.end(), position.begin(), position.end());
        FailureOr<ArrayValue> element = evaluateLetElement(let, full, read);
        if (failed(element))
          return failure();
        result.setSlice(position, *element);
        return success();
      })))
    return failure();
  return result;
}

FailureOr<std::vector<int64_t>> Interpreter::evaluateDomain(ArrayAttr sizes,
                                                            Operation *user) {
  std::vector<int64_t> extents;
  for (Attribute size : sizes) {
    FailureOr<int64_t> extent = evaluateDimExpr(cast<DimExprAttr>(size), user);
    if (failed(extent))
      return failure();
    extents.push_back(std::max<int64_t>(*extent, 0));
  }
  return extents;
}

FailureOr<ArrayValue> Interpreter::evaluateReduce(ReduceOp reduce,
                                                  Frame &frame) {
  FailureOr<std::vector<int64_t>> domain =
      evaluateDomain(reduce.getSizes(), reduce);
  if (failed(domain))
    return failure();
  const std::vector<int64_t> &sizes = *domain;
  double temperature = 1.0;
  if (Value value = reduce.getTemperature()) {
    FailureOr<ArrayValue> t = evaluateArray(value, frame);
    if (failed(t))
      return failure();
    temperature = t->data.front();
  }
  FailureOr<std::vector<int64_t>> shape =
      getShape(cast<ArrayType>(reduce.getType()), reduce);
  if (failed(shape))
    return failure();
  Value admitted = yieldedValue(reduce.getPredicate());
  Value body = yieldedValue(reduce.getBody());
  if (!body || (reduce.hasPredicate() && !admitted))
    return reduce.emitOpError("has a region without a yielded value");

  // A frame for `region` at `position`, nested in the reduction's frame.
  auto frameAt = [&](Region &region, ArrayRef<int64_t> position) {
    Frame inner(&region, &frame);
    for (auto [argument, index] :
         llvm::zip(region.front().getArguments(), position))
      inner.integers[argument] = index;
    return inner;
  };
  std::vector<ArrayValue> values;
  if (failed(forEachPosition(sizes, [&](ArrayRef<int64_t> position) {
        if (admitted) {
          Frame predicateFrame = frameAt(reduce.getPredicate(), position);
          FailureOr<int64_t> isAdmitted =
              evaluateInteger(admitted, predicateFrame);
          if (failed(isAdmitted))
            return failure();
          if (!*isAdmitted)
            return success();
        }
        Frame bodyFrame = frameAt(reduce.getBody(), position);
        FailureOr<ArrayValue> value = evaluateArray(body, bodyFrame);
        if (failed(value))
          return failure();
        values.push_back(std::move(*value));
        return success();
      })))
    return failure();

  if (failed(checkAllocation(reduce, *shape)))
    return failure();
  ArrayValue result(*shape);
  if (values.empty())
    return result;
  for (int64_t element = 0; element < result.size(); ++element) {
    std::vector<double> column;
    for (const ArrayValue &value : values)
      column.push_back(value.data[element]);
    double &out = result.data[element];
    switch (reduce.getKind()) {
    case ReduceKind::sum:
    case ReduceKind::mean:
      out = 0;
      for (double value : column)
        out += value;
      if (reduce.getKind() == ReduceKind::mean)
        out /= column.size();
      break;
    case ReduceKind::max:
      out = *std::max_element(column.begin(), column.end());
      break;
    case ReduceKind::lse:
      for (double &value : column)
        value /= temperature;
      out = temperature * array::logSumExp(column);
      break;
    case ReduceKind::custom:
      out = pluginCode<EnergyAggregationCode>(reduce, 0)(column.size(),
                                                         column.data());
      break;
    }
  }
  return result;
}

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

  return forEachPosition(*sizes, [&](ArrayRef<int64_t> position) {
    if (admitted) {
      Frame predicateFrame(&loop.getPredicate(), &frame);
      for (auto [argument, index] :
           llvm::zip(loop.getPredicate().front().getArguments(), position))
        predicateFrame.integers[argument] = index;
      FailureOr<int64_t> isAdmitted = evaluateInteger(admitted, predicateFrame);
      if (failed(isAdmitted))
        return failure();
      if (!*isAdmitted)
        return success();
    }
    // A fresh frame per position: values of the body are per iteration.
    Frame bodyFrame(&loop.getBody(), &frame);
    Block &body = loop.getBody().front();
    for (auto [argument, index] : llvm::zip(body.getArguments(), position))
      bodyFrame.integers[argument] = index;
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
