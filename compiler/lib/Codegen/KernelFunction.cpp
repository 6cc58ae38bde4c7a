//===- KernelFunction.cpp - Emitting one kernel function ------------------===//
//
// The structure of a kernel: its arguments and status, scratch memory, dims,
// loops over index domains, slices of arrays, and the ops that shape a
// program (statements, accumulations, loops, reads, lets, the repeat loop).
// Each kernel is one function in the artifact's calling convention. Scalars
// live in registers; arrays live in buffers (tensor storage, or scratch that
// the kernel allocates at entry and frees on return).
//
//===----------------------------------------------------------------------===//

#include "KernelFunction.h"
#include "energy/Codegen/ParallelLoops.h"
#include "energy/KernelSupport/KernelSupport.h"
#include "energy/Runtime/ArtifactABI.h"
#include "energy/Transforms/ProgramReads.h"

#include "mlir/Dialect/Affine/Utils.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::codegen;

void codegen::dropImplicitYield(scf::ForOp loop) {
  Block *body = loop.getBody();
  if (!body->empty() && isa<scf::YieldOp>(body->back()))
    body->back().erase();
}

KernelFunction::KernelFunction(ModelContext &context, func::FuncOp function,
                               bool isProgram)
    : b(function.getContext()), loc(function.getLoc()), context(context),
      function(function), isProgram(isProgram) {
  Block *entry = function.addEntryBlock();
  b.setInsertionPointToStart(entry);
  buffersArg = entry->getArgument(0);
  dimsArg = entry->getArgument(1);
  constsArg = entry->getArgument(2);
  stepArg = entry->getArgument(3);
  resultArg = entry->getArgument(4);
  Value one =
      LLVM::ConstantOp::create(b, loc, b.getI64Type(), b.getI64IntegerAttr(1));
  status = LLVM::AllocaOp::create(b, loc, pointerType(), b.getI32Type(), one);
  status.getDefiningOp()->setAttr(kKernelStatusAttr, b.getUnitAttr());
  LLVM::StoreOp::create(
      b, loc,
      arith::ConstantIntOp::create(b, loc, b.getI32Type(), ENERGY_KERNEL_OK),
      status);
  entryAnchor = arith::ConstantIndexOp::create(b, loc, 0);
  b.setInsertionPointToEnd(entry);
}

void KernelFunction::finish(Value code) {
  auto freeFunction =
      context.target.lookupSymbol<func::FuncOp>(ENERGY_SUPPORT_SCRATCH_FREE);
  for (Value pointer : allocations)
    func::CallOp::create(b, loc, freeFunction, ValueRange{pointer});
  if (!code)
    code = LLVM::LoadOp::create(b, loc, b.getI32Type(), status);
  func::ReturnOp::create(b, loc, code);
  for (Operation *anchor : anchors)
    anchor->erase();
  entryAnchor->erase();
}

Value KernelFunction::loadBufferPointer(unsigned slot) {
  Value slotPointer =
      LLVM::GEPOp::create(b, loc, pointerType(), pointerType(), buffersArg,
                          ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(slot)});
  return LLVM::LoadOp::create(b, loc, pointerType(), slotPointer);
}

Value KernelFunction::dim(StringRef name) {
  auto it = dimValues.find(name);
  if (it != dimValues.end())
    return it->second;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(entryAnchor);
  unsigned position = context.dimIndex.lookup(name);
  Value pointer = LLVM::GEPOp::create(
      b, loc, pointerType(), b.getI64Type(), dimsArg,
      ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(position)});
  Value value = LLVM::LoadOp::create(b, loc, b.getI64Type(), pointer);
  Value result =
      arith::IndexCastOp::create(b, loc, b.getIndexType(), value).getResult();
  dimValues[name] = result;
  return result;
}

Value KernelFunction::dimExpr(DimExprAttr expr) {
  SmallVector<Value> symbols;
  for (StringAttr name : expr.getNames())
    symbols.push_back(dim(name.getValue()));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(entryAnchor);
  return affine::expandAffineExpr(b, loc, expr.getExpr(), {}, symbols);
}

SmallVector<Value> KernelFunction::shape(ArrayType type) {
  SmallVector<Value> extents;
  for (StringAttr name : type.getShape())
    extents.push_back(dim(name.getValue()));
  return extents;
}

Value KernelFunction::elementCount(ArrayType type) {
  SmallVector<Value> extents = shape(type);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(entryAnchor);
  Value count = index(1);
  for (Value extent : extents)
    count = arith::MulIOp::create(b, loc, count, extent);
  return count;
}

Value KernelFunction::allocateElements(Value count, int64_t elementBytes) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(entryAnchor);
  if (elementBytes == 0)
    elementBytes = context.elementType.getWidth() / 8;
  Value bytes = arith::MulIOp::create(
      b, loc, toI64(count),
      arith::ConstantIntOp::create(b, loc, b.getI64Type(), elementBytes));
  // At least one element, so that an empty array still has an address.
  bytes = arith::MaxSIOp::create(
      b, loc, bytes, arith::ConstantIntOp::create(b, loc, b.getI64Type(), 8));
  auto allocate =
      context.target.lookupSymbol<func::FuncOp>(ENERGY_SUPPORT_SCRATCH_ALLOC);
  Value pointer =
      func::CallOp::create(b, loc, allocate, ValueRange{bytes}).getResult(0);
  allocations.push_back(pointer);
  return pointer;
}

Value KernelFunction::allocate(ArrayType type) {
  return allocateElements(elementCount(type));
}

void KernelFunction::forRange(Value upper, function_ref<void(Value)> body) {
  auto loop = scf::ForOp::create(b, loc, index(0), upper, index(1));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  body(loop.getInductionVar());
}

SmallVector<Value> KernelFunction::forRange(
    Value upper, ValueRange carried,
    function_ref<SmallVector<Value>(Value, ValueRange)> body) {
  auto loop = scf::ForOp::create(b, loc, index(0), upper, index(1), carried);
  dropImplicitYield(loop);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(loop.getBody());
    SmallVector<Value> next =
        body(loop.getInductionVar(), loop.getRegionIterArgs());
    scf::YieldOp::create(b, loc, next);
  }
  return SmallVector<Value>(loop.getResults());
}

SmallVector<Value> KernelFunction::extentsOf(ArrayAttr sizes) {
  SmallVector<Value> extents;
  for (Attribute size : sizes) {
    Value extent = dimExpr(cast<DimExprAttr>(size));
    // A negative extent is an empty range.
    extents.push_back(arith::MaxSIOp::create(b, loc, extent, index(0)));
  }
  return extents;
}

scf::ForOp KernelFunction::forSteps(Value lower, Value upper, Value step,
                                    function_ref<void(Value)> body) {
  auto loop = scf::ForOp::create(b, loc, lower, upper, step);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  body(loop.getInductionVar());
  return loop;
}

FailureOr<SmallVector<Value>> KernelFunction::forDomain(
    ArrayAttr sizes, Region &predicate, ValueRange carried,
    function_ref<FailureOr<SmallVector<Value>>(ValueRange, ValueRange)> body,
    FirstAxis first) {
  SmallVector<Value> extents = extentsOf(sizes);
  if (first.end)
    extents.front() = first.end;
  SmallVector<Value> indices;
  ++loopDepth;
  FailureOr<SmallVector<Value>> result =
      forDomainLevel(extents, indices, predicate, carried, body, first);
  --loopDepth;
  return result;
}

FailureOr<SmallVector<Value>> KernelFunction::forDomainLevel(
    ArrayRef<Value> extents, SmallVector<Value> &indices, Region &predicate,
    ValueRange carried,
    function_ref<FailureOr<SmallVector<Value>>(ValueRange, ValueRange)> body,
    FirstAxis first) {
  if (extents.empty()) {
    if (predicate.empty())
      return body(indices, carried);
    FailureOr<SmallVector<Value>> admitted =
        emitBlock(predicate.front(), indices);
    if (failed(admitted))
      return failure();
    auto branch = scf::IfOp::create(b, loc, carried.getTypes(),
                                    admitted->front(), /*withElse=*/true);
    for (Block *block : {branch.thenBlock(), branch.elseBlock()})
      if (!block->empty())
        block->back().erase();
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(branch.thenBlock());
      FailureOr<SmallVector<Value>> next = body(indices, carried);
      if (failed(next))
        return failure();
      scf::YieldOp::create(b, loc, *next);
      b.setInsertionPointToStart(branch.elseBlock());
      scf::YieldOp::create(b, loc, carried);
    }
    return SmallVector<Value>(branch.getResults());
  }
  auto loop = scf::ForOp::create(b, loc, first.start ? first.start : index(0),
                                 extents.front(), index(1), carried);
  if (first.parallel() && carried.empty())
    markParallel(loop);
  dropImplicitYield(loop);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(loop.getBody());
  indices.push_back(loop.getInductionVar());
  FailureOr<SmallVector<Value>> next =
      forDomainLevel(extents.drop_front(), indices, predicate,
                     loop.getRegionIterArgs(), body, first.next());
  indices.pop_back();
  if (failed(next))
    return failure();
  scf::YieldOp::create(b, loc, *next);
  return SmallVector<Value>(loop.getResults());
}

Lowered KernelFunction::build(ArrayType type,
                              function_ref<Value(Value)> element) {
  if (type.isScalar())
    return {element(index(0)), Value()};
  Value data = allocate(type);
  forRange(elementCount(type),
           [&](Value position) { store(element(position), data, position); });
  return {Value(), data};
}

Lowered KernelFunction::buildLanes(ArrayType type,
                                   function_ref<Value(Value, int)> element) {
  if (type.isScalar())
    return {element(index(0), 1), Value()};
  Value data = allocate(type);
  forLanes(elementCount(type), [&](Value offset, int lanes) {
    storeLanes(element(offset, lanes), data, offset, lanes);
  });
  return {Value(), data};
}

void KernelFunction::copyInto(Lowered value, ArrayType type, Value destination,
                              bool accumulate) {
  if (type.isScalar()) {
    Value element = elementAt(value, index(0));
    if (accumulate)
      element = add(load(destination, index(0)), element);
    return store(element, destination, index(0));
  }
  forLanes(elementCount(type), [&](Value offset, int lanes) {
    Value element = lanesAt(value, offset, lanes);
    if (accumulate)
      element = add(loadLanes(destination, offset, lanes), element);
    storeLanes(element, destination, offset, lanes);
  });
}

Value KernelFunction::storeResult(Value scalar) {
  Value wide = scalar;
  if (context.elementType.getWidth() != 64)
    wide = arith::ExtFOp::create(b, loc, b.getF64Type(), scalar);
  LLVM::StoreOp::create(b, loc, wide, resultArg);
  return wide;
}

Value KernelFunction::sliceOffset(ArrayRef<Value> indices,
                                  ArrayRef<Value> extents) {
  Value offset = index(0);
  for (auto [position, value] : llvm::enumerate(indices))
    offset = arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, offset, extents[position]),
        value);
  Value stride = index(1);
  for (Value extent : extents.drop_front(indices.size()))
    stride = arith::MulIOp::create(b, loc, stride, extent);
  return arith::MulIOp::create(b, loc, offset, stride);
}

Lowered KernelFunction::slice(Value base, ArrayType whole, ArrayType part,
                              ArrayRef<Value> indices) {
  Value offset = sliceOffset(indices, shape(whole));
  if (part.isScalar())
    return {load(base, offset), Value()};
  return {Value(), offsetPointer(base, offset)};
}

FailureOr<SmallVector<Value>>
KernelFunction::indicesOf(Operation *op, AffineMap map, ValueRange operands) {
  SmallVector<Value> values;
  for (Value operand : operands)
    values.push_back(integers.lookup(operand));
  std::optional<SmallVector<Value, 8>> expanded =
      affine::expandAffineMap(b, loc, map, values);
  if (!expanded)
    return op->emitOpError("has indices the code generator cannot expand");
  return SmallVector<Value>(expanded->begin(), expanded->end());
}

FailureOr<SmallVector<Value>> KernelFunction::emitBlock(Block &block,
                                                        ValueRange arguments) {
  for (auto [argument, value] : llvm::zip(block.getArguments(), arguments))
    integers.map(argument, value);
  for (Operation &op : block) {
    if (auto yield = dyn_cast<YieldOp>(op)) {
      SmallVector<Value> values;
      for (Value value : yield.getValues()) {
        if (isa<ArrayType>(value.getType())) {
          Lowered lowered = get(value);
          values.push_back(lowered.data ? lowered.data : lowered.scalar);
        } else {
          values.push_back(integers.lookup(value));
        }
      }
      return values;
    }
    loc = op.getLoc();
    if (loopDepth == 0) {
      statementAnchor = arith::ConstantIndexOp::create(b, loc, 0);
      anchors.push_back(statementAnchor);
    }
    if (failed(emitOp(&op)))
      return failure();
  }
  return SmallVector<Value>();
}

LogicalResult KernelFunction::emitOp(Operation *op) {
  if (auto store = dyn_cast<StoreOp>(op)) {
    auto tensor = context.model.lookupSymbol<TensorOp>(store.getTensorAttr());
    Value storage =
        loadBufferPointer(context.bufferIndex.lookup(store.getTensor()));
    copyInto(get(store.getValue()), tensor.getArrayType(), storage,
             /*accumulate=*/false);
    forgetStateDerivedWork();
    return success();
  }
  if (addedInPlace(op))
    return success();
  if (auto accumulate = dyn_cast<AccumulateOp>(op)) {
    Value target = gradientTargets.lookup(accumulate.getTensor());
    if (Operation *product = accumulate.getValue().getDefiningOp();
        product && addedInPlace(product) == accumulate) {
      emitProducts(product, target, /*add=*/true);
      return success();
    }
    auto tensor =
        context.model.lookupSymbol<TensorOp>(accumulate.getTensorAttr());
    FailureOr<SmallVector<Value>> indices =
        indicesOf(op, accumulate.getMap(), accumulate.getIndices());
    if (failed(indices))
      return failure();
    auto valueType = cast<ArrayType>(accumulate.getValue().getType());
    Value offset = sliceOffset(*indices, shape(tensor.getArrayType()));
    Value destination = offsetPointer(target, offset);
    Value value = accumulate.getValue();
    if (!fusedIntoUser.contains(value)) {
      copyInto(get(value), valueType, destination, /*accumulate=*/true);
      return success();
    }
    forLanes(elementCount(valueType), [&](Value at, int lanes) {
      Value sum =
          add(loadLanes(destination, at, lanes), laneValue(value, at, lanes));
      storeLanes(sum, destination, at, lanes);
    });
    return success();
  }
  if (auto grad = dyn_cast<GradOp>(op))
    return emitGrad(grad);
  if (auto loop = dyn_cast<ForeachOp>(op)) {
    return forDomain(
        loop.getSizes(), loop.getPredicate(), {},
        [&](ValueRange indices, ValueRange) -> FailureOr<SmallVector<Value>> {
          if (failed(emitBlock(loop.getBody().front(), indices)))
            return failure();
          return SmallVector<Value>();
        },
        FirstAxis::levels(loopDepth == 0 ? loop.getParallel().value_or(0) : 0));
  }
  if (auto repeat = dyn_cast<RepeatOp>(op))
    return emitRepeat(repeat);
  if (auto once = dyn_cast<OnceOp>(op))
    return emitOnce(once);
  if (auto contract = dyn_cast<SoftmaxContractOp>(op))
    return emitSoftmaxContract(contract);
  if (op->getNumResults() == 1 && isa<ArrayType>(op->getResult(0).getType())) {
    if (isFusedIntoUser(op)) {
      fusedIntoUser.insert(op->getResult(0));
      return success();
    }
    FailureOr<Lowered> value = emitArrayOp(op);
    if (failed(value))
      return failure();
    arrays[op->getResult(0)] = *value;
    return success();
  }
  return emitIntegerOp(op);
}

LogicalResult KernelFunction::emitGrad(GradOp grad) {
  func::FuncOp function;
  if (GradientOp gradient = grad.getGradient())
    function = context.gradientFunctions.lookup(gradient);
  if (!function)
    return grad.emitOpError()
           << "gradient of " << grad.getTensorAttr()
           << " is not derived; run energy-derive-gradients first";
  // The gradient function adds into its targets: a result's array starts
  // at zero; a gradient added `into` a tensor gets the tensor's buffer.
  SmallVector<Value> arguments = {buffersArg, dimsArg, constsArg, stepArg,
                                  resultArg};
  bool writesTensors = false;
  for (auto [position, target] : llvm::enumerate(grad.getIntoTensors())) {
    if (target) {
      arguments.push_back(bufferPointer(target.getValue()));
      writesTensors = true;
      continue;
    }
    Value result = grad.getResultOf(position);
    auto type = cast<ArrayType>(result.getType());
    Value data = allocate(type);
    copyInto(Lowered{zero(), Value()}, type, data, /*accumulate=*/false);
    arguments.push_back(data);
    arrays[result] = Lowered{Value(), data};
  }
  Value code = func::CallOp::create(b, loc, function, arguments).getResult(0);
  // A failing gradient (an adaptive loop inside) fails the kernel. Loops on
  // several threads may report at once.
  LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::max, status, code,
                            LLVM::AtomicOrdering::monotonic);
  if (writesTensors)
    forgetStateDerivedWork();
  for (Value result : grad.getResults())
    if (cast<ArrayType>(result.getType()).isScalar())
      arrays[result] = Lowered{load(arrays[result].data, index(0)), Value()};
  return success();
}

LogicalResult KernelFunction::emitIntegerOp(Operation *op) {
  if (isa<arith::ArithDialect>(op->getDialect())) {
    Operation *copy = b.clone(*op, integers);
    for (auto [from, to] : llvm::zip(op->getResults(), copy->getResults()))
      integers.map(from, to);
    return success();
  }
  Value result =
      llvm::TypeSwitch<Operation *, Value>(op)
          .Case([&](StepOp) {
            return arith::IndexCastOp::create(b, loc, b.getIndexType(), stepArg)
                .getResult();
          })
          .Case([&](SizeOp size) { return dimExpr(size.getSize()); })
          .Case([&](CmpOp compare) {
            arith::CmpFPredicate predicate;
            switch (compare.getPredicate()) {
            case CmpPredicate::lt:
              predicate = arith::CmpFPredicate::OLT;
              break;
            case CmpPredicate::le:
              predicate = arith::CmpFPredicate::OLE;
              break;
            case CmpPredicate::gt:
              predicate = arith::CmpFPredicate::OGT;
              break;
            case CmpPredicate::ge:
              predicate = arith::CmpFPredicate::OGE;
              break;
            case CmpPredicate::eq:
              predicate = arith::CmpFPredicate::OEQ;
              break;
            case CmpPredicate::ne:
              predicate = arith::CmpFPredicate::UNE;
              break;
            }
            return cmp(predicate, get(compare.getLhs()).scalar,
                       get(compare.getRhs()).scalar);
          })
          .Default([](Operation *) { return Value(); });
  if (!result)
    return op->emitOpError("is not supported by the CPU code generator");
  integers.map(op->getResult(0), result);
  return success();
}

func::CallOp KernelFunction::callSupport(StringRef name, ValueRange arguments) {
  auto function = context.target.lookupSymbol<func::FuncOp>(name);
  return func::CallOp::create(b, loc, function, arguments);
}

void KernelFunction::reportStatus(Value code) {
  LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::max, status, code,
                            LLVM::AtomicOrdering::monotonic);
}

Value KernelFunction::allocateElements(int64_t count, int64_t elementBytes) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(entryAnchor);
  return allocateElements(index(count), elementBytes);
}

Value KernelFunction::allocateSlots(unsigned count) {
  return allocateElements(count, /*elementBytes=*/8);
}

FailureOr<Lowered> KernelFunction::emitRead(ReadOp read) {
  auto type = cast<ArrayType>(read.getType());
  Operation *source = context.model.lookupSymbol(read.getSourceAttr());
  FailureOr<SmallVector<Value>> indices =
      indicesOf(read, read.getMap(), read.getIndices());
  if (failed(indices))
    return failure();
  if (auto constant = dyn_cast<ConstOp>(source)) {
    Value pointer = LLVM::GEPOp::create(
        b, loc, pointerType(), b.getF64Type(), constsArg,
        ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(
            context.constIndex.lookup(constant.getSymName()))});
    Value value = LLVM::LoadOp::create(b, loc, b.getF64Type(), pointer);
    if (context.elementType.getWidth() != 64)
      value = arith::TruncFOp::create(b, loc, context.elementType, value);
    return Lowered{value, Value()};
  }
  if (auto let = dyn_cast<LetOp>(source)) {
    FailureOr<Value> buffer = letBuffer(let);
    if (failed(buffer))
      return failure();
    return slice(*buffer, let.getArrayType(), type, *indices);
  }
  auto tensor = cast<TensorOp>(source);
  Value storage =
      loadBufferPointer(context.bufferIndex.lookup(tensor.getSymName()));
  Lowered value = slice(storage, tensor.getArrayType(), type, *indices);
  if (!isProgram || type.isScalar() || !readOutlivesItsValue(read))
    return value;
  // In a program, a value read before a store keeps the value it had.
  Value copy = allocate(type);
  copyInto(value, type, copy, /*accumulate=*/false);
  return Lowered{Value(), copy};
}

FailureOr<Value> KernelFunction::letBuffer(LetOp let) {
  if (Value buffer = letBuffers.lookup(let))
    return buffer;
  Value buffer = allocate(let.getArrayType());
  if (failed(aheadOfStatement([&] {
        return emitComprehension(let.getDomain(),
                                 cast<ArrayType>(let.getElementType()),
                                 let.getBody().front(), buffer);
      })))
    return failure();
  letBuffers[let] = buffer;
  return buffer;
}

LogicalResult KernelFunction::emitComprehension(ArrayAttr domain,
                                                ArrayType elementType,
                                                Block &body,
                                                Value destination) {
  Value elementSize = elementCount(elementType);
  SmallVector<Value> extents;
  for (Attribute size : domain)
    extents.push_back(dimExpr(cast<DimExprAttr>(size)));
  Region none;
  return forDomain(
      domain, none, {},
      [&](ValueRange indices, ValueRange) -> FailureOr<SmallVector<Value>> {
        FailureOr<SmallVector<Value>> element = emitBlock(body, indices);
        if (failed(element))
          return failure();
        Value offset = sliceOffset(SmallVector<Value>(indices), extents);
        offset = arith::MulIOp::create(b, loc, offset, elementSize);
        Value value = element->front();
        Lowered lowered = elementType.isScalar() ? Lowered{value, Value()}
                                                 : Lowered{Value(), value};
        copyInto(lowered, elementType, offsetPointer(destination, offset),
                 /*accumulate=*/false);
        return SmallVector<Value>();
      },
      FirstAxis::levels(loopDepth == 0 ? domain.size() : 0));
}

LogicalResult KernelFunction::emitRepeat(RepeatOp repeat) {
  // Rounds run while the body yields false and fewer than the maximum ran;
  // running out of rounds sets the kernel's status.
  Value limit = index(repeat.getMaxIterations());
  Type indexType = b.getIndexType();
  auto loop = scf::WhileOp::create(
      b, loc, TypeRange{indexType, b.getI1Type()},
      ValueRange{index(0), arith::ConstantIntOp::create(b, loc, 0, 1)});
  Block *before = b.createBlock(&loop.getBefore(), {},
                                {indexType, b.getI1Type()}, {loc, loc});
  Block *after = b.createBlock(&loop.getAfter(), {}, {indexType, b.getI1Type()},
                               {loc, loc});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(before);
    Value round = before->getArgument(0);
    Value done = before->getArgument(1);
    Value more = arith::AndIOp::create(
        b, loc,
        arith::XOrIOp::create(b, loc, done,
                              arith::ConstantIntOp::create(b, loc, 1, 1)),
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, round, limit));
    scf::ConditionOp::create(b, loc, more, before->getArguments());
    b.setInsertionPointToEnd(after);
    forgetStateDerivedWork();
    FailureOr<SmallVector<Value>> finished =
        emitBlock(repeat.getBody().front(), {});
    if (failed(finished))
      return failure();
    Value next = arith::AddIOp::create(b, loc, after->getArgument(0), index(1));
    scf::YieldOp::create(b, loc, ValueRange{next, finished->front()});
  }
  b.setInsertionPointAfter(loop);
  forgetStateDerivedWork();
  Value converged = loop.getResult(1);
  Value previous = LLVM::LoadOp::create(b, loc, b.getI32Type(), status);
  Value code =
      select(converged, previous,
             arith::ConstantIntOp::create(b, loc, b.getI32Type(),
                                          ENERGY_KERNEL_NO_CONVERGENCE));
  LLVM::StoreOp::create(b, loc, code, status);
  return success();
}

LogicalResult KernelFunction::emitOnce(OnceOp once) {
  // The value is kept in a row of the cache (the step's, per step; else the
  // only one) whose flag is 1; otherwise the body computes it and, where
  // there is a row for it whose flag is 0, keeps it. The runtime sets the
  // flags when a call begins.
  auto type = cast<ArrayType>(once.getType());
  Value cache = bufferPointer(once.getCache());
  Value flag = bufferPointer(once.getValid());
  Value slot = index(0);
  Value hasRow = arith::ConstantIntOp::create(b, loc, 1, 1);
  if (once.getPerStep()) {
    auto valid = context.model.lookupSymbol<TensorOp>(once.getValidAttr());
    Value rows = shape(valid.getArrayType()).front();
    Value step = arith::IndexCastOp::create(b, loc, b.getIndexType(), stepArg);
    hasRow = arith::AndIOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, step,
                              index(0)),
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, step, rows));
    slot = arith::SelectOp::create(b, loc, hasRow, step, index(0));
  }
  Value row = offsetPointer(
      cache, arith::MulIOp::create(b, loc, slot, elementCount(type)));
  // The flag: 1 kept, 0 to keep, -1 not to keep (the runtime's choice).
  Value state = load(flag, slot);
  Value kept = arith::AndIOp::create(
      b, loc, hasRow,
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, state,
                            real(1.0)));
  Value toKeep = arith::AndIOp::create(
      b, loc, hasRow,
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, state,
                            real(0.0)));
  auto branch = scf::IfOp::create(b, loc, TypeRange{pointerType()}, kept,
                                  /*withElseRegion=*/true);
  for (Block *block : {branch.thenBlock(), branch.elseBlock()})
    if (!block->empty())
      block->back().erase();
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(branch.thenBlock());
    scf::YieldOp::create(b, loc, row);
    b.setInsertionPointToStart(branch.elseBlock());
    // What the body computes exists only where it ran.
    DenseMap<Operation *, Value> enclosingLets = letBuffers;
    DenseMap<Operation *, Value> enclosingTiles = keptTiles;
    if (failed(emitBlock(once.getBody().front(), {})))
      return failure();
    letBuffers = std::move(enclosingLets);
    keptTiles = std::move(enclosingTiles);
    Lowered computed = get(once.getBodyValue());
    if (!computed.data)
      return once.emitOpError("expects its body to compute an array");
    auto keep = scf::IfOp::create(b, loc, TypeRange{}, toKeep,
                                  /*withElseRegion=*/false);
    b.setInsertionPointToStart(keep.thenBlock());
    copyInto(computed, type, row, /*accumulate=*/false);
    store(real(1.0), flag, slot);
    b.setInsertionPointAfter(keep);
    scf::YieldOp::create(b, loc, computed.data);
  }
  arrays[once.getResult()] = {Value(), branch.getResult(0)};
  return success();
}
