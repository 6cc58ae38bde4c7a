//===- KernelBuilder.cpp - The shared builder of kernel functions ---------===//
//
// A kernel function's entry (its arguments and status), scratch memory that
// is allocated at entry and freed on return, dims, loops and arrays. Scalars
// live in registers; arrays live in buffers (tensor storage, or scratch).
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"
#include "energy/Codegen/ParallelLoops.h"
#include "energy/KernelSupport/KernelSupport.h"
#include "energy/Runtime/ArtifactABI.h"

#include "mlir/Dialect/Affine/Utils.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"

#include <limits>

using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::codegen;

void codegen::dropImplicitYield(scf::ForOp loop) {
  Block *body = loop.getBody();
  if (!body->empty() && isa<scf::YieldOp>(body->back()))
    body->back().erase();
}

KernelFrame::KernelFrame(ModelContext &context, func::FuncOp function)
    : b(function.getContext()), loc(function.getLoc()), context(context),
      function(function) {
  Block *entry = function.addEntryBlock();
  b.setInsertionPointToStart(entry);
  buffersArg = entry->getArgument(0);
  dimsArg = entry->getArgument(1);
  constsArg = entry->getArgument(2);
  stepArg = entry->getArgument(3);
  resultArg = entry->getArgument(4);
  Type pointerType = LLVM::LLVMPointerType::get(b.getContext());
  Value one =
      LLVM::ConstantOp::create(b, loc, b.getI64Type(), b.getI64IntegerAttr(1));
  status = LLVM::AllocaOp::create(b, loc, pointerType, b.getI32Type(), one);
  status.getDefiningOp()->setAttr(kKernelStatusAttr, b.getUnitAttr());
  LLVM::StoreOp::create(
      b, loc,
      arith::ConstantIntOp::create(b, loc, b.getI32Type(), ENERGY_KERNEL_OK),
      status);
  entryAnchor = arith::ConstantIndexOp::create(b, loc, 0);
  b.setInsertionPointToEnd(entry);
}

void KernelBuilder::finish(Value code) {
  auto freeFunction =
      context.target.lookupSymbol<func::FuncOp>(ENERGY_SUPPORT_SCRATCH_FREE);
  if (!code)
    code = LLVM::LoadOp::create(b, loc, b.getI32Type(), frame.status);
  Block *exit = b.getInsertionBlock();
  if (!frame.allocations.empty()) {
    // Scratch that could not be allocated (a table too large for the
    // machine's memory at these dims): the kernel returns out of memory
    // before its body runs, through the same exit, which frees what it did
    // get.
    Block *entry = frame.entryAnchor->getBlock();
    exit = new Block();
    exit->addArgument(b.getI32Type(), loc);
    entry->getParent()->push_back(exit);
    cf::BranchOp::create(b, loc, exit, ValueRange{code});
    Block *body = entry->splitBlock(frame.entryAnchor);
    auto failures = context.target.lookupSymbol<func::FuncOp>(
        ENERGY_SUPPORT_SCRATCH_FAILURES);
    b.setInsertionPoint(frame.allocations.front().getDefiningOp());
    Value failuresBefore =
        func::CallOp::create(b, loc, failures, ValueRange{}).getResult(0);
    b.setInsertionPointToEnd(entry);
    Value failuresAfter =
        func::CallOp::create(b, loc, failures, ValueRange{}).getResult(0);
    Value missing = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                          failuresBefore, failuresAfter);
    Value outOfMemory = arith::ConstantIntOp::create(
        b, loc, b.getI32Type(), ENERGY_KERNEL_OUT_OF_MEMORY);
    cf::CondBranchOp::create(b, loc, missing, exit, ValueRange{outOfMemory},
                             body, ValueRange{});
    b.setInsertionPointToEnd(exit);
    code = exit->getArgument(0);
  }
  for (Value pointer : frame.allocations)
    func::CallOp::create(b, loc, freeFunction, ValueRange{pointer});
  func::ReturnOp::create(b, loc, code);
  for (Operation *anchor : frame.anchors)
    anchor->erase();
  frame.entryAnchor->erase();
}

Value KernelBuilder::loadBufferPointer(unsigned slot) {
  if (Value loaded = frame.bufferPointers.lookup(slot))
    return loaded;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(frame.entryAnchor);
  Value slotPointer = LLVM::GEPOp::create(
      b, loc, pointerType(), pointerType(), frame.buffersArg,
      ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(slot)});
  Value loaded = LLVM::LoadOp::create(b, loc, pointerType(), slotPointer);
  frame.bufferPointers[slot] = loaded;
  return loaded;
}

Value KernelBuilder::dim(StringRef name) {
  auto it = frame.dimValues.find(name);
  if (it != frame.dimValues.end())
    return it->second;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(frame.entryAnchor);
  unsigned position = context.dimIndex.lookup(name);
  Value pointer = LLVM::GEPOp::create(
      b, loc, pointerType(), b.getI64Type(), frame.dimsArg,
      ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(position)});
  Value value = LLVM::LoadOp::create(b, loc, b.getI64Type(), pointer);
  Value result =
      arith::IndexCastOp::create(b, loc, b.getIndexType(), value).getResult();
  frame.dimValues[name] = result;
  return result;
}

Value KernelBuilder::dimExpr(DimExprAttr expr) {
  SmallVector<Value> symbols;
  for (StringAttr name : expr.getNames())
    symbols.push_back(dim(name.getValue()));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(frame.entryAnchor);
  return affine::expandAffineExpr(b, loc, expr.getExpr(), {}, symbols);
}

SmallVector<Value> KernelBuilder::shape(ArrayType type) {
  SmallVector<Value> extents;
  for (StringAttr name : type.getShape())
    extents.push_back(dim(name.getValue()));
  return extents;
}

Value KernelBuilder::elementCount(ArrayType type) {
  SmallVector<Value> extents = shape(type);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(frame.entryAnchor);
  Value count = index(1);
  for (Value extent : extents)
    count = arith::MulIOp::create(b, loc, count, extent);
  return count;
}

Value KernelBuilder::allocateElements(Value count, int64_t elementBytes) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(frame.entryAnchor);
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
  frame.allocations.push_back(pointer);
  return pointer;
}

Value KernelBuilder::allocate(ArrayType type) {
  return allocateElements(elementCount(type));
}

Value KernelBuilder::allocateElements(int64_t count, int64_t elementBytes) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(frame.entryAnchor);
  return allocateElements(index(count), elementBytes);
}

Value KernelBuilder::allocateSlots(unsigned count) {
  Value slots = allocateElements(count, /*elementBytes=*/8);
  slots.getDefiningOp()->setAttr(kHostSlotsAttr, b.getUnitAttr());
  return slots;
}

func::CallOp KernelBuilder::callSupport(StringRef name, ValueRange arguments) {
  auto function = context.target.lookupSymbol<func::FuncOp>(name);
  return func::CallOp::create(b, loc, function, arguments);
}

void KernelBuilder::reportStatus(Value code) {
  LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::max, frame.status, code,
                            LLVM::AtomicOrdering::monotonic);
}

Value KernelBuilder::storeResult(Value scalar) {
  Value wide = scalar;
  if (context.elementType.getWidth() != 64)
    wide = arith::ExtFOp::create(b, loc, b.getF64Type(), scalar);
  LLVM::StoreOp::create(b, loc, wide, frame.resultArg);
  return wide;
}

void KernelBuilder::storeInSlot(Value slots, unsigned position, Value value) {
  if (value.getType().isIndex())
    value = toI64(value);
  Value at = LLVM::GEPOp::create(
      b, loc, pointerType(), b.getI64Type(), slots,
      ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(position)});
  LLVM::StoreOp::create(b, loc, value, at);
}

void KernelBuilder::forRange(Value upper, function_ref<void(Value)> body) {
  auto loop = scf::ForOp::create(b, loc, index(0), upper, index(1));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  body(loop.getInductionVar());
}

void KernelBuilder::forElements(Value count, function_ref<void(Value)> body) {
  auto loop = scf::ForOp::create(b, loc, index(0), count, index(1));
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    body(loop.getInductionVar());
  }
  markElementwise(loop);
}

SmallVector<Value> KernelBuilder::forRange(
    Value upper, ValueRange carried,
    function_ref<SmallVector<Value>(Value, ValueRange)> body) {
  return forRange(index(0), upper, carried, body);
}

SmallVector<Value> KernelBuilder::forRange(
    Value lower, Value upper, ValueRange carried,
    function_ref<SmallVector<Value>(Value, ValueRange)> body) {
  auto loop = scf::ForOp::create(b, loc, lower, upper, index(1), carried);
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

SmallVector<Value> KernelBuilder::extentsOf(ArrayAttr sizes) {
  SmallVector<Value> extents;
  for (Attribute size : sizes) {
    Value extent = dimExpr(cast<DimExprAttr>(size));
    // A negative extent is an empty range.
    extents.push_back(arith::MaxSIOp::create(b, loc, extent, index(0)));
  }
  return extents;
}

scf::ForOp KernelBuilder::forSteps(Value lower, Value upper, Value step,
                                   function_ref<void(Value)> body) {
  auto loop = scf::ForOp::create(b, loc, lower, upper, step);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  body(loop.getInductionVar());
  return loop;
}

Lowered KernelBuilder::build(ArrayType type,
                             function_ref<Value(Value)> element) {
  if (type.isScalar())
    return {element(index(0)), Value()};
  Value data = allocate(type);
  forElements(elementCount(type), [&](Value position) {
    store(element(position), data, position);
  });
  return {Value(), data};
}

Lowered KernelBuilder::buildLanes(ArrayType type,
                                  function_ref<Value(Value, int)> element,
                                  Value into) {
  if (type.isScalar())
    return {element(index(0), 1), Value()};
  Value data = into ? into : allocate(type);
  forLanes(elementCount(type), [&](Value offset, int lanes) {
    storeLanes(element(offset, lanes), data, offset, lanes);
  });
  return {Value(), data};
}

void KernelBuilder::copyInto(Lowered value, ArrayType type, Value destination,
                             bool accumulate) {
  if (type.isScalar()) {
    auto write = [&](Value at) {
      Value element = elementAt(value, at);
      if (accumulate)
        element = add(load(destination, at), element);
      store(element, destination, at);
    };
    if (!deviceLoops() || insideLoop())
      return write(index(0));
    // On a GPU, a kernel of one thread: the host does not touch the
    // element, so it need not wait for the kernels before.
    return forElements(index(1), write);
  }
  forLanes(elementCount(type), [&](Value offset, int lanes) {
    Value element = lanesAt(value, offset, lanes);
    if (accumulate)
      element = add(loadLanes(destination, offset, lanes), element);
    storeLanes(element, destination, offset, lanes);
  });
}

void KernelBuilder::sumChunks(Value partials, Value chunks, Value size,
                              Value destination) {
  auto chunkAt = [&](Value chunk) {
    return offsetPointer(partials, arith::MulIOp::create(b, loc, chunk, size));
  };
  if (!deviceLoops()) {
    forLanes(size, [&](Value offset, int lanes) {
      storeLanes(splat(real(0.0), lanes), destination, offset, lanes);
    });
    forRange(chunks, [&](Value chunk) {
      Value source = chunkAt(chunk);
      forLanes(size, [&](Value offset, int lanes) {
        storeLanes(add(loadLanes(destination, offset, lanes),
                       loadLanes(source, offset, lanes)),
                   destination, offset, lanes);
      });
    });
    return;
  }
  forElements(size, [&](Value position) {
    Value total = forRange(chunks, ValueRange{real(0.0)},
                           [&](Value chunk, ValueRange sum) {
                             return SmallVector<Value>{
                                 add(sum[0], load(chunkAt(chunk), position))};
                           })
                      .front();
    store(total, destination, position);
  });
}

Value KernelBuilder::sliceOffset(ArrayRef<Value> indices,
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

Lowered KernelBuilder::slice(Value base, ArrayType whole, ArrayType part,
                             ArrayRef<Value> indices) {
  Value offset = sliceOffset(indices, shape(whole));
  if (part.isScalar())
    return {load(base, offset), Value()};
  return {Value(), offsetPointer(base, offset)};
}

void KernelBuilder::expInPlace(Value values, Value count) {
  // Weights below the smallest normal number become 0 (they would cost a
  // microcode assist each and weigh under 2^-126 of the largest).
  if (deviceLoops()) {
    Value smallestNormal =
        real(singlePrecision() ? std::numeric_limits<float>::min()
                               : std::numeric_limits<double>::min());
    forElements(count, [&](Value position) {
      Value weight = exp(load(values, position));
      store(select(cmp(arith::CmpFPredicate::OLT, weight, smallestNormal),
                   real(0.0), weight),
            values, position);
    });
    return;
  }
  callSupport(singlePrecision() ? ENERGY_SUPPORT_SOFTMAX_WEIGHTS_F32
                                : ENERGY_SUPPORT_SOFTMAX_WEIGHTS_F64,
              {toI64(count), values, values});
}
