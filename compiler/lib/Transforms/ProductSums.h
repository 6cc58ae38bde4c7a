//===- ProductSums.h - Sums whose products share a factor ------*- C++ -*-===//
//
// What a gradient adds into a tensor as terms, scalar coefficients times
// values, and the builder of their sums, in which products that share a
// factor (up to scalars) are one product of that factor and the sum of the
// others. Private to compiler/lib/Transforms (CombineProducts.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_LIB_TRANSFORMS_PRODUCTSUMS_H
#define ENERGY_LIB_TRANSFORMS_PRODUCTSUMS_H

#include "energy/IR/EnergyOps.h"

#include "mlir/IR/Builders.h"

#include <algorithm>

namespace mlir::energy::product_sums {

/// A scalar coefficient: a number times scalar values, each to the power
/// +1 or -1 (in the order they were met; equal as multisets).
struct Coefficient {
  double number = 1.0;
  SmallVector<std::pair<Value, int>> factors;

  bool isOne() const { return number == 1.0 && factors.empty(); }

  void multiply(Value factor, int power) {
    if (auto constant = factor.getDefiningOp<ConstantOp>()) {
      double value = constant.getValueAttr().getValueAsDouble();
      number = power > 0 ? number * value : number / value;
      return;
    }
    for (auto *it = factors.begin(); it != factors.end(); ++it)
      if (it->first == factor && it->second == -power) {
        factors.erase(it);
        return;
      }
    factors.push_back({factor, power});
  }

  Coefficient times(const Coefficient &other) const {
    Coefficient product = *this;
    product.number *= other.number;
    for (auto [factor, power] : other.factors)
      product.multiply(factor, power);
    return product;
  }

  bool operator==(const Coefficient &other) const {
    return number == other.number && factors.size() == other.factors.size() &&
           std::is_permutation(factors.begin(), factors.end(),
                               other.factors.begin());
  }

  /// The coefficient as a scalar value at the builder's point; null when
  /// it is one.
  Value scalar(OpBuilder &builder, Location loc) const {
    if (isOne())
      return Value();
    Value scalar = ConstantOp::create(builder, loc, number);
    for (auto [factor, power] : factors)
      scalar = power > 0
                   ? MulOp::create(builder, loc, scalar, factor).getResult()
                   : DivOp::create(builder, loc, scalar, factor).getResult();
    return scalar;
  }

  /// `value` times this coefficient, at the builder's point.
  Value scale(OpBuilder &builder, Location loc, Value value) const {
    if (isOne())
      return value;
    if (number == -1.0 && factors.empty())
      return NegOp::create(builder, loc, value);
    return MulOp::create(builder, loc, value, scalar(builder, loc));
  }
};

/// c · value, one summand.
struct Term {
  Coefficient coefficient;
  Value value;
  bool operator==(const Term &other) const {
    return coefficient == other.coefficient && value == other.value;
  }
};

/// Adds to `terms` the summands of `coefficient` · `value`, through sums,
/// differences, negations and scalar factors of the same type.
void expand(Value value, Coefficient coefficient, SmallVectorImpl<Term> &terms);

/// The ways a group of terms shares a factor.
enum class Shared {
  BatchRhs,    // batches of A_i R (transposed, summed alike): R
  BatchLhs,    // batches of L B_i: L
  MatrixTimes, // L R_i: L
  TimesMatrix, // L_i R: R
  Transposed,  // R_iᵀ
};

/// The largest group of `terms` that share a factor (in `form`): the
/// largest first, since a term may share one factor with some terms and
/// the other with more.
SmallVector<size_t> largestGroup(ArrayRef<Term> terms, Shared &bestForm);

/// Builds sums of terms, each once: at the builder's point, or (`early`)
/// right after the last of `block`'s ops that compute what it reads, so
/// that every user of the terms it replaces can read it.
class SumBuilder {
public:
  SumBuilder(OpBuilder &builder, Block &block, bool early)
      : builder(builder), block(block), early(early) {}

  /// The terms with every group that shares a factor (two or more) replaced
  /// by one product of that factor and the group's inner sum.
  SmallVector<Term> combine(SmallVector<Term> terms, bool &combined);

  /// Σ terms of type `type` if it was built, else null.
  Value built(ArrayRef<Term> terms, Type type) const;

  /// Σ terms (of type `type`), built once per set of terms.
  Value sum(SmallVector<Term> terms, Type type);

private:
  /// Sets the builder's point right after the last op of the block that
  /// computes one of `values` (at the block's start where none does).
  void placeAfter(ArrayRef<Value> values);

  /// The same for the values `terms` read: their values and the scalars
  /// of their coefficients.
  void placeAfter(ArrayRef<Term> terms);

  /// One product of the shared factor of `terms[group]` and their inner sum.
  Value productOf(ArrayRef<Term> terms, ArrayRef<size_t> group, Shared form);

  /// Σ c_i v_i with whole-array operations.
  Value wholeSum(ArrayRef<Term> terms);

  /// Σ c_i v_i for batches of rows: a table over every axis but the last,
  /// whose positions run in parallel.
  Value tableOf(ArrayRef<Term> terms, ArrayType type);

  /// The row at `indices` of `value` when it is a table over `sizes` of
  /// elementwise work on rows (no loops): its body, cloned, so that the sum
  /// makes one pass where the table made another. Null otherwise.
  static Value inlinedRow(OpBuilder &inside, Value value, ArrayAttr sizes,
                          ValueRange indices);

  OpBuilder &builder;
  Block &block;
  /// Whether sums and products are built right after what they read, not
  /// at the builder's point.
  bool early;
  SmallVector<std::pair<SmallVector<Term>, Value>> sums;
};

} // namespace mlir::energy::product_sums

#endif // ENERGY_LIB_TRANSFORMS_PRODUCTSUMS_H
