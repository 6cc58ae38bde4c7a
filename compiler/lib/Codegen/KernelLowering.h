//===- KernelLowering.h - Lowering energy ops into kernels ------*- C++ -*-===//
//
// The lowering of a kernel's energy ops by patterns, one per op family: the
// state patterns share, the driver that hands each op to the pattern of
// highest benefit that matches it, and the pattern interface. Private to
// compiler/lib/Codegen.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_LIB_CODEGEN_KERNELLOWERING_H
#define ENERGY_LIB_CODEGEN_KERNELLOWERING_H

#include "KernelBuilder.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <functional>
#include <memory>
#include <type_traits>

namespace mlir::energy::codegen {

class KernelLoweringPatterns;

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

/// What the lowering patterns of one kernel share besides its frame.
struct LoweringState {
  LoweringState(const KernelLoweringPatterns &patterns, bool isProgram)
      : patterns(patterns), isProgram(isProgram) {}

  const KernelLoweringPatterns &patterns;
  /// Update programs and stopping rules see stores: reads of a tensor that
  /// the program stores into are copied where they stand.
  bool isProgram;
  /// The lowered value of each energy array value emitted so far.
  DenseMap<Value, Lowered> arrays;
  /// Element-wise values that their one user, element-wise too, computes
  /// lanes of in its own loop (no array of their own): isFusedIntoUser.
  llvm::DenseSet<Value> fusedIntoUser;
  /// The lanes of a fused value already computed in a loop, by value and
  /// the loop's offset: a value several fused users read is computed once.
  DenseMap<std::pair<Value, Value>, Value> fusedLanes;
  /// isFusedIntoUser's decisions so far.
  DenseMap<Operation *, bool> fusedDecisions;
  /// The lowered index and predicate values.
  IRMapping integers;
  /// Lets computed so far in the current statement scope.
  DenseMap<Operation *, Value> letBuffers;
  /// The tiles a bilinear contraction keeps (a pointer, null at run time
  /// when they are too many), for the one that reuses its scores.
  DenseMap<Operation *, Value> keptTiles;
  /// In a gradient function, the buffer each tensor's accumulations go into.
  llvm::StringMap<Value> gradientTargets;
  /// The buffer an op computes its array into in place of scratch of its
  /// own (the row of the comprehension or kept value it yields), and the
  /// values computed in the buffer of the tensor their store writes
  /// (Destinations.cpp).
  DenseMap<Operation *, Value> destinations;
  llvm::DenseSet<Value> inTensorBuffers;
  /// In a program, the value each scalar tensor holds since a store of it
  /// whose value the host has (ProgramOps.cpp): a read that follows takes
  /// it instead of loading it back.
  llvm::StringMap<Value> storedScalars;
};

/// The driver of one kernel's lowering, over its frame and state; op
/// families' lowerings derive from it and share both.
class KernelLowering : public KernelBuilder {
public:
  KernelLowering(KernelFrame &frame, LoweringState &state)
      : KernelBuilder(frame), state(state) {}

  /// Emits the ops of `block` (a region body whose block arguments get
  /// `arguments`), returning the lowered values it yields. Ops in `leftOut`
  /// are not emitted: the caller computes what they yield (a null value).
  FailureOr<SmallVector<Value>>
  emitBlock(Block &block, ValueRange arguments,
            const llvm::SmallPtrSetImpl<Operation *> *leftOut = nullptr);
  /// Emits `op` with the pattern of highest benefit that matches it.
  LogicalResult emitOp(Operation *op);
  /// The lowered array for an energy value emitted earlier.
  Lowered get(Value value) { return state.arrays.lookup(value); }
  void setLowered(Value value, Lowered lowered) {
    state.arrays[value] = lowered;
  }
  /// The lowered index and predicate values.
  IRMapping &integerMapping() { return state.integers; }
  /// Writes a comprehension (a let or an output: a body evaluated at every
  /// position of `domain`) into `destination`, row-major.
  LogicalResult emitComprehension(ArrayAttr domain, ArrayType elementType,
                                  Block &body, Value destination);
  /// The buffer a gradient function adds `tensor`'s accumulations into.
  void setGradientTarget(StringRef tensor, Value buffer) {
    state.gradientTargets[tensor] = buffer;
  }
  Value gradientTarget(StringRef tensor) {
    return state.gradientTargets.lookup(tensor);
  }

  /// Runs `body` at every position of `sizes` that `predicate` (when not
  /// empty) admits, carrying `carried`.
  FailureOr<SmallVector<Value>> forDomain(
      ArrayAttr sizes, Region &predicate, ValueRange carried,
      function_ref<FailureOr<SmallVector<Value>>(ValueRange, ValueRange)> body,
      FirstAxis first = {});
  FailureOr<SmallVector<Value>> indicesOf(Operation *op, AffineMap map,
                                          ValueRange operands);
  /// Lets read the state: after a store, or in a loop of the program, they
  /// are computed again.
  void forgetStateDerivedWork() { state.letBuffers.clear(); }

  //===--------------------------------------------------------------------===//
  // Where arrays are computed (Destinations.cpp)
  //===--------------------------------------------------------------------===//

  /// The store that writes what the table or product `op` computes, in a
  /// program, into a whole tensor right after it, where `op` reads nothing
  /// of that tensor: `op` computes into the tensor's buffer. Null if none.
  StoreOp storedInPlace(Operation *op);
  /// The buffer the array of `op` (a table or a product) is computed in:
  /// its destination, the tensor it is stored in place into, or scratch.
  Value arrayBuffer(Operation *op);
  /// Where `op` computes its array in place of scratch of its own (null:
  /// scratch): the row of the comprehension or the kept value it yields.
  Value destinationOf(Operation *op) { return state.destinations.lookup(op); }
  /// Has the table, product or element-wise op that yields `value` in
  /// `body` compute it into `destination()` while `body` is emitted once:
  /// that op (null where none can), to pass to computedInto after.
  Operation *computeInto(Block &body, Value value,
                         function_ref<Value()> destination);
  void computedInto(Operation *producer);
  /// Whether `value` was computed in the buffer of the tensor it is stored
  /// into.
  bool isInTensorBuffer(Value value) {
    return state.inTensorBuffers.contains(value);
  }

  //===--------------------------------------------------------------------===//
  // Element-wise ops fused into their users (FusedLanes.cpp)
  //===--------------------------------------------------------------------===//

  /// What the element-wise `op` computes from `operands` (scalars or
  /// vectors of lanes), as its ElementwiseOpInterface builds it.
  Value elementwise(Operation *op, ValueRange operands);
  /// Whether `op` is element-wise on vectors of lanes (its operands arrays
  /// of one shape or scalars).
  static bool isLaneWise(Operation *op);
  /// Whether `op`, element-wise, is computed in its user's loop over lanes:
  /// its one user (of one operand or more), later in the block, is
  /// element-wise of the same type, a dot product of two such arrays, a sum
  /// (mean, norm) of its elements, or accumulates or stores it, and nothing
  /// between them writes memory or holds a loop. In loops of one lane
  /// (deviceLoops()), also where its users are several element-wise ops of
  /// its type whose lanes one loop computes (fusionLoop): that loop computes
  /// each of its elements once, for all of them. Decided once an op.
  bool isFusedIntoUser(Operation *op);
  /// The op whose loop computes `op`'s lanes: `op` itself unless it is
  /// fused into its users.
  Operation *fusionLoop(Operation *op);
  /// isFusedIntoUser's decision, made.
  bool decideFusedIntoUser(Operation *op);
  /// Whether `value` is computed lane by lane in its user's loop.
  bool isFused(Value value) { return state.fusedIntoUser.contains(value); }
  void markFused(Value value) { state.fusedIntoUser.insert(value); }
  /// `lanes` elements of `value` from `offset`: loaded, or computed there
  /// where it is fused into its user.
  Value laneValue(Value value, Value offset, int lanes);
  /// `lanes` elements from `offset` of what the lane-wise `op` computes.
  Value laneOp(Operation *op, Value offset, int lanes);

protected:
  LoweringState &state;

private:
  FailureOr<SmallVector<Value>> forDomainLevel(
      ArrayRef<Value> extents, SmallVector<Value> &indices, Region &predicate,
      ValueRange carried,
      function_ref<FailureOr<SmallVector<Value>>(ValueRange, ValueRange)> body,
      FirstAxis first);
};

/// One way of lowering ops: those named `root` (any op when none) that
/// `match` accepts. Of an op's patterns, the one of highest benefit that
/// matches lowers it; `lower` failing is an error it has reported.
class KernelLoweringPattern {
public:
  using Match = std::function<bool(Operation *, KernelLowering &)>;
  using Lower = std::function<LogicalResult(Operation *, KernelLowering &)>;

  KernelLoweringPattern(std::optional<OperationName> root, unsigned benefit,
                        Match match, Lower lower)
      : root(root), benefit(benefit), match(std::move(match)),
        lower(std::move(lower)) {}

  std::optional<OperationName> root;
  unsigned benefit;
  Match match;
  Lower lower;
};

/// Benefits. The orders that matter: among element-wise ops, fused into
/// the user > on vectors of lanes > one element at a time; for matmul,
/// batch_matmul, transpose and accumulate, the special cases
/// (kInPlaceBenefit, kUnstoredBenefit) > the op's own pattern.
enum LoweringBenefit : unsigned {
  kOpBenefit = 1,
  /// A product computed into the storage its accumulation adds it to.
  kInPlaceBenefit = 2,
  /// A value that its users read through, never stored.
  kUnstoredBenefit = 2,
  kElementwiseBenefit = 2,
  kLaneWiseBenefit = 3,
  kFusedBenefit = 4,
};

/// The lowering patterns of every op family.
class KernelLoweringPatterns {
public:
  explicit KernelLoweringPatterns(MLIRContext *context) : context(context) {}

  /// Lowers ops named `OpTy` that `match` (when given) accepts.
  template <typename OpTy>
  void add(KernelLoweringPattern::Lower lower, unsigned benefit = kOpBenefit,
           KernelLoweringPattern::Match match = {}) {
    addPattern(OperationName(OpTy::getOperationName(), context), benefit,
               std::move(match), std::move(lower));
  }
  /// Lowers any op that `match` accepts.
  void addGeneric(unsigned benefit, KernelLoweringPattern::Match match,
                  KernelLoweringPattern::Lower lower) {
    addPattern(std::nullopt, benefit, std::move(match), std::move(lower));
  }
  /// Lowers ops `OpTys`, each with one array result, by `method` of the
  /// family `Family` (a KernelLowering), which returns the result's value.
  template <typename Family, typename... OpTys, typename Argument>
  void addArrayOps(FailureOr<Lowered> (Family::*method)(Argument)) {
    (add<OpTys>([method](Operation *op, KernelLowering &kernel) {
       Family family(kernel);
       FailureOr<Lowered> value;
       if constexpr (std::is_same_v<Argument, Operation *>)
         value = (family.*method)(op);
       else
         value = (family.*method)(cast<Argument>(op));
       if (failed(value))
         return failure();
       kernel.setLowered(op->getResult(0), *value);
       return success();
     }),
     ...);
  }
  /// Lowers ops `OpTy` by `method` of `Family`, which sets their results.
  template <typename Family, typename OpTy>
  void addStatement(LogicalResult (Family::*method)(OpTy)) {
    add<OpTy>([method](Operation *op, KernelLowering &kernel) {
      Family family(kernel);
      return (family.*method)(cast<OpTy>(op));
    });
  }

  /// The patterns that may lower `op`, highest benefit first (in the order
  /// they were added among equals).
  ArrayRef<const KernelLoweringPattern *> patternsFor(Operation *op) const;

private:
  void addPattern(std::optional<OperationName> root, unsigned benefit,
                  KernelLoweringPattern::Match match,
                  KernelLoweringPattern::Lower lower);

  MLIRContext *context;
  SmallVector<std::unique_ptr<KernelLoweringPattern>> patterns;
  /// Each op name's patterns, found on first use; boxed, so that a list
  /// stays put while lowering an op adds another name's.
  mutable DenseMap<OperationName,
                   std::unique_ptr<SmallVector<const KernelLoweringPattern *>>>
      byName;
};

/// The patterns of each op family, in that family's file.
void populateProgramLowerings(KernelLoweringPatterns &patterns);
void populateFusedLaneLowerings(KernelLoweringPatterns &patterns);
void populateArrayOpLowerings(KernelLoweringPatterns &patterns);
void populateMatrixProductLowerings(KernelLoweringPatterns &patterns);
void populateReductionLowerings(KernelLoweringPatterns &patterns);
void populateContractionLowerings(KernelLoweringPatterns &patterns);
void populatePluginCallLowerings(KernelLoweringPatterns &patterns);
/// All of them.
void populateKernelLowerings(KernelLoweringPatterns &patterns);

namespace detail {
/// What a KernelFunction owns, constructed before the lowering that refers
/// to it.
struct KernelStorage {
  KernelStorage(ModelContext &context, func::FuncOp function,
                const KernelLoweringPatterns &patterns, bool isProgram)
      : ownedFrame(context, function), ownedState(patterns, isProgram) {}
  KernelFrame ownedFrame;
  LoweringState ownedState;
};
} // namespace detail

/// One kernel function and the lowering of its ops: what KernelEmitter
/// creates for each kernel of an artifact.
class KernelFunction : private detail::KernelStorage, public KernelLowering {
public:
  KernelFunction(ModelContext &context, func::FuncOp function,
                 const KernelLoweringPatterns &patterns, bool isProgram = false)
      : KernelStorage(context, function, patterns, isProgram),
        KernelLowering(ownedFrame, ownedState) {}
};

} // namespace mlir::energy::codegen

#endif // ENERGY_LIB_CODEGEN_KERNELLOWERING_H
