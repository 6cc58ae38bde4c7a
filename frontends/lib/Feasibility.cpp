//===- Feasibility.cpp - Fourier–Motzkin elimination over AffineExpr ------===//
//
// Eliminates symbols from a system of affine inequalities one at a time:
// every inequality with a positive coefficient of the symbol is combined
// with every one with a negative coefficient so that the symbol cancels.
//
//===----------------------------------------------------------------------===//

#include "energy/Frontend/Feasibility.h"

#include <cstdlib>
#include <numeric>
#include <set>

using namespace energy::frontend;

namespace {

/// `a / b` rounded towards −∞, for b > 0.
int64_t floorDivide(int64_t a, int64_t b) {
  int64_t quotient = a / b;
  return (a % b != 0 && a < 0) ? quotient - 1 : quotient;
}

/// `e ≥ 0` with its coefficients divided by their gcd and the constant
/// rounded down: the same integer solutions, a tighter rational set.
AffineExpr tightened(const AffineExpr &e) {
  int64_t divisor = 0;
  for (const auto &[symbol, coefficient] : e.terms)
    divisor = std::gcd(divisor, coefficient < 0 ? -coefficient : coefficient);
  if (divisor <= 1)
    return e;
  AffineExpr result = e;
  for (auto &[symbol, coefficient] : result.terms)
    coefficient /= divisor;
  result.constant = floorDivide(e.constant, divisor);
  return result;
}

/// The system without its constant inequalities, false when one of them
/// fails; the others keep their first occurrence.
bool dropConstants(std::vector<AffineExpr> &system) {
  std::vector<AffineExpr> kept;
  std::set<std::string> seen;
  for (AffineExpr &inequality : system) {
    if (inequality.isConstant()) {
      if (inequality.constant < 0)
        return false;
      continue;
    }
    if (seen.insert(inequality.str()).second)
      kept.push_back(std::move(inequality));
  }
  system = std::move(kept);
  return true;
}

/// Removes `symbol` from `system`; false when an inequality overflows.
bool eliminateOne(std::vector<AffineExpr> &system, const std::string &symbol) {
  std::vector<AffineExpr> lower, upper, result;
  for (AffineExpr &inequality : system) {
    int64_t coefficient = inequality.getCoefficient(symbol);
    if (coefficient > 0)
      lower.push_back(std::move(inequality));
    else if (coefficient < 0)
      upper.push_back(std::move(inequality));
    else
      result.push_back(std::move(inequality));
  }
  for (const AffineExpr &below : lower)
    for (const AffineExpr &above : upper) {
      int64_t a = below.getCoefficient(symbol);
      int64_t b = -above.getCoefficient(symbol);
      AffineExpr combined = below.scaled(b) + above.scaled(a);
      if (combined.overflowed)
        return false;
      result.push_back(tightened(combined));
    }
  system = std::move(result);
  return true;
}

} // namespace

Feasibility energy::frontend::eliminate(
    std::vector<AffineExpr> system, const std::vector<std::string> &eliminated,
    const std::map<std::string, int64_t> &floors, size_t limit) {
  Feasibility answer;
  for (AffineExpr &inequality : system) {
    if (inequality.overflowed)
      return answer;
    inequality = tightened(inequality);
  }
  auto run = [&](std::vector<AffineExpr> &inequalities,
                 const std::vector<std::string> &symbols) {
    if (!dropConstants(inequalities))
      return Feasibility::Kind::Never;
    for (const std::string &symbol : symbols) {
      if (!eliminateOne(inequalities, symbol))
        return Feasibility::Kind::Unknown;
      if (!dropConstants(inequalities))
        return Feasibility::Kind::Never;
      if (inequalities.size() > limit)
        return Feasibility::Kind::Unknown;
    }
    return Feasibility::Kind::When;
  };
  answer.kind = run(system, eliminated);
  if (answer.kind != Feasibility::Kind::When)
    return answer;

  // The conditions with the floors of their symbols, every symbol
  // eliminated: Never when no admitted values satisfy them.
  std::vector<AffineExpr> bounded = system;
  std::set<std::string> remaining;
  for (const AffineExpr &condition : system)
    for (const auto &term : condition.terms)
      remaining.insert(term.first);
  for (const std::string &symbol : remaining)
    if (auto floor = floors.find(symbol); floor != floors.end())
      bounded.push_back(AffineExpr::getSymbol(symbol) -
                        AffineExpr::getConstant(floor->second));
  if (run(bounded, {remaining.begin(), remaining.end()}) ==
      Feasibility::Kind::Never) {
    answer.kind = Feasibility::Kind::Never;
    return answer;
  }
  // Conditions that the floors alone make true (no negative coefficient,
  // true at the floors) say nothing.
  for (AffineExpr &condition : system) {
    AffineExpr atFloors = AffineExpr::getConstant(condition.constant);
    bool increasing = true;
    for (const auto &[symbol, coefficient] : condition.terms) {
      auto floor = floors.find(symbol);
      increasing &= coefficient > 0 && floor != floors.end();
      if (increasing)
        atFloors = atFloors +
                   AffineExpr::getConstant(floor->second).scaled(coefficient);
    }
    if (!increasing || atFloors.overflowed || atFloors.constant < 0)
      answer.conditions.push_back(std::move(condition));
  }
  return answer;
}
