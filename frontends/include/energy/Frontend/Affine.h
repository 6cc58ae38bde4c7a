//===- Affine.h - Affine expressions over dims and indices ------*- C++ -*-===//
//
// An affine expression `c + Σ a_s · s` with integer coefficients over named
// symbols (dims, index variables, `step`). The checker uses it to validate
// index expressions and domain sizes, to give domain sizes a canonical
// spelling ("T - 1"), and to prove indices in or out of range.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_FRONTEND_AFFINE_H
#define ENERGY_FRONTEND_AFFINE_H

#include <cstdint>
#include <map>
#include <string>

namespace energy {
namespace frontend {

struct AffineExpr {
  /// Symbol name -> non-zero coefficient, sorted by name.
  std::map<std::string, int64_t> terms;
  int64_t constant = 0;
  /// Set when some arithmetic overflowed int64; the value is then garbage
  /// and callers must treat the expression as not affine.
  bool overflowed = false;

  static AffineExpr getConstant(int64_t value);
  static AffineExpr getSymbol(const std::string &name);

  bool isConstant() const { return terms.empty(); }
  int64_t getCoefficient(const std::string &name) const;

  AffineExpr operator+(const AffineExpr &other) const;
  AffineExpr operator-(const AffineExpr &other) const;
  AffineExpr scaled(int64_t factor) const;

  /// Canonical spelling: symbols in name order, then the constant:
  /// "T - 1", "2 * N + 3", "-j + i", "0".
  std::string str() const;
};

} // namespace frontend
} // namespace energy

#endif // ENERGY_FRONTEND_AFFINE_H
