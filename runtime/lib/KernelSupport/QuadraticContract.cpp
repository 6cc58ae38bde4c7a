//===- QuadraticContract.cpp - The quadratic contraction on the host ------===//
//
// energy_support_quadratic_contract_f32/f64: QuadraticContract.h's arguments
// checked, then its outputs computed in double, on the kernel thread pool.
//
//===----------------------------------------------------------------------===//

#include "energy/KernelSupport/QuadraticContract.h"
#include "energy/KernelSupport/KernelSupport.h"
#include "energy/KernelSupport/SoftmaxContract.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <new>

namespace energy::kernels {
/// Whether `args` are valid as QuadraticContract.h says (the CUDA version,
/// CudaQuadraticContract.cpp, checks them here too).
bool validQuadraticContract(const energy_quadratic_contract_args *args);
} // namespace energy::kernels

namespace {

/// `body(begin, end)` on the kernel thread pool over [0, count).
template <class Body> void parallelFor(int64_t count, Body &body) {
  energy_support_parallel_for(
      [](void *context, int64_t begin, int64_t end) {
        (*static_cast<Body *>(context))(begin, end);
      },
      &body, count);
}

/// The problem, in element type T.
template <typename T> struct Problem {
  int64_t rows, cols, depth;
  const T *points, *means, *precisions, *bias;
  double scale;

  /// s(r, c) = bias[c] + scale · (x_r − μ_c)ᵀ P_c (x_r − μ_c), in double.
  double score(int64_t r, int64_t c) const {
    const T *x = points + r * depth, *mean = means + c * depth;
    const T *matrix = precisions + c * depth * depth;
    double form = 0;
    for (int64_t i = 0; i < depth; ++i) {
      double product = 0; // (P_c (x_r − μ_c))_i
      for (int64_t j = 0; j < depth; ++j)
        product += static_cast<double>(matrix[i * depth + j]) *
                   (static_cast<double>(x[j]) - mean[j]);
      form += (static_cast<double>(x[i]) - mean[i]) * product;
    }
    return (bias ? static_cast<double>(bias[c]) : 0.0) + scale * form;
  }

  /// L[r] = log Σ_c exp(s(r, c)), one sweep with a running maximum m: each
  /// score adds exp(s − m), or rescales the sum by exp(m − s) when it is the
  /// new maximum, so that nothing overflows or underflows to nothing. −∞
  /// when every score is −∞.
  double normaliser(int64_t r) const {
    double highest = -std::numeric_limits<double>::infinity(), sum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      double s = score(r, c);
      if (s == -std::numeric_limits<double>::infinity())
        continue;
      if (s > highest) {
        sum = sum * std::exp(highest - s) + 1;
        highest = s;
      } else {
        sum += std::exp(s - highest);
      }
    }
    return highest == -std::numeric_limits<double>::infinity()
               ? highest
               : highest + std::log(sum);
  }
};

/// The sums of one (chunk of rows, component) item, in double: Σ w, Σ w·d,
/// Σ w·x and the upper triangle of Σ w·d dᵀ (d = x_r − μ_c), then room for
/// one d.
struct SumLayout {
  int64_t depth;
  int64_t weight() const { return 0; }
  int64_t centred() const { return 1; }
  int64_t point() const { return 1 + depth; }
  int64_t outer() const { return 1 + 2 * depth; }
  int64_t difference() const { return 1 + 2 * depth + depth * depth; }
  int64_t size() const { return 1 + 3 * depth + depth * depth; }
};

/// Rows per chunk of the column sums: a function of the row count only, so
/// that the order of every sum, and so its bits, never depends on the
/// threads.
constexpr int64_t kMinChunkRows = 1024, kMaxChunks = 16;

template <typename T>
int32_t contract(const energy_quadratic_contract_args &a) {
  const Problem<T> p{a.rows,
                     a.cols,
                     a.depth,
                     static_cast<const T *>(a.points),
                     static_cast<const T *>(a.means),
                     static_cast<const T *>(a.precisions),
                     static_cast<const T *>(a.bias),
                     a.scale};
  const int64_t rows = a.rows, cols = a.cols, depth = a.depth;
  T *lse = static_cast<T *>(a.lse);
  const int64_t outputs = a.num_col_outputs;
  if (cols == 0) { // L = 0; the column outputs have no columns
    if (lse)
      std::fill(lse, lse + rows, T(0));
    return ENERGY_CONTRACT_OK;
  }
  if (outputs == 0) {
    if (!lse)
      return ENERGY_CONTRACT_OK;
    auto pass = [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r)
        lse[r] = static_cast<T>(p.normaliser(r));
    };
    parallelFor(rows, pass);
    return ENERGY_CONTRACT_OK;
  }

  // Which sums the outputs need.
  bool needs[4] = {};
  for (int64_t j = 0; j < outputs; ++j)
    needs[a.col_output_kinds[j]] = true;
  const SumLayout layout{depth};
  const int64_t chunks =
      rows == 0
          ? 0
          : std::min(kMaxChunks, (rows + kMinChunkRows - 1) / kMinChunkRows);
  const int64_t chunkRows = chunks ? (rows + chunks - 1) / chunks : 0;
  int64_t items, elements;
  if (__builtin_mul_overflow(chunks, cols, &items) ||
      __builtin_mul_overflow(items, layout.size(), &elements) ||
      elements > std::numeric_limits<int64_t>::max() / 8)
    return ENERGY_CONTRACT_OUT_OF_MEMORY;
  std::unique_ptr<double[]> normalisers(new (std::nothrow) double[rows]);
  std::unique_ptr<double[]> sums(new (std::nothrow) double[elements]);
  if (!normalisers || !sums)
    return ENERGY_CONTRACT_OUT_OF_MEMORY;

  // Pass 1: each row's L.
  auto rowPass = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      normalisers[r] = p.normaliser(r);
      if (lse)
        lse[r] = static_cast<T>(normalisers[r]);
    }
  };
  parallelFor(rows, rowPass);

  // Pass 2: the sums of each (chunk, component), rows in order.
  auto columnPass = [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t chunk = item / cols, c = item % cols;
      double *sum = sums.get() + item * layout.size();
      double *d = sum + layout.difference();
      std::fill(sum, d, 0.0);
      const T *mean = p.means + c * depth;
      const int64_t last = std::min(rows, (chunk + 1) * chunkRows);
      for (int64_t r = chunk * chunkRows; r < last; ++r) {
        // Every score −∞: no weight (rather than exp(−∞ + ∞)).
        if (normalisers[r] == -std::numeric_limits<double>::infinity())
          continue;
        const double w = std::exp(p.score(r, c) - normalisers[r]);
        const T *x = p.points + r * depth;
        for (int64_t i = 0; i < depth; ++i)
          d[i] = static_cast<double>(x[i]) - mean[i];
        sum[layout.weight()] += w;
        if (needs[ENERGY_MOMENT_CENTRED])
          for (int64_t i = 0; i < depth; ++i)
            sum[layout.centred() + i] += w * d[i];
        if (needs[ENERGY_MOMENT_POINT])
          for (int64_t i = 0; i < depth; ++i)
            sum[layout.point() + i] += w * static_cast<double>(x[i]);
        if (needs[ENERGY_MOMENT_CENTRED_OUTER])
          for (int64_t i = 0; i < depth; ++i) {
            double *row = sum + layout.outer() + i * depth;
            const double scaled = w * d[i];
            for (int64_t j = i; j < depth; ++j)
              row[j] += scaled * d[j];
          }
      }
    }
  };
  parallelFor(items, columnPass);

  // The chunks' sums added in chunk order, into every output.
  auto total = [&](int64_t c, int64_t offset) {
    double value = 0;
    for (int64_t chunk = 0; chunk < chunks; ++chunk)
      value += sums[(chunk * cols + c) * layout.size() + offset];
    return static_cast<T>(value);
  };
  for (int64_t j = 0; j < outputs; ++j) {
    T *out = static_cast<T *>(a.col_outputs[j]);
    for (int64_t c = 0; c < cols; ++c)
      switch (a.col_output_kinds[j]) {
      case ENERGY_MOMENT_WEIGHT:
        out[c] = total(c, layout.weight());
        break;
      case ENERGY_MOMENT_POINT:
        for (int64_t i = 0; i < depth; ++i)
          out[c * depth + i] = total(c, layout.point() + i);
        break;
      case ENERGY_MOMENT_CENTRED:
        for (int64_t i = 0; i < depth; ++i)
          out[c * depth + i] = total(c, layout.centred() + i);
        break;
      case ENERGY_MOMENT_CENTRED_OUTER:
        for (int64_t i = 0; i < depth; ++i)
          for (int64_t k = 0; k < depth; ++k)
            out[(c * depth + i) * depth + k] = total(
                c, layout.outer() + std::min(i, k) * depth + std::max(i, k));
        break;
      }
  }
  return ENERGY_CONTRACT_OK;
}

} // namespace

bool energy::kernels::validQuadraticContract(
    const energy_quadratic_contract_args *args) {
  if (!args)
    return false;
  const energy_quadratic_contract_args &a = *args;
  int64_t points, means, matrices;
  if (a.rows < 0 || a.cols < 0 || a.depth < 0 ||
      __builtin_mul_overflow(a.rows, a.depth, &points) ||
      __builtin_mul_overflow(a.cols, a.depth, &means) ||
      __builtin_mul_overflow(means, a.depth, &matrices))
    return false;
  if (!std::isfinite(a.scale))
    return false;
  // An array is needed when it is not empty; bias and lse may be null.
  if ((points && !a.points) || (means && !a.means) ||
      (matrices && !a.precisions))
    return false;
  if (a.num_col_outputs < 0 ||
      (a.num_col_outputs > 0 && (!a.col_output_kinds || !a.col_outputs)))
    return false;
  for (int64_t j = 0; j < a.num_col_outputs; ++j) {
    const int64_t kind = a.col_output_kinds[j];
    if (kind < ENERGY_MOMENT_WEIGHT || kind > ENERGY_MOMENT_CENTRED_OUTER)
      return false;
    // Every width but WEIGHT's (1) is 0 when depth is.
    bool empty = a.cols == 0 || (kind != ENERGY_MOMENT_WEIGHT && a.depth == 0);
    if (!empty && !a.col_outputs[j])
      return false;
  }
  return true;
}

extern "C" {
int32_t
energy_support_quadratic_contract_f32(const energy_quadratic_contract_args *a) {
  if (!energy::kernels::validQuadraticContract(a))
    return ENERGY_CONTRACT_INVALID_ARGUMENT;
  return contract<float>(*a);
}

int32_t
energy_support_quadratic_contract_f64(const energy_quadratic_contract_args *a) {
  if (!energy::kernels::validQuadraticContract(a))
    return ENERGY_CONTRACT_INVALID_ARGUMENT;
  return contract<double>(*a);
}
}
