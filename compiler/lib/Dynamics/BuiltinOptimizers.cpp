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
}
