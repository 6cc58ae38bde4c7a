//===- Affine.cpp - Affine expressions over dims and indices --------------===//
//
// Arithmetic and canonical printing of AffineExpr.
//
//===----------------------------------------------------------------------===//

#include "energy/Frontend/Affine.h"

using namespace energy::frontend;

AffineExpr AffineExpr::getConstant(int64_t value) {
  AffineExpr result;
  result.constant = value;
  return result;
}

AffineExpr AffineExpr::getSymbol(const std::string &name) {
  AffineExpr result;
  result.terms[name] = 1;
  return result;
}

int64_t AffineExpr::getCoefficient(const std::string &name) const {
  auto it = terms.find(name);
  return it == terms.end() ? 0 : it->second;
}

AffineExpr AffineExpr::operator+(const AffineExpr &other) const {
  AffineExpr result = *this;
  result.overflowed |= other.overflowed;
  result.overflowed |=
      __builtin_add_overflow(result.constant, other.constant, &result.constant);
  for (const auto &[name, coefficient] : other.terms) {
    int64_t &slot = result.terms[name];
    result.overflowed |= __builtin_add_overflow(slot, coefficient, &slot);
    if (slot == 0)
      result.terms.erase(name);
  }
  return result;
}

AffineExpr AffineExpr::operator-(const AffineExpr &other) const {
  return *this + other.scaled(-1);
}

AffineExpr AffineExpr::scaled(int64_t factor) const {
  if (factor == 0)
    return getConstant(0);
  AffineExpr result;
  result.overflowed = overflowed;
  result.overflowed |=
      __builtin_mul_overflow(constant, factor, &result.constant);
  for (const auto &[name, coefficient] : terms)
    result.overflowed |=
        __builtin_mul_overflow(coefficient, factor, &result.terms[name]);
  return result;
}

std::string AffineExpr::str() const {
  std::string result;
  auto append = [&](int64_t coefficient, const std::string &symbol) {
    bool negative = coefficient < 0;
    uint64_t magnitude = negative ? 0 - static_cast<uint64_t>(coefficient)
                                  : static_cast<uint64_t>(coefficient);
    if (result.empty())
      result += negative ? "-" : "";
    else
      result += negative ? " - " : " + ";
    if (symbol.empty())
      result += std::to_string(magnitude);
    else if (magnitude == 1)
      result += symbol;
    else
      result += std::to_string(magnitude) + " * " + symbol;
  };
  for (const auto &[name, coefficient] : terms)
    append(coefficient, name);
  if (constant != 0 || result.empty())
    append(constant, "");
  return result;
}
