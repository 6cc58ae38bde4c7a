//===- Adam.cpp - The example plugin's Adam optimizer ---------------------===//
//
// Registers `adam(lr, beta1 = 0.9, beta2 = 0.999, eps = 1e-8)` as gradient
// dynamics: with g = dE/dx at the group's entry and t the step (from 1),
//   m <- beta1 m + (1 - beta1) g,   v <- beta2 v + (1 - beta2) g^2,
//   x <- x - lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps),
// its moment buffers m and v state tensors of the model (`x.adam_m`,
// `x.adam_v`, starting at zero), so runs save and resume them like
// momentum's.
//
//===----------------------------------------------------------------------===//

#include "energy/Dynamics/OptimizerRegistry.h"
#include "energy/Plugin/Plugin.h"

using namespace mlir;
using namespace mlir::energy;
namespace plugin = ::energy::plugin;

namespace {
LogicalResult applyAdam(UpdateBuilder &update, Value entry, Value gradient) {
  OpBuilder &b = update.getBuilder();
  Location loc = update.getLoc();
  auto constant = [&](double value) {
    return ConstantOp::create(b, loc, value).getResult();
  };
  Value beta1 = update.option("beta1"), beta2 = update.option("beta2");
  Value one = constant(1.0);
  StringRef node = update.getNode().getSymName();
  StringRef firstName = update.stateTensor("adam_m");
  StringRef secondName = update.stateTensor("adam_v");
  Value first = AddOp::create(
      b, loc, MulOp::create(b, loc, beta1, update.read(firstName)),
      MulOp::create(b, loc, SubOp::create(b, loc, one, beta1), gradient));
  Value second = AddOp::create(
      b, loc, MulOp::create(b, loc, beta2, update.read(secondName)),
      MulOp::create(b, loc, SubOp::create(b, loc, one, beta2),
                    MulOp::create(b, loc, gradient, gradient)));
  update.store(firstName, first);
  update.store(secondName, second);
  // t = step + 1; beta^t = exp(t log beta).
  Value steps = AddOp::create(
      b, loc,
      ToRealOp::create(b, loc, StepOp::create(b, loc, b.getIndexType())), one);
  auto correction = [&](Value beta) {
    Value power = ExpOp::create(
        b, loc, MulOp::create(b, loc, steps, LogOp::create(b, loc, beta)));
    return SubOp::create(b, loc, one, power).getResult();
  };
  Value firstHat = DivOp::create(b, loc, first, correction(beta1));
  Value secondHat = DivOp::create(b, loc, second, correction(beta2));
  Value denominator = AddOp::create(b, loc, SqrtOp::create(b, loc, secondHat),
                                    update.option("eps"));
  Value step = MulOp::create(b, loc, update.option("lr"),
                             DivOp::create(b, loc, firstHat, denominator));
  update.store(node, SubOp::create(b, loc, entry, step));
  return success();
}
} // namespace

/// Registers the optimizer's signature (names, options, defaults) and its
/// update.
llvm::Error registerAdam(plugin::Registration &registration) {
  using plugin::OptionValueKind;
  return registerOptimizer(
      registration,
      {"adam",
       "Adam: moments of the gradient and its square, bias-corrected "
       "(Kingma and Ba); x <- x - lr m^ / (sqrt(v^) + eps)",
       plugin::OptimizerCategory::Gradient,
       {},
       "",
       {{"lr", "step size (required)"},
        {"beta1", "decay of the first moment", OptionValueKind::Scalar, 0.9},
        {"beta2", "decay of the second moment", OptionValueKind::Scalar, 0.999},
        {"eps", "added to the root of the second moment",
         OptionValueKind::Scalar, 1e-8}}},
      /*prepare=*/nullptr, applyAdam);
}
