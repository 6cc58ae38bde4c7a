//===- BackwardBuilder.h - Builds energy.backward_program -------*- C++ -*-===//
//
// The builder energy-build-backward runs: the reverse sweep of one step
// (BuildBackward.cpp) or the solve at a fixed point
// (BuildImplicitBackward.cpp). Private to compiler/lib/Transforms.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_LIB_TRANSFORMS_BACKWARDBUILDER_H
#define ENERGY_LIB_TRANSFORMS_BACKWARDBUILDER_H

#include "energy/IR/EnergyOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <utility>

namespace mlir::energy {

/// Builds `energy.backward_program` for a model with losses: `seed`, then
/// the reverse-mode derivative of one step or, for `backward implicit`, the
/// adjoints at the fixed point the run ends at, then `finish`.
class BackwardBuilder {
public:
  BackwardBuilder(ModelOp model, UpdateProgramOp program)
      : model(model), program(program), symbols(model),
        context(model.getContext()) {}

  LogicalResult build();

private:
  /// Where the step program is, or the model without one.
  Location loc() { return program ? program.getLoc() : model.getLoc(); }

  FlatSymbolRefAttr ref(StringRef name) {
    return FlatSymbolRefAttr::get(context, name);
  }

  ArrayType typeOf(StringRef tensor) {
    return symbols.lookup<TensorOp>(tensor).getArrayType();
  }

  Value readWhole(OpBuilder &builder, Location loc, StringRef tensor) {
    return ReadOp::create(builder, loc, typeOf(tensor), ref(tensor),
                          AffineMapAttr::get(AffineMap::get(context)),
                          ValueRange());
  }

  Value zeros(OpBuilder &builder, Location loc, ArrayType type) {
    Value zero = ConstantOp::create(builder, loc, 0.0);
    if (type.isScalar())
      return zero;
    return BroadcastOp::create(builder, loc, type, zero);
  }

  /// What an auxiliary tensor of the backward program holds for @NAME (its
  /// provenance attribute, declared in ODS).
  enum class Provenance { AdjointOf, CotangentOf, SolverOf };
  /// A state tensor `NAME.SUFFIX` of `shape` marked `provenance = @NAME`,
  /// created on first use.
  StringRef auxiliaryTensor(StringRef name, StringRef suffix, ArrayAttr shape,
                            Provenance provenance);
  Operation *lastTensor();
  StringRef adjointTensor(StringRef tensor);

  /// `seed`: every adjoint starts as the gradient of the sum of the losses.
  void buildSeed(Block &block);

  /// `finish`: a state initialised from another tensor passes its adjoint
  /// on to it.
  void buildFinish(Block &block);

  //===--------------------------------------------------------------------===//
  // The fixed point (BuildImplicitBackward.cpp)
  //===--------------------------------------------------------------------===//

  Value constant(OpBuilder &builder, double value);
  Value innerProduct(OpBuilder &builder, Value lhs, Value rhs);
  /// numerator / denominator where `valid`, else 0, never dividing by 0.
  Value guardedRatio(OpBuilder &builder, Value valid, Value numerator,
                     Value denominator);
  Value compare(OpBuilder &builder, CmpPredicate predicate, Value lhs,
                Value rhs);

  /// The adjoints at a fixed point x* of the updated nodes x, where
  /// ∇ₓE(x*, Y) = 0 for the other tensors Y: with H = ∇²ₓE and x̄ the
  /// seeded adjoint, Ȳ −= ∇_Y ⟨∇ₓE, v⟩ where H v = x̄, and x̄ = 0. v comes
  /// from conjugate gradients on the Hessian-vector products
  /// H p = ∇ₓ ⟨∇ₓE, p⟩ (the gradient of the terms `x.backprop` with the
  /// cotangents c = p), at most `implicit_iterations` rounds, until
  /// ‖r‖ ≤ tol ‖x̄‖ or a direction of non-positive curvature.
  LogicalResult buildImplicitSolve(DynamicsOp dynamics, Block &block);

  //===--------------------------------------------------------------------===//
  // The step
  //===--------------------------------------------------------------------===//

  /// Appends to `block` the reverse-mode derivative of the program
  /// `source` (the step, or what a call runs around its steps): its ops
  /// again, each store preceded by a read of the value it replaces, then
  /// the reverse sweep, which restores those values and leaves every
  /// adjoint in its tensor. Run at the state `source` starts from (a step,
  /// a call's begin), or, for a program that only adds to the tensors it
  /// stores what the others give (a call's finish, x ← x − s W), at the
  /// state it leaves. Nothing for a null `source`.
  LogicalResult reverseProgram(Block *source, Block &block);

  /// The adjoint of `tensor` at this point of the reverse sweep (after the
  /// ops not yet reversed): null for zero.
  Value currentTensorAdjoint(OpBuilder &builder, Location loc,
                             StringRef tensor);
  void addTensorAdjoint(OpBuilder &builder, Location loc, StringRef tensor,
                        Value adjoint);
  void addAdjoint(OpBuilder &builder, Location loc, Value value, Value adjoint);

  LogicalResult reverse(Operation *op, OpBuilder &builder);
  LogicalResult reverseRead(ReadOp read, OpBuilder &builder);

  /// Stores `adjoint` as the cotangent of `name` and adds the gradient of
  /// `term` (⟨value, cotangent⟩) with respect to every tensor it reads into
  /// their adjoints.
  void pullBackThrough(TermOp term, StringRef cotangent, Value adjoint,
                       OpBuilder &builder, Location loc);

  /// Adds the gradient of `term` with respect to each differentiable tensor
  /// of `tensors` but those `skipped` holds into its adjoint; returns the
  /// gradient with respect to `wanted` (null if none was taken).
  Value addGradients(TermOp term, const llvm::SetVector<StringRef> &tensors,
                     OpBuilder &builder, Location loc,
                     const llvm::SetVector<StringRef> &skipped = {},
                     StringRef wanted = {});

  /// ḡ ↦ ∇_Y ⟨∇_x E, ḡ⟩ for every tensor Y: the gradient of the auxiliary
  /// term ⟨∇E, c⟩, c the cotangent tensor of x. Where the energy reads x
  /// through a residual let S = x + R(Y) (and the Y only through S), the
  /// term is F(S): its gradient in x is ∇_S F, and in each Y the pull-back
  /// of that through S, ∇_Y ⟨∇_S F, S⟩, which is computed once per S
  /// rather than once per use of S in the energy (a sum of outer products
  /// per pair of an attention becomes one per position).
  LogicalResult reverseGrad(GradOp grad, OpBuilder &builder);

  /// ḡ₁, ḡ₂, … ↦ ∇_Y Σₖ ⟨∇_{xₖ} E, ḡₖ⟩ for the tensors of `grad` that have
  /// adjoints, when there are several and each takes reverseGrad's plain
  /// path: one directional term for all, whose gradient computes what they
  /// share (a layer's matrix products) once. False, building nothing,
  /// otherwise.
  FailureOr<bool> reverseGradJointly(GradOp grad, OpBuilder &builder);

  /// ḡ ↦ ∇_Y ⟨∇_x E, ḡ⟩ where the energy reads lets F that read no state
  /// (a Transformer's embedded tokens, the keys of a conditional energy):
  /// the directional term is taken of the energy with each F read from a
  /// tensor F.value that holds F's value, so that ∇_{F.value} of it is F's
  /// cotangent, pulled back through F (one outer product per position) to
  /// the tensors F reads. Returns false, adding nothing, where no such let
  /// is read.
  FailureOr<bool> pullBackThroughFixedLets(StringRef tensor, Value adjoint,
                                           OpBuilder &builder, Location loc);

  /// The tensor `F.value` that stands for the let F in energyOfFixedLets.
  StringRef valueTensor(LetOp let);

  /// The auxiliary term `energy.fixed_lets`: the sum of the energy terms,
  /// with every let that reads no state and some differentiable tensor
  /// (`fixedLets`) read from its value tensor and the other lets inlined;
  /// made on first use, null where no such let is read.
  FailureOr<TermOp> energyOfFixedLets();

  /// The residual let S = x + R through which the energy terms (the term
  /// `of` alone, when given) read `tensor` x, and the differentiable tensors
  /// other than x that they read only through S; a null let where there is
  /// none (x read beside S, several such lets) or no tensor reads only
  /// through it.
  std::pair<LetOp, llvm::SetVector<StringRef>>
  residualStream(StringRef tensor, FlatSymbolRefAttr of);

  /// The auxiliary term ⟨∇_x E, c⟩ (E the global energy, or term `of`) and
  /// the cotangent tensor c of x it reads, made on first use.
  FailureOr<std::pair<TermOp, StringRef>> directionalTerm(StringRef tensor,
                                                          FlatSymbolRefAttr of);

  /// The auxiliary term Σₖ ⟨∇_{xₖ} E, cₖ⟩ of the tensors xₖ (`x1.x2.backprop`,
  /// with `.of` for a term's) and the cotangent tensors cₖ it reads, made on
  /// first use from their joint gradient.
  FailureOr<std::pair<TermOp, SmallVector<StringRef>>>
  directionalTerm(ArrayRef<FlatSymbolRefAttr> tensors, FlatSymbolRefAttr of);

  /// S̄ ↦ ∇_Y ⟨S̄, S⟩ for a let S read whole: the gradient of the auxiliary
  /// term Σ_i ⟨S̄[i], body(i)⟩ over the let's domain.
  LogicalResult reverseLetRead(LetOp let, Value adjoint, OpBuilder &builder,
                               Location loc);

  /// The auxiliary term Σ_i ⟨S̄[i], body(i)⟩ of a let S over its domain and
  /// the cotangent tensor S̄ it reads, made on first use.
  std::pair<TermOp, StringRef> letPullback(LetOp let);

  ModelOp model;
  UpdateProgramOp program;
  SymbolTable symbols;
  MLIRContext *context;
  BackwardProgramOp backward;
  llvm::SetVector<StringRef> differentiable;
  /// The adjoint of each forward value, summed over its uses reversed so
  /// far.
  DenseMap<Value, Value> adjoints;
  /// The adjoint of each tensor at the current point of the sweep; a null
  /// entry is zero, a missing one the adjoint the step was entered with.
  llvm::MapVector<StringRef, Value> tensorAdjoints;
  /// For each store of the forward sweep, the value it replaced.
  DenseMap<Operation *, Value> replaced;
  /// The lets energyOfFixedLets reads from value tensors.
  SmallVector<LetOp> fixedLets;
  bool fixedLetsSearched = false;
  /// The fixed lets a backward step pulls back through in the finish, and
  /// the last op the finish has for them.
  llvm::SmallPtrSet<Operation *, 4> deferredLets;
  Operation *finishCursor = nullptr;
};

} // namespace mlir::energy

#endif // ENERGY_LIB_TRANSFORMS_BACKWARDBUILDER_H
