//===- CombineProducts.cpp - Sums of products with a shared factor --------===//
//
// What a gradient adds into one tensor is often a sum of products that share
// a factor, up to scalars:
//   Σ_i c_i L R_i,  Σ_i c_i L_i R  (matrices, or batches of them alike:
//                                 rows times one matrix, Σ_b X[b]ᵀ A_i[b],
//                                 a head's X[h]ᵀ A_i[h])
//   Σ_i c_i R_iᵀ = (Σ_i c_i R_i)ᵀ
// whether added by whole-tensor accumulates or by loops that add, position
// by position, elements of such products (a head's parameter gradient).
// Each such sum is one product of the shared factor with Σ_i c_i A_i, an
// elementwise sum (a table over the rows for batches of rows): one product
// in place of several. The scalars c_i include those inside the factors
// (Wkᵀ Wq/√D and Wkᵀ (-Wq)/√D share Wkᵀ Wq), and the sums are built once
// for every product that needs the same one. The backward step's adjoints
// of x, Wq and Wk add 6, 4 and 4 such products; they become 2, 1 and 1.
// With `sums` (after the loops that add linear maps have joined), sums of
// one linear map of rows of different arrays, Σ_k Σ_p L(A_k[p]), are one
// sum of the map of Σ_k A_k, and sums of arrays that loops read combine
// their products alike.
//
//===----------------------------------------------------------------------===//

#include "Linearity.h"
#include "PlanKernels.h"
#include "Slices.h"

#include "energy/Transforms/Dependence.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::energy;

namespace {

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

/// Whether `factor` may be divided by: not the constant 0.
bool isDivisor(Value factor) {
  auto constant = factor.getDefiningOp<ConstantOp>();
  return !constant || constant.getValueAttr().getValueAsDouble() != 0.0;
}

/// `value` without the negations and the products and quotients by scalars
/// at its top, which go into `coefficient`; a transpose of a transpose
/// (scaled) is its operand.
Value stripScalars(Value value, Coefficient &coefficient) {
  for (;;) {
    Operation *def = value.getDefiningOp();
    if (auto neg = dyn_cast_or_null<NegOp>(def)) {
      coefficient.number = -coefficient.number;
      value = neg.getOperand();
      continue;
    }
    if (isa_and_nonnull<MulOp, DivOp>(def)) {
      Value lhs = def->getOperand(0), rhs = def->getOperand(1);
      if (isScalar(rhs) && lhs.getType() == value.getType() &&
          (isa<MulOp>(def) || isDivisor(rhs))) {
        coefficient.multiply(rhs, isa<MulOp>(def) ? 1 : -1);
        value = lhs;
        continue;
      }
      if (isa<MulOp>(def) && isScalar(lhs) &&
          rhs.getType() == value.getType()) {
        coefficient.multiply(lhs, 1);
        value = rhs;
        continue;
      }
    }
    if (auto transpose = dyn_cast_or_null<TransposeOp>(def)) {
      Coefficient inner;
      Value operand = stripScalars(transpose.getOperand(), inner);
      if (auto again = operand.getDefiningOp<TransposeOp>()) {
        coefficient = coefficient.times(inner);
        value = again.getOperand();
        continue;
      }
    }
    return value;
  }
}

/// The scalars of a matrix expression: those of its top and of the
/// operands of its products and transposes.
Coefficient scaleOf(Value value) {
  Coefficient coefficient;
  value = stripScalars(value, coefficient);
  Operation *def = value.getDefiningOp();
  if (auto transpose = dyn_cast_or_null<TransposeOp>(def))
    return coefficient.times(scaleOf(transpose.getOperand()));
  if (auto product = dyn_cast_or_null<MatmulOp>(def))
    return coefficient.times(scaleOf(product.getLhs()))
        .times(scaleOf(product.getRhs()));
  return coefficient;
}

/// Whether `a` and `b` are the same expression up to scalars.
bool sameUpToScalars(Value a, Value b) {
  Coefficient ignored;
  a = stripScalars(a, ignored);
  b = stripScalars(b, ignored);
  if (a == b)
    return true;
  if (a.getType() != b.getType())
    return false;
  auto ta = a.getDefiningOp<TransposeOp>(), tb = b.getDefiningOp<TransposeOp>();
  if (ta && tb)
    return sameUpToScalars(ta.getOperand(), tb.getOperand());
  auto pa = a.getDefiningOp<MatmulOp>(), pb = b.getDefiningOp<MatmulOp>();
  if (pa && pb)
    return sameUpToScalars(pa.getLhs(), pb.getLhs()) &&
           sameUpToScalars(pa.getRhs(), pb.getRhs());
  return computeSame(a, b, {});
}

/// `value` without its scalars (scaleOf(value) times it is `value`), reusing
/// the ops that have none.
Value withoutScalars(OpBuilder &builder, Value value) {
  Coefficient ignored;
  value = stripScalars(value, ignored);
  Location loc = value.getLoc();
  if (auto transpose = value.getDefiningOp<TransposeOp>()) {
    Value operand = withoutScalars(builder, transpose.getOperand());
    return operand == transpose.getOperand()
               ? value
               : TransposeOp::create(builder, loc, operand).getResult();
  }
  if (auto product = value.getDefiningOp<MatmulOp>()) {
    Value lhs = withoutScalars(builder, product.getLhs());
    Value rhs = withoutScalars(builder, product.getRhs());
    return lhs == product.getLhs() && rhs == product.getRhs()
               ? value
               : MatmulOp::create(builder, loc, lhs, rhs).getResult();
  }
  return value;
}

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
void expand(Value value, Coefficient coefficient,
            SmallVectorImpl<Term> &terms) {
  Operation *def = value.getDefiningOp();
  Type type = value.getType();
  auto sameType = [&](Value operand) { return operand.getType() == type; };
  if (!isScalar(value) && isa_and_nonnull<AddOp, SubOp>(def) &&
      sameType(def->getOperand(0)) && sameType(def->getOperand(1))) {
    expand(def->getOperand(0), coefficient, terms);
    if (isa<SubOp>(def))
      coefficient.number = -coefficient.number;
    expand(def->getOperand(1), coefficient, terms);
    return;
  }
  Coefficient scalars;
  Value stripped = isScalar(value) ? value : stripScalars(value, scalars);
  if (stripped != value) {
    expand(stripped, coefficient.times(scalars), terms);
    return;
  }
  terms.push_back({coefficient, value});
}

/// The ways a group of terms shares a factor.
enum class Shared {
  BatchRhs,    // batches of A_i R (transposed, summed alike): R
  BatchLhs,    // batches of L B_i: L
  MatrixTimes, // L R_i: L
  TimesMatrix, // L_i R: R
  Transposed,  // R_iᵀ
};
constexpr Shared kSharedForms[] = {Shared::BatchRhs, Shared::BatchLhs,
                                   Shared::MatrixTimes, Shared::TimesMatrix,
                                   Shared::Transposed};

/// A term's shared factor and its other factor (the summand of the inner
/// sum) in form `form`, or nulls.
std::pair<Value, Value> splitTerm(Value value, Shared form) {
  Operation *def = value.getDefiningOp();
  auto rows = dyn_cast_or_null<BatchMatmulOp>(def);
  auto product = dyn_cast_or_null<MatmulOp>(def);
  bool matrices =
      product && isMatrix(product.getLhs()) && isMatrix(product.getRhs());
  switch (form) {
  case Shared::BatchLhs:
    if (rows)
      return {rows.getLhs(), rows.getRhs()};
    break;
  case Shared::BatchRhs:
    if (rows)
      return {rows.getRhs(), rows.getLhs()};
    break;
  case Shared::MatrixTimes:
    if (matrices)
      return {product.getLhs(), product.getRhs()};
    break;
  case Shared::TimesMatrix:
    if (matrices)
      return {product.getRhs(), product.getLhs()};
    break;
  case Shared::Transposed:
    if (auto transpose = dyn_cast_or_null<TransposeOp>(def))
      return {Value(), transpose.getOperand()};
    break;
  }
  return {Value(), Value()};
}

/// Whether two terms of form `form` share their factor.
bool shareFactor(Value a, Value b, Shared form) {
  if (form == Shared::Transposed)
    return true;
  // Products of batches: the same axes, transposed and summed alike, and
  // other factors that add.
  if (form == Shared::BatchLhs || form == Shared::BatchRhs) {
    Operation *x = a.getDefiningOp(), *y = b.getDefiningOp();
    if (x->getPropertiesAsAttribute() != y->getPropertiesAsAttribute() ||
        splitTerm(a, form).second.getType() !=
            splitTerm(b, form).second.getType())
      return false;
  }
  return sameUpToScalars(splitTerm(a, form).first, splitTerm(b, form).first);
}

/// The largest group of `terms` that share a factor (in `form`): the
/// largest first, since a term may share one factor with some terms and
/// the other with more.
SmallVector<size_t> largestGroup(ArrayRef<Term> terms, Shared &bestForm) {
  SmallVector<size_t> best;
  for (Shared form : kSharedForms) {
    for (size_t i = 0; i < terms.size(); ++i) {
      if (!splitTerm(terms[i].value, form).second)
        continue;
      SmallVector<size_t> group{i};
      for (size_t j = i + 1; j < terms.size(); ++j)
        if (splitTerm(terms[j].value, form).second &&
            terms[j].value.getType() == terms[i].value.getType() &&
            shareFactor(terms[i].value, terms[j].value, form))
          group.push_back(j);
      if (group.size() > best.size()) {
        best = group;
        bestForm = form;
      }
    }
  }
  return best;
}

/// Builds sums of terms, each once: at the builder's point, or (`early`)
/// right after the last of `block`'s ops that compute what it reads, so
/// that every user of the terms it replaces can read it.
class SumBuilder {
public:
  SumBuilder(OpBuilder &builder, Block &block, bool early)
      : builder(builder), block(block), early(early) {}

  /// The terms with every group that shares a factor (two or more) replaced
  /// by one product of that factor and the group's inner sum.
  SmallVector<Term> combine(SmallVector<Term> terms, bool &combined) {
    for (;;) {
      Shared bestForm = kSharedForms[0];
      SmallVector<size_t> best = largestGroup(terms, bestForm);
      if (best.size() < 2)
        return terms;
      Term product = {Coefficient(), productOf(terms, best, bestForm)};
      for (size_t j : llvm::reverse(best))
        terms.erase(terms.begin() + j);
      terms.push_back(product);
      combined = true;
    }
  }

  /// Σ terms of type `type` if it was built, else null.
  Value built(ArrayRef<Term> terms, Type type) const {
    for (auto &[built, value] : sums)
      if (value.getType() == type && built.size() == terms.size() &&
          std::is_permutation(built.begin(), built.end(), terms.begin()))
        return value;
    return Value();
  }

  /// Σ terms (of type `type`), built once per set of terms.
  Value sum(SmallVector<Term> terms, Type type) {
    if (Value value = built(terms, type))
      return value;
    OpBuilder::InsertionGuard guard(builder);
    bool combined = false;
    SmallVector<Term> remaining = combine(terms, combined);
    placeAfter(remaining);
    Value result = cast<ArrayType>(type).getRank() >= 3
                       ? tableOf(remaining, cast<ArrayType>(type))
                       : wholeSum(remaining);
    sums.push_back({terms, result});
    return result;
  }

private:
  /// Sets the builder's point right after the last op of the block that
  /// computes one of `values` (at the block's start where none does).
  void placeAfter(ArrayRef<Value> values) {
    if (!early)
      return;
    Operation *last = nullptr;
    for (Value value : values) {
      Operation *def = value.getDefiningOp();
      Operation *op = def ? block.findAncestorOpInBlock(*def) : nullptr;
      if (op && (!last || last->isBeforeInBlock(op)))
        last = op;
    }
    if (last)
      builder.setInsertionPointAfter(last);
    else
      builder.setInsertionPointToStart(&block);
  }

  /// The same for the values `terms` read: their values and the scalars
  /// of their coefficients.
  void placeAfter(ArrayRef<Term> terms) {
    SmallVector<Value> values;
    for (const Term &term : terms) {
      values.push_back(term.value);
      for (auto [factor, power] : term.coefficient.factors)
        values.push_back(factor);
    }
    placeAfter(ArrayRef<Value>(values));
  }

  /// One product of the shared factor of `terms[group]` and their inner sum.
  Value productOf(ArrayRef<Term> terms, ArrayRef<size_t> group, Shared form) {
    Value first = terms[group.front()].value;
    Location loc = first.getLoc();
    SmallVector<Term> inner;
    for (size_t j : group) {
      auto [factor, other] = splitTerm(terms[j].value, form);
      Coefficient coefficient = terms[j].coefficient;
      if (factor)
        coefficient = coefficient.times(scaleOf(factor));
      inner.push_back({coefficient, other});
    }
    Value otherSum = sum(inner, inner.front().value.getType());
    Value factor = splitTerm(first, form).first;
    OpBuilder::InsertionGuard guard(builder);
    placeAfter(ArrayRef<Value>{otherSum, factor ? factor : otherSum});
    if (factor)
      factor = withoutScalars(builder, factor);
    switch (form) {
    case Shared::BatchLhs:
    case Shared::BatchRhs: {
      Operation *product = builder.clone(*first.getDefiningOp());
      product->setOperand(form == Shared::BatchLhs ? 0 : 1, factor);
      product->setOperand(form == Shared::BatchLhs ? 1 : 0, otherSum);
      return product->getResult(0);
    }
    case Shared::MatrixTimes:
      return MatmulOp::create(builder, loc, factor, otherSum);
    case Shared::TimesMatrix:
      return MatmulOp::create(builder, loc, otherSum, factor);
    case Shared::Transposed:
      return TransposeOp::create(builder, loc, otherSum);
    }
    llvm_unreachable("every form of a shared factor");
  }

  /// Σ c_i v_i with whole-array operations.
  Value wholeSum(ArrayRef<Term> terms) {
    Value total;
    for (const Term &term : terms) {
      Location loc = term.value.getLoc();
      Value scaled = term.coefficient.scale(builder, loc, term.value);
      total = total ? AddOp::create(builder, loc, total, scaled).getResult()
                    : scaled;
    }
    return total;
  }

  /// Σ c_i v_i for batches of rows: a table over every axis but the last,
  /// whose positions run in parallel.
  Value tableOf(ArrayRef<Term> terms, ArrayType type) {
    if (terms.size() == 1 && terms.front().coefficient.isOne())
      return terms.front().value;
    Location loc = terms.front().value.getLoc();
    SmallVector<Value> scalars;
    for (const Term &term : terms)
      scalars.push_back(term.coefficient.scalar(builder, loc));
    RowTable rows(builder, loc, type);
    OpBuilder &inside = rows.getBodyBuilder();
    Value total;
    for (auto [term, scalar] : llvm::zip(terms, scalars)) {
      Value row = inlinedRow(inside, term.value, rows.getTable().getSizes(),
                             rows.getIndices());
      if (!row)
        row = rows.rowOf(term.value, loc);
      if (scalar)
        row = MulOp::create(inside, loc, row, scalar);
      total = total ? AddOp::create(inside, loc, total, row).getResult() : row;
    }
    return rows.finish(total, loc);
  }

  /// The row at `indices` of `value` when it is a table over `sizes` of
  /// elementwise work on rows (no loops): its body, cloned, so that the sum
  /// makes one pass where the table made another. Null otherwise.
  static Value inlinedRow(OpBuilder &inside, Value value, ArrayAttr sizes,
                          ValueRange indices) {
    auto table = value.getDefiningOp<TabulateOp>();
    if (!table || table.getSizes() != sizes)
      return Value();
    Block &body = table.getBody().front();
    if (llvm::any_of(body.without_terminator(),
                     [](Operation &op) { return op.getNumRegions() != 0; }))
      return Value();
    IRMapping mapping;
    mapping.map(body.getArguments(), indices);
    for (Operation &op : body.without_terminator())
      inside.clone(op, mapping);
    return mapping.lookupOrDefault(table.getBodyValue());
  }

  OpBuilder &builder;
  Block &block;
  /// Whether sums and products are built right after what they read, not
  /// at the builder's point.
  bool early;
  SmallVector<std::pair<SmallVector<Term>, Value>> sums;
};

/// What one op of a gradient's body adds into a tensor, as a whole array.
struct Addition {
  Operation *op;
  FlatSymbolRefAttr tensor;
  Value value;
};

/// The whole-array value that `loop` adds into a tensor when, at each
/// position, it adds elementwise arithmetic of whole arrays' elements at
/// that position (a head's parameter gradient, Σ of per-head products, read
/// per head): that arithmetic on the whole arrays, built ahead of the loop
/// (appended to `built`). Null, building nothing, otherwise.
std::optional<Addition> wholeAddition(ForeachOp loop, ModelOp model,
                                      SmallVectorImpl<Operation *> &built) {
  if (loop.hasPredicate())
    return std::nullopt;
  Block &body = loop.getBody().front();
  auto isAtPosition = [&](OperandRange indices, AffineMap map) {
    return map.isIdentity() && llvm::equal(indices, body.getArguments());
  };
  auto accumulate =
      dyn_cast_or_null<AccumulateOp>(body.empty() ? nullptr : &body.back());
  if (!accumulate ||
      !isAtPosition(accumulate.getIndices(), accumulate.getMap()))
    return std::nullopt;
  auto tensor = model.lookupSymbol<TensorOp>(accumulate.getTensorAttr());
  Type rowType = accumulate.getValue().getType();
  if (!tensor || isScalar(accumulate.getValue()))
    return std::nullopt;
  auto isRow = [&](Value value) {
    return value.getType() == rowType && value.getParentBlock() == &body;
  };
  auto isOutsideScalar = [&](Value value) {
    return isScalar(value) && isDefinedOutside(value, loop);
  };
  for (Operation &op : body.without_terminator()) {
    if (&op == accumulate.getOperation())
      continue;
    bool plain =
        llvm::TypeSwitch<Operation *, bool>(&op)
            .Case([&](ExtractOp extract) {
              return isAtPosition(extract.getIndices(), extract.getMap()) &&
                     isDefinedOutside(extract.getSource(), loop) &&
                     extract.getSource().getType() == tensor.getArrayType();
            })
            .Case<AddOp, SubOp>([&](Operation *sum) {
              return isRow(sum->getOperand(0)) && isRow(sum->getOperand(1));
            })
            .Case([&](NegOp neg) { return isRow(neg.getOperand()); })
            .Case([&](DivOp quotient) {
              return isRow(quotient.getLhs()) &&
                     isOutsideScalar(quotient.getRhs());
            })
            .Case([&](MulOp product) {
              return (isRow(product.getLhs()) &&
                      isOutsideScalar(product.getRhs())) ||
                     (isOutsideScalar(product.getLhs()) &&
                      isRow(product.getRhs()));
            })
            .Default(false);
    if (!plain || op.getResult(0).getType() != rowType)
      return std::nullopt;
  }
  OpBuilder builder(loop);
  IRMapping whole;
  for (Operation &op : body.without_terminator()) {
    if (&op == accumulate.getOperation())
      break;
    if (auto extract = dyn_cast<ExtractOp>(op)) {
      whole.map(extract.getResult(), extract.getSource());
      continue;
    }
    Location loc = op.getLoc();
    auto operand = [&](unsigned i) {
      return whole.lookupOrDefault(op.getOperand(i));
    };
    Operation *array =
        llvm::TypeSwitch<Operation *, Operation *>(&op)
            .Case([&](AddOp) {
              return AddOp::create(builder, loc, operand(0), operand(1));
            })
            .Case([&](SubOp) {
              return SubOp::create(builder, loc, operand(0), operand(1));
            })
            .Case(
                [&](NegOp) { return NegOp::create(builder, loc, operand(0)); })
            .Case([&](DivOp) {
              return DivOp::create(builder, loc, operand(0), operand(1));
            })
            .Case([&](MulOp) {
              return MulOp::create(builder, loc, operand(0), operand(1));
            });
    built.push_back(array);
    whole.map(op.getResult(0), array->getResult(0));
  }
  Value value = whole.lookupOrDefault(accumulate.getValue());
  if (value.getType() != tensor.getArrayType()) {
    for (Operation *op : llvm::reverse(built))
      op->erase();
    built.clear();
    return std::nullopt;
  }
  return Addition{loop, accumulate.getTensorAttr(), value};
}

/// A sum over a domain of a linear map of the rows of a whole array at the
/// domain's positions, Σ_p L(A[p]) (a scale's gradient through a row
/// normalisation, Σ_p A[p] ∘ n[p]): the reduction and its read of A.
struct RowReduction {
  ReduceOp reduce;
  ExtractOp row;
};

/// `value` as a row reduction, for each row it is one of (Σ_p A[p] ∘ n[p] is
/// one of A and one of n).
SmallVector<RowReduction> rowReductions(Value value) {
  SmallVector<RowReduction> found;
  auto reduce = value.getDefiningOp<ReduceOp>();
  if (!reduce || reduce.getKind() != ReduceKind::sum || reduce.hasPredicate() ||
      reduce.getTemperature() || reduce.getAggregation())
    return found;
  Block &body = reduce.getBody().front();
  Value element = reduce.getBodyValue();
  for (auto extract : body.getOps<ExtractOp>()) {
    if (!extract.getMap().isIdentity() ||
        !llvm::equal(extract.getIndices(), body.getArguments()) ||
        !isDefinedOutside(extract.getSource(), reduce))
      continue;
    Value row = extract.getResult();
    LinearDecomposition decomposition = decomposeLinearly(
        element, body, [&](Value value) { return !dependsOn(value, row); });
    if (decomposition.atoms.size() == 1 && decomposition.atoms.front() == row)
      found.push_back({reduce, extract});
  }
  return found;
}

/// Whether two row reductions apply the same map to their rows.
bool sameMap(RowReduction a, RowReduction b) {
  if (a.reduce.getType() != b.reduce.getType() ||
      a.reduce.getSizes() != b.reduce.getSizes() ||
      a.row.getSource().getType() != b.row.getSource().getType())
    return false;
  IRMapping mapping;
  mapping.map(a.reduce.getBody().front().getArguments(),
              b.reduce.getBody().front().getArguments());
  mapping.map(a.row.getResult(), b.row.getResult());
  return computeSame(a.reduce.getBodyValue(), b.reduce.getBodyValue(), mapping);
}

/// Replaces the terms that are sums of one map of rows of different arrays,
/// Σ_i c_i Σ_p L(A_i[p]), by one, Σ_p L(S[p]) with S = Σ_i c_i A_i (whose
/// products `sums` combines), built at the builder's point. Whether it did.
bool combineReductions(SmallVectorImpl<Term> &terms, SumBuilder &sums,
                       OpBuilder &builder) {
  bool changed = false;
  for (size_t i = 0; i < terms.size(); ++i) {
    for (RowReduction first : rowReductions(terms[i].value)) {
      SmallVector<size_t> group{i};
      SmallVector<Term> rows;
      expand(first.row.getSource(), terms[i].coefficient, rows);
      for (size_t j = i + 1; j < terms.size(); ++j)
        for (RowReduction other : rowReductions(terms[j].value))
          if (sameMap(first, other)) {
            group.push_back(j);
            expand(other.row.getSource(), terms[j].coefficient, rows);
            break;
          }
      if (group.size() < 2)
        continue;
      Value total = sums.sum(rows, first.row.getSource().getType());
      IRMapping mapping;
      Operation *reduce = builder.clone(*first.reduce, mapping);
      mapping.lookup(first.row.getResult())
          .getDefiningOp<ExtractOp>()
          .getSourceMutable()
          .assign(total);
      for (size_t j : llvm::reverse(group))
        terms.erase(terms.begin() + j);
      terms.insert(terms.begin() + i, {Coefficient(), reduce->getResult(0)});
      changed = true;
      break;
    }
  }
  return changed;
}

/// Erases what computed `values` in `block` that nothing reads any more.
void eraseUnread(ArrayRef<Value> values, Block &block) {
  llvm::SetVector<Operation *> candidates;
  auto visit = [&](Value value) {
    if (Operation *op = value.getDefiningOp(); op && op->getBlock() == &block)
      candidates.insert(op);
  };
  for (Value value : values)
    visit(value);
  // Users before what they use: an op is dead once every later one that
  // read it is gone.
  for (size_t i = 0; i < candidates.size(); ++i)
    for (Value operand : candidates[i]->getOperands())
      visit(operand);
  SmallVector<Operation *> ordered(candidates.begin(), candidates.end());
  llvm::sort(ordered,
             [](Operation *a, Operation *b) { return b->isBeforeInBlock(a); });
  for (Operation *op : ordered)
    if (isOpTriviallyDead(op))
      op->erase();
}

/// Sums of whole arrays that nothing adds into a tensor (the rows a loop
/// applies a row normalisation's backward to), whose products share
/// factors and are read by the sum alone: one product per shared factor.
void combineSummedProducts(Block &block, SumBuilder &sums) {
  SmallVector<Operation *> roots;
  for (Operation &op : block) {
    if (!isa<AddOp, SubOp>(op) || op.use_empty() || isScalar(op.getResult(0)) ||
        cast<ArrayType>(op.getResult(0).getType()).getRank() < 2)
      continue;
    Type type = op.getResult(0).getType();
    if (llvm::any_of(op.getUsers(), [&](Operation *user) {
          return isa<AccumulateOp>(user) ||
                 (isa<AddOp, SubOp>(user) &&
                  user->getResult(0).getType() == type);
        }))
      continue;
    roots.push_back(&op);
  }
  for (Operation *root : roots) {
    SmallVector<Term> terms;
    expand(root->getResult(0), Coefficient(), terms);
    Type type = root->getResult(0).getType();
    // The same sum built already (for a sum of one map of these rows), or
    // products to combine that only this sum reads: they are then
    // computed no more.
    if (!sums.built(terms, type)) {
      Shared form;
      SmallVector<size_t> group = largestGroup(terms, form);
      if (group.size() < 2 || llvm::any_of(group, [&](size_t i) {
            return !terms[i].value.hasOneUse();
          }))
        continue;
    }
    Value total = sums.sum(terms, type);
    if (total == root->getResult(0))
      continue;
    root->getResult(0).replaceAllUsesWith(total);
    eraseUnread(root->getResult(0), block);
  }
}

/// Rewrites what `block` adds into each tensor, with whole-tensor
/// accumulates or with loops that add whole arrays' elements position by
/// position, as sums of combined products, at the last of them, when some
/// products combine.
void combineAccumulatedProducts(Block &block, bool withSums) {
  SmallVector<Addition> additions;
  SmallVector<Operation *> built;
  auto model = block.getParentOp()->getParentOfType<ModelOp>();
  for (Operation &op : block) {
    if (auto accumulate = dyn_cast<AccumulateOp>(op)) {
      auto tensor = model.lookupSymbol<TensorOp>(accumulate.getTensorAttr());
      if (accumulate.getIndices().empty() && tensor &&
          tensor.getArrayType() == accumulate.getValue().getType() &&
          !isScalar(accumulate.getValue()))
        additions.push_back(
            {accumulate, accumulate.getTensorAttr(), accumulate.getValue()});
    } else if (auto loop = dyn_cast<ForeachOp>(op)) {
      SmallVector<Operation *> loopBuilt;
      if (auto addition = wholeAddition(loop, model, loopBuilt)) {
        additions.push_back(*addition);
        llvm::append_range(built, loopBuilt);
      }
    }
  }
  // The terms added into each tensor, in the order of their first add.
  SmallVector<std::pair<FlatSymbolRefAttr, SmallVector<Term>>> targets;
  for (const Addition &addition : additions) {
    auto *target = llvm::find_if(
        targets, [&](auto &entry) { return entry.first == addition.tensor; });
    if (target == targets.end()) {
      targets.push_back({addition.tensor, {}});
      target = &targets.back();
    }
    expand(addition.value, Coefficient(), target->second);
  }
  SmallVector<std::pair<FlatSymbolRefAttr, SmallVector<Term>>> rewritten;
  OpBuilder builder(&block, block.begin());
  SumBuilder sums(builder, block, /*early=*/withSums);
  if (additions.size() >= 2) {
    builder.setInsertionPoint(additions.back().op);
    for (auto &[tensor, terms] : targets) {
      bool combined = withSums && combineReductions(terms, sums, builder);
      SmallVector<Term> remaining = sums.combine(terms, combined);
      if (combined)
        rewritten.push_back({tensor, remaining});
    }
    MLIRContext *context = block.getParentOp()->getContext();
    for (auto &[tensor, terms] : rewritten) {
      for (const Term &term : terms) {
        Location loc = term.value.getLoc();
        Value value = term.coefficient.scale(builder, loc, term.value);
        auto accumulate = AccumulateOp::create(
            builder, loc, value, tensor,
            AffineMapAttr::get(AffineMap::get(0, 0, {}, context)),
            ValueRange());
        // Right after the product, which the backends then compute into the
        // tensor.
        if (Operation *def = value.getDefiningOp();
            def && def->getBlock() == &block && value.hasOneUse())
          accumulate->moveAfter(def);
      }
    }
  }
  SmallVector<Value> replaced;
  for (const Addition &addition : additions)
    if (llvm::any_of(rewritten, [&](auto &entry) {
          return entry.first == addition.tensor;
        })) {
      if (isa<AccumulateOp>(addition.op)) {
        replaced.push_back(addition.value);
      } else {
        llvm::SetVector<Value> read;
        getUsedValuesDefinedAbove(addition.op->getRegions(), read);
        llvm::append_range(replaced, read);
      }
      addition.op->erase();
    }
  // What was built for loops whose tensor kept its additions.
  for (Operation *op : llvm::reverse(built))
    if (op->use_empty())
      op->erase();
  eraseUnread(replaced, block);
  if (withSums)
    combineSummedProducts(block, sums);
}

} // namespace

void mlir::energy::combineProducts(ModelOp model, bool sums) {
  model.walk([&](GradientOp gradient) {
    combineAccumulatedProducts(gradient.getBody().front(), sums);
  });
}
