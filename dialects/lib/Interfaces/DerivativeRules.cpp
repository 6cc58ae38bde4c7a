//===- DerivativeRules.cpp - Reverse-mode rules of the energy ops ---------===//
//
// The DerivativeOpInterface implementation of the differentiable energy ops
// beyond the element-wise ones (a table in EnergyExprOps.td): given the adjoint
// g of the result, the adjoint of each operand, built from energy ops so that
// rules compose (a gradient can be differentiated again).
//
//===----------------------------------------------------------------------===//

#include "energy/IR/EnergyOps.h"
#include "energy/Interfaces/ExprBuilder.h"
#include "energy/Plugin/FunctionTable.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include <cmath>

using namespace mlir;
using namespace mlir::energy;

//===----------------------------------------------------------------------===//
// Leaves
//===----------------------------------------------------------------------===//

// A read is a leaf: its indices carry no derivative. Gradient derivation
// accumulates the adjoint of the read into the adjoint of its source tensor
// at the read's indices.
LogicalResult ReadOp::buildAdjoints(OpBuilder &, ValueRange,
                                    SmallVectorImpl<Value> &operandAdjoints) {
  operandAdjoints.assign(getNumOperands(), Value());
  return success();
}

// y = v[i]: dv = g placed at i in zeros of v's shape
LogicalResult
ExtractOp::buildAdjoints(OpBuilder &builder, ValueRange adjoints,
                         SmallVectorImpl<Value> &operandAdjoints) {
  operandAdjoints.assign(getNumOperands(), Value());
  operandAdjoints[0] = EmbedOp::create(builder, getLoc(), getSource().getType(),
                                       adjoints[0], getMapAttr(), getIndices());
  return success();
}

// y = zeros with v at i: dv = g[i]
LogicalResult EmbedOp::buildAdjoints(OpBuilder &builder, ValueRange adjoints,
                                     SmallVectorImpl<Value> &operandAdjoints) {
  operandAdjoints.assign(getNumOperands(), Value());
  operandAdjoints[0] =
      ExtractOp::create(builder, getLoc(), getValue().getType(), adjoints[0],
                        getMapAttr(), getIndices());
  return success();
}

// to_real(i): i is an index, through which no derivative flows.
LogicalResult ToRealOp::buildAdjoints(OpBuilder &, ValueRange,
                                      SmallVectorImpl<Value> &operandAdjoints) {
  operandAdjoints.assign(1, Value());
  return success();
}

// eye(D) has no operands.
LogicalResult EyeOp::buildAdjoints(OpBuilder &, ValueRange,
                                   SmallVectorImpl<Value> &operandAdjoints) {
  operandAdjoints.clear();
  return success();
}

//===----------------------------------------------------------------------===//
// Integer powers (EnergyExprOps.td's table has the element-wise rules)
//===----------------------------------------------------------------------===//

// d(x^n) = n x^(n-1) dx
LogicalResult PowOp::buildAdjoints(OpBuilder &builder, ValueRange adjoints,
                                   SmallVectorImpl<Value> &operandAdjoints) {
  ExprBuilder e(builder, getLoc());
  int64_t n = getExponent();
  Value g = adjoints[0];
  if (n == 0) {
    operandAdjoints.assign({Value()});
    return success();
  }
  if (n == 1) {
    operandAdjoints.assign({g});
    return success();
  }
  Value lower =
      n == 2 ? getOperand()
             : PowOp::create(builder, getLoc(), getType(), getOperand(), n - 1)
                   .getResult();
  operandAdjoints.assign(
      {e.mul(g, e.mul(e.constant(static_cast<double>(n)), lower))});
  return success();
}

//===----------------------------------------------------------------------===//
// Normalisations along the last axis
//===----------------------------------------------------------------------===//

// y = softmax(x): dx = y ⊙ (g - Σ_last g ⊙ y)
LogicalResult
SoftmaxOp::buildAdjoints(OpBuilder &builder, ValueRange adjoints,
                         SmallVectorImpl<Value> &operandAdjoints) {
  ExprBuilder e(builder, getLoc());
  Value g = adjoints[0], y = getResult();
  Value inner = e.expandTo(e.sumLast(e.mul(g, y)), getType());
  operandAdjoints.assign({e.mul(y, e.sub(g, inner))});
  return success();
}

// y = log_softmax(x): dx = g - exp(y) ⊙ Σ_last g
LogicalResult
LogSoftmaxOp::buildAdjoints(OpBuilder &builder, ValueRange adjoints,
                            SmallVectorImpl<Value> &operandAdjoints) {
  ExprBuilder e(builder, getLoc());
  Value g = adjoints[0];
  Value total = e.expandTo(e.sumLast(g), getType());
  operandAdjoints.assign({e.sub(g, e.mul(e.unary<ExpOp>(getResult()), total))});
  return success();
}

// y = x / r, r = √(mean_last(x²) + ε): dx = (g - y ⊙ mean_last(g ⊙ y)) / r
LogicalResult
RmsNormOp::buildAdjoints(OpBuilder &builder, ValueRange adjoints,
                         SmallVectorImpl<Value> &operandAdjoints) {
  ExprBuilder e(builder, getLoc());
  Value g = adjoints[0], x = getOperand(), y = getResult();
  Value rms =
      e.unary<SqrtOp>(e.add(e.meanLastExpanded(e.mul(x, x)), e.constant(1e-5)));
  Value projected = e.mul(y, e.meanLastExpanded(e.mul(g, y)));
  operandAdjoints.assign({e.div(e.sub(g, projected), rms)});
  return success();
}

// y = (x - μ) / σ, σ = √(mean_last((x - μ)²) + ε):
// dx = (g - mean_last(g) - y ⊙ mean_last(g ⊙ y)) / σ
LogicalResult
LayerNormOp::buildAdjoints(OpBuilder &builder, ValueRange adjoints,
                           SmallVectorImpl<Value> &operandAdjoints) {
  ExprBuilder e(builder, getLoc());
  Value g = adjoints[0], x = getOperand(), y = getResult();
  Value centred = e.sub(x, e.meanLastExpanded(x));
  Value deviation = e.unary<SqrtOp>(
      e.add(e.meanLastExpanded(e.mul(centred, centred)), e.constant(1e-5)));
  Value numerator = e.sub(e.sub(g, e.meanLastExpanded(g)),
                          e.mul(y, e.meanLastExpanded(e.mul(g, y))));
  operandAdjoints.assign({e.div(numerator, deviation)});
  return success();
}

//===----------------------------------------------------------------------===//
// Vector and matrix math
//===----------------------------------------------------------------------===//

// Y = X⁻¹: dX = -Yᵀ G Yᵀ
LogicalResult
InverseOp::buildAdjoints(OpBuilder &builder, ValueRange adjoints,
                         SmallVectorImpl<Value> &operandAdjoints) {
  ExprBuilder e(builder, getLoc());
  Value yt = e.transpose(getResult());
  operandAdjoints.assign({e.neg(e.matmul(e.matmul(yt, adjoints[0]), yt))});
  return success();
}

// y = A b: dA = g bᵀ (or G Bᵀ), db = Aᵀ g
LogicalResult MatmulOp::buildAdjoints(OpBuilder &builder, ValueRange adjoints,
                                      SmallVectorImpl<Value> &operandAdjoints) {
  ExprBuilder e(builder, getLoc());
  Value g = adjoints[0];
  Value lhsAdjoint = cast<ArrayType>(getRhs().getType()).getRank() == 1
                         ? e.outer(g, getRhs())
                         : e.matmul(g, e.transpose(getRhs()));
  operandAdjoints.assign({lhsAdjoint, e.matmul(e.transpose(getLhs()), g)});
  return success();
}

// d Xᵀ = (dX)ᵀ
LogicalResult
TransposeOp::buildAdjoints(OpBuilder &builder, ValueRange adjoints,
                           SmallVectorImpl<Value> &operandAdjoints) {
  ExprBuilder e(builder, getLoc());
  operandAdjoints.assign({e.transpose(adjoints[0])});
  return success();
}

// d (a · b) = b · da + a · db
LogicalResult DotOp::buildAdjoints(OpBuilder &builder, ValueRange adjoints,
                                   SmallVectorImpl<Value> &operandAdjoints) {
  ExprBuilder e(builder, getLoc());
  Value g = adjoints[0];
  operandAdjoints.assign({e.mul(g, getRhs()), e.mul(g, getLhs())});
  return success();
}

// d (vᵀ M v) = ((M + Mᵀ) v) · dv + (v vᵀ) : dM
LogicalResult QuadOp::buildAdjoints(OpBuilder &builder, ValueRange adjoints,
                                    SmallVectorImpl<Value> &operandAdjoints) {
  ExprBuilder e(builder, getLoc());
  Value g = adjoints[0], v = getVector(), m = getMatrix();
  // One product with the symmetrised matrix: where M does not depend on
  // the loop around the quad (a mixture's precision inside a sum over
  // points), the matrix comes out of the sum as one factor.
  Value vectorAdjoint = e.matmul(e.add(m, e.transpose(m)), v);
  operandAdjoints.assign({e.mul(g, vectorAdjoint), e.mul(g, e.outer(v, v))});
  return success();
}

// Y = a bᵀ: da = G b, db = Gᵀ a
LogicalResult OuterOp::buildAdjoints(OpBuilder &builder, ValueRange adjoints,
                                     SmallVectorImpl<Value> &operandAdjoints) {
  ExprBuilder e(builder, getLoc());
  Value g = adjoints[0];
  operandAdjoints.assign(
      {e.matmul(g, getRhs()), e.matmul(e.transpose(g), getLhs())});
  return success();
}

bool ReduceElementsOp::hasDerivativeRule() {
  return getKind() != ElementsKind::maxabs;
}

// sum: dx = g;  mean: dx = g / n;  lse: dx = g exp(x - y);
// sqnorm: dx = 2 g x;  norm: dx = g x / y;  maxabs: no rule.
LogicalResult
ReduceElementsOp::buildAdjoints(OpBuilder &builder, ValueRange adjoints,
                                SmallVectorImpl<Value> &operandAdjoints) {
  ExprBuilder e(builder, getLoc());
  Value g = adjoints[0], x = getOperand(), y = getResult();
  auto type = cast<ArrayType>(x.getType());
  Value adjoint;
  switch (getKind()) {
  case ElementsKind::sum:
    adjoint = e.broadcastTo(g, type);
    break;
  case ElementsKind::mean:
    adjoint = e.broadcastTo(e.div(g, e.elementCount(type)), type);
    break;
  case ElementsKind::lse:
    adjoint = e.mul(g, e.unary<ExpOp>(e.sub(x, y)));
    break;
  case ElementsKind::sqnorm:
    adjoint = e.mul(e.mul(g, e.constant(2.0)), x);
    break;
  case ElementsKind::norm:
    adjoint = e.mul(e.div(g, y), x);
    break;
  case ElementsKind::maxabs:
    return emitOpError("'maxabs' has no derivative rule; it serves stopping "
                       "rules, not energies");
  }
  operandAdjoints.assign({adjoint});
  return success();
}

// y = Σ_last x: dx = g repeated along the last axis
LogicalResult
SumLastOp::buildAdjoints(OpBuilder &builder, ValueRange adjoints,
                         SmallVectorImpl<Value> &operandAdjoints) {
  ExprBuilder e(builder, getLoc());
  Value g = adjoints[0];
  Type type = getOperand().getType();
  operandAdjoints.assign({e.broadcastTo(g, type)});
  return success();
}

// y = x repeated along new trailing axes: dx = g summed over those axes
LogicalResult
BroadcastOp::buildAdjoints(OpBuilder &builder, ValueRange adjoints,
                           SmallVectorImpl<Value> &operandAdjoints) {
  ExprBuilder e(builder, getLoc());
  Value adjoint = adjoints[0];
  unsigned targetRank = cast<ArrayType>(getOperand().getType()).getRank();
  if (targetRank == 0) {
    operandAdjoints.assign({e.sumElements(adjoint)});
    return success();
  }
  while (cast<ArrayType>(adjoint.getType()).getRank() > targetRank)
    adjoint = e.sumLast(adjoint);
  operandAdjoints.assign({adjoint});
  return success();
}

// Y = diag(v): dv = diag_part(G)
LogicalResult DiagOp::buildAdjoints(OpBuilder &builder, ValueRange adjoints,
                                    SmallVectorImpl<Value> &operandAdjoints) {
  operandAdjoints.assign(
      {DiagPartOp::create(builder, getLoc(), adjoints[0]).getResult()});
  return success();
}

// v = diag_part(X): dX = diag(g)
LogicalResult
DiagPartOp::buildAdjoints(OpBuilder &builder, ValueRange adjoints,
                          SmallVectorImpl<Value> &operandAdjoints) {
  operandAdjoints.assign(
      {DiagOp::create(builder, getLoc(), adjoints[0]).getResult()});
  return success();
}

// d log det M = M⁻ᵀ : dM
LogicalResult LogDetOp::buildAdjoints(OpBuilder &builder, ValueRange adjoints,
                                      SmallVectorImpl<Value> &operandAdjoints) {
  ExprBuilder e(builder, getLoc());
  Value inverse = e.unary<InverseOp>(getOperand());
  operandAdjoints.assign({e.mul(adjoints[0], e.transpose(inverse))});
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions over index domains
//===----------------------------------------------------------------------===//

// L = T log Σ_p exp(e_p / T): ∂L/∂T = (L - Σ_p w_p e_p) / T with
// w_p = exp((e_p - L) / T). The body's own adjoints come from
// buildBodyAdjoint.
LogicalResult ReduceOp::buildAdjoints(OpBuilder &builder, ValueRange adjoints,
                                      SmallVectorImpl<Value> &operandAdjoints) {
  Value temperature = getTemperature();
  if (!temperature) {
    operandAdjoints.clear();
    return success();
  }
  ExprBuilder e(builder, getLoc());
  Value lse = getResult();
  Value weighted = e.sumOverDomain(*this, [&](ExprBuilder &inner, Value body) {
    Value weight =
        inner.unary<ExpOp>(inner.div(inner.sub(body, lse), temperature));
    return inner.mul(weight, body);
  });
  Value adjoint = e.mul(adjoints[0], e.div(e.sub(lse, weighted), temperature));
  operandAdjoints.assign({e.unbroadcast(adjoint, temperature.getType())});
  return success();
}

bool ReduceOp::hasDerivativeRule() { return true; }

// sum: ∂y/∂e_p = 1;  mean: 1 / |admitted positions|, the count taken as at
// least 1 under a predicate (the same wherever a position is admitted; a
// sum of adjoints the planner takes the 1 / count out of is then 0, not
// 0 / 0, where no position is: the mean of nothing is 0);
// lse: softmax weight exp((e_p - y) / T);  max: 1 / (the number of
// positions at the maximum) where e_p is the maximum, else 0 (the
// subgradient that shares ties evenly, as PyTorch's amax does). e_p is
// at the maximum within 64 ε |y|: a gradient computes e_p again, maybe
// in another order of additions than the maximum took (a dot product of up
// to 64 terms); a wider margin would split the gradients of near ties.
Value ReduceOp::buildBodyAdjoint(OpBuilder &builder, Value resultAdjoint,
                                 Value result, Value bodyValue) {
  ExprBuilder e(builder, getLoc());
  switch (getKind()) {
  case ReduceKind::sum:
    return resultAdjoint;
  case ReduceKind::mean: {
    Value count = e.sumOverDomain(
        *this, [](ExprBuilder &inner, Value) { return inner.constant(1.0); });
    if (hasPredicate())
      count = MaximumOp::create(builder, getLoc(), count, e.constant(1.0));
    return e.div(resultAdjoint, count);
  }
  case ReduceKind::lse: {
    Value exponent = e.sub(bodyValue, result);
    if (Value temperature = getTemperature())
      exponent = e.div(exponent, temperature);
    return e.mul(resultAdjoint, e.unary<ExpOp>(exponent));
  }
  case ReduceKind::max: {
    // The tolerance and the number of ties, once, after the maximum.
    OpBuilder after(getContext());
    after.setInsertionPointAfter(getOperation());
    ExprBuilder once(after, getLoc());
    Value tolerance = once.mul(
        once.mul(once.constant(64.0), RoundingUnitOp::create(after, getLoc())),
        once.unary<AbsOp>(result));
    auto atMaximum = [&](ExprBuilder &inner, Value value) {
      Value below = inner.sub(inner.sub(result, value), tolerance);
      return inner.sub(inner.constant(1.0), inner.unary<HeavisideOp>(below));
    };
    Value ties = once.sumOverDomain(*this, atMaximum);
    // w / (ties + 1 - w): 1 / ties where w is 1 (this position is one of
    // the ties), 0 where it is 0, and never 1 / ties taken out of a sum
    // over the positions (0 / 0 where a predicate admits none).
    Value weight = atMaximum(e, bodyValue);
    Value denominator = e.add(ties, e.sub(e.constant(1.0), weight));
    return e.div(e.mul(resultAdjoint, weight), denominator);
  }
  case ReduceKind::custom:
    // The weights depend on every position's value: derive-gradients
    // tabulates them ahead of the loop (buildCustomWeights).
    emitOpError("a plugin aggregation's body adjoint needs its weights "
                "tabulated ahead of the loop");
    return {};
  }
  llvm_unreachable("unknown reduction kind");
}

// y = c ? a : b: da = c ? g : 0, db = c ? 0 : g; c is a condition.
LogicalResult SelectOp::buildAdjoints(OpBuilder &builder, ValueRange adjoints,
                                      SmallVectorImpl<Value> &operandAdjoints) {
  ExprBuilder e(builder, getLoc());
  Value g = adjoints[0];
  Value zero = e.mul(g, e.constant(0.0));
  operandAdjoints.assign(
      {Value(), SelectOp::create(builder, getLoc(), getCondition(), g, zero),
       SelectOp::create(builder, getLoc(), getCondition(), zero, g)});
  return success();
}

//===----------------------------------------------------------------------===//
// Plugins' functions: their derivatives are run-time code too
//===----------------------------------------------------------------------===//

bool ApplyOp::hasDerivativeRule() {
  const ::energy::plugin::FunctionInfo *function =
      ::energy::plugin::getFunctionTable().lookup(getFunction());
  return function &&
         static_cast<size_t>(getOrder()) + 1 < function->code.symbols.size();
}

// d f^(k)(x) = f^(k+1)(x) dx
LogicalResult ApplyOp::buildAdjoints(OpBuilder &builder, ValueRange adjoints,
                                     SmallVectorImpl<Value> &operandAdjoints) {
  ExprBuilder e(builder, getLoc());
  Value derivative =
      ApplyOp::create(builder, getLoc(), getType(), getFunctionAttr(),
                      builder.getI64IntegerAttr(getOrder() + 1), getOperand());
  operandAdjoints.assign({e.mul(adjoints[0], derivative)});
  return success();
}

// d s(a, b) = ∇_a s · da + ∇_b s · db
LogicalResult
SimilarityOp::buildAdjoints(OpBuilder &builder, ValueRange adjoints,
                            SmallVectorImpl<Value> &operandAdjoints) {
  ExprBuilder e(builder, getLoc());
  auto gradient = [&](int64_t argument) {
    return SimilarityGradientOp::create(
        builder, getLoc(), getLhs().getType(), getFunctionAttr(),
        builder.getI64IntegerAttr(argument), getLhs(), getRhs());
  };
  operandAdjoints.assign(
      {e.mul(adjoints[0], gradient(0)), e.mul(adjoints[0], gradient(1))});
  return success();
}
