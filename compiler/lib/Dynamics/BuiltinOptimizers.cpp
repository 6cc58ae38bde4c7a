//===- BuiltinOptimizers.cpp - The GD forms of paper 000 ------------------===//
//
// Plain gradient descent, heavy-ball momentum and Nesterov's accelerated
// gradient (paper 000 eqs. 9-10), registered like any plugin's optimizer.
//
//===----------------------------------------------------------------------===//

#include "energy/Dynamics/OptimizerRegistry.h"

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

OptimizerOption learningRate() {
  return {"lr", "step size (required)", std::nullopt};
}
OptimizerOption momentumDecay() {
  return {"beta", "decay of the momentum buffer", 0.9};
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

/// x ← x_entry − h g
Value descend(UpdateBuilder &update, Value entry, Value step, Value gradient) {
  return sub(update, entry, mul(update, step, gradient));
}
} // namespace

void mlir::energy::registerBuiltinOptimizers(OptimizerRegistry &registry) {
  // x ← x − lr ∇E(x)
  registry.add({"gd",
                "gradient descent: x <- x - lr * dE/dx",
                {learningRate()},
                /*prepare=*/nullptr,
                [](UpdateBuilder &update, Value entry, Value gradient) {
                  update.store(update.getNode().getSymName(),
                               sub(update, entry,
                                   mul(update, update.option("lr"), gradient)));
                  return success();
                }});
  // p ← β p + ∇E(x);  x ← x − lr p   (000 eq. 9; p starts at 0)
  registry.add({"momentum",
                "heavy-ball momentum: p <- beta p + dE/dx; x <- x - lr p "
                "(paper 000 eq. 9, p starts at 0)",
                {learningRate(), momentumDecay()},
                /*prepare=*/nullptr,
                applyMomentum});
  // The gradient is taken at the look-ahead y − β p; then as momentum:
  // p ← β p + ∇E(y − β p);  y ← y − lr p   (000 eq. 10)
  registry.add(
      {"nesterov",
       "Nesterov's accelerated gradient: the gradient at y - beta p, then "
       "as momentum (paper 000 eq. 10)",
       {learningRate(), momentumDecay()},
       [](UpdateBuilder &update) {
         StringRef node = update.getNode().getSymName();
         Value velocity = update.read(update.stateTensor("velocity"));
         Value lookAhead = sub(update, update.read(node),
                               mul(update, update.option("beta"), velocity));
         update.store(node, lookAhead);
         return success();
       },
       applyMomentum});
  // w ← w − lr P ∇E(w), P applied along the last axis (001 eq. 14)
  registry.add(
      {"precond",
       "preconditioned gradient: w <- w - lr * P dE/dw, P an [n, n] matrix "
       "applied along the last axis (paper 001 eq. 14)",
       {learningRate(), {"P", "the preconditioner (required)", std::nullopt}},
       /*prepare=*/nullptr,
       [](UpdateBuilder &update, Value entry, Value gradient) {
         Value preconditioned =
             applyAlongLastAxis(update, update.option("P"), gradient);
         update.store(
             update.getNode().getSymName(),
             descend(update, entry, update.option("lr"), preconditioned));
         return success();
       }});
  // dv/dt = −∇E(v) over dt per step. Euler: v ← v − dt ∇E(v). Heun:
  // k₁ = ∇E(v), ṽ = v − dt k₁, k₂ = ∇E(ṽ), v ← v − dt (k₁ + k₂) / 2.
  registry.add(
      {"ode",
       "integrates dv/dt = -dE/dv over dt per step, by Euler or Heun",
       {{"method", "euler or heun", std::nullopt, {"euler", "heun"}},
        {"dt", "time per step (required)", std::nullopt},
        {"rtol", "relative tolerance of adaptive sub-steps (not built yet)",
         0.0},
        {"atol", "absolute tolerance of adaptive sub-steps (not built yet)",
         0.0}},
       /*prepare=*/nullptr,
       [](UpdateBuilder &update, Value entry, Value gradient) -> LogicalResult {
         UpdateOp rule = update.getRule();
         for (Attribute name : rule.getOptionNames())
           if (cast<StringAttr>(name).getValue() == "rtol" ||
               cast<StringAttr>(name).getValue() == "atol")
             return rule.emitError()
                    << "adaptive sub-steps (rtol, atol) of `ode` are not "
                       "built yet";
         StringRef node = update.getNode().getSymName();
         Value dt = update.option("dt");
         Value euler = descend(update, entry, dt, gradient);
         if (update.choice("method") == "euler") {
           update.store(node, euler);
           return success();
         }
         update.store(node, euler);
         Value predicted = update.gradient(node);
         Value average =
             mul(update, add(update, gradient, predicted),
                 ConstantOp::create(update.getBuilder(), update.getLoc(), 0.5));
         update.store(node, descend(update, entry, dt, average));
         return success();
       }});
}
