//===- KernelEmitter.cpp - energy model to loop-level kernels -------------===//
//
// Each kernel is one function in the artifact's calling convention. Scalars
// live in registers; arrays live in buffers (tensor storage, or scratch that
// the kernel allocates at entry and frees on return), so a reduction over
// parents inside a loop over children keeps only per-element state: nothing
// of size children × parents is ever stored. A log-sum-exp reduction is one
// streaming pass with a running maximum and sum.
//
//===----------------------------------------------------------------------===//

#include "energy/Codegen/KernelEmitter.h"
#include "energy/Codegen/ParallelLoops.h"
#include "energy/KernelSupport/KernelSupport.h"
#include "energy/Runtime/ArtifactABI.h"

#include "mlir/Dialect/Affine/Utils.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <limits>

using namespace mlir;
using namespace mlir::energy;

namespace {

/// The lowered form of an energy array value: a scalar in a register, or a
/// pointer to contiguous row-major elements.
struct Lowered {
  Value scalar;
  Value data;
};

/// How the outermost loop of a domain runs.
struct FirstAxis {
  /// Its positions write disjoint memory, so it may be shared out on the
  /// thread pool (ParallelLoops.h).
  bool parallel = false;
  /// Only positions [start, end) (a chunk of a reduction); null: all.
  Value start, end;

  static FirstAxis whole(bool parallel) { return {parallel, Value(), Value()}; }
  static FirstAxis chunk(Value start, Value end) { return {false, start, end}; }
};

/// Loops without carried values come with a yield; bodies here add their
/// own.
void dropImplicitYield(scf::ForOp loop) {
  Block *body = loop.getBody();
  if (!body->empty() && isa<scf::YieldOp>(body->back()))
    body->back().erase();
}

/// What every kernel of one model shares: the layout and the module.
struct ModelContext {
  ModelOp model;
  ModuleOp target;
  FloatType elementType;
  ArtifactLayout layout;
  llvm::StringMap<unsigned> dimIndex, constIndex, bufferIndex;
  /// The private function computing each gradient program into a buffer.
  DenseMap<Operation *, func::FuncOp> gradientFunctions;
};

/// The state of emitting one function.
class KernelFunction {
public:
  KernelFunction(ModelContext &context, func::FuncOp function,
                 bool isProgram = false);

  /// The kernel's arguments (ArtifactABI.h) and, for gradient functions, the
  /// buffer accumulations go into.
  Value buffersArg, dimsArg, constsArg, stepArg, resultArg, gradientTarget;

  /// Emits the ops of `block` (a region body whose block arguments get
  /// `arguments`), returning the lowered values it yields.
  FailureOr<SmallVector<Value>> emitBlock(Block &block, ValueRange arguments);
  /// The lowered array for an energy value emitted earlier.
  Lowered get(Value value) { return arrays.lookup(value); }
  /// Stores `value` (of type `type`) into the buffer at `destination`,
  /// adding to what is there when `accumulate`.
  void copyInto(Lowered value, ArrayType type, Value destination,
                bool accumulate);
  Value storeResult(Value scalar);
  /// The pointer to the buffer named `name` (ArtifactLayout order).
  Value bufferPointer(StringRef name) {
    return loadBufferPointer(context.bufferIndex.lookup(name));
  }
  /// Writes a comprehension (a let or an output: a body evaluated at every
  /// position of `domain`) into `destination`, row-major.
  LogicalResult emitComprehension(ArrayAttr domain, ArrayType elementType,
                                  Block &body, Value destination);
  Value zero() { return real(0.0); }
  /// Frees scratch memory and returns `code` (the kernel's status when
  /// null).
  void finish(Value code = Value());

  OpBuilder b;
  Location loc;

private:
  ModelContext &context;
  func::FuncOp function;
  /// Update programs and stopping rules see stores: reads of a tensor that
  /// the program stores into are copied where they stand.
  bool isProgram;
  /// Allocations and dims go before this op in the entry block.
  Operation *entryAnchor;
  /// The status slot (i32) the kernel returns.
  Value status;
  SmallVector<Value> allocations;
  llvm::StringMap<Value> dimValues;
  DenseMap<Value, Lowered> arrays;
  IRMapping integers;
  /// How many domain loops enclose the code being emitted.
  int loopDepth = 0;
  /// Whether the positions of `loop` along its first axis add into disjoint
  /// slots: every accumulation in it has that index as one of its axes, and
  /// nothing else in it writes.
  static bool writesDisjointSlots(ForeachOp loop);
  /// Values computed outside every domain loop.
  llvm::DenseSet<Value> topLevelValues;
  /// Work that loops hoist goes before this op: the start of the current
  /// statement (an op outside every loop).
  Operation *statementAnchor = nullptr;
  SmallVector<Operation *> anchors;
  /// Ops whose value at every position of their loop's domain is computed
  /// before the loops: the buffer, of the domain's extents times the
  /// value's elements.
  struct Precomputed {
    Value buffer;
    SmallVector<Value> extents;
    Value elementSize;
  };
  DenseMap<Operation *, Precomputed> precomputed;
  /// Computes ahead, for every position of the domain `sizes`, the matmuls
  /// of `body` that depend only on the loop's own indices and on values
  /// computed outside every loop (the projections k_p = Wk x_p of an
  /// attention energy), when the loop is nested in another.
  void precomputeIndexOnlyWork(ArrayAttr sizes, Block &body);

  /// Lets computed so far in the current statement scope.
  DenseMap<Operation *, Value> letBuffers;
  /// Lets and precomputed work read the state: after a store, or in a loop
  /// of the program, they are computed again.
  void forgetStateDerivedWork() {
    letBuffers.clear();
    precomputed.clear();
  }
  /// Emits `work`, which depends on no loop index, ahead of the current
  /// statement when inside a loop, so that it runs once; work that `work`
  /// hoists in turn goes before it.
  template <typename Work> auto aheadOfStatement(Work work) {
    OpBuilder::InsertionGuard guard(b);
    Operation *enclosingAnchor = statementAnchor;
    int enclosingDepth = loopDepth;
    if (loopDepth > 0 && statementAnchor)
      b.setInsertionPoint(statementAnchor);
    statementAnchor = arith::ConstantIndexOp::create(b, loc, 0);
    anchors.push_back(statementAnchor);
    loopDepth = 0;
    auto result = work();
    statementAnchor = enclosingAnchor;
    loopDepth = enclosingDepth;
    return result;
  }

  Type pointerType() { return LLVM::LLVMPointerType::get(b.getContext()); }
  Value index(int64_t value) {
    return arith::ConstantIndexOp::create(b, loc, value);
  }
  Value real(double value) {
    return arith::ConstantOp::create(
        b, loc, b.getFloatAttr(context.elementType, value));
  }
  arith::FastMathFlagsAttr fastMath() {
    return arith::FastMathFlagsAttr::get(b.getContext(),
                                         arith::FastMathFlags::contract |
                                             arith::FastMathFlags::reassoc);
  }
  Value add(Value x, Value y) {
    return arith::AddFOp::create(b, loc, x, y, fastMath());
  }
  Value sub(Value x, Value y) {
    return arith::SubFOp::create(b, loc, x, y, fastMath());
  }
  Value mul(Value x, Value y) {
    return arith::MulFOp::create(b, loc, x, y, fastMath());
  }
  Value div(Value x, Value y) {
    return arith::DivFOp::create(b, loc, x, y, fastMath());
  }
  Value maximum(Value x, Value y) {
    return arith::MaxNumFOp::create(b, loc, x, y);
  }
  Value exp(Value x) { return math::ExpOp::create(b, loc, x); }
  Value log(Value x) { return math::LogOp::create(b, loc, x); }
  Value cmp(arith::CmpFPredicate predicate, Value x, Value y) {
    return arith::CmpFOp::create(b, loc, predicate, x, y);
  }
  Value select(Value condition, Value x, Value y) {
    return arith::SelectOp::create(b, loc, condition, x, y);
  }
  Value toI64(Value indexValue) {
    return arith::IndexCastOp::create(b, loc, b.getI64Type(), indexValue);
  }

  /// Pointer arithmetic and element access.
  Value offsetPointer(Value base, Value elementOffset) {
    return LLVM::GEPOp::create(b, loc, pointerType(), context.elementType, base,
                               ValueRange{toI64(elementOffset)});
  }
  Value load(Value base, Value elementOffset) {
    return LLVM::LoadOp::create(b, loc, context.elementType,
                                offsetPointer(base, elementOffset));
  }
  void store(Value value, Value base, Value elementOffset) {
    LLVM::StoreOp::create(b, loc, value, offsetPointer(base, elementOffset));
  }
  /// The i-th pointer of the buffers argument.
  Value loadBufferPointer(unsigned slot);

  /// Values that only depend on dims, computed once at entry.
  Value dim(StringRef name);
  Value dimExpr(DimExprAttr expr);
  Value elementCount(ArrayType type);
  SmallVector<Value> shape(ArrayType type);
  /// Scratch for one value of `type`, allocated at entry, freed on return.
  Value allocate(ArrayType type);
  Value allocateElements(Value count);

  /// Loops.
  void forRange(Value upper, function_ref<void(Value)> body);
  SmallVector<Value>
  forRange(Value upper, ValueRange carried,
           function_ref<SmallVector<Value>(Value, ValueRange)> body);
  /// Runs `body` at every position of `sizes` that `predicate` (when not
  /// empty) admits, carrying `carried`.
  FailureOr<SmallVector<Value>> forDomain(
      ArrayAttr sizes, Region &predicate, ValueRange carried,
      function_ref<FailureOr<SmallVector<Value>>(ValueRange, ValueRange)> body,
      Block *bodyBlock = nullptr, FirstAxis first = {});
  FailureOr<SmallVector<Value>> forDomainLevel(
      ArrayRef<Value> extents, SmallVector<Value> &indices, Region &predicate,
      ValueRange carried,
      function_ref<FailureOr<SmallVector<Value>>(ValueRange, ValueRange)> body,
      FirstAxis first);

  /// An array of `type` whose element at a row-major position is `element`.
  Lowered build(ArrayType type, function_ref<Value(Value)> element);
  /// The element at a row-major position (a scalar broadcasts).
  Value elementAt(Lowered value, Value position) {
    return value.data ? load(value.data, position) : value.scalar;
  }
  /// The row-major offset of the slice at `indices` of an array whose axes
  /// have `extents`, in elements.
  Value sliceOffset(ArrayRef<Value> indices, ArrayRef<Value> extents);
  Lowered slice(Value base, ArrayType whole, ArrayType part,
                ArrayRef<Value> indices);
  FailureOr<SmallVector<Value>> indicesOf(Operation *op, AffineMap map,
                                          ValueRange operands);

  LogicalResult emitOp(Operation *op);
  LogicalResult emitIntegerOp(Operation *op);
  FailureOr<Lowered> emitArrayOp(Operation *op);
  FailureOr<Lowered> emitRead(ReadOp read);
  FailureOr<Value> letBuffer(LetOp let);
  FailureOr<Lowered> emitReduce(ReduceOp reduce);
  /// Σ_p exp((x_p − L) / T) · f_p, linear in the exponential, where
  /// L = T log Σ_p exp(x_p / T) is computed in the same block (the child
  /// side of an lse term): the pieces of that pattern.
  struct SoftmaxSum {
    ReduceOp lse;
    Operation *shift;       // x_p − L
    Operation *exponential; // exp((x_p − L) / T)
  };
  std::optional<SoftmaxSum> matchSoftmaxSum(ReduceOp sum);
  /// Sums matched in the block being emitted, and their lse reductions,
  /// which are computed with them.
  DenseMap<Operation *, SoftmaxSum> softmaxSums;
  llvm::DenseSet<Operation *> lseFusedIntoSum;
  void findSoftmaxSums(Block &block);
  /// One pass over the domain (online softmax): a running max m, running
  /// l = Σ exp((x − m) / T) and acc = Σ exp((x − m) / T) f, both rescaled
  /// when m grows; then L = m + T log l and the sum is acc / l (T = 1
  /// without a temperature).
  FailureOr<Lowered> emitSoftmaxSum(ReduceOp sum, const SoftmaxSum &parts);
  /// Run just before an op of a block is emitted.
  DenseMap<Operation *, std::function<void()>> beforeEmitting;
  /// A reduction in the order of its domain, on one thread.
  FailureOr<Lowered> emitReduceInOrder(ReduceOp reduce, FirstAxis first = {});
  FailureOr<Lowered> emitRows(Operation *op, Lowered operand, ArrayType type);
  FailureOr<Lowered> emitSupportCall(Operation *op, Lowered operand,
                                     ArrayType operandType);
  LogicalResult emitRepeat(RepeatOp repeat);
  Value unary(Operation *op, Value x);
};

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
  if (entry->getNumArguments() > 5)
    gradientTarget = entry->getArgument(5);
  Value one =
      LLVM::ConstantOp::create(b, loc, b.getI64Type(), b.getI64IntegerAttr(1));
  status = LLVM::AllocaOp::create(b, loc, pointerType(), b.getI32Type(), one);
  LLVM::StoreOp::create(
      b, loc,
      arith::ConstantIntOp::create(b, loc, b.getI32Type(), ENERGY_KERNEL_OK),
      status);
  entryAnchor = arith::ConstantIndexOp::create(b, loc, 0);
  b.setInsertionPointToEnd(entry);
}

void KernelFunction::finish(Value code) {
  auto freeFunction = context.target.lookupSymbol<func::FuncOp>("free");
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

Value KernelFunction::allocateElements(Value count) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(entryAnchor);
  Value bytes = arith::MulIOp::create(
      b, loc, toI64(count),
      arith::ConstantIntOp::create(b, loc, b.getI64Type(),
                                   context.elementType.getWidth() / 8));
  // At least one element, so that an empty array still has an address.
  bytes = arith::MaxSIOp::create(
      b, loc, bytes, arith::ConstantIntOp::create(b, loc, b.getI64Type(), 8));
  auto malloc = context.target.lookupSymbol<func::FuncOp>("malloc");
  Value pointer =
      func::CallOp::create(b, loc, malloc, ValueRange{bytes}).getResult(0);
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

FailureOr<SmallVector<Value>> KernelFunction::forDomain(
    ArrayAttr sizes, Region &predicate, ValueRange carried,
    function_ref<FailureOr<SmallVector<Value>>(ValueRange, ValueRange)> body,
    Block *bodyBlock, FirstAxis first) {
  if (bodyBlock)
    precomputeIndexOnlyWork(sizes, *bodyBlock);
  SmallVector<Value> extents;
  for (Attribute size : sizes) {
    Value extent = dimExpr(cast<DimExprAttr>(size));
    // A negative extent is an empty range.
    extents.push_back(arith::MaxSIOp::create(b, loc, extent, index(0)));
  }
  if (first.end)
    extents.front() = first.end;
  SmallVector<Value> indices;
  ++loopDepth;
  FailureOr<SmallVector<Value>> result =
      forDomainLevel(extents, indices, predicate, carried, body, first);
  --loopDepth;
  return result;
}

bool KernelFunction::writesDisjointSlots(ForeachOp loop) {
  Value first = loop.getBody().front().getArgument(0);
  WalkResult walk = loop.getBody().walk([&](Operation *op) {
    if (isa<StoreOp, GradOp, RepeatOp>(op))
      return WalkResult::interrupt();
    auto accumulate = dyn_cast<AccumulateOp>(op);
    if (!accumulate)
      return WalkResult::advance();
    bool slotAxis =
        llvm::any_of(accumulate.getMap().getResults(), [&](AffineExpr result) {
          auto dim = dyn_cast<AffineDimExpr>(result);
          return dim && accumulate.getIndices()[dim.getPosition()] == first;
        });
    return slotAxis ? WalkResult::advance() : WalkResult::interrupt();
  });
  return !walk.wasInterrupted();
}

void KernelFunction::precomputeIndexOnlyWork(ArrayAttr sizes, Block &body) {
  if (loopDepth == 0 || !statementAnchor)
    return;
  for (Operation &op : body) {
    auto matmul = dyn_cast<MatmulOp>(op);
    if (!matmul || precomputed.count(matmul))
      continue;
    SmallVector<ReadOp> reads;
    bool independent = true;
    for (Value operand : matmul->getOperands()) {
      if (topLevelValues.contains(operand))
        continue;
      auto read = operand.getDefiningOp<ReadOp>();
      bool tensorOrLet =
          read &&
          !isa<ConstOp>(context.model.lookupSymbol(read.getSourceAttr()));
      // A read at exactly the loop's indices stays in range at every
      // position of the domain; a whole tensor is read anywhere.
      if (tensorOrLet &&
          ((read->getBlock() == &body && read.getMap().isIdentity() &&
            llvm::equal(read.getIndices(), body.getArguments())) ||
           read.getIndices().empty())) {
        reads.push_back(read);
        continue;
      }
      independent = false;
    }
    if (!independent || llvm::none_of(reads, [](ReadOp read) {
          return !read.getIndices().empty();
        }))
      continue;
    auto type = cast<ArrayType>(matmul.getType());
    Precomputed entry;
    entry.elementSize = elementCount(type);
    Value count = entry.elementSize;
    for (Attribute size : sizes) {
      Value extent = dimExpr(cast<DimExprAttr>(size));
      OpBuilder::InsertionGuard atEntry(b);
      b.setInsertionPoint(entryAnchor);
      extent = arith::MaxSIOp::create(b, loc, extent, index(0));
      count = arith::MulIOp::create(b, loc, count, extent);
      entry.extents.push_back(extent);
    }
    entry.buffer = allocateElements(count);
    Region none;
    FailureOr<SmallVector<Value>> done = aheadOfStatement([&] {
      return forDomain(
          sizes, none, {},
          [&](ValueRange indices, ValueRange) -> FailureOr<SmallVector<Value>> {
            for (auto [argument, value] :
                 llvm::zip(body.getArguments(), indices))
              integers.map(argument, value);
            for (ReadOp read : reads)
              if (failed(emitOp(read)))
                return failure();
            if (failed(emitOp(matmul)))
              return failure();
            Value offset = arith::MulIOp::create(
                b, loc, sliceOffset(SmallVector<Value>(indices), entry.extents),
                entry.elementSize);
            copyInto(get(matmul.getResult()), type,
                     offsetPointer(entry.buffer, offset), /*accumulate=*/false);
            return SmallVector<Value>();
          },
          /*bodyBlock=*/nullptr, FirstAxis::whole(/*parallel=*/true));
    });
    if (succeeded(done))
      precomputed[matmul] = std::move(entry);
  }
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
  if (first.parallel && carried.empty())
    markParallel(loop);
  dropImplicitYield(loop);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(loop.getBody());
  indices.push_back(loop.getInductionVar());
  FailureOr<SmallVector<Value>> next =
      forDomainLevel(extents.drop_front(), indices, predicate,
                     loop.getRegionIterArgs(), body, FirstAxis());
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

void KernelFunction::copyInto(Lowered value, ArrayType type, Value destination,
                              bool accumulate) {
  auto write = [&](Value position) {
    Value element = elementAt(value, position);
    if (accumulate)
      element = add(load(destination, position), element);
    store(element, destination, position);
  };
  if (type.isScalar())
    return write(index(0));
  forRange(elementCount(type), write);
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
  findSoftmaxSums(block);
  for (Operation &op : block) {
    if (lseFusedIntoSum.contains(&op))
      continue;
    if (auto hook = beforeEmitting.find(&op); hook != beforeEmitting.end())
      hook->second();
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
    if (auto it = precomputed.find(&op); it != precomputed.end()) {
      SmallVector<Value> indices;
      for (Value argument : block.getArguments())
        indices.push_back(integers.lookup(argument));
      Value offset = arith::MulIOp::create(
          b, loc, sliceOffset(indices, it->second.extents),
          it->second.elementSize);
      arrays[op.getResult(0)] =
          Lowered{Value(), offsetPointer(it->second.buffer, offset)};
      continue;
    }
    if (loopDepth == 0) {
      statementAnchor = arith::ConstantIndexOp::create(b, loc, 0);
      anchors.push_back(statementAnchor);
    }
    if (failed(emitOp(&op)))
      return failure();
    if (loopDepth == 0)
      topLevelValues.insert(op.getResults().begin(), op.getResults().end());
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
  if (auto accumulate = dyn_cast<AccumulateOp>(op)) {
    auto tensor =
        context.model.lookupSymbol<TensorOp>(accumulate.getTensorAttr());
    FailureOr<SmallVector<Value>> indices =
        indicesOf(op, accumulate.getMap(), accumulate.getIndices());
    if (failed(indices))
      return failure();
    auto valueType = cast<ArrayType>(accumulate.getValue().getType());
    Value offset = sliceOffset(*indices, shape(tensor.getArrayType()));
    copyInto(get(accumulate.getValue()), valueType,
             offsetPointer(gradientTarget, offset), /*accumulate=*/true);
    return success();
  }
  if (auto loop = dyn_cast<ForeachOp>(op)) {
    return forDomain(
        loop.getSizes(), loop.getPredicate(), {},
        [&](ValueRange indices, ValueRange) -> FailureOr<SmallVector<Value>> {
          if (failed(emitBlock(loop.getBody().front(), indices)))
            return failure();
          return SmallVector<Value>();
        },
        &loop.getBody().front(),
        FirstAxis::whole(loopDepth == 0 && writesDisjointSlots(loop)));
  }
  if (auto repeat = dyn_cast<RepeatOp>(op))
    return emitRepeat(repeat);
  if (op->getNumResults() == 1 && isa<ArrayType>(op->getResult(0).getType())) {
    FailureOr<Lowered> value = emitArrayOp(op);
    if (failed(value))
      return failure();
    arrays[op->getResult(0)] = *value;
    return success();
  }
  return emitIntegerOp(op);
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

Value KernelFunction::unary(Operation *op, Value x) {
  Value zero = real(0.0), one = real(1.0);
  auto sigmoid = [&](Value v) {
    return div(one, add(one, exp(arith::NegFOp::create(b, loc, v))));
  };
  return llvm::TypeSwitch<Operation *, Value>(op)
      .Case([&](NegOp) { return arith::NegFOp::create(b, loc, x); })
      .Case([&](ExpOp) { return exp(x); })
      .Case([&](LogOp) { return log(x); })
      .Case([&](TanhOp) { return math::TanhOp::create(b, loc, x); })
      .Case([&](SigmoidOp) { return sigmoid(x); })
      .Case([&](SiluOp) { return mul(x, sigmoid(x)); })
      .Case([&](SoftplusOp) {
        Value magnitude = math::AbsFOp::create(b, loc, x);
        Value tail = math::Log1pOp::create(
            b, loc, exp(arith::NegFOp::create(b, loc, magnitude)));
        return add(tail, maximum(x, zero));
      })
      .Case([&](GeluOp) {
        Value scaled = mul(x, real(-M_SQRT1_2));
        return mul(mul(x, real(0.5)), math::ErfcOp::create(b, loc, scaled));
      })
      .Case([&](ErfOp) { return math::ErfOp::create(b, loc, x); })
      .Case([&](ReluOp) {
        return select(cmp(arith::CmpFPredicate::OGT, x, zero), x, zero);
      })
      .Case([&](HeavisideOp) {
        return select(cmp(arith::CmpFPredicate::OGT, x, zero), one, zero);
      })
      .Case([&](SignOp) {
        Value positive =
            select(cmp(arith::CmpFPredicate::OGT, x, zero), one, zero);
        Value negative =
            select(cmp(arith::CmpFPredicate::OLT, x, zero), one, zero);
        return sub(positive, negative);
      })
      .Case([&](SqrtOp) { return math::SqrtOp::create(b, loc, x); })
      .Case([&](AbsOp) { return math::AbsFOp::create(b, loc, x); })
      .Case([&](SiluIntOp) {
        Value wide = x;
        if (context.elementType.getWidth() != 64)
          wide = arith::ExtFOp::create(b, loc, b.getF64Type(), x);
        auto function =
            context.target.lookupSymbol<func::FuncOp>(ENERGY_SUPPORT_SILU_INT);
        Value result = func::CallOp::create(b, loc, function, ValueRange{wide})
                           .getResult(0);
        if (context.elementType.getWidth() != 64)
          result = arith::TruncFOp::create(b, loc, context.elementType, result);
        return result;
      })
      .Case([&](PowOp pow) {
        int64_t exponent = pow.getExponent();
        Value result = one;
        for (int64_t i = 0; i < std::abs(exponent); ++i)
          result = mul(result, x);
        return exponent < 0 ? div(one, result) : result;
      })
      .Default([](Operation *) { return Value(); });
}

FailureOr<Lowered> KernelFunction::emitArrayOp(Operation *op) {
  auto type = cast<ArrayType>(op->getResult(0).getType());
  auto operandAt = [&](unsigned i) { return get(op->getOperand(i)); };
  auto operandType = [&](unsigned i) {
    return cast<ArrayType>(op->getOperand(i).getType());
  };
  auto binary = [&](function_ref<Value(Value, Value)> function) {
    Lowered lhs = operandAt(0), rhs = operandAt(1);
    return build(type, [&](Value position) {
      return function(elementAt(lhs, position), elementAt(rhs, position));
    });
  };
  using Result = FailureOr<Lowered>;
  if (isa<NegOp, ExpOp, LogOp, TanhOp, SigmoidOp, SiluOp, SoftplusOp, GeluOp,
          ErfOp, ReluOp, HeavisideOp, SignOp, SqrtOp, AbsOp, SiluIntOp, PowOp>(
          op)) {
    Lowered operand = operandAt(0);
    return build(type, [&](Value position) {
      return unary(op, elementAt(operand, position));
    });
  }
  return llvm::TypeSwitch<Operation *, Result>(op)
      .Case([&](ConstantOp constant) -> Result {
        return Lowered{real(constant.getValue().convertToDouble()), Value()};
      })
      .Case([&](ReadOp read) { return emitRead(read); })
      .Case([&](AddOp) -> Result {
        return binary([&](Value x, Value y) { return add(x, y); });
      })
      .Case([&](SubOp) -> Result {
        return binary([&](Value x, Value y) { return sub(x, y); });
      })
      .Case([&](MulOp) -> Result {
        return binary([&](Value x, Value y) { return mul(x, y); });
      })
      .Case([&](DivOp) -> Result {
        return binary([&](Value x, Value y) { return div(x, y); });
      })
      .Case([&](MaximumOp) -> Result {
        return binary([&](Value x, Value y) { return maximum(x, y); });
      })
      .Case([&](ToRealOp toReal) -> Result {
        Value value = toI64(integers.lookup(toReal.getIndex()));
        return Lowered{
            arith::SIToFPOp::create(b, loc, context.elementType, value),
            Value()};
      })
      .Case([&](EyeOp) -> Result {
        Value n = shape(type).back();
        return build(type, [&](Value position) {
          Value row = arith::DivUIOp::create(b, loc, position, n);
          Value column = arith::RemUIOp::create(b, loc, position, n);
          Value diagonal = arith::CmpIOp::create(
              b, loc, arith::CmpIPredicate::eq, row, column);
          return select(diagonal, real(1.0), real(0.0));
        });
      })
      .Case([&](MatmulOp) -> Result {
        Lowered lhs = operandAt(0), rhs = operandAt(1);
        SmallVector<Value> lhsShape = shape(operandType(0));
        Value rows = lhsShape[0], inner = lhsShape[1];
        Value data = allocate(type);
        if (operandType(1).getRank() == 1) {
          forRange(rows, [&](Value i) {
            Value rowStart = arith::MulIOp::create(b, loc, i, inner);
            Value sum =
                forRange(inner, {real(0.0)}, [&](Value k, ValueRange acc) {
                  Value a = load(lhs.data,
                                 arith::AddIOp::create(b, loc, rowStart, k));
                  return SmallVector<Value>{
                      add(acc[0], mul(a, load(rhs.data, k)))};
                })[0];
            store(sum, data, i);
          });
          return Lowered{Value(), data};
        }
        Value columns = shape(operandType(1))[1];
        // i, k, j order: the innermost loop runs along rows of rhs and of
        // the result, contiguously.
        forRange(elementCount(type),
                 [&](Value position) { store(real(0.0), data, position); });
        forRange(rows, [&](Value i) {
          Value resultRow = arith::MulIOp::create(b, loc, i, columns);
          forRange(inner, [&](Value k) {
            Value a =
                load(lhs.data,
                     arith::AddIOp::create(
                         b, loc, arith::MulIOp::create(b, loc, i, inner), k));
            Value rhsRow = arith::MulIOp::create(b, loc, k, columns);
            forRange(columns, [&](Value j) {
              Value out = arith::AddIOp::create(b, loc, resultRow, j);
              Value bkj =
                  load(rhs.data, arith::AddIOp::create(b, loc, rhsRow, j));
              store(add(load(data, out), mul(a, bkj)), data, out);
            });
          });
        });
        return Lowered{Value(), data};
      })
      .Case([&](TransposeOp) -> Result {
        Lowered operand = operandAt(0);
        SmallVector<Value> extents = shape(type);
        Value rows = extents[extents.size() - 2];
        Value columns = extents.back();
        Value block = arith::MulIOp::create(b, loc, rows, columns);
        return build(type, [&](Value position) {
          // The result's (i, j) in a block is the operand's (j, i).
          Value start = arith::MulIOp::create(
              b, loc, arith::DivUIOp::create(b, loc, position, block), block);
          Value within = arith::RemUIOp::create(b, loc, position, block);
          Value i = arith::DivUIOp::create(b, loc, within, columns);
          Value j = arith::RemUIOp::create(b, loc, within, columns);
          Value source = arith::AddIOp::create(
              b, loc, start,
              arith::AddIOp::create(b, loc,
                                    arith::MulIOp::create(b, loc, j, rows), i));
          return load(operand.data, source);
        });
      })
      .Case([&](DotOp) -> Result {
        Lowered lhs = operandAt(0), rhs = operandAt(1);
        Value sum =
            forRange(elementCount(operandType(0)), {real(0.0)},
                     [&](Value i, ValueRange acc) {
                       return SmallVector<Value>{add(
                           acc[0], mul(elementAt(lhs, i), elementAt(rhs, i)))};
                     })[0];
        return Lowered{sum, Value()};
      })
      .Case([&](QuadOp) -> Result {
        Lowered vector = operandAt(0), matrix = operandAt(1);
        Value n = shape(operandType(0))[0];
        Value sum = forRange(n, {real(0.0)}, [&](Value i, ValueRange outer) {
          Value row = arith::MulIOp::create(b, loc, i, n);
          Value inner = forRange(n, {real(0.0)}, [&](Value j, ValueRange acc) {
            Value m = load(matrix.data, arith::AddIOp::create(b, loc, row, j));
            return SmallVector<Value>{
                add(acc[0], mul(m, load(vector.data, j)))};
          })[0];
          return SmallVector<Value>{
              add(outer[0], mul(load(vector.data, i), inner))};
        })[0];
        return Lowered{sum, Value()};
      })
      .Case([&](OuterOp) -> Result {
        Lowered lhs = operandAt(0), rhs = operandAt(1);
        Value columns = elementCount(operandType(1));
        return build(type, [&](Value position) {
          Value i = arith::DivUIOp::create(b, loc, position, columns);
          Value j = arith::RemUIOp::create(b, loc, position, columns);
          return mul(elementAt(lhs, i), elementAt(rhs, j));
        });
      })
      .Case([&](ReduceElementsOp reduce) -> Result {
        Lowered operand = operandAt(0);
        Value count = elementCount(operandType(0));
        Value negInf = real(-std::numeric_limits<double>::infinity());
        ElementsKind kind = reduce.getKind();
        if (kind == ElementsKind::lse) {
          SmallVector<Value> state = forRange(
              count, {negInf, real(0.0)}, [&](Value i, ValueRange acc) {
                Value x = elementAt(operand, i);
                Value largest = maximum(acc[0], x);
                Value scale = exp(sub(acc[0], largest));
                scale = select(cmp(arith::CmpFPredicate::OEQ, acc[0], negInf),
                               real(0.0), scale);
                Value term = exp(sub(x, largest));
                term = select(cmp(arith::CmpFPredicate::OEQ, x, negInf),
                              real(0.0), term);
                return SmallVector<Value>{largest,
                                          add(mul(acc[1], scale), term)};
              });
          return Lowered{add(state[0], log(state[1])), Value()};
        }
        Value total =
            forRange(count, {real(0.0)}, [&](Value i, ValueRange acc) {
              Value x = elementAt(operand, i);
              switch (kind) {
              case ElementsKind::maxabs:
                return SmallVector<Value>{
                    maximum(acc[0], math::AbsFOp::create(b, loc, x))};
              case ElementsKind::sqnorm:
              case ElementsKind::norm:
                return SmallVector<Value>{add(acc[0], mul(x, x))};
              default:
                return SmallVector<Value>{add(acc[0], x)};
              }
            })[0];
        if (kind == ElementsKind::mean)
          total = div(total, arith::SIToFPOp::create(
                                 b, loc, context.elementType, toI64(count)));
        if (kind == ElementsKind::norm)
          total = math::SqrtOp::create(b, loc, total);
        return Lowered{total, Value()};
      })
      .Case([&](SumLastOp) -> Result {
        Lowered operand = operandAt(0);
        Value length = shape(operandType(0)).back();
        return build(type, [&](Value position) {
          Value start = arith::MulIOp::create(b, loc, position, length);
          return forRange(length, {real(0.0)}, [&](Value k, ValueRange acc) {
            return SmallVector<Value>{
                add(acc[0], load(operand.data,
                                 arith::AddIOp::create(b, loc, start, k)))};
          })[0];
        });
      })
      .Case([&](BroadcastOp) -> Result {
        Lowered operand = operandAt(0);
        Value repeats = index(1);
        SmallVector<Value> extents = shape(type);
        for (Value extent :
             ArrayRef<Value>(extents).drop_front(operandType(0).getRank()))
          repeats = arith::MulIOp::create(b, loc, repeats, extent);
        return build(type, [&](Value position) {
          return elementAt(operand,
                           arith::DivUIOp::create(b, loc, position, repeats));
        });
      })
      .Case([&](DiagOp) -> Result {
        Lowered operand = operandAt(0);
        Value n = shape(type).back();
        return build(type, [&](Value position) {
          Value row = arith::DivUIOp::create(b, loc, position, n);
          Value column = arith::RemUIOp::create(b, loc, position, n);
          Value diagonal = arith::CmpIOp::create(
              b, loc, arith::CmpIPredicate::eq, row, column);
          return select(diagonal, load(operand.data, row), real(0.0));
        });
      })
      .Case([&](DiagPartOp) -> Result {
        Lowered operand = operandAt(0);
        Value n = shape(type).back();
        return build(type, [&](Value i) {
          return load(operand.data,
                      arith::AddIOp::create(
                          b, loc, arith::MulIOp::create(b, loc, i, n), i));
        });
      })
      .Case<SoftmaxOp, LogSoftmaxOp, RmsNormOp, LayerNormOp>(
          [&](Operation *) { return emitRows(op, operandAt(0), type); })
      .Case<LogDetOp, InverseOp>([&](Operation *) {
        return emitSupportCall(op, operandAt(0), operandType(0));
      })
      .Case([&](ExtractOp extract) -> Result {
        FailureOr<SmallVector<Value>> indices =
            indicesOf(op, extract.getMap(), extract.getIndices());
        if (failed(indices))
          return failure();
        return slice(get(extract.getSource()).data,
                     cast<ArrayType>(extract.getSource().getType()), type,
                     *indices);
      })
      .Case([&](EmbedOp embed) -> Result {
        FailureOr<SmallVector<Value>> indices =
            indicesOf(op, embed.getMap(), embed.getIndices());
        if (failed(indices))
          return failure();
        Value data = allocate(type);
        forRange(elementCount(type),
                 [&](Value position) { store(real(0.0), data, position); });
        Value offset = sliceOffset(*indices, shape(type));
        copyInto(get(embed.getValue()),
                 cast<ArrayType>(embed.getValue().getType()),
                 offsetPointer(data, offset), /*accumulate=*/false);
        return Lowered{Value(), data};
      })
      .Case([&](ReduceOp reduce) { return emitReduce(reduce); })
      .Case([&](SelectOp choice) -> Result {
        Value condition = integers.lookup(choice.getCondition());
        Lowered whenTrue = get(choice.getTrueValue());
        Lowered whenFalse = get(choice.getFalseValue());
        if (type.isScalar())
          return Lowered{select(condition, whenTrue.scalar, whenFalse.scalar),
                         Value()};
        return Lowered{Value(),
                       select(condition, whenTrue.data, whenFalse.data)};
      })
      .Case([&](GradOp grad) -> Result {
        func::FuncOp function;
        for (GradientOp gradient : context.model.getOps<GradientOp>())
          if (gradient.getTensor() == grad.getTensor() &&
              gradient.getOfAttr() == grad.getOfAttr())
            function = context.gradientFunctions.lookup(gradient);
        if (!function)
          return op->emitOpError()
                 << "gradient of " << grad.getTensorAttr()
                 << " is not derived; run energy-derive-gradients first";
        Value data = allocate(type);
        Value code =
            func::CallOp::create(b, loc, function,
                                 ValueRange{buffersArg, dimsArg, constsArg,
                                            stepArg, resultArg, data})
                .getResult(0);
        // A failing gradient (an adaptive loop inside) fails the kernel.
        // Loops on several threads may report at once.
        LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::max, status, code,
                                  LLVM::AtomicOrdering::monotonic);
        if (type.isScalar())
          return Lowered{load(data, index(0)), Value()};
        return Lowered{Value(), data};
      })
      .Default([&](Operation *) -> Result {
        return op->emitOpError("is not supported by the CPU code generator");
      });
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
  if (!isProgram || type.isScalar())
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
      /*bodyBlock=*/nullptr, FirstAxis::whole(loopDepth == 0));
}

namespace {
/// Whether `a` (in the body of an lse) computes what `b` (in the body of a
/// sum over the same domain) does: the same ops on corresponding operands,
/// the bodies' arguments corresponding through `arguments`.
bool computeSame(Value a, Value b, const IRMapping &arguments) {
  if (a == b)
    return true;
  if (isa<BlockArgument>(a))
    return arguments.lookupOrNull(a) == b;
  Operation *x = a.getDefiningOp(), *y = b.getDefiningOp();
  if (!x || !y || x->getName() != y->getName() || x->getNumRegions() != 0 ||
      y->getNumRegions() != 0 || x->getResultTypes() != y->getResultTypes() ||
      cast<OpResult>(a).getResultNumber() !=
          cast<OpResult>(b).getResultNumber() ||
      x->getPropertiesAsAttribute() != y->getPropertiesAsAttribute() ||
      x->getDiscardableAttrDictionary() != y->getDiscardableAttrDictionary() ||
      x->getNumOperands() != y->getNumOperands())
    return false;
  for (auto [left, right] : llvm::zip(x->getOperands(), y->getOperands()))
    if (!computeSame(left, right, arguments))
      return false;
  return true;
}

/// Whether `value` is linear in `weight` within `body`: `weight` times
/// factors that do not depend on it.
bool linearIn(Value value, Value weight, const llvm::DenseSet<Value> &tainted) {
  if (value == weight)
    return true;
  Operation *op = value.getDefiningOp();
  if (!op)
    return false;
  auto clean = [&](Value v) { return !tainted.contains(v); };
  if (isa<MulOp, MatmulOp>(op)) {
    Value lhs = op->getOperand(0), rhs = op->getOperand(1);
    return (linearIn(lhs, weight, tainted) && clean(rhs)) ||
           (linearIn(rhs, weight, tainted) && clean(lhs));
  }
  if (auto div = dyn_cast<DivOp>(op))
    return linearIn(div.getLhs(), weight, tainted) && clean(div.getRhs());
  if (auto neg = dyn_cast<NegOp>(op))
    return linearIn(neg.getOperand(), weight, tainted);
  return false;
}
} // namespace

std::optional<KernelFunction::SoftmaxSum>
KernelFunction::matchSoftmaxSum(ReduceOp sum) {
  if (sum.getKind() != ReduceKind::sum)
    return std::nullopt;
  Block &body = sum.getBody().front();
  Block &block = *sum->getBlock();
  for (auto shift : body.getOps<SubOp>()) {
    auto lse = shift.getRhs().getDefiningOp<ReduceOp>();
    if (!lse || lse->getBlock() != &block || lse.getKind() != ReduceKind::lse ||
        lse.getSizes() != sum.getSizes() ||
        lse.hasPredicate() != sum.hasPredicate() || !shift->hasOneUse())
      continue;
    // With a temperature T the weight is exp((x − L) / T).
    Operation *argument = shift;
    if (Value temperature = lse.getTemperature()) {
      auto scaled = dyn_cast<DivOp>(*shift->getUsers().begin());
      if (!scaled || scaled.getLhs() != shift.getResult() ||
          scaled.getRhs() != temperature || !scaled->hasOneUse())
        continue;
      argument = scaled;
    }
    auto exponential = dyn_cast<ExpOp>(*argument->getUsers().begin());
    if (!exponential)
      continue;
    // L is used once in the sum, and otherwise only after it.
    bool usable = llvm::all_of(lse->getUsers(), [&](Operation *user) {
      if (sum->isAncestor(user))
        return user == shift.getOperation();
      Operation *statement = block.findAncestorOpInBlock(*user);
      return statement && sum->isBeforeInBlock(statement);
    });
    if (!usable)
      continue;
    IRMapping arguments;
    arguments.map(lse.getBody().front().getArguments(), body.getArguments());
    if (lse.hasPredicate()) {
      IRMapping predicateArguments;
      predicateArguments.map(lse.getPredicate().front().getArguments(),
                             sum.getPredicate().front().getArguments());
      auto lseAdmits =
          cast<YieldOp>(lse.getPredicate().front().getTerminator());
      auto sumAdmits =
          cast<YieldOp>(sum.getPredicate().front().getTerminator());
      if (!computeSame(lseAdmits.getValues()[0], sumAdmits.getValues()[0],
                       predicateArguments))
        continue;
    }
    if (!computeSame(lse.getBodyValue(), shift.getLhs(), arguments))
      continue;
    llvm::DenseSet<Value> tainted = {exponential.getResult()};
    for (Operation &op : body) {
      bool uses = false;
      op.walk([&](Operation *nested) {
        for (Value operand : nested->getOperands())
          uses |= tainted.contains(operand);
      });
      if (uses)
        tainted.insert(op.getResults().begin(), op.getResults().end());
    }
    if (!linearIn(sum.getBodyValue(), exponential.getResult(), tainted))
      continue;
    return SoftmaxSum{lse, shift, exponential};
  }
  return std::nullopt;
}

void KernelFunction::findSoftmaxSums(Block &block) {
  for (auto sum : block.getOps<ReduceOp>()) {
    std::optional<SoftmaxSum> parts = matchSoftmaxSum(sum);
    if (!parts || lseFusedIntoSum.contains(parts->lse))
      continue;
    softmaxSums[sum] = *parts;
    lseFusedIntoSum.insert(parts->lse);
  }
}

FailureOr<Lowered> KernelFunction::emitSoftmaxSum(ReduceOp sum,
                                                  const SoftmaxSum &parts) {
  auto type = cast<ArrayType>(sum.getType());
  bool scalar = type.isScalar();
  Value negInf = real(-std::numeric_limits<double>::infinity());
  Value zero = real(0.0), one = real(1.0);
  Value count = scalar ? index(1) : elementCount(type);
  Value accumulator = scalar ? Value() : allocate(type);
  if (!scalar)
    forRange(count, [&](Value i) { store(zero, accumulator, i); });
  // admitted positions, m, l, and acc when scalar.
  SmallVector<Value> carried = {zero, negInf, zero};
  if (scalar)
    carried.push_back(zero);
  Value lse = ReduceOp(parts.lse).getResult();
  Value temperature = ReduceOp(parts.lse).getTemperature()
                          ? get(ReduceOp(parts.lse).getTemperature()).scalar
                          : Value();
  FailureOr<SmallVector<Value>> result = forDomain(
      sum.getSizes(), sum.getPredicate(), carried,
      [&](ValueRange indices,
          ValueRange state) -> FailureOr<SmallVector<Value>> {
        Value largest;
        // The body computes exp(x − L) with L standing for the new max.
        beforeEmitting[parts.shift] = [&] {
          Value x = get(cast<SubOp>(parts.shift).getLhs()).scalar;
          largest = maximum(state[1], x);
          arrays[lse] = Lowered{largest, Value()};
        };
        FailureOr<SmallVector<Value>> body =
            emitBlock(sum.getBody().front(), indices);
        beforeEmitting.erase(parts.shift);
        if (failed(body))
          return failure();
        // The max rarely grows: rescale only then.
        Value grows = cmp(arith::CmpFPredicate::OGT, largest, state[1]);
        auto branch = scf::IfOp::create(b, loc, TypeRange{largest.getType()},
                                        grows, /*withElse=*/true);
        {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(branch.thenBlock());
          Value drop = sub(state[1], largest);
          if (temperature)
            drop = div(drop, temperature);
          scf::YieldOp::create(b, loc, exp(drop));
          b.setInsertionPointToStart(branch.elseBlock());
          scf::YieldOp::create(b, loc, one);
        }
        Value rescale = branch.getResult(0);
        Value weight = get(parts.exponential->getResult(0)).scalar;
        SmallVector<Value> next = {add(state[0], one), largest,
                                   add(mul(state[2], rescale), weight)};
        Value summand = body->front();
        if (scalar) {
          next.push_back(add(mul(state[3], rescale), summand));
          return next;
        }
        forRange(count, [&](Value i) {
          store(add(mul(load(accumulator, i), rescale), load(summand, i)),
                accumulator, i);
        });
        return next;
      },
      &sum.getBody().front());
  if (failed(result))
    return failure();
  // An empty domain gives 0 for both.
  Value empty = cmp(arith::CmpFPredicate::OEQ, (*result)[0], zero);
  Value total = (*result)[2];
  Value logTotal = log(total);
  if (temperature)
    logTotal = mul(logTotal, temperature);
  arrays[lse] =
      Lowered{select(empty, zero, add((*result)[1], logTotal)), Value()};
  if (scalar)
    return Lowered{select(empty, zero, div((*result)[3], total)), Value()};
  forRange(count, [&](Value i) {
    store(select(empty, zero, div(load(accumulator, i), total)), accumulator,
          i);
  });
  return Lowered{Value(), accumulator};
}

FailureOr<Lowered> KernelFunction::emitReduce(ReduceOp reduce) {
  if (auto it = softmaxSums.find(reduce); it != softmaxSums.end())
    return emitSoftmaxSum(reduce, it->second);
  if (loopDepth > 0 || reduce.getKind() != ReduceKind::sum)
    return emitReduceInOrder(reduce);
  // A sum outside every loop: fixed chunks of the first axis, summed on the
  // thread pool, then added in chunk order, so that the result does not
  // depend on the number of threads.
  constexpr int64_t kPositionsPerChunk = 64;
  auto type = cast<ArrayType>(reduce.getType());
  Value extent, chunks, size, partials;
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(entryAnchor);
    extent = arith::MaxSIOp::create(
        b, loc, dimExpr(cast<DimExprAttr>(reduce.getSizes()[0])), index(0));
    chunks =
        arith::CeilDivSIOp::create(b, loc, extent, index(kPositionsPerChunk));
    size = elementCount(type);
    partials = allocateElements(arith::MulIOp::create(b, loc, chunks, size));
  }
  auto partialOf = [&](Value chunk) {
    return offsetPointer(partials, arith::MulIOp::create(b, loc, chunk, size));
  };
  auto loop = scf::ForOp::create(b, loc, index(0), chunks, index(1));
  markParallel(loop);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(loop.getBody()->getTerminator());
    Value start = arith::MulIOp::create(b, loc, loop.getInductionVar(),
                                        index(kPositionsPerChunk));
    Value end = arith::MinSIOp::create(
        b, loc, arith::AddIOp::create(b, loc, start, index(kPositionsPerChunk)),
        extent);
    FailureOr<Lowered> partial =
        emitReduceInOrder(reduce, FirstAxis::chunk(start, end));
    if (failed(partial))
      return failure();
    copyInto(*partial, type, partialOf(loop.getInductionVar()),
             /*accumulate=*/false);
  }
  if (type.isScalar()) {
    Value total = forRange(chunks, ValueRange{real(0.0)},
                           [&](Value chunk, ValueRange sum) {
                             return SmallVector<Value>{
                                 add(sum[0], load(partialOf(chunk), index(0)))};
                           })
                      .front();
    return Lowered{total, Value()};
  }
  Value total = allocate(type);
  forRange(size, [&](Value i) { store(real(0.0), total, i); });
  forRange(chunks, [&](Value chunk) {
    copyInto(Lowered{Value(), partialOf(chunk)}, type, total,
             /*accumulate=*/true);
  });
  return Lowered{Value(), total};
}

FailureOr<Lowered> KernelFunction::emitReduceInOrder(ReduceOp reduce,
                                                     FirstAxis axis) {
  auto type = cast<ArrayType>(reduce.getType());
  ReduceKind kind = reduce.getKind();
  Value negInf = real(-std::numeric_limits<double>::infinity());
  Value zero = real(0.0), one = real(1.0);
  Value temperature =
      reduce.getTemperature() ? get(reduce.getTemperature()).scalar : Value();
  bool scalar = type.isScalar();
  // Per element: the running value (sum, max, or the lse's running max) and,
  // for lse, the running sum of exp(v − max). Scalars are carried in
  // registers, arrays in scratch buffers.
  Value count = scalar ? index(1) : elementCount(type);
  Value first = scalar ? Value() : allocate(type);
  Value second = (scalar || kind != ReduceKind::lse) ? Value() : allocate(type);
  Value initial =
      (kind == ReduceKind::max || kind == ReduceKind::lse) ? negInf : zero;
  SmallVector<Value> carried = {zero}; // admitted positions
  if (scalar) {
    carried.push_back(initial);
    if (kind == ReduceKind::lse)
      carried.push_back(zero);
  } else {
    forRange(count, [&](Value i) {
      store(initial, first, i);
      if (second)
        store(zero, second, i);
    });
  }
  // Folds one value into (running, sum); returns the new pair.
  auto fold = [&](Value value, Value running,
                  Value sum) -> std::pair<Value, Value> {
    switch (kind) {
    case ReduceKind::sum:
    case ReduceKind::mean:
      return {add(running, value), Value()};
    case ReduceKind::max:
      return {maximum(running, value), Value()};
    case ReduceKind::lse: {
      if (temperature)
        value = div(value, temperature);
      Value largest = maximum(running, value);
      Value scale = select(cmp(arith::CmpFPredicate::OEQ, running, negInf),
                           zero, exp(sub(running, largest)));
      Value term = select(cmp(arith::CmpFPredicate::OEQ, value, negInf), zero,
                          exp(sub(value, largest)));
      return {largest, add(mul(sum, scale), term)};
    }
    }
    return {Value(), Value()};
  };
  FailureOr<SmallVector<Value>> result = forDomain(
      reduce.getSizes(), reduce.getPredicate(), carried,
      [&](ValueRange indices,
          ValueRange state) -> FailureOr<SmallVector<Value>> {
        FailureOr<SmallVector<Value>> body =
            emitBlock(reduce.getBody().front(), indices);
        if (failed(body))
          return failure();
        SmallVector<Value> next = {add(state[0], one)};
        if (scalar) {
          auto [running, sum] =
              fold(body->front(), state[1],
                   kind == ReduceKind::lse ? state[2] : Value());
          next.push_back(running);
          if (sum)
            next.push_back(sum);
          return next;
        }
        Value values = body->front();
        forRange(count, [&](Value i) {
          auto [running, sum] = fold(load(values, i), load(first, i),
                                     second ? load(second, i) : Value());
          store(running, first, i);
          if (sum)
            store(sum, second, i);
        });
        return next;
      },
      &reduce.getBody().front(), axis);
  if (failed(result))
    return failure();
  Value admitted = (*result)[0];
  Value empty = cmp(arith::CmpFPredicate::OEQ, admitted, zero);
  // The finished value of one element; an empty domain gives 0.
  auto finish = [&](Value running, Value sum) {
    Value value = running;
    if (kind == ReduceKind::mean)
      value = div(running, admitted);
    if (kind == ReduceKind::lse) {
      value = add(running, log(sum));
      if (temperature)
        value = mul(value, temperature);
    }
    return select(empty, zero, value);
  };
  if (scalar)
    return Lowered{
        finish((*result)[1], kind == ReduceKind::lse ? (*result)[2] : Value()),
        Value()};
  forRange(count, [&](Value i) {
    store(finish(load(first, i), second ? load(second, i) : Value()), first, i);
  });
  return Lowered{Value(), first};
}

FailureOr<Lowered> KernelFunction::emitRows(Operation *op, Lowered operand,
                                            ArrayType type) {
  Value length = shape(type).back();
  Value rows = arith::DivUIOp::create(b, loc, elementCount(type), length);
  Value data = allocate(type);
  Value negInf = real(-std::numeric_limits<double>::infinity());
  Value size =
      arith::SIToFPOp::create(b, loc, context.elementType, toI64(length));
  forRange(rows, [&](Value row) {
    Value start = arith::MulIOp::create(b, loc, row, length);
    auto at = [&](Value k) {
      return arith::AddIOp::create(b, loc, start, k).getResult();
    };
    auto sumOver = [&](function_ref<Value(Value)> term) {
      return forRange(length, {real(0.0)}, [&](Value k, ValueRange acc) {
        return SmallVector<Value>{add(acc[0], term(load(operand.data, at(k))))};
      })[0];
    };
    auto writeRow = [&](function_ref<Value(Value)> element) {
      forRange(length, [&](Value k) {
        store(element(load(operand.data, at(k))), data, at(k));
      });
    };
    if (isa<SoftmaxOp, LogSoftmaxOp>(op)) {
      Value largest = forRange(length, {negInf}, [&](Value k, ValueRange acc) {
        return SmallVector<Value>{maximum(acc[0], load(operand.data, at(k)))};
      })[0];
      Value normaliser = add(
          largest, log(sumOver([&](Value x) { return exp(sub(x, largest)); })));
      if (isa<SoftmaxOp>(op))
        writeRow([&](Value x) { return exp(sub(x, normaliser)); });
      else
        writeRow([&](Value x) { return sub(x, normaliser); });
      return;
    }
    Value epsilon = real(1e-5);
    if (isa<RmsNormOp>(op)) {
      Value meanSquare = div(sumOver([&](Value x) { return mul(x, x); }), size);
      Value scale = div(real(1.0),
                        math::SqrtOp::create(b, loc, add(meanSquare, epsilon)));
      writeRow([&](Value x) { return mul(x, scale); });
      return;
    }
    Value centre = div(sumOver([&](Value x) { return x; }), size);
    Value variance = div(sumOver([&](Value x) {
                           Value d = sub(x, centre);
                           return mul(d, d);
                         }),
                         size);
    Value scale =
        div(real(1.0), math::SqrtOp::create(b, loc, add(variance, epsilon)));
    writeRow([&](Value x) { return mul(sub(x, centre), scale); });
  });
  return Lowered{Value(), data};
}

FailureOr<Lowered> KernelFunction::emitSupportCall(Operation *op,
                                                   Lowered operand,
                                                   ArrayType operandType) {
  bool single = context.elementType.getWidth() != 64;
  Value n = toI64(shape(operandType).back());
  if (isa<LogDetOp>(op)) {
    auto function = context.target.lookupSymbol<func::FuncOp>(
        single ? ENERGY_SUPPORT_LOGDET_F32 : ENERGY_SUPPORT_LOGDET_F64);
    Value value =
        func::CallOp::create(b, loc, function, ValueRange{n, operand.data})
            .getResult(0);
    if (single)
      value = arith::TruncFOp::create(b, loc, context.elementType, value);
    return Lowered{value, Value()};
  }
  auto function = context.target.lookupSymbol<func::FuncOp>(
      single ? ENERGY_SUPPORT_INVERSE_F32 : ENERGY_SUPPORT_INVERSE_F64);
  Value data = allocate(operandType);
  func::CallOp::create(b, loc, function, ValueRange{n, operand.data, data});
  return Lowered{Value(), data};
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

/// Declares the C functions kernels call.
void declareRuntimeFunctions(ModuleOp target) {
  OpBuilder b(target.getContext());
  b.setInsertionPointToStart(target.getBody());
  Location loc = target.getLoc();
  Type pointer = LLVM::LLVMPointerType::get(b.getContext());
  Type i64 = b.getI64Type(), i32 = b.getI32Type(), f64 = b.getF64Type();
  auto declare = [&](StringRef name, TypeRange arguments, TypeRange results) {
    auto function = func::FuncOp::create(b, loc, name,
                                         b.getFunctionType(arguments, results));
    function.setPrivate();
  };
  declare("malloc", {i64}, {pointer});
  declare("free", {pointer}, {});
  declare(ENERGY_SUPPORT_SILU_INT, {f64}, {f64});
  declare(ENERGY_SUPPORT_LOGDET_F64, {i64, pointer}, {f64});
  declare(ENERGY_SUPPORT_LOGDET_F32, {i64, pointer}, {f64});
  declare(ENERGY_SUPPORT_INVERSE_F64, {i64, pointer, pointer}, {i32});
  declare(ENERGY_SUPPORT_INVERSE_F32, {i64, pointer, pointer}, {i32});
  Type chunk = b.getFunctionType({pointer, i64, i64}, {});
  declare(ENERGY_SUPPORT_PARALLEL_FOR, {chunk, pointer, i64}, {});
  declare(ENERGY_SUPPORT_SET_NUM_THREADS, {i32}, {});
}

/// A symbol-safe spelling of a model name (tensor names may contain '.').
std::string mangle(StringRef name) {
  std::string result;
  for (char c : name)
    result += (isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return result;
}

} // namespace

FailureOr<ArtifactLayout> mlir::energy::emitKernels(ModelOp model,
                                                    ModuleOp target,
                                                    FloatType elementType) {
  ModelContext context;
  context.model = model;
  context.target = target;
  context.elementType = elementType;
  ArtifactLayout &layout = context.layout;
  Block &body = model.getBody().front();
  for (DimOp dim : body.getOps<DimOp>()) {
    context.dimIndex[dim.getSymName()] = layout.dims.size();
    layout.dims.push_back(dim);
  }
  for (ConstOp constant : body.getOps<ConstOp>()) {
    context.constIndex[constant.getSymName()] = layout.consts.size();
    layout.consts.push_back(constant);
  }
  auto addBuffer = [&](std::string name, ArtifactLayout::BufferKind kind,
                       Operation *op) {
    context.bufferIndex[name] = layout.buffers.size();
    layout.buffers.push_back({std::move(name), kind, op});
  };
  for (TensorOp tensor : body.getOps<TensorOp>())
    addBuffer(tensor.getSymName().str(), ArtifactLayout::BufferKind::Tensor,
              tensor);
  for (GradientOp gradient : body.getOps<GradientOp>())
    if (!gradient.getOf())
      addBuffer(("grad." + gradient.getTensor()).str(),
                ArtifactLayout::BufferKind::Gradient, gradient);
  for (OutputOp output : body.getOps<OutputOp>())
    addBuffer(output.getSymName().str(), ArtifactLayout::BufferKind::Output,
              output);

  declareRuntimeFunctions(target);
  OpBuilder b(model.getContext());
  b.setInsertionPointToEnd(target.getBody());
  Type pointer = LLVM::LLVMPointerType::get(b.getContext());
  SmallVector<Type> kernelArguments = {pointer, pointer, pointer,
                                       b.getI64Type(), pointer};
  auto createFunction = [&](StringRef name, bool withTarget, Location loc) {
    SmallVector<Type> arguments = kernelArguments;
    if (withTarget)
      arguments.push_back(pointer);
    auto function = func::FuncOp::create(
        b, loc, name, b.getFunctionType(arguments, {b.getI32Type()}));
    if (withTarget)
      function.setPrivate();
    return function;
  };

  // Gradient programs first: kernels and step programs call them.
  unsigned gradientNumber = 0;
  for (GradientOp gradient : body.getOps<GradientOp>()) {
    std::string name = "energy_gradient_" + std::to_string(gradientNumber++) +
                       "_" + mangle(gradient.getTensor());
    context.gradientFunctions[gradient] =
        createFunction(name, /*withTarget=*/true, gradient.getLoc());
  }
  for (GradientOp gradient : body.getOps<GradientOp>()) {
    func::FuncOp function = context.gradientFunctions[gradient];
    KernelFunction kernel(context, function);
    auto tensor = model.lookupSymbol<TensorOp>(gradient.getTensorAttr());
    kernel.copyInto(Lowered{kernel.zero(), Value()}, tensor.getArrayType(),
                    kernel.gradientTarget, /*accumulate=*/false);
    if (failed(kernel.emitBlock(gradient.getBody().front(), {})))
      return failure();
    kernel.finish();
    if (gradient.getOf())
      continue;
    std::string symbol = "energy_kernel_grad_" + mangle(gradient.getTensor());
    func::FuncOp entry =
        createFunction(symbol, /*withTarget=*/false, gradient.getLoc());
    KernelFunction wrapper(context, entry);
    Value destination =
        wrapper.bufferPointer(("grad." + gradient.getTensor()).str());
    Value code =
        func::CallOp::create(wrapper.b, wrapper.loc, function,
                             ValueRange{wrapper.buffersArg, wrapper.dimsArg,
                                        wrapper.constsArg, wrapper.stepArg,
                                        wrapper.resultArg, destination})
            .getResult(0);
    wrapper.finish(code);
    layout.gradientKernels.push_back({gradient.getTensor().str(), symbol});
  }

  {
    func::FuncOp function =
        createFunction("energy_kernel_energy", false, model.getLoc());
    KernelFunction kernel(context, function);
    Value total = kernel.zero();
    for (TermOp term : body.getOps<TermOp>()) {
      if (term.getAuxiliary())
        continue;
      FailureOr<SmallVector<Value>> value =
          kernel.emitBlock(term.getBody().front(), {});
      if (failed(value))
        return failure();
      total =
          arith::AddFOp::create(kernel.b, kernel.loc, total, value->front());
    }
    kernel.storeResult(total);
    kernel.finish();
    layout.energyKernel = "energy_kernel_energy";
  }

  for (OutputOp output : body.getOps<OutputOp>()) {
    std::string symbol = "energy_kernel_output_" + mangle(output.getSymName());
    func::FuncOp function = createFunction(symbol, false, output.getLoc());
    KernelFunction kernel(context, function);
    Value destination = kernel.bufferPointer(output.getSymName());
    if (failed(kernel.emitComprehension(
            output.getDomain(), cast<ArrayType>(output.getElementType()),
            output.getBody().front(), destination)))
      return failure();
    kernel.finish();
    layout.outputKernels.push_back({output.getSymName().str(), symbol});
  }

  auto programs = body.getOps<UpdateProgramOp>();
  if (!programs.empty()) {
    UpdateProgramOp program = *programs.begin();
    func::FuncOp function =
        createFunction("energy_kernel_step", false, program.getLoc());
    KernelFunction kernel(context, function, /*isProgram=*/true);
    if (failed(kernel.emitBlock(program.getBody().front(), {})))
      return failure();
    kernel.finish();
    layout.stepKernel = "energy_kernel_step";
  }
  if (DynamicsOp dynamics = model.getDynamics();
      dynamics && !dynamics.getUntil().empty()) {
    func::FuncOp function =
        createFunction("energy_kernel_until", false, dynamics.getLoc());
    KernelFunction kernel(context, function, /*isProgram=*/true);
    FailureOr<SmallVector<Value>> done =
        kernel.emitBlock(dynamics.getUntil().front(), {});
    if (failed(done))
      return failure();
    Value flag = arith::UIToFPOp::create(kernel.b, kernel.loc, elementType,
                                         done->front());
    kernel.storeResult(flag);
    kernel.finish();
    layout.untilKernel = "energy_kernel_until";
  }
  return layout;
}
