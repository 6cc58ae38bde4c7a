//===- OptimizerTable.cpp - The built-in optimizers' signatures -----------===//
//
// Names, options and defaults of the built-in optimizers; their updates are
// built by compiler/lib/Dynamics/BuiltinOptimizers.cpp under the same names.
//
//===----------------------------------------------------------------------===//

#include "energy/Plugin/OptimizerTable.h"

using namespace energy::plugin;

const OptimizerOption *
OptimizerSignature::findOption(llvm::StringRef option) const {
  for (const OptimizerOption &candidate : options)
    if (candidate.name == option)
      return &candidate;
  return nullptr;
}

llvm::Error OptimizerTable::add(OptimizerSignature signature) {
  if (lookup(signature.name))
    return llvm::createStringError(
        "optimizer '" + signature.name +
        "' is registered twice (a plugin's name must be new)");
  optimizers.push_back(std::move(signature));
  return llvm::Error::success();
}

const OptimizerSignature *OptimizerTable::lookup(llvm::StringRef name) const {
  for (const OptimizerSignature &signature : optimizers)
    if (signature.name == name)
      return &signature;
  return nullptr;
}

OptimizerTable energy::plugin::builtinOptimizerTable() {
  const OptimizerOption lr{"lr", "step size (required)"};
  const OptimizerOption beta{"beta", "decay of the momentum buffer",
                             OptionValueKind::Scalar, 0.9};
  using Kind = OptionValueKind;
  std::vector<OptimizerSignature> builtins = {
      {"gd",
       "gradient descent: x <- x - lr * dE/dx",
       OptimizerCategory::Gradient,
       {},
       "",
       {lr}},
      {"momentum",
       "heavy-ball momentum: p <- beta p + dE/dx; x <- x - lr p (paper 000 "
       "eq. 9, p starts at 0)",
       OptimizerCategory::Gradient,
       {},
       "",
       {lr, beta}},
      {"nesterov",
       "Nesterov's accelerated gradient: the gradient at y - beta p, then as "
       "momentum (paper 000 eq. 10)",
       OptimizerCategory::Gradient,
       {},
       "",
       {lr, beta}},
      {"newton",
       "Newton step x <- x - lr * H^-1 dE/dx, H^-1 g by conjugate gradients "
       "on Hessian-vector products (cg iterations; a direction of "
       "non-positive curvature stops CG, and at the first iteration falls "
       "back to the gradient step), or by the series sum_{k<=n} (I - H)^k g "
       "when taylor = n is given (paper 000 section 3.2 for n = 1)",
       OptimizerCategory::Gradient,
       {},
       "",
       {lr,
        {"cg", "conjugate-gradient iterations", Kind::Integer, 10.0},
        {"taylor", "order n of the Taylor series (instead of CG)",
         Kind::Integer, 0.0}}},
      {"precond",
       "preconditioned gradient: w <- w - lr * P dE/dw, P an [n, n] matrix "
       "applied along the last axis (paper 001 eq. 14)",
       OptimizerCategory::Gradient,
       {},
       "",
       {lr, {"P", "the preconditioner (required)", Kind::LastAxisMatrix}}},
      {"ode",
       "integrates dv/dt = -dE/dv over dt per step, by Euler or Heun",
       OptimizerCategory::Gradient,
       {"euler", "heun"},
       "method",
       {{"dt", "time per step (required)"},
        {"rtol", "relative tolerance of adaptive sub-steps", Kind::Scalar, 0.0},
        {"atol", "absolute tolerance of adaptive sub-steps", Kind::Scalar,
         0.0}}},
      {"stationary",
       "EM M-step: each node solved in closed form with the "
       "responsibilities held",
       OptimizerCategory::Stationary}};
  OptimizerTable table;
  for (OptimizerSignature &signature : builtins)
    llvm::cantFail(table.add(std::move(signature)));
  return table;
}

OptimizerTable &energy::plugin::getOptimizerTable() {
  static OptimizerTable table = builtinOptimizerTable();
  return table;
}
