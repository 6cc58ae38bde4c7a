//===- ProductSums.cpp - Sums of terms, products that share a factor ------===//
//
// Terms through sums and scalars, the forms in which products share a
// factor, and the sums that SumBuilder builds once each (ProductSums.h).
//
//===----------------------------------------------------------------------===//

#include "ProductSums.h"
#include "PlanKernels.h"
#include "Slices.h"

#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::product_sums;

namespace {

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

} // namespace

/// Adds to `terms` the summands of `coefficient` · `value`, through sums,
/// differences, negations and scalar factors of the same type.
void product_sums::expand(Value value, Coefficient coefficient,
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

/// The largest group of `terms` that share a factor (in `form`): the
/// largest first, since a term may share one factor with some terms and
/// the other with more.
SmallVector<size_t> product_sums::largestGroup(ArrayRef<Term> terms,
                                               Shared &bestForm) {
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

/// The terms with every group that shares a factor (two or more) replaced
/// by one product of that factor and the group's inner sum.
SmallVector<Term> SumBuilder::combine(SmallVector<Term> terms, bool &combined) {
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
Value SumBuilder::built(ArrayRef<Term> terms, Type type) const {
  for (auto &[built, value] : sums)
    if (value.getType() == type && built.size() == terms.size() &&
        std::is_permutation(built.begin(), built.end(), terms.begin()))
      return value;
  return Value();
}

/// Σ terms (of type `type`), built once per set of terms.
Value SumBuilder::sum(SmallVector<Term> terms, Type type) {
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

/// Sets the builder's point right after the last op of the block that
/// computes one of `values` (at the block's start where none does).
void SumBuilder::placeAfter(ArrayRef<Value> values) {
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
void SumBuilder::placeAfter(ArrayRef<Term> terms) {
  SmallVector<Value> values;
  for (const Term &term : terms) {
    values.push_back(term.value);
    for (auto [factor, power] : term.coefficient.factors)
      values.push_back(factor);
  }
  placeAfter(ArrayRef<Value>(values));
}

/// One product of the shared factor of `terms[group]` and their inner sum.
Value SumBuilder::productOf(ArrayRef<Term> terms, ArrayRef<size_t> group,
                            Shared form) {
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
Value SumBuilder::wholeSum(ArrayRef<Term> terms) {
  Value total;
  for (const Term &term : terms) {
    Location loc = term.value.getLoc();
    Value scaled = term.coefficient.scale(builder, loc, term.value);
    total =
        total ? AddOp::create(builder, loc, total, scaled).getResult() : scaled;
  }
  return total;
}

/// Σ c_i v_i for batches of rows: a table over every axis but the last,
/// whose positions run in parallel.
Value SumBuilder::tableOf(ArrayRef<Term> terms, ArrayType type) {
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
Value SumBuilder::inlinedRow(OpBuilder &inside, Value value, ArrayAttr sizes,
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
