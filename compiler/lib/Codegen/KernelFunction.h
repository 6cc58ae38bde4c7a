//===- KernelFunction.h - Emitting one kernel function ----------*- C++ -*-===//
//
// The state and helpers of emitting one kernel of an artifact: its
// arguments, scratch memory, loops over index domains, and the lowering of
// each energy op into scf, arith, math and LLVM pointer ops. The lowering is
// split by concept over KernelFunction.cpp (structure, memory, loops,
// reads), ArrayOps.cpp (elementwise and linear algebra), Reductions.cpp,
// Contractions.cpp (tables and softmax contractions) and KernelEmitter.cpp
// (the kernels of a model). Private to compiler/lib/Codegen.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_LIB_CODEGEN_KERNELFUNCTION_H
#define ENERGY_LIB_CODEGEN_KERNELFUNCTION_H

#include "energy/Codegen/KernelEmitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::energy::codegen {

/// The lowered form of an energy array value: a scalar in a register, or a
/// pointer to contiguous row-major elements.
struct Lowered {
  Value scalar;
  Value data;
};

/// How the outermost loop of a domain runs.
struct FirstAxis {
  /// The leading levels of the domain, this one first, whose positions
  /// write disjoint memory (for a given position of the levels before
  /// them): the first may be shared out on the thread pool
  /// (ParallelLoops.h), and the GPU backend may run them all as one loop.
  unsigned parallelLevels = 0;
  /// Only positions [start, end) (a chunk of a reduction); null: all.
  Value start, end;

  bool parallel() const { return parallelLevels > 0; }
  /// The levels below this one.
  FirstAxis next() const {
    return levels(parallelLevels > 0 ? parallelLevels - 1 : 0);
  }
  static FirstAxis whole(bool parallel) { return levels(parallel ? 1 : 0); }
  static FirstAxis levels(unsigned count) { return {count, Value(), Value()}; }
  static FirstAxis chunk(Value start, Value end) { return {0, start, end}; }
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
  /// The private function computing each gradient program into a buffer.
  DenseMap<Operation *, func::FuncOp> gradientFunctions;
};

/// Declares, in `target`, the C functions of the kernel support library
/// that kernels call.
void declareRuntimeFunctions(ModuleOp target);

/// The state of emitting one function.
class KernelLanes;

class KernelFunction {
  /// Builds element-wise ops' lanes with the kernel's helpers.
  friend class KernelLanes;

public:
  KernelFunction(ModelContext &context, func::FuncOp function,
                 bool isProgram = false);

  /// The kernel's arguments (ArtifactABI.h).
  Value buffersArg, dimsArg, constsArg, stepArg, resultArg;
  /// In a gradient function, the buffer each tensor's accumulations go into.
  llvm::StringMap<Value> gradientTargets;

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
  /// Element-wise values that their one user, element-wise too, computes
  /// lanes of in its own loop (no array of their own): isFusedIntoUser.
  llvm::DenseSet<Value> fusedIntoUser;
  IRMapping integers;
  /// How many domain loops enclose the code being emitted.
  int loopDepth = 0;
  /// Work that a loop needs once goes before this op: the start of the
  /// current statement (an op outside every loop).
  Operation *statementAnchor = nullptr;
  SmallVector<Operation *> anchors;

  /// Lets computed so far in the current statement scope.
  DenseMap<Operation *, Value> letBuffers;
  /// The tiles a bilinear contraction keeps (a pointer, null at run time
  /// when they are too many), for the one that reuses its scores.
  DenseMap<Operation *, Value> keptTiles;
  /// Lets read the state: after a store, or in a loop of the program, they
  /// are computed again.
  void forgetStateDerivedWork() { letBuffers.clear(); }
  /// Emits `work`, which depends on no loop index, ahead of the current
  /// statement when inside a loop, so that it runs once; work that `work`
  /// needs ahead in turn goes before it.
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

  //===--------------------------------------------------------------------===//
  // Scalars, pointers, memory (KernelFunction.cpp)
  //===--------------------------------------------------------------------===//

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
  Value toF64(Value real) {
    if (context.elementType.getWidth() == 64)
      return real;
    return arith::ExtFOp::create(b, loc, b.getF64Type(), real);
  }
  /// Whether elements are f32 (else f64).
  bool singlePrecision() { return context.elementType.getWidth() != 64; }

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
  /// Calls the support function `name` (declared by
  /// declareRuntimeFunctions).
  func::CallOp callSupport(StringRef name, ValueRange arguments);
  /// Folds a support function's status into the kernel's: the worst wins.
  /// Loops on several threads may report at once.
  void reportStatus(Value code);

  /// Values that only depend on dims, computed once at entry.
  Value dim(StringRef name);
  Value dimExpr(DimExprAttr expr);
  Value elementCount(ArrayType type);
  SmallVector<Value> shape(ArrayType type);
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

  //===--------------------------------------------------------------------===//
  // Loops (KernelFunction.cpp)
  //===--------------------------------------------------------------------===//

  void forRange(Value upper, function_ref<void(Value)> body);
  SmallVector<Value>
  forRange(Value upper, ValueRange carried,
           function_ref<SmallVector<Value>(Value, ValueRange)> body);
  /// Loops over [lower, upper) in steps of `step`.
  scf::ForOp forSteps(Value lower, Value upper, Value step,
                      function_ref<void(Value)> body);
  /// Runs `body` at every position of `sizes` that `predicate` (when not
  /// empty) admits, carrying `carried`.
  FailureOr<SmallVector<Value>> forDomain(
      ArrayAttr sizes, Region &predicate, ValueRange carried,
      function_ref<FailureOr<SmallVector<Value>>(ValueRange, ValueRange)> body,
      FirstAxis first = {});
  FailureOr<SmallVector<Value>> forDomainLevel(
      ArrayRef<Value> extents, SmallVector<Value> &indices, Region &predicate,
      ValueRange carried,
      function_ref<FailureOr<SmallVector<Value>>(ValueRange, ValueRange)> body,
      FirstAxis first);
  /// The extents of a domain (a negative extent is an empty range).
  SmallVector<Value> extentsOf(ArrayAttr sizes);

  //===--------------------------------------------------------------------===//
  // Vector loops (VectorLoops.cpp): the inner loops over contiguous elements
  // as explicit vectors of 64 bytes, with a scalar remainder, so that they
  // run at full width whatever the trip count.
  //===--------------------------------------------------------------------===//

  /// Elements of a 64-byte vector.
  int vectorLanes() { return 512 / context.elementType.getWidth(); }
  /// `lanes` elements at `base + offset` (a scalar when lanes is 1).
  Value loadLanes(Value base, Value offset, int lanes);
  void storeLanes(Value value, Value base, Value offset, int lanes);
  /// `scalar` in every lane.
  Value splat(Value scalar, int lanes);
  /// Runs `body(offset, lanes)` over [0, count): vectors, then scalars.
  void forLanes(Value count, function_ref<void(Value, int)> body);
  /// Σ over [0, count) of `term(offset, lanes)`: a vector accumulator, then
  /// one horizontal sum and the scalar remainder.
  Value sumLanes(Value count, function_ref<Value(Value, int)> term);
  /// y[i] += a · x[i] (a scalar, x an array), over `count` elements.
  void addScaled(Value y, Value a, Value x, Value count);
  /// Σ_i x[i] · y[i].
  Value dotProduct(Value x, Value y, Value count);

  //===--------------------------------------------------------------------===//
  // Arrays (KernelFunction.cpp)
  //===--------------------------------------------------------------------===//

  /// An array of `type` whose element at a row-major position is `element`.
  Lowered build(ArrayType type, function_ref<Value(Value)> element);
  /// The same, computing `lanes` elements from an offset at a time.
  Lowered buildLanes(ArrayType type, function_ref<Value(Value, int)> element);
  /// `lanes` elements of `value` from `offset` (a scalar broadcasts).
  Value lanesAt(Lowered value, Value offset, int lanes) {
    return value.data ? loadLanes(value.data, offset, lanes)
                      : splat(value.scalar, lanes);
  }
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

  //===--------------------------------------------------------------------===//
  // Ops
  //===--------------------------------------------------------------------===//

  /// KernelFunction.cpp: statements, reads, lets, the repeat loop.
  LogicalResult emitOp(Operation *op);
  LogicalResult emitIntegerOp(Operation *op);
  /// Calls the gradient program of `grad`'s tensors, one buffer per result.
  LogicalResult emitGrad(GradOp grad);
  FailureOr<Lowered> emitRead(ReadOp read);
  FailureOr<Value> letBuffer(LetOp let);
  LogicalResult emitRepeat(RepeatOp repeat);
  LogicalResult emitOnce(OnceOp once);

  /// ArrayOps.cpp: elementwise and linear algebra.
  FailureOr<Lowered> emitArrayOp(Operation *op);
  /// What the element-wise `op` computes from `operands` (scalars or
  /// vectors of lanes), as its ElementwiseOpInterface builds it.
  Value elementwise(Operation *op, ValueRange operands);
  /// Whether `op` is element-wise on vectors of lanes (its operands arrays
  /// of one shape or scalars).
  static bool isLaneWise(Operation *op);
  /// Whether `op`, element-wise, is computed in its user's loop over lanes:
  /// its one user, later in the block, is element-wise of the same type, a
  /// dot product of two such arrays, a sum (mean, norm) of its elements or
  /// accumulates it, and nothing between them writes memory or holds a
  /// loop.
  static bool isFusedIntoUser(Operation *op);
  /// `lanes` elements of `value` from `offset`: loaded, or computed there
  /// where it is fused into its user.
  Value laneValue(Value value, Value offset, int lanes);
  /// `lanes` elements from `offset` of what the lane-wise `op` computes.
  Value laneOp(Operation *op, Value offset, int lanes);
  FailureOr<Lowered> emitMatmul(MatmulOp matmul);
  FailureOr<Lowered> emitBatchMatmul(BatchMatmulOp product);
  /// The accumulate right after `op` that adds its product (a batch_matmul,
  /// or a matmul of two matrices, outside every loop) into a whole tensor
  /// when nothing else reads it: the product is then computed into the
  /// tensor's storage, never stored on its own; null otherwise.
  AccumulateOp addedInPlace(Operation *op);
  /// The support call of a batch_matmul or matmul `op` writing into `into`,
  /// or adding to it with `add`.
  void emitProducts(Operation *op, Value into, bool add);
  FailureOr<Lowered> emitRows(Operation *op, Lowered operand, ArrayType type);
  /// A plugin's function or aggregation (PluginCalls.cpp): a call of its
  /// run-time code through the artifact's pointer slot.
  FailureOr<Lowered> emitPluginOp(Operation *op);
  Value callPluginCode(StringRef symbol, Type result, ValueRange arguments);
  /// `value` as doubles: itself in f64 kernels, a converted copy in f32.
  Value asDoubles(Lowered value, Value count);
  /// Doubles back as the kernel's elements (in place in f64 kernels).
  Value fromDoubles(Value doubles, Value count);
  FailureOr<Lowered> emitSupportCall(Operation *op, Lowered operand,
                                     ArrayType operandType);

  /// Reductions.cpp.
  FailureOr<Lowered> emitReduce(ReduceOp reduce);
  /// A reduction in the order of its domain, on one thread.
  FailureOr<Lowered> emitReduceInOrder(ReduceOp reduce, FirstAxis first = {});

  /// Contractions.cpp: tables and softmax contractions.
  FailureOr<Lowered> emitTabulate(TabulateOp table);
  LogicalResult emitSoftmaxContract(SoftmaxContractOp contract);
  LogicalResult emitBilinearContract(SoftmaxContractOp contract,
                                     const BilinearContract &form);
  /// The weights (κ, α₁ … αₘ), as f64, of a bilinear contraction's value
  /// whose factor is `factor` (null for 1), affine in the form's pair terms.
  FailureOr<SmallVector<Value>>
  factorCoefficients(Value factor, const BilinearContract &form);
  LogicalResult emitQuadraticContract(SoftmaxContractOp contract,
                                      const QuadraticContract &form);
  LogicalResult emitGenericContract(SoftmaxContractOp contract);
  /// Stores `value` (an index as i64) in 8-byte slot `position` of `slots`.
  void storeInSlot(Value slots, unsigned position, Value value);
  /// Reports a contraction kernel's code (SoftmaxContract.h's
  /// ENERGY_CONTRACT_*) as the kernel's status.
  void reportContractStatus(Value code);
  /// The softmax weights exp(x) of `count` elements at `values`, in place
  /// (the support library's vector exp, results below the smallest normal
  /// number dropped).
  void expInPlace(Value values, Value count);
};

} // namespace mlir::energy::codegen

#endif // ENERGY_LIB_CODEGEN_KERNELFUNCTION_H
