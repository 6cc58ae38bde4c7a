//===- DenseMath.h - Plain dense linear algebra for test references -*- C++
//-*-===//
//
// The few dense operations the tests' plain-C++ references are written
// with (row-major matrices as flat vectors), kept in one place so that every
// reference computes them the same way.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TESTS_UNIT_SUPPORT_DENSEMATH_H
#define ENERGY_TESTS_UNIT_SUPPORT_DENSEMATH_H

#include <cstddef>
#include <vector>

namespace energy::testing {

/// A dense real array in row-major order, as the interpreter's `Tensor`.
using Vector = std::vector<double>;

/// Σ a_i b_i.
inline double dot(const Vector &a, const Vector &b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i)
    sum += a[i] * b[i];
  return sum;
}

/// `A v` for A of shape [rows, v.size()] stored row-major.
inline Vector matVec(const Vector &a, const Vector &v) {
  size_t columns = v.size(), rows = a.size() / columns;
  Vector result(rows, 0.0);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < columns; ++c)
      result[r] += a[r * columns + c] * v[c];
  return result;
}

/// `Aᵀ v` for A of shape [v.size(), columns] stored row-major.
inline Vector matTVec(const Vector &a, const Vector &v) {
  size_t rows = v.size(), columns = a.size() / rows;
  Vector result(columns, 0.0);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < columns; ++c)
      result[c] += a[r * columns + c] * v[r];
  return result;
}

} // namespace energy::testing

#endif // ENERGY_TESTS_UNIT_SUPPORT_DENSEMATH_H
