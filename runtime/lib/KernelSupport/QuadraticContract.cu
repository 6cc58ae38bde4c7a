//===- QuadraticContract.cu - The quadratic contraction on the GPU --------===//
//
// The kernels of QuadraticContract.h's contraction on CUDA cores: a row pass
// for the scores and normalisers, a column pass for the weighted moments.
//
// Compiled to PTX by nvcc at build time; CudaQuadraticContract.cpp embeds it
// and launches, in this order (the parameters of each are 8-byte values, in
// the order of its signature below; QuadraticContractShapes.h has the sizes
// both sides use):
//  - energy_quadratic_prepare_<T>: each component's record, zero-padded to
//    the bound DMAX on the depth: U = scale · (P_ii on the diagonal, P_ij +
//    P_ji above it, 0 below), so that d_rᵀ U d_r = scale · d_rᵀ P_c d_r with
//    about half the products; then μ_c and bias[c];
//  - energy_quadratic_rows_<T>_<DMAX>: one or two rows per thread, x_r in
//    registers, the records staged through shared memory a tile at a time
//    (every thread reads the same element: broadcasts); an online
//    (max-shifted) log-sum-exp gives L[r], and, when there are column
//    outputs, every score s(r, c) is stored, column-major, for the column
//    pass (a slice of the rows at a time where they would take too much
//    memory);
//  - energy_quadratic_cols[_outer]_<T>_<DMAX>: block (c, chunk) walks its
//    chunk's rows a tile at a time: stages e_r = √w_r (x_r − μ_c, 1, 0, ...)
//    with w_r = exp(s(r, c) − L[r]), so that e_r e_rᵀ holds w_r d_r d_rᵀ,
//    w_r d_r and w_r; each thread sums one square patch of those products
//    over a group of the tile's rows (the patches on and above the diagonal
//    with _outer, else the last block column, and of that its first column
//    only), and the groups' sums are added and written to the chunk's slice
//    of the partial sums;
//  - energy_quadratic_finish_<T>: the chunks' partial sums added in chunk
//    order, in double, into the outputs (POINT as CENTRED + μ_c · WEIGHT).
// Every sum has a fixed order, so every call gives the same bits.
//
//===----------------------------------------------------------------------===//

#include "QuadraticContractShapes.h"

#include <stdint.h>

namespace {

using energy::cuda::quadratic::kThreads;
using energy::cuda::quadratic::patchCount;
using energy::cuda::quadratic::patchSize;
using energy::cuda::quadratic::recordSize;
using energy::cuda::quadratic::rowsPerThread;
using energy::cuda::quadratic::tileRows;

/// Shared memory the row pass stages records in.
constexpr int kRecordTileBytes = 40 * 1024;

__device__ float expOf(float x) { return expf(x); }
__device__ double expOf(double x) { return exp(x); }
__device__ float logOf(float x) { return logf(x); }
__device__ double logOf(double x) { return log(x); }

/// Four consecutive elements, loaded and stored as one access.
template <typename T> struct alignas(4 * sizeof(T)) Vec4 { T v[4]; };

template <typename T> __device__ Vec4<T> load4(const T *p) {
  return *reinterpret_cast<const Vec4<T> *>(p);
}
template <typename T> __device__ void store4(T *p, const Vec4<T> &value) {
  *reinterpret_cast<Vec4<T> *>(p) = value;
}

/// scale · d_pᵀ P_c d_p for each of the ROWS rows p with U the record's
/// upper-triangular form: Σ_i d_i Σ_{j >= 4⌊i/4⌋} U_ij d_j (U is zero below
/// the diagonal), rows 4k .. 4k + 3 of U at once, each element of U read
/// (a broadcast) serving every row.
template <typename T, int DMAX, int ROWS>
__device__ void quadraticForms(const T (&d)[ROWS][DMAX], const T *U,
                               T (&q)[ROWS]) {
#pragma unroll
  for (int p = 0; p < ROWS; ++p)
    q[p] = T(0);
#pragma unroll
  for (int k = 0; k < DMAX; k += 4) {
    T y[ROWS][4] = {};
#pragma unroll
    for (int j = k; j < DMAX; j += 4)
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        Vec4<T> u = load4(U + (k + t) * DMAX + j);
#pragma unroll
        for (int p = 0; p < ROWS; ++p)
#pragma unroll
          for (int s = 0; s < 4; ++s)
            y[p][t] = fma(u.v[s], d[p][j + s], y[p][t]);
      }
#pragma unroll
    for (int p = 0; p < ROWS; ++p)
#pragma unroll
      for (int t = 0; t < 4; ++t)
        q[p] = fma(d[p][k + t], y[p][t], q[p]);
  }
}

/// The row pass over `rows` rows: L[r] = log Σ_c exp(s(r, c)) into lse[r],
/// and s(r, c) into scores[c · rows + r] unless scores is null, from the
/// `cols` components' records.
template <typename T, int DMAX>
__device__ void rowsPass(const T *__restrict__ points,
                         const T *__restrict__ records, T *__restrict__ lse,
                         T *__restrict__ scores, int64_t rows, int64_t cols,
                         int depth) {
  constexpr int kRecord = recordSize(DMAX);
  constexpr int kFit = kRecordTileBytes / int(kRecord * sizeof(T));
  constexpr int kComponents = kFit < 1 ? 1 : kFit > 64 ? 64 : kFit;
  constexpr int kRows = rowsPerThread(DMAX, sizeof(T));
  // x_r in registers where x_r and d_r both fit (all but f64 at DMAX 64),
  // else read again (from the L1 cache) for each component.
  constexpr bool kHoldPoint = DMAX * sizeof(T) <= 256;
  __shared__ Vec4<T> staged[kComponents * kRecord / 4];
  const T *tile = reinterpret_cast<const T *>(staged);

  int64_t row[kRows];
  bool active[kRows];
  T x[kRows][kHoldPoint ? DMAX : 1];
#pragma unroll
  for (int p = 0; p < kRows; ++p) {
    row[p] = static_cast<int64_t>(blockIdx.x) * (kThreads * kRows) +
             p * kThreads + threadIdx.x;
    active[p] = row[p] < rows;
    if constexpr (kHoldPoint)
#pragma unroll
      for (int i = 0; i < DMAX; ++i)
        x[p][i] = active[p] && i < depth ? points[row[p] * depth + i] : T(0);
  }

  // The running maximum m of each row's scores and Σ exp(s − m).
  T m[kRows], sum[kRows];
#pragma unroll
  for (int p = 0; p < kRows; ++p) {
    m[p] = -INFINITY;
    sum[p] = T(0);
  }
  for (int64_t first = 0; first < cols; first += kComponents) {
    const int count = static_cast<int>(
        cols - first < kComponents ? cols - first : kComponents);
    __syncthreads();
    const Vec4<T> *source =
        reinterpret_cast<const Vec4<T> *>(records + first * kRecord);
    for (int i = threadIdx.x; i < count * kRecord / 4; i += kThreads)
      staged[i] = source[i];
    __syncthreads();
    for (int c = 0; c < count; ++c) {
      const T *U = tile + c * kRecord;
      const T *mean = U + DMAX * DMAX;
      T d[kRows][DMAX];
#pragma unroll
      for (int p = 0; p < kRows; ++p) {
        const T *point = points + row[p] * depth;
        if constexpr (!kHoldPoint)
          asm volatile("" : "+l"(point)); // read again, not held
#pragma unroll
        for (int j = 0; j < DMAX; j += 4) {
          Vec4<T> mu = load4(mean + j);
#pragma unroll
          for (int t = 0; t < 4; ++t) {
            T own;
            if constexpr (kHoldPoint)
              own = x[p][j + t];
            else
              own = active[p] && j + t < depth ? point[j + t] : T(0);
            d[p][j + t] = own - mu.v[t];
          }
        }
      }
      T q[kRows];
      quadraticForms<T, DMAX, kRows>(d, U, q);
#pragma unroll
      for (int p = 0; p < kRows; ++p) {
        const T s = mean[DMAX] + q[p];
        if (scores && active[p])
          scores[(first + c) * rows + row[p]] = s;
        // One exp per score: exp(−|s − m|) rescales the sum when s is the
        // new maximum and is the score's term otherwise. A score of −∞
        // adds nothing (and leaves m at −∞ when every score is −∞).
        const T difference = s - m[p];
        const T e = s == -INFINITY ? T(0) : expOf(-fabs(difference));
        const bool larger = difference > T(0);
        sum[p] = larger ? fma(sum[p], e, T(1)) : sum[p] + e;
        m[p] = larger ? s : m[p];
      }
    }
  }
#pragma unroll
  for (int p = 0; p < kRows; ++p)
    if (active[p])
      lse[row[p]] = m[p] == -INFINITY ? m[p] : m[p] + logOf(sum[p]);
}

/// The column pass of block (c = blockIdx.x, chunk = blockIdx.y) over
/// `rows` rows: the sums over the chunk's rows of the patches of e_r e_rᵀ
/// (see the top of the file) into partials[chunk][c][patch], each patch
/// row-major. scores are the row pass's, lse its L.
template <typename T, int DMAX, bool Outer>
__device__ void
colsPass(const T *__restrict__ points, const T *__restrict__ records,
         const T *__restrict__ scores, const T *__restrict__ lse,
         T *__restrict__ partials, int64_t rows, int64_t cols, int depth,
         int64_t rowsPerChunk) {
  constexpr int kPatch = patchSize(sizeof(T));
  constexpr int kTileRows = tileRows(DMAX, sizeof(T));
  // A staged row: e = √w (d, 1, 0, ...), DMAX + kPatch elements.
  constexpr int kStride = DMAX + kPatch;
  constexpr int kBlocks = DMAX / kPatch + 1;
  constexpr int kPatches = patchCount(DMAX, sizeof(T), Outer);
  constexpr int kGroups = kThreads / kPatches;
  // Of the last block column only its first column (Σ w d, Σ w) counts.
  constexpr int kColumns = Outer ? kPatch : 1;
  // The tile's elements of d that each thread stages.
  constexpr int kStage = kTileRows * DMAX / kThreads;
  static_assert(kThreads % DMAX == 0 && kStage * kThreads == kTileRows * DMAX,
                "a thread stages one column of whole rows");
  static_assert(kTileRows <= kThreads, "a thread weighs one row");
  static_assert(kGroups * kPatches * kPatch <= kTileRows * kStride,
                "the tile holds one row of each patch of every group");
  __shared__ Vec4<T> tileStorage[kTileRows * kStride / 4];
  __shared__ T roots[kTileRows];
  T *tile = reinterpret_cast<T *>(tileStorage);

  const int64_t c = blockIdx.x, chunk = blockIdx.y;
  const T *record = records + c * recordSize(DMAX);
  const T *componentScores = scores + c * rows;
  // Staging: this thread's column (the same for each of its elements, as
  // kThreads is a multiple of DMAX) and the first of its rows.
  const int column = threadIdx.x % DMAX;
  const int firstStagedRow = threadIdx.x / DMAX;
  const T columnMean = record[DMAX * DMAX + column];
  // The sums: this thread's patch (blocks bi <= bj) and group of rows.
  const int patch = threadIdx.x % kPatches, group = threadIdx.x / kPatches;
  int bi = 0, bj = kBlocks - 1;
  if (Outer) {
    int rest = patch;
    while (rest >= kBlocks - bi) {
      rest -= kBlocks - bi;
      ++bi;
    }
    bj = bi + rest;
  } else {
    bi = patch;
  }

  T sums[kPatch][kPatch] = {};
  const int64_t begin = chunk * rowsPerChunk;
  const int64_t end = rows - begin < rowsPerChunk ? rows : begin + rowsPerChunk;
  // The next tile's elements, this thread's row's score and normaliser,
  // loaded while the current tile is summed.
  T nextPoint[kStage], nextScore = T(0), nextNormaliser = T(0);
  auto loadTile = [&](int64_t base) {
#pragma unroll
    for (int k = 0; k < kStage; ++k) {
      const int64_t row = base + firstStagedRow + k * (kThreads / DMAX);
      nextPoint[k] =
          row < end && column < depth ? points[row * depth + column] : T(0);
    }
    const int64_t row = base + threadIdx.x;
    if (threadIdx.x < kTileRows && row < end) {
      nextScore = componentScores[row];
      nextNormaliser = lse[row];
    } else {
      nextNormaliser = -INFINITY; // no weight
    }
  };
  loadTile(begin);
  for (int64_t base = begin; base < end; base += kTileRows) {
    __syncthreads(); // the previous tile is summed
    // √w = exp((s − L) / 2); rows past the end, or whose every score is
    // −∞, weigh nothing.
    if (threadIdx.x < kTileRows)
      roots[threadIdx.x] = nextNormaliser == -INFINITY
                               ? T(0)
                               : expOf(T(0.5) * (nextScore - nextNormaliser));
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kStage; ++k) {
      const int r = firstStagedRow + k * (kThreads / DMAX);
      tile[r * kStride + column] = (nextPoint[k] - columnMean) * roots[r];
    }
    for (int r = threadIdx.x; r < kTileRows; r += kThreads)
#pragma unroll
      for (int v = 0; v < kPatch; v += 4)
        store4(tile + r * kStride + DMAX + v,
               Vec4<T>{{v == 0 ? roots[r] : T(0), T(0), T(0), T(0)}});
    __syncthreads();
    if (base + kTileRows < end)
      loadTile(base + kTileRows);

    // This thread's patch of Σ e eᵀ over its group's rows of the tile.
    if (group < kGroups)
      for (int r = group; r < kTileRows; r += kGroups) {
        T a[kPatch], b[kColumns];
#pragma unroll
        for (int u = 0; u < kPatch; u += 4) {
          Vec4<T> part = load4(tile + r * kStride + kPatch * bi + u);
#pragma unroll
          for (int t = 0; t < 4; ++t)
            a[u + t] = part.v[t];
        }
        if constexpr (Outer) {
#pragma unroll
          for (int v = 0; v < kPatch; v += 4) {
            Vec4<T> part = load4(tile + r * kStride + kPatch * bj + v);
#pragma unroll
            for (int t = 0; t < 4; ++t)
              b[v + t] = part.v[t];
          }
        } else {
          b[0] = tile[r * kStride + DMAX];
        }
#pragma unroll
        for (int u = 0; u < kPatch; ++u)
#pragma unroll
          for (int v = 0; v < kColumns; ++v)
            sums[u][v] = fma(a[u], b[v], sums[u][v]);
      }
  }

  // The groups' sums added in group order, one row of the patches at a
  // time, through the tile.
  T *out = partials + (chunk * cols + c) * (kPatches * kPatch * kPatch);
#pragma unroll
  for (int u = 0; u < kPatch; ++u) {
    __syncthreads();
    if (group < kGroups)
#pragma unroll
      for (int v = 0; v < kPatch; v += 4)
        store4(tile + (group * kPatches + patch) * kPatch + v,
               Vec4<T>{{sums[u][v], sums[u][v + 1], sums[u][v + 2],
                        sums[u][v + 3]}});
    __syncthreads();
    if (threadIdx.x < kPatches)
#pragma unroll
      for (int v = 0; v < kPatch; v += 4) {
        Vec4<T> total = load4(tile + threadIdx.x * kPatch + v);
        for (int g = 1; g < kGroups; ++g) {
          Vec4<T> part =
              load4(tile + (g * kPatches + threadIdx.x) * kPatch + v);
#pragma unroll
          for (int t = 0; t < 4; ++t)
            total.v[t] += part.v[t];
        }
        store4(out + threadIdx.x * kPatch * kPatch + u * kPatch + v, total);
      }
  }
}

/// The records of `cols` components (see the top of the file) for the
/// bound `dmax`, one element per thread; `count` = cols · recordSize(dmax).
/// `bias` may be null. Computed in double, rounded once.
template <typename T>
__device__ void preparePass(const T *precisions, const T *means, const T *bias,
                            double scale, T *records, int64_t depth,
                            int64_t dmax, int64_t count) {
  const int64_t index =
      static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (index >= count)
    return;
  const int64_t record = recordSize(static_cast<int>(dmax));
  const int64_t c = index / record, offset = index % record;
  const T *P = precisions + c * depth * depth;
  auto entry = [&](int64_t i, int64_t j) -> double {
    return i < depth && j < depth ? static_cast<double>(P[i * depth + j]) : 0.0;
  };
  T value = T(0);
  if (offset < dmax * dmax) { // U
    const int64_t i = offset / dmax, j = offset % dmax;
    if (j == i)
      value = static_cast<T>(scale * entry(i, i));
    else if (j > i)
      value = static_cast<T>(scale * (entry(i, j) + entry(j, i)));
  } else if (offset < dmax * dmax + dmax) { // μ
    const int64_t i = offset - dmax * dmax;
    value = i < depth ? means[c * depth + i] : T(0);
  } else if (offset == dmax * dmax + dmax && bias) {
    value = bias[c];
  }
  records[index] = value;
}

/// The outputs of cols × (1 + depth + depth²) positions, one per thread:
/// position 0 of a component is its WEIGHT sum, 1 .. depth its CENTRED and
/// POINT sums, the rest its CENTRED_OUTER sums; each the sum over the
/// `chunks` partial sums (in chunk order, in double) of the entry of e eᵀ it
/// reads. A null output is not asked for; `outerSums` says whether the
/// column pass summed the outer products.
template <typename T>
__device__ void finishPass(const T *partials, const T *records, T *weight,
                           T *point, T *centred, T *outer, int64_t cols,
                           int64_t depth, int64_t dmax, int64_t outerSums,
                           int64_t chunks, int64_t count) {
  const int64_t index =
      static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (index >= count)
    return;
  constexpr int64_t kPatch = patchSize(sizeof(T));
  const int64_t positions = 1 + depth + depth * depth;
  const int64_t c = index / positions, position = index % positions;
  const int64_t blocks = dmax / kPatch + 1;
  const int64_t patches =
      patchCount(static_cast<int>(dmax), sizeof(T), outerSums != 0);
  // Σ over the chunks of entry (a, b), a <= b, of e eᵀ.
  auto entry = [&](int64_t a, int64_t b) {
    const int64_t bi = a / kPatch, bj = b / kPatch;
    const int64_t patch =
        outerSums ? bi * blocks - bi * (bi - 1) / 2 + (bj - bi) : bi;
    const T *p = partials + (c * patches + patch) * kPatch * kPatch +
                 (a % kPatch) * kPatch + b % kPatch;
    const int64_t stride = cols * patches * kPatch * kPatch;
    double sum = 0;
    for (int64_t k = 0; k < chunks; ++k)
      sum += static_cast<double>(p[k * stride]);
    return sum;
  };
  if (position == 0) {
    if (weight)
      weight[c] = static_cast<T>(entry(dmax, dmax));
  } else if (position <= depth) {
    const int64_t i = position - 1;
    if (!centred && !point)
      return;
    const double sum = entry(i, dmax);
    if (centred)
      centred[c * depth + i] = static_cast<T>(sum);
    if (point) {
      const T mean =
          records[c * recordSize(static_cast<int>(dmax)) + dmax * dmax + i];
      point[c * depth + i] =
          static_cast<T>(sum + static_cast<double>(mean) * entry(dmax, dmax));
    }
  } else if (outer) {
    const int64_t i = (position - 1 - depth) / depth;
    const int64_t j = (position - 1 - depth) % depth;
    outer[(c * depth + i) * depth + j] =
        static_cast<T>(i <= j ? entry(i, j) : entry(j, i));
  }
}

} // namespace

// The entries, per element type and bound DMAX on the depth;
// CudaQuadraticContract.cpp picks the smallest bound that holds the depth.
#define ENERGY_QUADRATIC_KERNELS(T, SUFFIX, DMAX)                              \
  extern "C" __global__ void __launch_bounds__(kThreads, 1)                    \
      energy_quadratic_rows_##SUFFIX##_##DMAX(                                 \
          const T *points, const T *records, T *lse, T *scores, int64_t rows,  \
          int64_t cols, int64_t depth) {                                       \
    rowsPass<T, DMAX>(points, records, lse, scores, rows, cols,                \
                      static_cast<int>(depth));                                \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(kThreads, 1)                    \
      energy_quadratic_cols_##SUFFIX##_##DMAX(                                 \
          const T *points, const T *records, const T *scores, const T *lse,    \
          T *partials, int64_t rows, int64_t cols, int64_t depth,              \
          int64_t rowsPerChunk) {                                              \
    colsPass<T, DMAX, false>(points, records, scores, lse, partials, rows,     \
                             cols, static_cast<int>(depth), rowsPerChunk);     \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(kThreads, 1)                    \
      energy_quadratic_cols_outer_##SUFFIX##_##DMAX(                           \
          const T *points, const T *records, const T *scores, const T *lse,    \
          T *partials, int64_t rows, int64_t cols, int64_t depth,              \
          int64_t rowsPerChunk) {                                              \
    colsPass<T, DMAX, true>(points, records, scores, lse, partials, rows,      \
                            cols, static_cast<int>(depth), rowsPerChunk);      \
  }

#define ENERGY_QUADRATIC_TYPE_KERNELS(T, SUFFIX)                               \
  extern "C" __global__ void __launch_bounds__(kThreads, 1)                    \
      energy_quadratic_prepare_##SUFFIX(                                       \
          const T *precisions, const T *means, const T *bias, double scale,    \
          T *records, int64_t depth, int64_t dmax, int64_t count) {            \
    preparePass<T>(precisions, means, bias, scale, records, depth, dmax,       \
                   count);                                                     \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(kThreads, 1)                    \
      energy_quadratic_finish_##SUFFIX(                                        \
          const T *partials, const T *records, T *weight, T *point,            \
          T *centred, T *outer, int64_t cols, int64_t depth, int64_t dmax,     \
          int64_t outerSums, int64_t chunks, int64_t count) {                  \
    finishPass<T>(partials, records, weight, point, centred, outer, cols,      \
                  depth, dmax, outerSums, chunks, count);                      \
  }                                                                            \
  ENERGY_QUADRATIC_KERNELS(T, SUFFIX, 8)                                       \
  ENERGY_QUADRATIC_KERNELS(T, SUFFIX, 16)                                      \
  ENERGY_QUADRATIC_KERNELS(T, SUFFIX, 32)                                      \
  ENERGY_QUADRATIC_KERNELS(T, SUFFIX, 64)

ENERGY_QUADRATIC_TYPE_KERNELS(float, f32)
ENERGY_QUADRATIC_TYPE_KERNELS(double, f64)
