//===- SoftmaxContract.cu - The softmax-contraction kernel on the GPU -----===//
//
// The two passes of SoftmaxContract.h's contraction on CUDA cores, streaming
// (nothing of size rows × cols is stored): the row side, one thread per row,
// runs an online softmax over tiles of columns staged in shared memory and
// accumulates Σ_c w · col_values; the column side, one thread per column,
// reuses each row's normaliser L from the row side over tiles of rows.
// Compiled to PTX by nvcc at build time; CudaContract.cpp embeds it and
// launches each pass one thread per position, kBlockThreads to a block, with
// the pass's ContractSlots by value, then the position count.
//
//===----------------------------------------------------------------------===//

#include "SoftmaxContractDevice.h"

#include <stdint.h>

namespace {

using Slots = energy::cuda::ContractSlots;
using energy::cuda::admitted;
using energy::cuda::bitsToDouble;
using energy::cuda::pointer;
using energy::cuda::tableWidth;

/// Columns (or rows) staged in shared memory at a time.
constexpr int kTile = 32;
/// Threads per block (CudaLaunch.h's kBlockThreads).
constexpr int kBlockThreads = 256;

__device__ float expOf(float x) { return expf(x); }
__device__ double expOf(double x) { return exp(x); }
__device__ float logOf(float x) { return logf(x); }
__device__ double logOf(double x) { return log(x); }

/// Stages positions [base, base + kTile) of `source` (rows of `depth`
/// features; `count` of them) and of this pass's value tables (their rows
/// side by side, `width` in all) in shared memory; zeros past the ends.
template <typename T, int MaxD, int MaxW>
__device__ void stage(T (&features)[kTile][MaxD], T (&values)[kTile][MaxW],
                      int64_t base, int64_t count, const T *source, int depth,
                      const Slots &s, int width) {
  for (int i = threadIdx.x; i < kTile * MaxD; i += blockDim.x) {
    int p = i / MaxD, d = i % MaxD;
    features[p][d] =
        base + p < count && d < depth ? source[(base + p) * depth + d] : T(0);
  }
  for (int i = threadIdx.x; i < kTile * MaxW; i += blockDim.x) {
    int p = i / MaxW, w = i % MaxW;
    values[p][w] = base + p < count && w < width
                       ? energy::cuda::tableValue<T>(s, base + p, w)
                       : T(0);
  }
}

/// Writes the accumulators of `position` (over `divisor`) to this pass's
/// output tables, each its share of them.
template <typename T, int MaxW>
__device__ void writeOutputs(const Slots &s, int64_t position,
                             const T (&accumulator)[MaxW], T divisor) {
  const int width = tableWidth(s);
#pragma unroll
  for (int w = 0; w < MaxW; ++w)
    if (w < width)
      energy::cuda::storeOutput<T>(s, position, w, accumulator[w] / divisor);
}

/// Features of `position` (a row of `depth`), times `scale`, in registers;
/// zeros for an inactive thread.
template <typename T, int MaxD>
__device__ void loadFeatures(T (&features)[MaxD], const T *source,
                             int64_t position, int depth, T scale,
                             bool active) {
#pragma unroll
  for (int d = 0; d < MaxD; ++d)
    features[d] =
        active && d < depth ? source[position * depth + d] * scale : T(0);
}

/// Row side. MaxD bounds the depth, MaxW the widths' sum (in registers).
/// With a given normaliser (givenLse) the weights need no online rescaling.
template <typename T, int MaxD, int MaxW>
__device__ void rowPass(const Slots &s) {
  __shared__ T features[kTile][MaxD];
  __shared__ T values[kTile][MaxW];
  const int64_t row =
      static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool active = row < s.rows;
  const int depth = static_cast<int>(s.depth);
  const T temperature = static_cast<T>(bitsToDouble(s.temperatureBits));
  const T *givenLse = pointer<const T>(s.givenLse);
  const int width = tableWidth(s);

  T q[MaxD];
  loadFeatures(q, pointer<const T>(s.rowFeatures), row, depth,
               static_cast<T>(bitsToDouble(s.scaleBits)), active);
  T accumulator[MaxW] = {};
  // In units of the temperature: running max m, Σ exp(t − m) as sum.
  T m = -INFINITY, sum = T(0);
  const T given = givenLse && active ? givenLse[row] / temperature : T(0);

  for (int64_t base = 0; base < s.cols; base += kTile) {
    __syncthreads();
    stage(features, values, base, s.cols, pointer<const T>(s.colFeatures),
          depth, s, width);
    __syncthreads();
    if (!active)
      continue;
    for (int c = 0; c < kTile; ++c) {
      int64_t col = base + c;
      if (col >= s.cols)
        break;
      if (!admitted(s, row, col))
        continue;
      T score = T(0);
#pragma unroll
      for (int d = 0; d < MaxD; ++d)
        score += q[d] * features[c][d];
      T t = score / temperature;
      T weight;
      if (givenLse) {
        weight = expOf(t - given);
      } else {
        if (t > m) {
          T rescale = expOf(m - t);
          sum *= rescale;
#pragma unroll
          for (int w = 0; w < MaxW; ++w)
            accumulator[w] *= rescale;
          m = t;
        }
        weight = expOf(t - m);
        sum += weight;
      }
#pragma unroll
      for (int w = 0; w < MaxW; ++w)
        accumulator[w] += weight * values[c][w];
    }
  }
  if (!active)
    return;
  T normaliser;
  if (givenLse)
    normaliser = givenLse[row];
  else
    normaliser = sum > T(0) ? temperature * (m + logOf(sum)) : T(0);
  if (s.lse)
    pointer<T>(s.lse)[row] = normaliser;
  // A row without an admitted column has nothing accumulated: zeros.
  writeOutputs(s, row, accumulator, givenLse || sum <= T(0) ? T(1) : sum);
}

/// Column side: col_outputs[j][c] = Σ_r w(r, c) · row_values[j][r], with L
/// (lse, a row-side output or the given one) read for each row.
template <typename T, int MaxD, int MaxW>
__device__ void colPass(const Slots &s) {
  __shared__ T features[kTile][MaxD];
  __shared__ T values[kTile][MaxW];
  __shared__ T normalisers[kTile];
  const int64_t col =
      static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool active = col < s.cols;
  const int depth = static_cast<int>(s.depth);
  const T temperature = static_cast<T>(bitsToDouble(s.temperatureBits));
  const T *lse = pointer<const T>(s.givenLse ? s.givenLse : s.lse);
  const int width = tableWidth(s);

  T k[MaxD];
  loadFeatures(k, pointer<const T>(s.colFeatures), col, depth,
               static_cast<T>(bitsToDouble(s.scaleBits)), active);
  T accumulator[MaxW] = {};

  for (int64_t base = 0; base < s.rows; base += kTile) {
    __syncthreads();
    stage(features, values, base, s.rows, pointer<const T>(s.rowFeatures),
          depth, s, width);
    for (int i = threadIdx.x; i < kTile; i += blockDim.x)
      normalisers[i] = base + i < s.rows ? lse[base + i] / temperature : T(0);
    __syncthreads();
    if (!active)
      continue;
    for (int r = 0; r < kTile; ++r) {
      int64_t row = base + r;
      if (row >= s.rows)
        break;
      if (!admitted(s, row, col))
        continue;
      T score = T(0);
#pragma unroll
      for (int d = 0; d < MaxD; ++d)
        score += features[r][d] * k[d];
      T weight = expOf(score / temperature - normalisers[r]);
#pragma unroll
      for (int w = 0; w < MaxW; ++w)
        accumulator[w] += weight * values[r][w];
    }
  }
  if (active)
    writeOutputs(s, col, accumulator, T(1));
}

} // namespace

// One entry per element type, bound on the depth and on the widths' sum;
// CudaContract.cpp picks the smallest that fits. They take the pass's
// ContractSlots, then the position count (rows or cols); blockIdx.y is the
// problem of the batch.
#define ENERGY_CONTRACT_KERNELS(T, SUFFIX, D, W)                               \
  extern "C" __global__ void __launch_bounds__(kBlockThreads)                  \
      energy_contract_rows_##SUFFIX##_##D##_##W(Slots s, int64_t) {            \
    rowPass<T, D, W>(energy::cuda::problemSlots<T>(s, false));                 \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(kBlockThreads)                  \
      energy_contract_cols_##SUFFIX##_##D##_##W(Slots s, int64_t) {            \
    colPass<T, D, W>(energy::cuda::problemSlots<T>(s, true));                  \
  }

ENERGY_CONTRACT_KERNELS(float, f32, 32, 32)
ENERGY_CONTRACT_KERNELS(float, f32, 64, 64)
ENERGY_CONTRACT_KERNELS(float, f32, 128, 128)
ENERGY_CONTRACT_KERNELS(double, f64, 32, 32)
ENERGY_CONTRACT_KERNELS(double, f64, 64, 64)
