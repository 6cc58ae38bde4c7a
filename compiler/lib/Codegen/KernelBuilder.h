//===- KernelBuilder.h - The shared builder of kernel functions -*- C++ -*-===//
//
// What every lowering pattern builds with: a kernel function of the
// artifact's calling convention, its scalars, pointers, scratch, dims, loops,
// vectors of lanes and arrays. It knows energy types, not energy ops.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_LIB_CODEGEN_KERNELBUILDER_H
#define ENERGY_LIB_CODEGEN_KERNELBUILDER_H

#include "energy/Codegen/KernelEmitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::energy::codegen {

/// The lowered form of an energy array value: a scalar in a register, or a
/// pointer to contiguous row-major elements.
struct Lowered {
  Value scalar;
  Value data;
};

/// Loops without carried values come with a yield; bodies here add their
/// own.
void dropImplicitYield(scf::ForOp loop);

/// What every kernel of one model shares: the layout and the module.
struct ModelContext {
  ModelOp model;
  ModuleOp target;
  FloatType elementType;
  ArtifactLayout layout;
  llvm::StringMap<unsigned> dimIndex, constIndex, bufferIndex;
  /// The tensors some program stores into (storedTensors); no kernel writes
  /// the others.
  llvm::StringSet<> writtenTensors;
  /// The private function computing each gradient program into a buffer.
  DenseMap<Operation *, func::FuncOp> gradientFunctions;
};

/// Declares, in `target`, the C functions of the kernel support library
/// that kernels call.
void declareRuntimeFunctions(ModuleOp target);

/// One kernel function being built: its arguments (ArtifactABI.h), status,
/// scratch and dims, and where work hoisted out of loops goes.
struct KernelFrame {
  KernelFrame(ModelContext &context, func::FuncOp function);

  OpBuilder b;
  Location loc;
  ModelContext &context;
  func::FuncOp function;
  Value buffersArg, dimsArg, constsArg, stepArg, resultArg;
  /// The status slot (i32) the kernel returns.
  Value status;
  /// Allocations and dims go before this op in the entry block.
  Operation *entryAnchor;
  SmallVector<Value> allocations;
  llvm::StringMap<Value> dimValues;
  /// The buffers' addresses, loaded once at the entry (by buffer slot): a
  /// store in a loop could otherwise be taken to change the buffer array,
  /// and the address be loaded again at every iteration.
  llvm::DenseMap<unsigned, Value> bufferPointers;
  /// How many domain loops enclose the code being built.
  int loopDepth = 0;
  /// Work that a loop needs once goes before this op: the start of the
  /// current statement (an op outside every loop).
  Operation *statementAnchor = nullptr;
  SmallVector<Operation *> anchors;
};

/// Builds into a KernelFrame. Copies share the frame: a lowering pattern
/// takes one over the kernel it emits into.
class KernelBuilder {
public:
  explicit KernelBuilder(KernelFrame &frame)
      : b(frame.b), loc(frame.loc), context(frame.context), frame(frame) {}

  OpBuilder &b;
  Location &loc;
  ModelContext &context;

  /// The kernel's arguments (ArtifactABI.h): buffers, dims, consts, step,
  /// result.
  ValueRange kernelArguments() {
    return frame.function.getArguments().take_front(5);
  }
  /// Frees scratch memory and returns `code` (the kernel's status when
  /// null).
  void finish(Value code = Value());

  //===--------------------------------------------------------------------===//
  // Scalars, pointers, memory (KernelBuilder.cpp)
  //===--------------------------------------------------------------------===//

  Type pointerType() { return LLVM::LLVMPointerType::get(b.getContext()); }
  Value index(int64_t value) {
    return arith::ConstantIndexOp::create(b, loc, value);
  }
  Value real(double value) {
    return arith::ConstantOp::create(
        b, loc, b.getFloatAttr(context.elementType, value));
  }
  Value zero() { return real(0.0); }
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
  // One compare and select, one instruction on x86 where maxnum takes
  // three: a NaN operand may or may not be the result, so callers whose
  // result must show a NaN get it from the elements themselves.
  Value largerOf(Value x, Value y) {
    return select(cmp(arith::CmpFPredicate::OGT, x, y), x, y);
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
  Value toF64(Value real) {
    if (context.elementType.getWidth() == 64)
      return real;
    return arith::ExtFOp::create(b, loc, b.getF64Type(), real);
  }
  /// Whether elements are f32 (else f64).
  bool singlePrecision() { return context.elementType.getWidth() != 64; }
  /// Whether loops must not call host functions where code can do the work
  /// (kDeviceLoopsAttr: CUDA artifacts).
  bool deviceLoops() { return context.model->hasAttr(kDeviceLoopsAttr); }

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
  /// The pointer to the buffer named `name` (ArtifactLayout order).
  Value bufferPointer(StringRef name) {
    return loadBufferPointer(context.bufferIndex.lookup(name));
  }
  /// Calls the support function `name` (declared by
  /// declareRuntimeFunctions).
  func::CallOp callSupport(StringRef name, ValueRange arguments);
  /// Folds a support function's status into the kernel's: the worst wins.
  /// Loops on several threads may report at once.
  void reportStatus(Value code);
  /// Stores `value` (an index as i64) in 8-byte slot `position` of `slots`.
  void storeInSlot(Value slots, unsigned position, Value value);
  /// The softmax weights exp(x) of `count` elements at `values`, in place
  /// (the support library's vector exp, or a loop with deviceLoops();
  /// results below the smallest normal number dropped).
  void expInPlace(Value values, Value count);
  /// Stores a scalar result (as f64) into the result argument.
  Value storeResult(Value scalar);

  /// Values that only depend on dims, computed once at entry.
  Value dim(StringRef name);
  Value dimExpr(DimExprAttr expr);
  Value elementCount(ArrayType type);
  SmallVector<Value> shape(ArrayType type);
  /// The extents of a domain (a negative extent is an empty range).
  SmallVector<Value> extentsOf(ArrayAttr sizes);
  /// Scratch for one value of `type`, allocated at entry, freed on return.
  Value allocate(ArrayType type);
  /// Scratch for `count` elements of `elementBytes` bytes (0: the kernel's
  /// element type). Scratch a parallel loop alone uses is private to each
  /// of its chunks (ParallelLoops.h).
  Value allocateElements(Value count, int64_t elementBytes = 0);
  Value allocateElements(int64_t count, int64_t elementBytes = 0);
  /// Scratch for `count` 8-byte slots (a struct of the support library's
  /// ABI).
  Value allocateSlots(unsigned count);

  /// Whether the code being built is inside a domain loop.
  bool insideLoop() const { return frame.loopDepth > 0; }
  /// Emits `work`, which depends on no loop index, ahead of the current
  /// statement when inside a loop, so that it runs once; work that `work`
  /// needs ahead in turn goes before it.
  template <typename Work> auto aheadOfStatement(Work work) {
    OpBuilder::InsertionGuard guard(b);
    Operation *enclosingAnchor = frame.statementAnchor;
    int enclosingDepth = frame.loopDepth;
    if (frame.loopDepth > 0 && frame.statementAnchor)
      b.setInsertionPoint(frame.statementAnchor);
    frame.statementAnchor = arith::ConstantIndexOp::create(b, loc, 0);
    frame.anchors.push_back(frame.statementAnchor);
    frame.loopDepth = 0;
    auto result = work();
    frame.statementAnchor = enclosingAnchor;
    frame.loopDepth = enclosingDepth;
    return result;
  }

  //===--------------------------------------------------------------------===//
  // Loops (KernelBuilder.cpp)
  //===--------------------------------------------------------------------===//

  void forRange(Value upper, function_ref<void(Value)> body);
  SmallVector<Value>
  forRange(Value upper, ValueRange carried,
           function_ref<SmallVector<Value>(Value, ValueRange)> body);
  /// Loops over [lower, upper) carrying `carried`; returns the results.
  SmallVector<Value>
  forRange(Value lower, Value upper, ValueRange carried,
           function_ref<SmallVector<Value>(Value, ValueRange)> body);
  /// Loops over [0, count) whose positions write disjoint memory: on a GPU,
  /// outside other loops, a kernel with a thread per position.
  void forElements(Value count, function_ref<void(Value)> body);
  /// Loops over [lower, upper) in steps of `step`.
  scf::ForOp forSteps(Value lower, Value upper, Value step,
                      function_ref<void(Value)> body);

  //===--------------------------------------------------------------------===//
  // Vector loops (VectorLoops.cpp): the inner loops over contiguous elements
  // as explicit vectors of 64 bytes, with a scalar remainder, so that they
  // run at full width whatever the trip count.
  //===--------------------------------------------------------------------===//

  /// Elements of a 64-byte vector; one in loops for a GPU (deviceLoops()),
  /// whose threads each take an element, so that a warp's reads are
  /// adjacent.
  int vectorLanes() {
    return deviceLoops() ? 1 : 512 / context.elementType.getWidth();
  }
  /// `lanes` elements at `base + offset` (a scalar when lanes is 1).
  Value loadLanes(Value base, Value offset, int lanes);
  void storeLanes(Value value, Value base, Value offset, int lanes);
  /// `scalar` in every lane.
  Value splat(Value scalar, int lanes);
  /// Runs `body(offset, lanes)` over [0, count): vectors, then scalars
  /// (one loop of scalars when vectorLanes() is 1).
  void forLanes(Value count, function_ref<void(Value, int)> body);
  /// `combine` folded over [0, count) of `term(offset, lanes)` from
  /// `identity`: a vector accumulator, `horizontal` of it, then the scalar
  /// remainder.
  Value foldLanes(Value count, Value identity,
                  function_ref<Value(Value, Value)> combine,
                  function_ref<Value(Value)> horizontal,
                  function_ref<Value(Value, int)> term);
  /// `initial` combined with `term(offset, 1)` for offsets [from, count).
  Value foldScalars(Value from, Value count, Value initial,
                    function_ref<Value(Value, Value)> combine,
                    function_ref<Value(Value, int)> term);
  /// Σ over [0, count) of `term(offset, lanes)`.
  Value sumLanes(Value count, function_ref<Value(Value, int)> term);
  /// The largest `term(offset, lanes)` over [0, count) by `largerOf` (a NaN
  /// term may or may not be the result); −∞ when count is 0.
  Value maxLanes(Value count, function_ref<Value(Value, int)> term);
  /// y[i] += a · x[i] (a scalar, x an array), over `count` elements.
  void addScaled(Value y, Value a, Value x, Value count);
  /// Σ_i x[i] · y[i].
  Value dotProduct(Value x, Value y, Value count);

  //===--------------------------------------------------------------------===//
  // Arrays (KernelBuilder.cpp)
  //===--------------------------------------------------------------------===//

  /// An array of `type` whose element at a row-major position is `element`.
  Lowered build(ArrayType type, function_ref<Value(Value)> element);
  /// The same, computing `lanes` elements from an offset at a time, into
  /// `into` when given.
  Lowered buildLanes(ArrayType type, function_ref<Value(Value, int)> element,
                     Value into = Value());
  /// `lanes` elements of `value` from `offset` (a scalar broadcasts).
  Value lanesAt(Lowered value, Value offset, int lanes) {
    return value.data ? loadLanes(value.data, offset, lanes)
                      : splat(value.scalar, lanes);
  }
  /// The element at a row-major position (a scalar broadcasts).
  Value elementAt(Lowered value, Value position) {
    return value.data ? load(value.data, position) : value.scalar;
  }
  /// Stores `value` (of type `type`) into the buffer at `destination`,
  /// adding to what is there when `accumulate`.
  void copyInto(Lowered value, ArrayType type, Value destination,
                bool accumulate);
  /// Stores into `destination` the sum, in chunk order, of the `chunks`
  /// arrays of `size` elements back to back at `partials` (on a GPU, a kernel
  /// with a thread per element).
  void sumChunks(Value partials, Value chunks, Value size, Value destination);
  /// The row-major offset of the slice at `indices` of an array whose axes
  /// have `extents`, in elements.
  Value sliceOffset(ArrayRef<Value> indices, ArrayRef<Value> extents);
  Lowered slice(Value base, ArrayType whole, ArrayType part,
                ArrayRef<Value> indices);

protected:
  KernelFrame &frame;
};

} // namespace mlir::energy::codegen

#endif // ENERGY_LIB_CODEGEN_KERNELBUILDER_H
