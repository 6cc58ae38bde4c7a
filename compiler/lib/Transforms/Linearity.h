//===- Linearity.h - Which values are linear maps of which ------*- C++ -*-===//
//
// What planning needs to know of linear algebra: in which operands an op is
// linear, and, for a value computed in the body of a loop or reduction,
// the values it is a sum of linear maps of, when those maps take their
// other operands from outside (Σ_p L(u_p) = L(Σ_p u_p) for such maps).
// Private to compiler/lib/Transforms.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_LIB_TRANSFORMS_LINEARITY_H
#define ENERGY_LIB_TRANSFORMS_LINEARITY_H

#include "energy/IR/EnergyOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::energy {

/// How an op depends on its array operands.
enum class Linearity {
  /// Not linear in its operands (or not known to be).
  None,
  /// Linear in all its array operands together (add, sub, neg, transpose,
  /// sums of elements, broadcast, diag, extract, embed): a sum of such ops
  /// of linear values is linear.
  Joint,
  /// Linear in each array operand when the others are held fixed (mul,
  /// matmul, dot, outer; div in its dividend only).
  Separate,
};

/// How `op` depends on its array operands.
Linearity linearityOf(Operation *op);

/// Whether `op`, of Separate linearity, is linear in operand `index`.
bool isLinearInOperand(Operation *op, unsigned index);

/// A value of a body as Σ_k L_k(u_k): the values u_k (`atoms`: values
/// that are not linear maps of others, and the fixed terms a sum adds, such
/// as c in x + c; each counted once) and the ops of the maps L_k (`maps`,
/// in no order), whose other operands are `invariant` (the factors of a
/// product, a divisor).
struct LinearDecomposition {
  llvm::SetVector<Value> atoms;
  llvm::SetVector<Operation *> maps;
};

/// The decomposition of `value`, a value of `body` (ops in nested regions
/// are atoms), where `invariant(v)` says which values the maps may take
/// as fixed operands.
LinearDecomposition decomposeLinearly(Value value, Block &body,
                                      function_ref<bool(Value)> invariant);

/// Whether `value`, a value of `body`, depends on one of `roots`: through
/// operands, or values the regions of an op use (a sum over a row inside
/// a loop). Dependence.h's `dependsOn` for roots in one block, looking no
/// further than that block and keeping its answers in `memo` (for these
/// roots only): the linear decompositions ask it of every value they meet.
bool dependsOnAnyOf(Value value, ArrayRef<Value> roots, Block &body,
                    llvm::DenseMap<Value, bool> &memo);

/// The part of `value`, a value of `body` linear in `rows` together (every
/// other value it depends on held fixed), with the summands that depend on
/// none of them left out: for L₁(u) + L₂(v) + c and rows {u}, L₁(u). Ops
/// it needs beyond `value`'s own are built at `builder` and appended to
/// `built`. A null Value where that part is zero; nullopt where `value` is
/// not such a map of the rows (a product of two of them, a nonlinear op of
/// one, an op with regions on the way).
std::optional<Value> linearPart(Value value, Block &body, ArrayRef<Value> rows,
                                OpBuilder &builder,
                                SmallVectorImpl<Operation *> &built);

/// A value of a body as E(σ₁, …, σₘ, x): multilinear maps (sums, products,
/// matrix products, transposes …, with their other operands `invariant`)
/// of varying scalars σᵢ and at most one varying value x that is not such
/// a map of others, each appearing with degree one. Then Σ_p E = E(S, 1,
/// …, 1) for S = Σ_p σ₁ ⋯ σₘ x, with the carrier (x, else σ₁) replaced by
/// S and every other σᵢ by 1: a sum of weights times a transformed row is
/// the transform of the weighted sum of rows.
struct ScaledDecomposition {
  SmallVector<Value> scalars;
  /// The varying value that is not a scalar factor, or null.
  Value vector;
  llvm::SetVector<Operation *> maps;
};

/// The scaled decomposition of `value`, a value of `body`, or nullopt.
std::optional<ScaledDecomposition>
decomposeScaled(Value value, Block &body, function_ref<bool(Value)> invariant);

/// Distributes the linear maps that `value`, a value of `body`, applies to
/// sums (and differences) over their terms until `value` is a sum of at
/// most `maxTerms` terms that decomposeScaled accepts, some of whose maps
/// `transforms` says transform a row: L(x + y) = L(x) + L(y). The terms'
/// ops are added before the body's terminator and the terms appended to
/// `terms`; false, with the body unchanged, when `value` is already such a
/// term or cannot be made a sum of them.
bool distributeOverSums(Value value, Block &body,
                        function_ref<bool(Value)> invariant,
                        function_ref<bool(Operation *)> transforms,
                        unsigned maxTerms, SmallVectorImpl<Value> &terms);

/// The rank of the widest value that a sum of `value`, a value of `body`,
/// must add per position once the linear maps whose other operands are
/// `steady` apply after the sum, products distributed over the sums they
/// take and scalar factors moved into the carrier: Σ_p σ_p W u_p adds u_p
/// (W steady), Σ_p σ_p a ⊗ x_p adds x_p (a steady), Σ_p u_p ⊗ x_p adds the
/// outer product, rank 2. Steady values and varying scalars count 0.
int64_t summedWidth(Value value, Block &body, function_ref<bool(Value)> steady);

/// Rewrites each inner product ⟨L(u), v⟩ in `scope` (a `dot`, or the sum
/// of an elementwise product) as ⟨u, Lᵀ(v)⟩, Lᵀ(v) built by the maps'
/// reverse-mode rules, where some loop index around it varies u but not
/// the linear map L's other operands nor v, and u varies with every index
/// those do: L then applies once per position of its own indices
/// (TransposeLinearMaps.cpp). Whether anything changed.
bool transposeLinearMaps(Operation *scope);

} // namespace mlir::energy

#endif // ENERGY_LIB_TRANSFORMS_LINEARITY_H
