//===- FactorOuterSums.cpp - Outer products out of sums -------------------===//
//
// In the gradients of auxiliary terms (second derivatives: Newton's steps,
// the backward pass through gradient rules), a parameter's adjoint is a sum
// over pairs of outer products, D² work per pair. By linearity, a side of
// the product that does not depend on the sum's indices comes out of it:
//   Σ_p outer(s_p u, v_p) = outer(u, Σ_p s_p v_p),
// leaving D work per pair; so does any linear map applied to what is
// summed, with its other operands from outside (Σ_p A X_p = A Σ_p X_p, a
// transpose, a scalar factor).
//
//===----------------------------------------------------------------------===//

#include "Slices.h"
#include "energy/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::energy {
#define GEN_PASS_DEF_ENERGYFACTOROUTERSUMS
#include "energy/Transforms/Passes.h.inc"
} // namespace mlir::energy

using namespace mlir;
using namespace mlir::energy;

namespace {

/// A `reduce sum` without a temperature.
bool isUntemperedSum(ReduceOp reduce) {
  return reduce.getKind() == ReduceKind::sum && !reduce.getTemperature();
}

Value yieldedValue(ReduceOp reduce) {
  return cast<YieldOp>(reduce.getBody().front().getTerminator())
      .getValues()
      .front();
}

/// A copy of `reduce` (before it) whose body yields what `build` makes from
/// the copy's mapping, of type `type`.
ReduceOp cloneYielding(PatternRewriter &rewriter, ReduceOp reduce, Type type,
                       function_ref<Value(OpBuilder &, IRMapping &)> build) {
  auto copy = ReduceOp::create(rewriter, reduce.getLoc(), type,
                               reduce.getKind(), reduce.getSizes(), Value());
  IRMapping mapping;
  reduce.getPredicate().cloneInto(&copy.getPredicate(), mapping);
  reduce.getBody().cloneInto(&copy.getBody(), mapping);
  Operation *yield = copy.getBody().front().getTerminator();
  OpBuilder builder(yield);
  Value value = build(builder, mapping);
  yield->setOperands(value);
  return copy;
}

/// The sum, over `reduce`'s domain, of `inside`, a value of its body.
Value sumOf(PatternRewriter &rewriter, ReduceOp reduce, Value inside) {
  return cloneYielding(
             rewriter, reduce, inside.getType(),
             [&](OpBuilder &, IRMapping &m) { return m.lookup(inside); })
      .getResult();
}

/// Whether `value` does not depend on the body of `reduce`.
bool isOutside(Value value, ReduceOp reduce) {
  return !reduce->isAncestor(value.getParentRegion()->getParentOp());
}

/// `side` as s · u with u from outside `reduce` (s null: side is u).
std::optional<std::pair<Value, Value>> factorSide(Value side, ReduceOp reduce) {
  if (isOutside(side, reduce))
    return std::make_pair(Value(), side);
  auto mul = side.getDefiningOp<MulOp>();
  if (!mul)
    return std::nullopt;
  Value lhs = mul.getLhs(), rhs = mul.getRhs();
  if (isScalar(lhs) && !isScalar(rhs) && isOutside(rhs, reduce))
    return std::make_pair(lhs, rhs);
  if (isScalar(rhs) && !isScalar(lhs) && isOutside(lhs, reduce))
    return std::make_pair(rhs, lhs);
  return std::nullopt;
}

/// The sides of an outer product `value` is, looking through a transpose.
std::optional<std::pair<Value, Value>> outerSides(Value value) {
  bool transposed = false;
  if (auto transpose = value.getDefiningOp<TransposeOp>()) {
    value = transpose.getOperand();
    transposed = true;
  }
  auto outer = value.getDefiningOp<OuterOp>();
  if (!outer)
    return std::nullopt;
  return transposed ? std::make_pair(outer.getRhs(), outer.getLhs())
                    : std::make_pair(outer.getLhs(), outer.getRhs());
}

/// The sides of the outer product a plain sum adds up, if it adds one.
std::optional<std::pair<Value, Value>> summedOuterSides(ReduceOp reduce) {
  if (!isUntemperedSum(reduce))
    return std::nullopt;
  return outerSides(yieldedValue(reduce));
}

/// Σ (x + y) = Σ x + Σ y, when x or y is an outer product (so that the
/// other patterns can take each apart).
struct SplitSumOfOuterProducts : OpRewritePattern<ReduceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReduceOp reduce,
                                PatternRewriter &rewriter) const override {
    if (!isUntemperedSum(reduce))
      return failure();
    auto add = yieldedValue(reduce).getDefiningOp<AddOp>();
    if (!add || add.getLhs().getType() != reduce.getType() ||
        add.getRhs().getType() != reduce.getType() ||
        (!outerSides(add.getLhs()) && !outerSides(add.getRhs())))
      return failure();
    Value first = sumOf(rewriter, reduce, add.getLhs());
    Value second = sumOf(rewriter, reduce, add.getRhs());
    rewriter.replaceOpWithNewOp<AddOp>(reduce, first, second);
    return success();
  }
};

/// outer(a + b, c) = outer(a, c) + outer(b, c), and on the other side, when
/// it is what a sum yields.
struct DistributeOuterProduct : OpRewritePattern<ReduceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReduceOp reduce,
                                PatternRewriter &rewriter) const override {
    std::optional<std::pair<Value, Value>> sides = summedOuterSides(reduce);
    if (!sides)
      return failure();
    Value lhs = sides->first, rhs = sides->second;
    AddOp sum = lhs.getDefiningOp<AddOp>();
    bool onLeft = sum && !isOutside(lhs, reduce);
    if (!onLeft) {
      sum = rhs.getDefiningOp<AddOp>();
      if (!sum || isOutside(rhs, reduce))
        return failure();
    }
    if (sum.getLhs().getType() != sum.getResult().getType() ||
        sum.getRhs().getType() != sum.getResult().getType())
      return failure();
    Operation *yield = reduce.getBody().front().getTerminator();
    rewriter.setInsertionPoint(yield);
    Location loc = reduce.getLoc();
    auto product = [&](Value part) -> Value {
      return onLeft ? OuterOp::create(rewriter, loc, part, rhs).getResult()
                    : OuterOp::create(rewriter, loc, lhs, part).getResult();
    };
    Value total = AddOp::create(rewriter, loc, product(sum.getLhs()),
                                product(sum.getRhs()));
    rewriter.modifyOpInPlace(yield, [&] { yield->setOperands(total); });
    return success();
  }
};

/// Σ_p outer(s_p u, v_p) = outer(u, Σ_p s_p v_p), and on the other side.
struct FactorOuterProduct : OpRewritePattern<ReduceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReduceOp reduce,
                                PatternRewriter &rewriter) const override {
    std::optional<std::pair<Value, Value>> sides = summedOuterSides(reduce);
    if (!sides)
      return failure();
    auto [lhs, rhs] = *sides;
    for (bool left : {true, false}) {
      Value factored = left ? lhs : rhs, other = left ? rhs : lhs;
      std::optional<std::pair<Value, Value>> factor =
          factorSide(factored, reduce);
      if (!factor || isOutside(other, reduce))
        continue;
      Value scale = factor->first, outside = factor->second;
      ReduceOp summed =
          cloneYielding(rewriter, reduce, other.getType(),
                        [&](OpBuilder &builder, IRMapping &m) -> Value {
                          Value value = m.lookup(other);
                          if (!scale)
                            return value;
                          return MulOp::create(builder, reduce.getLoc(),
                                               m.lookup(scale), value);
                        });
      Value product = left ? OuterOp::create(rewriter, reduce.getLoc(), outside,
                                             summed.getResult())
                                 .getResult()
                           : OuterOp::create(rewriter, reduce.getLoc(),
                                             summed.getResult(), outside)
                                 .getResult();
      rewriter.replaceOp(reduce, product);
      return success();
    }
    return failure();
  }
};

/// The operand of `op` in which it is linear when that is the only one that
/// depends on the body of `reduce`: the matrix or factor that multiplies,
/// the divisor, and what a transpose or a negation takes; else nothing.
std::optional<unsigned> linearOperandInside(Operation *op, ReduceOp reduce) {
  if (!isa<TransposeOp, NegOp, MatmulOp, MulOp, DivOp>(op))
    return std::nullopt;
  std::optional<unsigned> inside;
  for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
    if (isOutside(operand, reduce))
      continue;
    if (inside)
      return std::nullopt;
    inside = i;
  }
  // A quotient is linear in its dividend only.
  if (isa<DivOp>(op) && inside != 0u)
    return std::nullopt;
  return inside;
}

/// Σ_p f(X_p) = f(Σ_p X_p) for f linear with its other operands from
/// outside the sum: a matrix (a gradient through a product of parameters,
/// such as Wkᵀ Wq, multiplies every pair's outer products by the other
/// factor), a scalar factor or divisor, a transpose, a negation. What X_p
/// is then comes apart in the sum.
struct FactorLinearMap : OpRewritePattern<ReduceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReduceOp reduce,
                                PatternRewriter &rewriter) const override {
    if (!isUntemperedSum(reduce))
      return failure();
    Operation *map = yieldedValue(reduce).getDefiningOp();
    std::optional<unsigned> inside =
        map ? linearOperandInside(map, reduce) : std::nullopt;
    if (!inside)
      return failure();
    Value total = sumOf(rewriter, reduce, map->getOperand(*inside));
    IRMapping operands;
    operands.map(map->getOperand(*inside), total);
    Operation *outside = rewriter.clone(*map, operands);
    rewriter.replaceOp(reduce, outside->getResults());
    return success();
  }
};

struct FactorOuterSumsPass
    : public mlir::energy::impl::EnergyFactorOuterSumsBase<
          FactorOuterSumsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModelOp model = getOperation();
    RewritePatternSet patterns(&getContext());
    patterns.add<SplitSumOfOuterProducts, DistributeOuterProduct,
                 FactorOuterProduct, FactorLinearMap>(&getContext());
    FrozenRewritePatternSet frozen(std::move(patterns));
    for (GradientOp gradient : model.getBody().front().getOps<GradientOp>()) {
      FlatSymbolRefAttr of = gradient.getOfAttr();
      auto term = of ? model.lookupSymbol<TermOp>(of) : TermOp();
      if (!term || !term.getAuxiliary() || term.getLoss())
        continue;
      if (failed(applyPatternsGreedily(gradient, frozen)))
        return signalPassFailure();
    }
  }
};

} // namespace
