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
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <limits>

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

LogicalResult interpreter::checkInRange(
    Operation *op, ArrayRef<int64_t> indices, ArrayRef<int64_t> shape,
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

bool interpreter::containsNaN(const ArrayValue &t) {
  return llvm::any_of(t.data, [](double value) { return std::isnan(value); });
}

//===----------------------------------------------------------------------===//
// Creation and bindings
//===----------------------------------------------------------------------===//

FailureOr<Interpreter> Interpreter::create(ModelOp model,
                                           const Bindings &bindings) {
  if (failed(verify(model)))
    return failure();
  Interpreter interpreter(model);
  interpreter.step = bindings.getStep();
  interpreter.roundingUnit = bindings.getRoundingUnit();
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
InFlightDiagnostic interpreter::unboundDim(Operation *user, StringRef name) {
  return user->emitError() << "dim @" << name
                           << " is not bound: it has no default, so it needs "
                              "a value";
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
  auto known = shapes.find(type);
  if (known != shapes.end())
    return known->second;
  std::vector<int64_t> shape;
  for (StringAttr dim : type.getShape()) {
    std::optional<int64_t> extent = getDim(dim.getValue());
    if (!extent)
      return unboundDim(user, dim.getValue());
    shape.push_back(*extent);
  }
  shapes[type] = shape;
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

const llvm::SmallPtrSetImpl<Block *> &
Interpreter::argumentBlocksOf(Value value) {
  auto known = argumentBlocks.find(value);
  if (known != argumentBlocks.end())
    return known->second;
  llvm::SmallPtrSet<Block *, 4> blocks;
  if (auto argument = dyn_cast<BlockArgument>(value)) {
    blocks.insert(argument.getOwner());
  } else {
    // Its operands and what its regions read from outside them.
    Operation *op = value.getDefiningOp();
    llvm::SetVector<Value> read(op->operand_begin(), op->operand_end());
    for (Region &region : op->getRegions())
      getUsedValuesDefinedAbove(region, read);
    for (Value operand : read)
      for (Block *block : argumentBlocksOf(operand))
        blocks.insert(block);
  }
  return argumentBlocks[value] = std::move(blocks);
}

Interpreter::MemoSlot Interpreter::memoSlot(Value value, Frame *owner) {
  auto known = hoistPlans.find(value);
  if (known == hoistPlans.end()) {
    HoistPlan plan;
    // Reads, extractions, constants and element-wise ops cost less than
    // keeping them would.
    Operation *op = value.getDefiningOp();
    bool worthKeeping =
        op->getNumRegions() != 0 ||
        !isa<ReadOp, ExtractOp, ConstantOp, ElementwiseOpInterface>(op);
    const llvm::SmallPtrSetImpl<Block *> &read = argumentBlocksOf(value);
    // Up the loop bodies around the value (reductions' and tables'): to
    // above the outermost whose indices it does not read.
    unsigned level = 0;
    for (Region *region = value.getParentRegion();
         worthKeeping && region &&
         isa_and_nonnull<ReduceOp, TabulateOp>(region->getParentOp());
         region = region->getParentOp()->getParentRegion(), ++level) {
      bool reads = read.contains(&region->front());
      plan.keyed.push_back(reads);
      if (!reads)
        plan.levels = level + 1;
    }
    plan.keyed.resize(plan.levels);
    known = hoistPlans.try_emplace(value, std::move(plan)).first;
  }
  const HoistPlan &plan = known->second;
  MemoSlot slot{owner, {}};
  for (unsigned level = 0; level < plan.levels; ++level) {
    // Frames follow the regions' nesting; where they do not, no keeping.
    if (!slot.frame->parent ||
        slot.frame->region->getParentOp()->getParentRegion() !=
            slot.frame->parent->region)
      return {owner, {}};
    if (plan.keyed[level])
      for (BlockArgument index : slot.frame->region->front().getArguments())
        slot.key.push_back(slot.frame->integers.lookup(index));
    slot.frame = slot.frame->parent;
  }
  return slot;
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
  MemoSlot slot = memoSlot(value, owner);
  if (slot.frame != owner) {
    auto &kept = slot.frame->hoisted[value];
    auto found = kept.find(slot.key);
    if (found != kept.end())
      return found->second;
  }

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
  if (slot.frame != owner)
    slot.frame->hoisted[value][slot.key] = *result;
  else
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
  // The index rule (IndexArithmetic.h): overflow and division by zero are
  // errors on the op; arith's divsi and remsi round toward zero, floordivsi
  // and ceildivsi as their names say.
  auto indexOp = [&](::energy::IndexOp kind) {
    return binary([&, kind](int64_t a, int64_t b) -> FailureOr<int64_t> {
      int64_t result = 0;
      ::energy::IndexFault fault = ::energy::applyIndexOp(kind, a, b, result);
      if (fault != ::energy::IndexFault::None)
        return op->emitOpError()
               << "computes " << a << " and " << b << ", which "
               << ::energy::describeIndexFault(fault);
      return result;
    });
  };
  auto truncating = [&](bool remainder) {
    return binary([&, remainder](int64_t a, int64_t b) -> FailureOr<int64_t> {
      if (b == 0)
        return op->emitOpError("divides by zero");
      // The one quotient that overflows: the least value over −1.
      if (b == -1 && !remainder && a == std::numeric_limits<int64_t>::min())
        return op->emitOpError()
               << "computes " << a << " / -1, which overflows";
      if (b == -1)
        return remainder ? 0 : -a;
      return remainder ? a % b : a / b;
    });
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
      .Case([&](arith::AddIOp) { return indexOp(::energy::IndexOp::Add); })
      .Case([&](arith::SubIOp) { return indexOp(::energy::IndexOp::Sub); })
      .Case([&](arith::MulIOp) { return indexOp(::energy::IndexOp::Mul); })
      .Case([&](arith::FloorDivSIOp) {
        return indexOp(::energy::IndexOp::FloorDiv);
      })
      .Case([&](arith::CeilDivSIOp) {
        return indexOp(::energy::IndexOp::CeilDiv);
      })
      .Case([&](arith::DivSIOp) { return truncating(/*remainder=*/false); })
      .Case([&](arith::RemSIOp) { return truncating(/*remainder=*/true); })
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
