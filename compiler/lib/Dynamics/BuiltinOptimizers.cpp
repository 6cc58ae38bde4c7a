//===- BuiltinOptimizers.cpp - How the built-in optimizers update ---------===//
//
// The updates of gd, momentum and Nesterov (paper 000 eqs. 9-10), precond,
// newton and ode; each entry of BuiltinOptimizers.def joins one to its
// signature.
//
//===----------------------------------------------------------------------===//

#include "energy/Dynamics/OptimizerRegistry.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <cmath>

using namespace mlir;
using namespace mlir::energy;

namespace {
Value mul(UpdateBuilder &update, Value lhs, Value rhs) {
  return MulOp::create(update.getBuilder(), update.getLoc(), lhs, rhs);
}
Value add(UpdateBuilder &update, Value lhs, Value rhs) {
  return AddOp::create(update.getBuilder(), update.getLoc(), lhs, rhs);
}
Value sub(UpdateBuilder &update, Value lhs, Value rhs) {
  return SubOp::create(update.getBuilder(), update.getLoc(), lhs, rhs);
}

Value matmul(UpdateBuilder &update, Value lhs, Value rhs) {
  return MatmulOp::create(update.getBuilder(), update.getLoc(), lhs, rhs);
}
Value transpose(UpdateBuilder &update, Value value) {
  return TransposeOp::create(update.getBuilder(), update.getLoc(), value);
}

/// P applied along the last axis of `value`: P v for a vector, each row
/// times Pᵀ (that is, P applied to every row) for a matrix.
Value applyAlongLastAxis(UpdateBuilder &update, Value matrix, Value value) {
  if (cast<ArrayType>(value.getType()).getRank() == 1)
    return matmul(update, matrix, value);
  return matmul(update, value, transpose(update, matrix));
}

/// p ← β p + g;  x ← x_entry − lr p   (the update of momentum and nesterov)
LogicalResult applyMomentum(UpdateBuilder &update, Value entry,
                            Value gradient) {
  StringRef velocity = update.stateTensor("velocity");
  Value decayed = mul(update, update.option("beta"), update.read(velocity));
  Value buffer = add(update, decayed, gradient);
  update.store(velocity, buffer);
  update.store(update.getNode().getSymName(),
               sub(update, entry, mul(update, update.option("lr"), buffer)));
  return success();
}

Value sumElements(UpdateBuilder &update, Value value) {
  return ReduceElementsOp::create(update.getBuilder(), update.getLoc(),
                                  ElementsKind::sum, value);
}
Value constant(UpdateBuilder &update, double value) {
  return ConstantOp::create(update.getBuilder(), update.getLoc(), value);
}
Value select(UpdateBuilder &update, Value condition, Value a, Value b) {
  return SelectOp::create(update.getBuilder(), update.getLoc(), condition, a,
                          b);
}
Value isGreater(UpdateBuilder &update, Value a, Value b) {
  return CmpOp::create(update.getBuilder(), update.getLoc(), CmpPredicate::gt,
                       a, b);
}
Value isPositive(UpdateBuilder &update, Value scalar) {
  return isGreater(update, scalar, constant(update, 0.0));
}
Value both(UpdateBuilder &update, Value a, Value b) {
  return arith::AndIOp::create(update.getBuilder(), update.getLoc(), a, b);
}
/// numerator / denominator where `valid`, else 0, never dividing by 0.
Value guardedRatio(UpdateBuilder &update, Value valid, Value numerator,
                   Value denominator) {
  Value safe = select(update, valid, denominator, constant(update, 1.0));
  Value ratio =
      DivOp::create(update.getBuilder(), update.getLoc(), numerator, safe);
  return select(update, valid, ratio, constant(update, 0.0));
}

/// s ≈ H⁻¹ g by `iterations` steps of conjugate gradients on H s = g, with
/// Hessian-vector products. A direction of curvature pᵀHp ≤ √ε · pᵀp, ε the
/// machine epsilon of the type the kernels compute in (none, negative, or
/// rounding noise, which dividing by would step 1/ε times ‖p‖), stops the
/// iteration with the current s; if the very first one has it, s = g (a
/// gradient step). Straight-line code: the stopping is by selects.
FailureOr<Value> solveConjugateGradient(UpdateBuilder &update, Value gradient,
                                        int64_t iterations) {
  Value solution = mul(update, gradient, constant(update, 0.0));
  Value residual = gradient, direction = gradient;
  Value residualNorm = sumElements(update, mul(update, residual, residual));
  Value flatCurvature = SqrtOp::create(
      update.getBuilder(), update.getLoc(),
      RoundingUnitOp::create(update.getBuilder(), update.getLoc()));
  Value active, firstActive;
  for (int64_t k = 0; k < iterations; ++k) {
    Value product = update.hessianVectorProduct(direction);
    if (!product)
      return failure();
    Value curvature = sumElements(update, mul(update, direction, product));
    Value flat = mul(update, flatCurvature,
                     sumElements(update, mul(update, direction, direction)));
    Value ok = both(update, isGreater(update, curvature, flat),
                    isPositive(update, residualNorm));
    if (active)
      ok = both(update, active, ok);
    if (!firstActive)
      firstActive = ok;
    Value alpha = guardedRatio(update, ok, residualNorm, curvature);
    solution = add(update, solution, mul(update, alpha, direction));
    residual = sub(update, residual, mul(update, alpha, product));
    Value newNorm = sumElements(update, mul(update, residual, residual));
    Value beta = guardedRatio(update, ok, newNorm, residualNorm);
    direction = add(update, residual, mul(update, beta, direction));
    residualNorm = newNorm;
    active = ok;
  }
  if (!firstActive)
    return gradient;
  return select(update, firstActive, solution, gradient);
}

/// H⁻¹ g ≈ Σ_{k=0..n} (I − H)^k g (000 §3.2 for n = 1).
FailureOr<Value> taylorInverse(UpdateBuilder &update, Value gradient,
                               int64_t order) {
  Value term = gradient, total = gradient;
  for (int64_t k = 1; k <= order; ++k) {
    Value product = update.hessianVectorProduct(term);
    if (!product)
      return failure();
    term = sub(update, term, product);
    total = add(update, total, term);
  }
  return total;
}

Value minimum(UpdateBuilder &update, Value a, Value b) {
  OpBuilder &builder = update.getBuilder();
  Location loc = update.getLoc();
  Value negated = MaximumOp::create(
      builder, loc, NegOp::create(builder, loc, a.getType(), a),
      NegOp::create(builder, loc, b.getType(), b));
  return NegOp::create(builder, loc, negated.getType(), negated);
}
Value maximum(UpdateBuilder &update, Value a, Value b) {
  return MaximumOp::create(update.getBuilder(), update.getLoc(), a, b);
}
Value maxAbs(UpdateBuilder &update, Value v) {
  return ReduceElementsOp::create(update.getBuilder(), update.getLoc(),
                                  ElementsKind::maxabs, v);
}

/// Integrates dv/dt = −∇E(v) over `dt` by Heun steps of adaptive size: a
/// sub-step of size h is accepted when the difference between its Heun and
/// Euler results is within atol + rtol · |v| (max norms), and h is then
/// scaled by 0.9 / √error, within [0.2, 5]. The sub-step size is carried to
/// the next step in the scalar state `@v.ode_step`, the time still to cover
/// in `@v.ode_remaining`.
LogicalResult integrateAdaptively(UpdateBuilder &update, Value dt) {
  OpBuilder &builder = update.getBuilder();
  Location loc = update.getLoc();
  StringRef node = update.getNode().getSymName();
  Value rtol = update.option("rtol"), atol = update.option("atol");
  StringRef stepSize = update.stateTensor("ode_step", /*scalar=*/true);
  StringRef remaining = update.stateTensor("ode_remaining", /*scalar=*/true);
  update.store(remaining, dt);
  Value carried = update.read(stepSize);
  Value start = select(update, isPositive(update, carried),
                       minimum(update, carried, dt), dt);
  update.store(stepSize, start);

  auto loop = RepeatOp::create(builder, loc, builder.getI64IntegerAttr(100000));
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(&loop.getBody().emplaceBlock());
  Value v = update.read(node);
  Value left = update.read(remaining);
  Value h = minimum(update, update.read(stepSize), left);
  Value k1 = update.gradient(node);
  Value euler = sub(update, v, mul(update, h, k1));
  update.store(node, euler);
  Value k2 = update.gradient(node);
  Value heun = sub(
      update, v,
      mul(update, mul(update, h, constant(update, 0.5)), add(update, k1, k2)));
  Value scale = add(update, atol, mul(update, rtol, maxAbs(update, heun)));
  Value error = DivOp::create(builder, loc,
                              maxAbs(update, sub(update, heun, euler)), scale);
  Value accept = CmpOp::create(builder, loc, CmpPredicate::le, error,
                               constant(update, 1.0));
  update.store(node, select(update, accept, heun, v));
  Value now = select(update, accept, sub(update, left, h), left);
  update.store(remaining, now);
  Value shrink = DivOp::create(
      builder, loc, constant(update, 0.9),
      SqrtOp::create(builder, loc, error.getType(),
                     maximum(update, error, constant(update, 1e-12))));
  Value factor = minimum(update, maximum(update, shrink, constant(update, 0.2)),
                         constant(update, 5.0));
  update.store(stepSize, mul(update, h, factor));
  Value done = CmpOp::create(builder, loc, CmpPredicate::le, now,
                             mul(update, dt, constant(update, 1e-12)));
  YieldOp::create(builder, loc, done);
  return success();
}

/// x ← x_entry − h g
Value descend(UpdateBuilder &update, Value entry, Value step, Value gradient) {
  return sub(update, entry, mul(update, step, gradient));
}

/// x ← x − lr ∇E(x)
LogicalResult applyGradientDescent(UpdateBuilder &update, Value entry,
                                   Value gradient) {
  update.store(update.getNode().getSymName(),
               descend(update, entry, update.option("lr"), gradient));
  return success();
}

/// Nesterov's gradient is taken at the look-ahead y − β p; then as momentum:
/// p ← β p + ∇E(y − β p);  y ← y − lr p   (000 eq. 10)
LogicalResult prepareNesterov(UpdateBuilder &update) {
  StringRef node = update.getNode().getSymName();
  Value velocity = update.read(update.stateTensor("velocity"));
  Value lookAhead = sub(update, update.read(node),
                        mul(update, update.option("beta"), velocity));
  update.store(node, lookAhead);
  return success();
}

/// w ← w − lr P ∇E(w), P applied along the last axis (001 eq. 14)
LogicalResult applyPreconditioned(UpdateBuilder &update, Value entry,
                                  Value gradient) {
  Value preconditioned =
      applyAlongLastAxis(update, update.option("P"), gradient);
  update.store(update.getNode().getSymName(),
               descend(update, entry, update.option("lr"), preconditioned));
  return success();
}

/// x ← x − lr s with s ≈ H⁻¹ ∇E: Newton-CG on Hessian-vector products, or
/// the Taylor series Σ_{k≤n} (I − H)^k ∇E when `taylor = n` is given.
LogicalResult applyNewton(UpdateBuilder &update, Value entry, Value gradient) {
  bool taylor = update.hasOption("taylor");
  std::optional<double> count = update.literalOption(taylor ? "taylor" : "cg");
  if (!count)
    return failure();
  if (*count < 0 || *count != std::floor(*count) || *count > 1000)
    return update.getRule().emitError()
           << "option '" << (taylor ? "taylor" : "cg")
           << "' must be an integer from 0 to 1000";
  FailureOr<Value> step =
      taylor ? taylorInverse(update, gradient, int64_t(*count))
             : solveConjugateGradient(update, gradient, int64_t(*count));
  if (failed(step))
    return failure();
  update.store(update.getNode().getSymName(),
               descend(update, entry, update.option("lr"), *step));
  return success();
}

/// dv/dt = −∇E(v) over dt per step. Euler: v ← v − dt ∇E(v). Heun:
/// k₁ = ∇E(v), ṽ = v − dt k₁, k₂ = ∇E(ṽ), v ← v − dt (k₁ + k₂) / 2.
LogicalResult applyOde(UpdateBuilder &update, Value entry, Value gradient) {
  StringRef node = update.getNode().getSymName();
  Value dt = update.option("dt");
  if (update.hasOption("rtol") || update.hasOption("atol"))
    return integrateAdaptively(update, dt);
  update.store(node, descend(update, entry, dt, gradient));
  if (update.choice("method") == "euler")
    return success();
  Value predicted = update.gradient(node);
  Value average =
      mul(update, add(update, gradient, predicted), constant(update, 0.5));
  update.store(node, descend(update, entry, dt, average));
  return success();
}
} // namespace

void mlir::energy::registerBuiltinOptimizers(OptimizerRegistry &registry) {
  using namespace ::energy::plugin;
#define ENERGY_OPTIMIZER(Prepare, Apply, ...)                                  \
  {                                                                            \
    OptimizerDefinition definition{OptimizerSignature{__VA_ARGS__}.name,       \
                                   Prepare, Apply};                            \
    if (definition.apply)                                                      \
      llvm::cantFail(registry.add(std::move(definition)));                     \
  }
#include "energy/Plugin/BuiltinOptimizers.def"
}
