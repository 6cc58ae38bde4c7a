//===- CheckDynamics.cpp - Checking of the dynamics block -----------------===//
//
// The dynamics' rules against the optimizer table (names, options and
// their values), the nodes they update, explicit rules' shapes, step counts
// and stopping rules.
//
//===----------------------------------------------------------------------===//

#include "CheckerImpl.h"

#include "energy/Frontend/Checker.h"
#include "energy/Frontend/Diagnostics.h"

#include "llvm/ADT/DenseSet.h"

using namespace energy::frontend;
using namespace energy::frontend::detail;
using llvm::cast;
using llvm::dyn_cast;
using llvm::isa;

void Checker::checkStepsCount(DynamicsBlock &dynamics) {
  if (!dynamics.steps)
    return;
  Expr &count = *dynamics.steps->count;
  if (auto *number = dyn_cast<NumberExpr>(&count)) {
    std::optional<int64_t> value = getIntegerLiteral(count);
    if (!value || *value < 0 || *value > kMaxDimValue) {
      diagnostics.error(count.getLoc(),
                        "the step count must be a non-negative integer or a "
                        "dim expression, not " +
                            quote(number->getSpelling()),
                        {count.getRange()});
      return;
    }
    count.setShape(Shape());
    stepUpper = AffineExpr::getConstant(*value - 1);
    return;
  }
  if (std::optional<AffineExpr> size = checkDomainSize(count))
    stepUpper = *size - AffineExpr::getConstant(1);
}

void Checker::checkDynamics(DynamicsBlock &dynamics) {
  llvm::DenseMap<TensorDecl *, const UpdateRule *> ruleOf;
  for (UpdateRule &rule : dynamics.rules) {
    Decl *decl = globals.lookup(rule.node);
    bool targetOk = false;
    if (!decl) {
      diagnostics.error(rule.nodeRange.Start,
                        "unknown node " + quote(rule.node) + " in rule",
                        {rule.nodeRange});
    } else {
      decl->markUsed();
      auto *tensor = dyn_cast<TensorDecl>(decl);
      if (!tensor || tensor->getRole() != TensorRole::State) {
        diagnostics.error(rule.nodeRange.Start,
                          "a rule can only update a state, but " +
                              quote(rule.node) + " is " +
                              (tensor ? "an " : "a ") + describeDecl(*decl),
                          {rule.nodeRange});
        diagnostics.note(decl->getNameRange().Start,
                         quote(rule.node) + " is declared here");
      } else {
        auto [it, inserted] = ruleOf.try_emplace(tensor, &rule);
        if (!inserted) {
          diagnostics.error(rule.nodeRange.Start,
                            quote(rule.node) + " has two rules",
                            {rule.nodeRange});
          diagnostics.note(it->second->nodeRange.Start,
                           "see previous rule here");
        }
        rule.target = tensor;
        targetOk = true;
      }
    }
    if (rule.kind == UpdateRule::Kind::Optimizer) {
      checkOptimizerRule(rule);
      continue;
    }
    std::optional<Shape> value = checkExpr(*rule.value);
    if (value && targetOk && *value != rule.target->getShape())
      diagnostics.error(rule.value->getLoc(),
                        "the rule for " + quote(rule.node) + " has shape " +
                            value->str() + " but " + quote(rule.node) + " is " +
                            rule.target->getShape().str(),
                        {rule.value->getRange()});
  }
  if (dynamics.steps && dynamics.steps->until) {
    ExprContext saved = context;
    context = ExprContext::Until;
    checkCondition(*dynamics.steps->until, /*requireAffine=*/false);
    context = saved;
  }
}

void Checker::checkOptimizerRule(UpdateRule &rule) {
  const energy::plugin::OptimizerSignature *info =
      optimizers.lookup(rule.optimizer);
  if (!info) {
    diagnostics.error(rule.optimizerRange.Start,
                      "unknown optimizer " + quote(rule.optimizer),
                      {rule.optimizerRange});
    return;
  }
  rule.optimizerInfo = info;
  std::string optimizerName = quote(rule.optimizer);
  // Positional argument.
  for (size_t i = 0; i < rule.positional.size(); ++i) {
    const PositionalArg &argument = rule.positional[i];
    if (info->positionalChoices.empty() || i > 0) {
      diagnostics.error(argument.range.Start,
                        "unexpected argument " + quote(argument.name) +
                            " for optimizer " + optimizerName +
                            "; options are written `name = value`",
                        {argument.range});
      continue;
    }
    if (!llvm::is_contained(info->positionalChoices, argument.name.str())) {
      std::string choices;
      for (size_t c = 0; c < info->positionalChoices.size(); ++c) {
        if (c)
          choices += c + 1 == info->positionalChoices.size() ? " or " : ", ";
        choices += quote(info->positionalChoices[c]);
      }
      diagnostics.error(argument.range.Start,
                        "unknown " + info->positionalName + " " +
                            quote(argument.name) + " for optimizer " +
                            optimizerName + "; expected " + choices,
                        {argument.range});
    }
  }
  // Options.
  llvm::StringMap<const OptimizerOption *> seen;
  for (OptimizerOption &option : rule.options) {
    const energy::plugin::OptimizerOption *optionInfo =
        info->findOption(option.name);
    if (!optionInfo) {
      diagnostics.error(option.nameRange.Start,
                        "unknown option " + quote(option.name) +
                            " for optimizer " + optimizerName,
                        {option.nameRange});
      continue;
    }
    auto [it, inserted] = seen.try_emplace(option.name, &option);
    if (!inserted) {
      diagnostics.error(option.nameRange.Start,
                        "duplicate option " + quote(option.name),
                        {option.nameRange});
      diagnostics.note(it->second->nameRange.Start,
                       "see previous definition here");
      continue;
    }
    Expr &value = *option.value;
    ExprContext saved = context;
    context = ExprContext::Option;
    switch (optionInfo->valueKind) {
    case OptionValueKind::Scalar:
      checkScalar(value, "option " + quote(option.name));
      break;
    case OptionValueKind::Integer: {
      std::optional<int64_t> literal = getIntegerLiteral(value);
      if (!literal || *literal < 0)
        diagnostics.error(value.getLoc(),
                          "option " + quote(option.name) +
                              " must be a non-negative integer literal",
                          {value.getRange()});
      else
        checkExpr(value);
      break;
    }
    case OptionValueKind::LastAxisMatrix: {
      std::optional<Shape> shape = checkExpr(value);
      if (!shape || !rule.target)
        break;
      Shape nodeShape = rule.target->getShape();
      if (nodeShape.isScalar() || nodeShape.getRank() > 2) {
        diagnostics.error(value.getLoc(),
                          "option " + quote(option.name) +
                              " applies along the last axis of a vector or "
                              "of the rows of a matrix, but " +
                              quote(rule.node) + " has shape " +
                              nodeShape.str(),
                          {value.getRange()});
        break;
      }
      std::string axis = nodeShape.back();
      Shape expected({axis, axis});
      if (*shape != expected)
        diagnostics.error(value.getLoc(),
                          "option " + quote(option.name) + " must have shape " +
                              expected.str() + " (the last axis of " +
                              quote(rule.node) + "), but it has shape " +
                              shape->str(),
                          {value.getRange()});
      break;
    }
    }
    context = saved;
  }
  for (const energy::plugin::OptimizerOption &optionInfo : info->options)
    if (optionInfo.required() && !seen.count(optionInfo.name))
      diagnostics.error(rule.optimizerRange.Start,
                        "optimizer " + optimizerName + " requires option " +
                            quote(optionInfo.name),
                        {rule.optimizerRange});
}

/// Collects the tensors referenced inside the body of some `lse`, following
/// lets and fn bodies.
static void collectTensorsInsideLse(const Expr &expr, bool insideLse,
                                    llvm::DenseSet<const Decl *> &visiting,
                                    llvm::DenseSet<const TensorDecl *> &found) {
  if (const auto *name = dyn_cast<NameExpr>(&expr)) {
    Decl *decl = name->getDecl();
    if (name->getSymbolKind() == SymbolKind::Tensor && insideLse)
      found.insert(cast<TensorDecl>(decl));
    if (name->getSymbolKind() == SymbolKind::Let &&
        visiting.insert(decl).second) {
      collectTensorsInsideLse(cast<LetDecl>(decl)->getBody(), insideLse,
                              visiting, found);
      visiting.erase(decl);
    }
    return;
  }
  if (const auto *call = dyn_cast<CallExpr>(&expr)) {
    if (FnDecl *fn = call->getFn(); fn && visiting.insert(fn).second) {
      collectTensorsInsideLse(fn->getBody(), insideLse, visiting, found);
      visiting.erase(fn);
    }
  }
  bool lse = false;
  if (const auto *reduction = dyn_cast<ReductionExpr>(&expr))
    lse = reduction->getReductionKind() == ReductionKind::Lse;
  forEachChild(expr, [&](const Expr &child) {
    collectTensorsInsideLse(child, insideLse || lse, visiting, found);
  });
}

void Checker::checkStationaryRules(ModelSpec &model) {
  llvm::DenseSet<const TensorDecl *> insideLse;
  llvm::DenseSet<const Decl *> visiting;
  for (DeclPtr &decl : model.decls)
    if (auto *energy = dyn_cast<EnergyDecl>(decl.get()))
      collectTensorsInsideLse(energy->getBody(), false, visiting, insideLse);
  for (UpdateRule &rule : model.dynamics->rules) {
    if (!rule.optimizerInfo || !rule.target ||
        rule.optimizerInfo->category != OptimizerCategory::Stationary)
      continue;
    if (!insideLse.count(rule.target))
      diagnostics.error(rule.optimizerRange.Start,
                        "no closed form for `stationary` node " +
                            quote(rule.node) +
                            ": it does not appear inside an `lse` of any "
                            "energy",
                        {rule.optimizerRange});
  }
}

void Checker::reportUnused(ModelSpec &model) {
  for (DeclPtr &decl : model.decls) {
    if (decl->isUsed() || isa<TermDecl>(decl.get()) ||
        isa<OutputDecl>(decl.get()))
      continue;
    diagnostics.warning(decl->getNameRange().Start,
                        llvm::Twine(describeDecl(*decl)) + " " +
                            quote(decl->getName()) + " is never used",
                        {decl->getNameRange()});
  }
}

bool energy::frontend::checkModel(ModelSpec &model,
                                  DiagnosticEngine &diagnostics,
                                  const OptimizerTable &optimizers) {
  Checker checker(diagnostics, optimizers);
  return checker.check(model);
}
