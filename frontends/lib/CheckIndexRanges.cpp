//===- CheckIndexRanges.cpp - Index ranges the runtime checks -------------===//
//
// For every index the interval bounds of CheckDomains.cpp leave undecided:
// the inequalities of the scope's domains and predicates, with the index
// below 0 (or at the axis' size or beyond), and their index variables
// eliminated (Feasibility.h). What is left are conditions on the dims and
// `step` that the runtime evaluates once it knows them; a side with no
// solution is proven, a side with no conditions is an error here.
//
//===----------------------------------------------------------------------===//

#include "CheckerImpl.h"

#include "energy/Frontend/Diagnostics.h"
#include "energy/Frontend/Feasibility.h"

using namespace energy::frontend;
using namespace energy::frontend::detail;

AffineExpr Checker::expandDerivedDims(const AffineExpr &affine) const {
  AffineExpr result = AffineExpr::getConstant(affine.constant);
  result.overflowed = affine.overflowed;
  for (const auto &[symbol, coefficient] : affine.terms) {
    auto definition = derivedDims.find(symbol);
    result = result + (definition != derivedDims.end()
                           ? definition->second.scaled(coefficient)
                           : AffineExpr::getSymbol(symbol).scaled(coefficient));
  }
  return result;
}

void Checker::recordIndexCheck(const IndexExpr &read, unsigned position,
                               const AffineExpr &value,
                               const std::string &axis) {
  std::vector<AffineExpr> system;
  std::vector<std::string> variables;
  // Innermost first: its inequalities mention the outer variables.
  for (auto variable = indexScope.rbegin(); variable != indexScope.rend();
       ++variable) {
    // A predicate the inequalities do not capture admits fewer pairs than
    // they do: conditions from them could refuse a model that is in range.
    if (variable->loosePredicate)
      return;
    variables.push_back(variable->binding->name.str());
    for (const AffineExpr &constraint : variable->constraints)
      system.push_back(expandDerivedDims(constraint));
  }
  auto meaning = symbolMeaning.find(axis);
  AffineExpr size = expandDerivedDims(meaning != symbolMeaning.end()
                                          ? meaning->second
                                          : AffineExpr::getSymbol(axis));
  AffineExpr index = expandDerivedDims(value);
  if (size.overflowed || index.overflowed)
    return;

  // Dims are at least 1, `step` at least 0.
  std::map<std::string, int64_t> floors;
  auto addFloors = [&](const AffineExpr &affine) {
    for (const auto &term : affine.terms)
      if (!lookupIndex(term.first))
        floors[term.first] = term.first == "step" ? 0 : 1;
  };
  for (const AffineExpr &constraint : system)
    addFloors(constraint);
  addFloors(size);
  addFloors(index);

  auto conditionsFor = [&](const AffineExpr &violation) {
    std::vector<AffineExpr> withViolation = system;
    withViolation.push_back(violation);
    return eliminate(std::move(withViolation), variables, floors);
  };
  Feasibility below =
      conditionsFor(index.scaled(-1) - AffineExpr::getConstant(1));
  Feasibility above = conditionsFor(index - size);

  IndexRangeCheck check;
  check.read = read.getRange();
  check.axis = position;
  check.size = size;
  const Expr &indexExpr = *read.getIndices()[position];
  const std::string reach = "reach " + quote(axis) + ", the size of its axis";
  for (auto [side, feasibility, what] :
       {std::tuple{&check.below, &below, std::string("be negative")},
        std::tuple{&check.above, &above, reach}}) {
    if (feasibility->kind != Feasibility::Kind::When)
      continue;
    if (feasibility->conditions.empty()) {
      diagnostics.error(indexExpr.getLoc(),
                        "index is out of range whatever the dims: it can " +
                            what,
                        {indexExpr.getRange()});
      return;
    }
    *side = feasibility->conditions;
  }
  if (check.below || check.above)
    indexChecks.push_back(std::move(check));
}
