//===- ProgramOps.cpp - The ops that shape a kernel's program -------------===//
//
// Lowers statements (stores, accumulations into gradient buffers, calls of
// gradient programs), loops over domains, reads of tensors, lets and
// constants, the repeat loop of an adaptive solver, a value computed once
// and kept, and the index and predicate ops.
//
//===----------------------------------------------------------------------===//

#include "KernelLowering.h"
#include "energy/Codegen/ParallelLoops.h"
#include "energy/Runtime/ArtifactABI.h"
#include "energy/Transforms/ProgramReads.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::codegen;

namespace {
class ProgramLowering : public KernelLowering {
public:
  explicit ProgramLowering(KernelLowering &kernel) : KernelLowering(kernel) {}

  LogicalResult emitStore(StoreOp store);
  LogicalResult emitAccumulate(AccumulateOp accumulate);
  /// Calls the gradient program of `grad`'s tensors, one buffer per result.
  LogicalResult emitGrad(GradOp grad);
  LogicalResult emitForeach(ForeachOp loop);
  FailureOr<Lowered> emitRead(ReadOp read);
  FailureOr<Value> letBuffer(LetOp let);
  LogicalResult emitRepeat(RepeatOp repeat);
  LogicalResult emitOnce(OnceOp once);
  /// An index or predicate op's lowered value.
  Value emitIntegerOp(Operation *op);

private:
  /// Forgets the stored values of the tensors `op` may write
  /// (forEachTensorWrittenIn).
  void forgetScalarsWrittenIn(Operation *op);
  /// The value in the buffer of the scalar tensor `name`.
  Value loadScalar(StringRef name);
};
} // namespace

LogicalResult ProgramLowering::emitStore(StoreOp store) {
  auto tensor = context.model.lookupSymbol<TensorOp>(store.getTensorAttr());
  Value value = store.getValue();
  if (!isInTensorBuffer(value)) {
    Value storage =
        loadBufferPointer(context.bufferIndex.lookup(store.getTensor()));
    if (isFused(value))
      forLanes(elementCount(tensor.getArrayType()), [&](Value at, int lanes) {
        storeLanes(laneValue(value, at, lanes), storage, at, lanes);
      });
    else
      copyInto(get(value), tensor.getArrayType(), storage,
               /*accumulate=*/false);
  }
  state.storedScalars.erase(store.getTensor());
  if (tensor.getArrayType().isScalar() && !isFused(value) &&
      !isInTensorBuffer(value))
    if (Value scalar = get(value).scalar)
      state.storedScalars[store.getTensor()] = scalar;
  forgetStateDerivedWork();
  return success();
}

/// Calls `written` with each tensor `op` or an op inside it stores into or
/// adds a gradient into.
static void forEachTensorWrittenIn(Operation *op,
                                   function_ref<void(StringRef)> written) {
  op->walk([&](Operation *inner) {
    if (auto store = dyn_cast<StoreOp>(inner))
      written(store.getTensor());
    if (auto grad = dyn_cast<GradOp>(inner))
      for (FlatSymbolRefAttr target : grad.getIntoTensors())
        if (target)
          written(target.getValue());
  });
}

void ProgramLowering::forgetScalarsWrittenIn(Operation *op) {
  forEachTensorWrittenIn(
      op, [&](StringRef name) { state.storedScalars.erase(name); });
}

Value ProgramLowering::loadScalar(StringRef name) {
  return load(loadBufferPointer(context.bufferIndex.lookup(name)), index(0));
}

LogicalResult ProgramLowering::emitAccumulate(AccumulateOp accumulate) {
  Value target = state.gradientTargets.lookup(accumulate.getTensor());
  auto tensor =
      context.model.lookupSymbol<TensorOp>(accumulate.getTensorAttr());
  FailureOr<SmallVector<Value>> indices =
      indicesOf(accumulate, accumulate.getMap(), accumulate.getIndices());
  if (failed(indices))
    return failure();
  auto valueType = cast<ArrayType>(accumulate.getValue().getType());
  Value offset = sliceOffset(*indices, shape(tensor.getArrayType()));
  Value destination = offsetPointer(target, offset);
  Value value = accumulate.getValue();
  if (!isFused(value)) {
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

LogicalResult ProgramLowering::emitForeach(ForeachOp loop) {
  // A store in a position's body is not the value of the next position's.
  forgetScalarsWrittenIn(loop);
  FailureOr<SmallVector<Value>> done = forDomain(
      loop.getSizes(), loop.getPredicate(), {},
      [&](ValueRange indices, ValueRange) -> FailureOr<SmallVector<Value>> {
        if (failed(emitBlock(loop.getBody().front(), indices)))
          return failure();
        return SmallVector<Value>();
      },
      FirstAxis::levels(insideLoop() ? 0 : loop.getParallel().value_or(0)));
  forgetScalarsWrittenIn(loop);
  return success(succeeded(done));
}

Value ProgramLowering::emitIntegerOp(Operation *op) {
  return llvm::TypeSwitch<Operation *, Value>(op)
      .Case([&](StepOp) {
        return arith::IndexCastOp::create(b, loc, b.getIndexType(),
                                          frame.stepArg)
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
      });
}

LogicalResult ProgramLowering::emitGrad(GradOp grad) {
  func::FuncOp function;
  if (GradientOp gradient = grad.getGradient())
    function = context.gradientFunctions.lookup(gradient);
  if (!function)
    return grad.emitOpError()
           << "gradient of " << grad.getTensorAttr()
           << " is not derived; run energy-derive-gradients first";
  // The gradient function adds into its targets: a result's array starts
  // at zero; a gradient added `into` a tensor gets the tensor's buffer.
  forgetScalarsWrittenIn(grad);
  SmallVector<Value> arguments(kernelArguments());
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
    state.arrays[result] = Lowered{Value(), data};
  }
  Value code = func::CallOp::create(b, loc, function, arguments).getResult(0);
  // A failing gradient (an adaptive loop inside) fails the kernel. Loops on
  // several threads may report at once.
  LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::max, frame.status, code,
                            LLVM::AtomicOrdering::monotonic);
  if (writesTensors)
    forgetStateDerivedWork();
  for (Value result : grad.getResults())
    if (cast<ArrayType>(result.getType()).isScalar())
      state.arrays[result] =
          Lowered{load(state.arrays[result].data, index(0)), Value()};
  return success();
}

FailureOr<Lowered> ProgramLowering::emitRead(ReadOp read) {
  auto type = cast<ArrayType>(read.getType());
  Operation *source = context.model.lookupSymbol(read.getSourceAttr());
  FailureOr<SmallVector<Value>> indices =
      indicesOf(read, read.getMap(), read.getIndices());
  if (failed(indices))
    return failure();
  if (auto constant = dyn_cast<ConstOp>(source)) {
    Value pointer = LLVM::GEPOp::create(
        b, loc, pointerType(), b.getF64Type(), frame.constsArg,
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
  if (Value stored = state.storedScalars.lookup(tensor.getSymName());
      stored && type.isScalar() && tensor.getArrayType().isScalar())
    return Lowered{stored, Value()};
  Value storage =
      loadBufferPointer(context.bufferIndex.lookup(tensor.getSymName()));
  Lowered value = slice(storage, tensor.getArrayType(), type, *indices);
  // A scalar of a tensor no kernel writes: a GPU kernel that uses it may
  // load it itself, without the host waiting for the GPU.
  if (type.isScalar() && !context.writtenTensors.contains(tensor.getSymName()))
    if (auto load = value.scalar.getDefiningOp<LLVM::LoadOp>())
      load->setAttr(kUnchangedLoadAttr, b.getUnitAttr());
  if (!state.isProgram || type.isScalar() || !readOutlivesItsValue(read))
    return value;
  // In a program, a value read before a store keeps the value it had.
  Value copy = allocate(type);
  copyInto(value, type, copy, /*accumulate=*/false);
  return Lowered{Value(), copy};
}

FailureOr<Value> ProgramLowering::letBuffer(LetOp let) {
  if (Value buffer = state.letBuffers.lookup(let))
    return buffer;
  Value buffer = allocate(let.getArrayType());
  if (failed(aheadOfStatement([&] {
        return emitComprehension(let.getDomain(),
                                 cast<ArrayType>(let.getElementType()),
                                 let.getBody().front(), buffer);
      })))
    return failure();
  state.letBuffers[let] = buffer;
  return buffer;
}

LogicalResult ProgramLowering::emitRepeat(RepeatOp repeat) {
  // Rounds run while the body yields false and fewer than the maximum ran;
  // running out of rounds sets the kernel's status. The scalar tensors the
  // body stores into at its top level alone (an adaptive step's time and
  // step size) go from round to round as values too, so that the host does
  // not read back what it stored.
  Block &body = repeat.getBody().front();
  llvm::StringSet<> writtenOtherwise;
  SmallVector<StringRef> carried;
  for (Operation &op : body)
    if (!isa<StoreOp>(op))
      forEachTensorWrittenIn(
          &op, [&](StringRef name) { writtenOtherwise.insert(name); });
  for (auto store : body.getOps<StoreOp>()) {
    auto tensor = context.model.lookupSymbol<TensorOp>(store.getTensorAttr());
    if (tensor.getArrayType().isScalar() &&
        !writtenOtherwise.contains(store.getTensor()) &&
        !llvm::is_contained(carried, store.getTensor()))
      carried.push_back(store.getTensor());
  }
  SmallVector<Value> initial = {index(0),
                                arith::ConstantIntOp::create(b, loc, 0, 1)};
  for (StringRef name : carried) {
    Value known = state.storedScalars.lookup(name);
    initial.push_back(known ? known : loadScalar(name));
  }
  forgetScalarsWrittenIn(repeat);
  Value limit = index(repeat.getMaxIterations());
  SmallVector<Type> types(ValueRange(initial).getTypes());
  SmallVector<Location> locations(initial.size(), loc);
  auto loop = scf::WhileOp::create(b, loc, types, initial);
  Block *before = b.createBlock(&loop.getBefore(), {}, types, locations);
  Block *after = b.createBlock(&loop.getAfter(), {}, types, locations);
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
    for (auto [position, name] : llvm::enumerate(carried))
      state.storedScalars[name] = after->getArgument(2 + position);
    FailureOr<SmallVector<Value>> finished = emitBlock(body, {});
    if (failed(finished))
      return failure();
    Value next = arith::AddIOp::create(b, loc, after->getArgument(0), index(1));
    SmallVector<Value> yielded = {next, finished->front()};
    for (StringRef name : carried) {
      Value stored = state.storedScalars.lookup(name);
      yielded.push_back(stored ? stored : loadScalar(name));
    }
    scf::YieldOp::create(b, loc, yielded);
  }
  b.setInsertionPointAfter(loop);
  forgetScalarsWrittenIn(repeat);
  for (auto [position, name] : llvm::enumerate(carried))
    state.storedScalars[name] = loop.getResult(2 + position);
  forgetStateDerivedWork();
  Value converged = loop.getResult(1);
  Value previous = LLVM::LoadOp::create(b, loc, b.getI32Type(), frame.status);
  Value code =
      select(converged, previous,
             arith::ConstantIntOp::create(b, loc, b.getI32Type(),
                                          ENERGY_KERNEL_NO_CONVERGENCE));
  LLVM::StoreOp::create(b, loc, code, frame.status);
  return success();
}

LogicalResult ProgramLowering::emitOnce(OnceOp once) {
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
    Value step =
        arith::IndexCastOp::create(b, loc, b.getIndexType(), frame.stepArg);
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
  Value flagValue = load(flag, slot);
  Value kept = arith::AndIOp::create(
      b, loc, hasRow,
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, flagValue,
                            real(1.0)));
  Value toKeep = arith::AndIOp::create(
      b, loc, hasRow,
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, flagValue,
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
    // What the body computes exists only where it ran. What yields it is
    // computed in the row where the row is to keep it.
    forgetScalarsWrittenIn(once);
    DenseMap<Operation *, Value> enclosingLets = state.letBuffers;
    DenseMap<Operation *, Value> enclosingTiles = state.keptTiles;
    Value inRow;
    Operation *producer =
        computeInto(once.getBody().front(), once.getBodyValue(), [&] {
          return inRow = select(toKeep, row, allocate(type));
        });
    FailureOr<SmallVector<Value>> body = emitBlock(once.getBody().front(), {});
    computedInto(producer);
    if (failed(body))
      return failure();
    state.letBuffers = std::move(enclosingLets);
    state.keptTiles = std::move(enclosingTiles);
    Lowered computed = get(once.getBodyValue());
    if (!computed.data)
      return once.emitOpError("expects its body to compute an array");
    auto keep = scf::IfOp::create(b, loc, TypeRange{}, toKeep,
                                  /*withElseRegion=*/false);
    b.setInsertionPointToStart(keep.thenBlock());
    if (computed.data != inRow)
      copyInto(computed, type, row, /*accumulate=*/false);
    store(real(1.0), flag, slot);
    b.setInsertionPointAfter(keep);
    scf::YieldOp::create(b, loc, computed.data);
  }
  forgetScalarsWrittenIn(once);
  state.arrays[once.getResult()] = {Value(), branch.getResult(0)};
  return success();
}

void codegen::populateProgramLowerings(KernelLoweringPatterns &patterns) {
  patterns.addStatement(&ProgramLowering::emitStore);
  patterns.addStatement(&ProgramLowering::emitAccumulate);
  patterns.addStatement(&ProgramLowering::emitGrad);
  patterns.addStatement(&ProgramLowering::emitForeach);
  patterns.addStatement(&ProgramLowering::emitRepeat);
  patterns.addStatement(&ProgramLowering::emitOnce);
  patterns.addArrayOps<ProgramLowering, ReadOp>(&ProgramLowering::emitRead);
  // Index arithmetic is cloned; the energy ops on indices and predicates
  // map to arith.
  patterns.addGeneric(
      kOpBenefit,
      [](Operation *op, KernelLowering &) {
        return isa<arith::ArithDialect>(op->getDialect());
      },
      [](Operation *op, KernelLowering &kernel) {
        Operation *copy = kernel.b.clone(*op, kernel.integerMapping());
        for (auto [from, to] : llvm::zip(op->getResults(), copy->getResults()))
          kernel.integerMapping().map(from, to);
        return success();
      });
  auto integerOp = [](Operation *op, KernelLowering &kernel) {
    kernel.integerMapping().map(op->getResult(0),
                                ProgramLowering(kernel).emitIntegerOp(op));
    return success();
  };
  patterns.add<StepOp>(integerOp);
  patterns.add<SizeOp>(integerOp);
  patterns.add<CmpOp>(integerOp);
}
