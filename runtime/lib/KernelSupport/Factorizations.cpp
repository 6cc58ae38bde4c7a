//===- Factorizations.cpp - Dense factorisations kernels call -------------===//
//
// Dense factorisations in double precision (whatever the caller's element
// type). The interpreter uses the same functions, so one definition serves
// both.
//
//===----------------------------------------------------------------------===//

#include "energy/KernelSupport/KernelSupport.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

namespace {

template <typename T> double logDet(int64_t n, const T *matrix) {
  auto symmetric = [&](int64_t i, int64_t j) {
    return 0.5 * (static_cast<double>(matrix[i * n + j]) +
                  static_cast<double>(matrix[j * n + i]));
  };
  // Cholesky factor L (lower triangle, row-major) of the symmetric part.
  std::vector<double> factor(n * n, 0.0);
  double result = 0;
  for (int64_t j = 0; j < n; ++j) {
    double pivot = symmetric(j, j);
    for (int64_t k = 0; k < j; ++k)
      pivot -= factor[j * n + k] * factor[j * n + k];
    if (!(pivot > 0))
      return std::numeric_limits<double>::quiet_NaN();
    double diagonal = std::sqrt(pivot);
    factor[j * n + j] = diagonal;
    result += 2 * std::log(diagonal);
    for (int64_t i = j + 1; i < n; ++i) {
      double value = symmetric(i, j);
      for (int64_t k = 0; k < j; ++k)
        value -= factor[i * n + k] * factor[j * n + k];
      factor[i * n + j] = value / diagonal;
    }
  }
  return result;
}

template <typename T>
int32_t inverse(int64_t n, const T *matrix, T *inverseOut) {
  std::vector<double> work(matrix, matrix + n * n);
  std::vector<double> result(n * n, 0.0);
  for (int64_t i = 0; i < n; ++i)
    result[i * n + i] = 1.0;
  double scale = 0;
  for (double value : work)
    scale = std::max(scale, std::fabs(value));
  double tiny = n * std::numeric_limits<double>::epsilon() * scale;
  auto swapRows = [&](std::vector<double> &t, int64_t a, int64_t b) {
    for (int64_t k = 0; k < n; ++k)
      std::swap(t[a * n + k], t[b * n + k]);
  };
  for (int64_t column = 0; column < n; ++column) {
    int64_t pivotRow = column;
    for (int64_t row = column + 1; row < n; ++row)
      if (std::fabs(work[row * n + column]) >
          std::fabs(work[pivotRow * n + column]))
        pivotRow = row;
    double pivot = work[pivotRow * n + column];
    if (!(std::fabs(pivot) > tiny)) {
      std::fill(inverseOut, inverseOut + n * n,
                std::numeric_limits<T>::quiet_NaN());
      return 1;
    }
    swapRows(work, column, pivotRow);
    swapRows(result, column, pivotRow);
    for (int64_t k = 0; k < n; ++k) {
      work[column * n + k] /= pivot;
      result[column * n + k] /= pivot;
    }
    for (int64_t row = 0; row < n; ++row) {
      double factor = work[row * n + column];
      if (row == column || factor == 0)
        continue;
      for (int64_t k = 0; k < n; ++k) {
        work[row * n + k] -= factor * work[column * n + k];
        result[row * n + k] -= factor * result[column * n + k];
      }
    }
  }
  for (int64_t i = 0; i < n * n; ++i)
    inverseOut[i] = static_cast<T>(result[i]);
  return 0;
}

} // namespace

extern "C" {
double energy_support_logdet_f64(int64_t n, const double *matrix) {
  return logDet(n, matrix);
}
double energy_support_logdet_f32(int64_t n, const float *matrix) {
  return logDet(n, matrix);
}
int32_t energy_support_inverse_f64(int64_t n, const double *matrix,
                                   double *inverseOut) {
  return inverse(n, matrix, inverseOut);
}
int32_t energy_support_inverse_f32(int64_t n, const float *matrix,
                                   float *inverseOut) {
  return inverse(n, matrix, inverseOut);
}
}
