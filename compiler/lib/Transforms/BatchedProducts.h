//===- BatchedProducts.h - What the batched-product steps share -*- C++ -*-===//
//
// The parts of a matrix-vector product in a loop that BatchedProducts.cpp and
// HeadProducts.cpp take out of it: the heads' matrices as one array, and the
// scalars that scale its vector. Private to compiler/lib/Transforms.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_LIB_TRANSFORMS_BATCHEDPRODUCTS_H
#define ENERGY_LIB_TRANSFORMS_BATCHEDPRODUCTS_H

#include "Slices.h"
#include "energy/IR/EnergyOps.h"

#include "mlir/IR/Builders.h"

namespace mlir::energy {

/// The matrices M[b] of every head as one array [B, …] and whether the
/// product takes it transposed, given `transposed` for M itself: a
/// transpose in M's definition is the product's flag instead.
std::pair<Value, bool> matricesOver(Value matrix, Value head, Attribute size,
                                    ArrayRef<Block *> blocks, Operation *anchor,
                                    bool transposed);
/// The same over several head indices (grouped heads M[g, r]): one array
/// [G, R, …], the batch axes of a batch_matmul.
std::pair<Value, bool> matricesOver(Value matrix, ArrayRef<Value> heads,
                                    ArrayRef<Attribute> sizes,
                                    ArrayRef<Block *> blocks, Operation *anchor,
                                    bool transposed);

/// Scalars from outside a loop that multiply (or divide) a value computed
/// in it: applied to a product of whole arrays instead of to every row.
struct ScalarFactors {
  SmallVector<std::pair<Value, bool>> factors; ///< (s, whether it divides)

  /// `value` as w · s₁ / s₂ …, the s from outside `scope`: returns w and
  /// records the s, outermost first.
  Value peel(Value value, Operation *scope) {
    auto outerScalar = [&](Value factor) {
      return cast<ArrayType>(factor.getType()).isScalar() &&
             isDefinedOutside(factor, scope);
    };
    while (Operation *def = value.getDefiningOp()) {
      if (!isa<MulOp, DivOp>(def))
        break;
      Value lhs = def->getOperand(0), rhs = def->getOperand(1);
      if (outerScalar(rhs) && lhs.getType() == value.getType()) {
        factors.push_back({rhs, isa<DivOp>(def)});
        value = lhs;
      } else if (isa<MulOp>(def) && outerScalar(lhs) &&
                 rhs.getType() == value.getType()) {
        factors.push_back({lhs, false});
        value = rhs;
      } else {
        break;
      }
    }
    return value;
  }

  /// `value` with the recorded factors applied, innermost first.
  Value apply(OpBuilder &builder, Location loc, Value value) const {
    for (auto [factor, divides] : llvm::reverse(factors))
      value = divides ? DivOp::create(builder, loc, value, factor).getResult()
                      : MulOp::create(builder, loc, value, factor).getResult();
    return value;
  }
};

/// Whether `product`, in the body of `loop`, is only added (times
/// scalars) into slots that do not choose some index of `loop` that its
/// vector depends on and its matrix does not: the products are summed over
/// that index, Σ_j M v[j] = M Σ_j v[j], one product after the sum
/// (LoopSums.cpp, FactorLinearMaps.cpp) rather than one per position.
bool summedBeforeMatrix(MatmulOp product, Operation *loop);

/// In the body of a loop or table over three or more indices, each product
/// M[h] v of a head's matrix and a vector of other indices (and of h or
/// not) as the element of one batch_matmul with r row axes ahead of it
/// (HeadProducts.cpp). Returns whether it rewrote any.
bool batchHeadProducts(Operation *loop);
/// Σ_h M[h] v[h, i₁, …, i_r] in loops over i₁ … i_r (r ≥ 2) as the row of
/// one summed batch_matmul ahead of the loops (HeadProducts.cpp). Returns
/// whether it rewrote `sum`.
bool batchHeadSum(ReduceOp sum);
/// Σ_g Σ_r M[g, r] v[g, r, i₁, …, i_r], a sum over one head index of a sum
/// over another (grouped heads), as batchHeadSum does the sum over (g, r);
/// leaves `sum` as it was where that does not apply (HeadProducts.cpp).
/// Returns whether it rewrote `sum`.
bool batchNestedHeadSum(ReduceOp sum);
/// Σ_(i₁, …, i_r) u ⊗ v in a loop over heads h, one side of h and the
/// other not (a per-head parameter's gradient over every token of a
/// batch), as the element h of one batch_matmul whose inner dim runs over
/// the r row axes (HeadProducts.cpp). Returns whether it rewrote `sum`.
bool batchHeadOuterSum(ReduceOp sum);

/// In a table over pairs stored whole (a statement tabulate over
/// (h…, j) whose body yields a tabulate over i), each score dot(a, b) of a
/// row a of (h…, i) and a row b of (h…, j) as the element [h…, j, i] of
/// one batch_matmul B Aᵀ over the heads h… ahead of the table
/// (PairScores.cpp). Returns whether it rewrote any.
bool batchPairScores(TabulateOp table);

/// Σ_p u ⊗ v over one or two indices as Σ_b U[b]ᵀ V[b] (Uᵀ V over a
/// single index), the tables of u and v ahead of it (OuterSums.cpp).
/// Returns whether it rewrote `reduce`.
bool batchOuterSum(ReduceOp reduce);
/// Σ_b Σ_j u ⊗ v, a plain sum whose body is a plain sum over another index
/// of outer products (and what that reads per position of b), as
/// batchOuterSum does the same sum over (b, j); leaves `reduce` as it was
/// where that does not apply (OuterSums.cpp).
void batchNestedOuterSum(ReduceOp reduce);
/// The sums Σ_j u ⊗ v (j one or two indices, or Σ_i Σ_j) in a loop over b
/// as rows b of batches of products U[b]ᵀ V[b] ahead of it, V shared by
/// every b where v does not vary with b (OuterSums.cpp). Returns whether it
/// rewrote `loop`.
bool batchPerIndexOuterSum(ForeachOp loop);

/// Rewrites a batch of products that every reader sums over its batch axis
/// through linear maps that do not vary with it as the summed product
/// (BatchSums.cpp); false, with the products unchanged, otherwise.
bool sumOverBatch(BatchMatmulOp product);
/// Rewrites a product that one plain sum reads whole over every row, the
/// batch's too where it has one, Σ_r (op(A) op(B))[r], as the product of
/// the summed rows, (Σ_r A[r]) op(B), a matrix-vector product per batch
/// position (BatchSums.cpp); false, with the product unchanged, otherwise.
bool sumRowsFirst(BatchMatmulOp product);

} // namespace mlir::energy

#endif // ENERGY_LIB_TRANSFORMS_BATCHEDPRODUCTS_H
