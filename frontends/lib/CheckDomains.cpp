//===- CheckDomains.cpp - Checking of index domains -----------------------===//
//
// The index domains of reductions, lets and outputs: their indices and
// sizes, the predicates that restrict them, and the affine index
// expressions that read with them.
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

std::optional<AffineExpr> Checker::checkDomainSize(Expr &size) {
  ExprContext saved = context;
  context = ExprContext::Const;
  std::optional<Shape> shape = checkExpr(size);
  context = saved;
  if (!shape)
    return std::nullopt;
  std::optional<AffineExpr> affine = toAffine(size);
  bool onlyDims = affine.has_value();
  if (affine)
    for (const auto &term : affine->terms)
      onlyDims &= !lookupIndex(term.first) && term.first != "step";
  if (!shape->isScalar() || !onlyDims) {
    diagnostics.error(size.getLoc(),
                      "a domain size must be an affine expression of dims "
                      "and integers, such as `T - 1`",
                      {size.getRange()});
    return std::nullopt;
  }
  return affine;
}

bool Checker::pushDomain(IndexDomain &domain, bool allowPredicate) {
  size_t firstVariable = indexScope.size();
  bool ok = true;
  std::vector<AffineExpr> sizes;
  for (IndexBinding &binding : domain.bindings) {
    std::optional<AffineExpr> size = checkDomainSize(*binding.size);
    if (!size) {
      ok = false;
      continue;
    }
    binding.sizeSymbol = size->str();
    symbolMeaning.emplace(binding.sizeSymbol, *size);
    sizes.push_back(*size);
  }
  if (!ok)
    return false;
  for (size_t i = 0; i < domain.bindings.size(); ++i) {
    IndexBinding &binding = domain.bindings[i];
    if (IndexVariable *outer = lookupIndex(binding.name)) {
      bool sameDomain =
          static_cast<size_t>(outer - indexScope.data()) >= firstVariable;
      diagnostics.error(binding.nameRange.Start,
                        (sameDomain ? "duplicate index " : "index ") +
                            quote(binding.name) +
                            (sameDomain ? "" : " shadows an outer index"),
                        {binding.nameRange});
      if (!sameDomain && outer->ofReduction)
        diagnostics.note(outer->binding->nameRange.Start,
                         "bound here, by a reduction whose body extends as "
                         "far right as arithmetic goes; to end it before the "
                         "inner one, parenthesise it, as in `(sum(" +
                             binding.name.str() + ": ...) e) + ...`");
      else
        diagnostics.note(outer->binding->nameRange.Start,
                         "see previous definition here");
      ok = false;
    } else if (Decl *global = globals.lookup(binding.name)) {
      diagnostics.error(binding.nameRange.Start,
                        "index " + quote(binding.name) + " shadows " +
                            describeDecl(*global) + " " + quote(binding.name),
                        {binding.nameRange});
      diagnostics.note(global->getNameRange().Start,
                       "see previous definition here");
      ok = false;
    } else if (currentFn) {
      for (const FnParam &param : currentFn->getParams())
        if (param.name == binding.name) {
          diagnostics.error(binding.nameRange.Start,
                            "index " + quote(binding.name) +
                                " shadows a parameter",
                            {binding.nameRange});
          ok = false;
        }
    }
    IndexVariable variable;
    variable.binding = &binding;
    variable.ofReduction = allowPredicate;
    variable.lower = AffineExpr::getConstant(0);
    variable.upper = sizes[i] - AffineExpr::getConstant(1);
    AffineExpr symbol = AffineExpr::getSymbol(binding.name.str());
    variable.constraints = {symbol, variable.upper - symbol};
    indexScope.push_back(std::move(variable));
  }
  if (!ok) {
    indexScope.resize(firstVariable);
    return false;
  }
  if (domain.predicate) {
    if (!allowPredicate) {
      diagnostics.error(domain.predicate->getLoc(),
                        "a `where` clause is only allowed in a reduction",
                        {domain.predicate->getRange()});
      indexScope.resize(firstVariable);
      return false;
    }
    if (!checkCondition(*domain.predicate, /*requireAffine=*/true)) {
      indexScope.resize(firstVariable);
      return false;
    }
    applyPredicateBounds(*domain.predicate, firstVariable);
  }
  return true;
}

void Checker::popDomain(const IndexDomain &domain) {
  indexScope.resize(indexScope.size() - domain.bindings.size());
}

/// Tightens the bounds of this domain's variables with the conjuncts of the
/// predicate that have the form `v op e` (or `e op v`), where v is one of
/// the domain's variables with coefficient ±1 and e mentions no variable of
/// this domain other than through its bounds. Anything else (`!=`, `or`, a
/// variable on both sides, a bound through a variable that is itself
/// constrained) marks the variables involved as inexact.
void Checker::applyPredicateBounds(Expr &predicate, size_t firstVariable) {
  std::vector<BinaryExpr *> conjuncts;
  std::vector<Expr *> worklist{&predicate};
  while (!worklist.empty()) {
    Expr *current = worklist.back();
    worklist.pop_back();
    auto *binary = dyn_cast<BinaryExpr>(current);
    if (binary && binary->getOp() == BinaryOp::And) {
      worklist.push_back(&binary->getRhs());
      worklist.push_back(&binary->getLhs());
    } else if (binary) {
      conjuncts.push_back(binary);
    } else {
      indexScope.back().loosePredicate = true;
    }
  }
  auto domainVariable = [&](const std::string &name) -> IndexVariable * {
    for (size_t i = firstVariable; i < indexScope.size(); ++i)
      if (indexScope[i].binding->name == name)
        return &indexScope[i];
    return nullptr;
  };
  auto markAllInexact = [&](const AffineExpr &affine) {
    for (const auto &term : affine.terms)
      if (IndexVariable *variable = domainVariable(term.first))
        variable->exact = false;
  };
  // How many conjuncts mention each variable of this domain.
  std::map<std::string, unsigned> mentions;
  std::vector<std::optional<AffineExpr>> differences;
  IndexVariable &last = indexScope.back();
  for (BinaryExpr *conjunct : conjuncts) {
    std::optional<AffineExpr> lhs = toAffine(conjunct->getLhs());
    std::optional<AffineExpr> rhs = toAffine(conjunct->getRhs());
    std::optional<AffineExpr> difference;
    if (lhs && rhs && conjunct->getOp() != BinaryOp::Or)
      difference = *lhs - *rhs;
    differences.push_back(difference);
    if (difference)
      for (const auto &term : difference->terms)
        ++mentions[term.first];
    // The conjunct as inequalities `e ≥ 0` on integers.
    BinaryOp op = conjunct->getOp();
    if (!difference || op == BinaryOp::Ne) {
      last.loosePredicate = true;
      continue;
    }
    const AffineExpr one = AffineExpr::getConstant(1);
    if (op == BinaryOp::Lt)
      last.constraints.push_back(difference->scaled(-1) - one);
    if (op == BinaryOp::Le || op == BinaryOp::Eq)
      last.constraints.push_back(difference->scaled(-1));
    if (op == BinaryOp::Gt)
      last.constraints.push_back(*difference - one);
    if (op == BinaryOp::Ge || op == BinaryOp::Eq)
      last.constraints.push_back(*difference);
  }
  // Bounds of the other symbols, for substitution: the domain's own
  // variables use their size bounds; outer variables their bounds.
  auto boundOf = [&](const std::string &name, bool upper,
                     bool &exact) -> AffineExpr {
    if (name == "step") {
      if (!upper)
        return AffineExpr::getConstant(0);
      if (stepUpper)
        return *stepUpper;
      exact = false;
      return AffineExpr::getSymbol(name);
    }
    if (IndexVariable *variable = lookupIndex(name)) {
      if (!variable->exact || (domainVariable(name) && mentions[name] > 1))
        exact = false;
      return upper ? variable->upper : variable->lower;
    }
    return AffineExpr::getSymbol(name); // a dim
  };

  for (size_t c = 0; c < conjuncts.size(); ++c) {
    BinaryExpr *conjunct = conjuncts[c];
    const std::optional<AffineExpr> &difference = differences[c];
    if (!difference) {
      for (size_t i = firstVariable; i < indexScope.size(); ++i)
        indexScope[i].exact = false;
      continue;
    }
    // Pick the bounded variable: the first domain variable with ±1.
    IndexVariable *target = nullptr;
    int64_t sign = 0;
    for (const auto &[name, coefficient] : difference->terms) {
      IndexVariable *variable = domainVariable(name);
      if (variable && (coefficient == 1 || coefficient == -1)) {
        target = variable;
        sign = coefficient;
        break;
      }
    }
    BinaryOp op = conjunct->getOp();
    if (!target || op == BinaryOp::Ne) {
      markAllInexact(*difference);
      continue;
    }
    // difference = sign * v + rest  (op)  0, so v (op') -sign * rest.
    std::string name = target->binding->name.str();
    AffineExpr rest = *difference - AffineExpr::getSymbol(name).scaled(sign);
    AffineExpr bound = rest.scaled(-sign);
    if (sign < 0) {
      // Flip the comparison: -v + rest op 0  <=>  v op' rest.
      switch (op) {
      case BinaryOp::Lt:
        op = BinaryOp::Gt;
        break;
      case BinaryOp::Le:
        op = BinaryOp::Ge;
        break;
      case BinaryOp::Gt:
        op = BinaryOp::Lt;
        break;
      case BinaryOp::Ge:
        op = BinaryOp::Le;
        break;
      default:
        break;
      }
    }
    bool upperSide = op == BinaryOp::Lt || op == BinaryOp::Le;
    bool lowerSide = op == BinaryOp::Gt || op == BinaryOp::Ge;
    bool exact = true;
    auto substitute = [&](bool upper) {
      AffineExpr result = AffineExpr::getConstant(bound.constant);
      for (const auto &[symbol, coefficient] : bound.terms) {
        if (symbol == name) {
          exact = false;
          continue;
        }
        bool useUpper = coefficient > 0 ? upper : !upper;
        result = result + boundOf(symbol, useUpper, exact).scaled(coefficient);
      }
      return result;
    };
    auto tighten = [&](bool upper, int64_t offset) {
      AffineExpr candidate =
          substitute(upper) + AffineExpr::getConstant(offset);
      AffineExpr &current = upper ? target->upper : target->lower;
      AffineExpr gap = candidate - current;
      if (candidate.overflowed || gap.overflowed || !gap.isConstant()) {
        exact = false;
        return;
      }
      if (upper ? gap.constant < 0 : gap.constant > 0)
        current = candidate;
    };
    if (upperSide || op == BinaryOp::Eq)
      tighten(/*upper=*/true, op == BinaryOp::Lt ? -1 : 0);
    if (lowerSide || op == BinaryOp::Eq)
      tighten(/*upper=*/false, op == BinaryOp::Gt ? 1 : 0);
    if (!exact)
      target->exact = false;
  }
}

void Checker::checkIndexInRange(const Expr &index, const AffineExpr &value,
                                const std::string &axis) {
  AffineExpr lower = AffineExpr::getConstant(value.constant);
  AffineExpr upper = lower;
  for (const auto &[symbol, coefficient] : value.terms) {
    AffineExpr low, high;
    if (symbol == "step") {
      if (!stepUpper)
        return;
      low = AffineExpr::getConstant(0);
      high = *stepUpper;
    } else if (IndexVariable *variable = lookupIndex(symbol)) {
      if (!variable->exact)
        return;
      low = variable->lower;
      high = variable->upper;
    } else {
      low = high = AffineExpr::getSymbol(symbol);
    }
    lower = lower + (coefficient > 0 ? low : high).scaled(coefficient);
    upper = upper + (coefficient > 0 ? high : low).scaled(coefficient);
  }
  auto meaning = symbolMeaning.find(axis);
  AffineExpr size = meaning != symbolMeaning.end()
                        ? meaning->second
                        : AffineExpr::getSymbol(axis);
  AffineExpr excess = upper - size;
  if (lower.overflowed || excess.overflowed)
    return;
  if (lower.isConstant() && lower.constant < 0) {
    diagnostics.error(index.getLoc(),
                      "index may be out of range: it can be " +
                          llvm::Twine(lower.constant) + " on an axis of size " +
                          quote(axis),
                      {index.getRange()});
  } else if (excess.isConstant() && excess.constant >= 0) {
    diagnostics.error(index.getLoc(),
                      "index may be out of range: it can reach " +
                          quote(upper.str()) + " on an axis of size " +
                          quote(axis),
                      {index.getRange()});
  }
}
