//===- OptimizerTable.cpp - Known optimizers and their options ------------===//
//
// The built-in optimizer table. Defaults of optional options (beta = 0.9,
// cg = 10, method = euler) are applied by the dynamics lowering, not here.
//
//===----------------------------------------------------------------------===//

#include "energy/Frontend/OptimizerTable.h"

using namespace energy::frontend;

const OptimizerOptionInfo *
OptimizerInfo::findOption(llvm::StringRef option) const {
  for (const OptimizerOptionInfo &info : options)
    if (info.name == option)
      return &info;
  return nullptr;
}

void OptimizerTable::add(OptimizerInfo info) {
  for (OptimizerInfo &existing : optimizers) {
    if (existing.name == info.name) {
      existing = std::move(info);
      return;
    }
  }
  optimizers.push_back(std::move(info));
}

const OptimizerInfo *OptimizerTable::lookup(llvm::StringRef name) const {
  for (const OptimizerInfo &info : optimizers)
    if (info.name == name)
      return &info;
  return nullptr;
}

static OptimizerTable buildDefaultTable() {
  const OptimizerOptionInfo lr{"lr", OptionValueKind::Scalar, true};
  const OptimizerOptionInfo beta{"beta", OptionValueKind::Scalar, false};
  OptimizerTable table;
  using Category = OptimizerCategory;
  table.add({"gd", Category::Gradient, {}, "", {lr}});
  table.add({"momentum", Category::Gradient, {}, "", {lr, beta}});
  table.add({"nesterov", Category::Gradient, {}, "", {lr, beta}});
  table.add({"newton",
             Category::Gradient,
             {},
             "",
             {lr,
              {"cg", OptionValueKind::Integer, false},
              {"taylor", OptionValueKind::Integer, false}}});
  table.add({"precond",
             Category::Gradient,
             {},
             "",
             {lr, {"P", OptionValueKind::LastAxisMatrix, true}}});
  table.add({"ode",
             Category::Gradient,
             {"euler", "heun"},
             "method",
             {{"dt", OptionValueKind::Scalar, true},
              {"rtol", OptionValueKind::Scalar, false},
              {"atol", OptionValueKind::Scalar, false}}});
  table.add({"stationary", Category::Stationary, {}, "", {}});
  return table;
}

const OptimizerTable &energy::frontend::getDefaultOptimizerTable() {
  static const OptimizerTable table = buildDefaultTable();
  return table;
}
