//===- Interpreter.h - Reference interpreter of the energy dialect --------===//
//
// Evaluates `energy` dialect IR in double precision with straightforward
// loops: energy terms, outputs, lets, gradient programs and any value at the
// top level of a body. It is the oracle against which compiled kernels and
// derived gradients are checked, so it favours clarity over speed. Errors (a
// missing binding, an index out of range, a NaN) are emitted as MLIR
// diagnostics on the offending op and returned as failure.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_INTERPRETER_INTERPRETER_H
#define ENERGY_INTERPRETER_INTERPRETER_H

#include "energy/IR/EnergyOps.h"
#include "energy/Interpreter/ArrayValue.h"
#include "energy/Interpreter/Bindings.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringMap.h"

#include <map>
#include <optional>
#include <vector>

namespace mlir::energy {

/// A model with its bindings, ready to evaluate. Bindings are fixed for the
/// interpreter's lifetime, so values of lets are cached across evaluations.
class Interpreter {
public:
  /// Verifies `model` and checks `bindings` against it: every bound name is
  /// declared, bound tensors have their declared shapes, derived dims divide
  /// exactly. Emits an error and fails otherwise.
  static FailureOr<Interpreter> create(ModelOp model, const Bindings &bindings);

  /// The global energy: the sum of every `energy.term` but the auxiliary
  /// ones.
  FailureOr<double> evaluateEnergy();
  FailureOr<double> evaluateTerm(TermOp term);
  /// The whole output: its domain axes followed by its element's axes.
  FailureOr<ArrayValue> evaluateOutput(OutputOp output);
  /// The whole let: its domain axes followed by its element's axes.
  FailureOr<ArrayValue> evaluateLet(LetOp let);
  /// A value defined at the top level of the body of a term, let, output,
  /// update option, assign rule or stopping rule. `indices` give the values
  /// of the body's block arguments (a let's or output's domain indices).
  /// Index and i1 values are returned as scalars.
  FailureOr<ArrayValue> evaluate(Value value, ArrayRef<int64_t> indices = {});

  /// Runs the gradient program `gradient`: a zero buffer of its tensor's
  /// shape, into which every `energy.accumulate` adds, executed in order
  /// (`energy.foreach` at every admitted position, row-major). The result is
  /// cached: bindings are fixed.
  FailureOr<ArrayValue> evaluateGradient(GradientOp gradient);
  /// Runs a gradient program of one or several tensors (a joint one): the
  /// gradient of each of its tensors, in order.
  FailureOr<SmallVector<ArrayValue>> evaluateGradients(GradientOp gradient);
  /// The gradient program of the tensor named `tensorName`; an error on the
  /// model when it has none.
  FailureOr<ArrayValue> evaluateGradient(StringRef tensorName);

  /// Discards what was computed from the current tensors and step (lets and
  /// gradients), after either changes.
  void invalidateCaches();

  /// Runs one step of `program`: its ops in order, each `energy.store`
  /// replacing its tensor's value for everything evaluated afterwards.
  /// Values computed before a store keep the values they had then.
  LogicalResult runUpdateProgram(UpdateProgramOp program);
  /// Runs a program block the same way: a part of an
  /// `energy.backward_program` (its seed, step or finish).
  LogicalResult runProgram(Region &program);

  /// Replaces the value of a tensor (of its shape), as a store does.
  LogicalResult setTensorValue(StringRef name, ArrayValue value);

  /// The current value of a tensor: bound, initialised, or last stored.
  FailureOr<ArrayValue> getTensorValue(StringRef name);

  /// Sets the dynamics step that `energy.step` reads.
  void setStep(int64_t newStep);

  /// The value of a dim, if bound, defaulted or derived.
  std::optional<int64_t> getDim(StringRef name) const;
  /// The concrete shape of `type`; `user` receives the error for an unbound
  /// dim.
  FailureOr<std::vector<int64_t>> getShape(ArrayType type, Operation *user);

  /// The values computed while evaluating one block at one position
  /// (defined in the interpreter's sources).
  struct Frame;
  /// The buffer each tensor of a running gradient program adds into.
  using GradientBuffers = llvm::StringMap<ArrayValue>;

private:
  explicit Interpreter(ModelOp model) : model(model) {}

  /// The frame, among `frame` and its parents, of the block `value` is
  /// defined in; null when that block is not being evaluated.
  static Frame *findOwner(Value value, Frame &frame);
  /// Where a value is kept once computed: a frame's memo, under the
  /// positions of the loops below that frame that the value depends on.
  struct MemoSlot {
    Frame *frame;
    std::vector<int64_t> key;
  };
  /// The slot of `value`, whose block's frame is `owner`: above the bodies
  /// of reductions and tables around it whose indices it does not depend
  /// on, so that it is computed once for all their positions (an lse over
  /// components for each row, in a table over components of sums over
  /// rows); `owner` itself where there are none.
  MemoSlot memoSlot(Value value, Frame *owner);
  /// The blocks whose arguments `value` depends on, through its operands
  /// and the values its regions use from outside (memoised).
  const llvm::SmallPtrSetImpl<Block *> &argumentBlocksOf(Value value);

  FailureOr<ArrayValue> evaluateArray(Value value, Frame &frame);
  FailureOr<int64_t> evaluateInteger(Value value, Frame &frame);
  FailureOr<ArrayValue> evaluateArrayOp(Operation *op, Frame &frame);
  FailureOr<int64_t> evaluateIntegerOp(Operation *op, Frame &frame);
  /// The results of an `energy.grad`: its gradient program's.
  FailureOr<SmallVector<ArrayValue>> evaluateGradOp(GradOp grad);
  /// The values of an affine index map over index operands.
  FailureOr<std::vector<int64_t>> evaluateIndices(Operation *op, AffineMap map,
                                                  ValueRange operands,
                                                  Frame &frame);
  FailureOr<ArrayValue> evaluateRead(ReadOp read, Frame &frame);
  /// The tensor, let or const a read names (resolved once per read).
  Operation *sourceOf(ReadOp read);
  FailureOr<ArrayValue> evaluateReduce(ReduceOp reduce, Frame &frame);
  /// Kernel-plan ops (PlanOps.cpp).
  FailureOr<ArrayValue> evaluateTabulate(TabulateOp table, Frame &frame);
  FailureOr<ArrayValue> evaluateBatchMatmul(BatchMatmulOp product,
                                            const ArrayValue &lhs,
                                            const ArrayValue &rhs);
  FailureOr<ArrayValue> evaluatePrefixSum(PrefixSumOp prefix,
                                          const ArrayValue &operand);
  /// The same with one row axis.
  FailureOr<ArrayValue> evaluateBatchMatmulOfMatrices(BatchMatmulOp product,
                                                      const ArrayValue &lhs,
                                                      const ArrayValue &rhs);
  FailureOr<SmallVector<ArrayValue>>
  evaluateSoftmaxContract(SoftmaxContractOp contract, Frame &frame);
  /// The element of `let` at a full tuple of its domain indices (cached).
  FailureOr<ArrayValue> evaluateLetElement(LetOp let, ArrayRef<int64_t> indices,
                                           Operation *user);
  /// The value of `user`'s region body evaluated at every position of
  /// `domain`, stacked in front of the element's axes.
  FailureOr<ArrayValue> evaluateComprehension(
      Operation *user, ArrayAttr domain, Type elementType,
      function_ref<FailureOr<ArrayValue>(ArrayRef<int64_t>)> element);
  FailureOr<const ArrayValue *> getTensor(TensorOp tensor, Operation *user);
  FailureOr<int64_t> evaluateDimExpr(DimExprAttr expr, Operation *user);
  /// The sizes of an index domain (negative sizes clamp to 0).
  FailureOr<std::vector<int64_t>> evaluateDomain(ArrayAttr sizes,
                                                 Operation *user);
  /// Executes the ops of `block` in order in `frame`, accumulating into
  /// `gradient`: loops and accumulations run, pure values are computed when
  /// used.
  LogicalResult executeGradientBlock(Block &block, Frame &frame,
                                     GradientBuffers &gradients);
  LogicalResult executeForeach(ForeachOp loop, Frame &frame,
                               GradientBuffers &gradients);
  /// Executes the ops of a block of an update program in order: stores,
  /// `energy.repeat` loops, and every value where it stands.
  LogicalResult executeProgramBlock(Block &block, Frame &frame);
  LogicalResult executeAccumulate(AccumulateOp accumulate, Frame &frame,
                                  GradientBuffers &gradients);

  ModelOp model;
  llvm::StringMap<int64_t> dims;
  llvm::StringMap<double> consts;
  /// Bound tensors, and unbound ones once their initialiser has run.
  llvm::StringMap<ArrayValue> tensors;
  int64_t step = 0;
  /// What `energy.rounding_unit` evaluates to (Bindings::getRoundingUnit).
  double roundingUnit = 0;
  llvm::DenseMap<Operation *, std::map<std::vector<int64_t>, ArrayValue>>
      letCache;
  llvm::DenseMap<Value, llvm::SmallPtrSet<Block *, 4>> argumentBlocks;
  /// What sourceOf resolved, by read.
  llvm::DenseMap<Operation *, Operation *> readSources;
  /// What getShape computed, by array type (the dims are fixed).
  llvm::DenseMap<Type, std::vector<int64_t>> shapes;
  /// Per value, how memoSlot finds its slot: the number of frames up from
  /// its own, and for each frame on the way whether its indices are part
  /// of the key (0 frames: its own frame's memo).
  struct HoistPlan {
    unsigned levels = 0;
    llvm::SmallVector<bool, 4> keyed;
  };
  llvm::DenseMap<Value, HoistPlan> hoistPlans;
  /// Gradients computed so far, by program (its tensors and term).
  llvm::StringMap<SmallVector<ArrayValue>> gradientCache;
  /// Lets, tensors and gradients being evaluated, to report cyclic
  /// definitions.
  llvm::DenseSet<Operation *> inProgress;
};

} // namespace mlir::energy

#endif // ENERGY_INTERPRETER_INTERPRETER_H
