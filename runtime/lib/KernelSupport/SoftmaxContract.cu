//===- SoftmaxContract.cu - The softmax-contraction kernel on the GPU -----===//
//
// The two passes of SoftmaxContract.h's contraction on CUDA cores, streaming
// (nothing of size rows × cols is stored), one template: the row side, one
// thread per row, runs an online softmax over tiles of columns staged in
// shared memory and accumulates Σ_c w · col_values; the column side, one
// thread per column, reuses each row's normaliser L from the row side over
// tiles of rows.
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

/// One pass. MaxD bounds the depth, MaxW the widths' sum (in registers).
/// The row side (ColumnSide false) sums over columns for each row, with an
/// online softmax, or with the given normaliser, which needs no rescaling;
/// the column side sums over rows for each column, with each row's L (lse,
/// a row-side output, or the given one).
template <typename T, int MaxD, int MaxW, bool ColumnSide>
__device__ void contractPass(const Slots &s) {
  __shared__ T features[kTile][MaxD];
  __shared__ T values[kTile][MaxW];
  __shared__ T innerNormalisers[kTile];
  const int64_t outerCount = ColumnSide ? s.cols : s.rows;
  const int64_t innerCount = ColumnSide ? s.rows : s.cols;
  const int64_t position =
      static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool active = position < outerCount;
  const int depth = static_cast<int>(s.depth);
  const T temperature = static_cast<T>(bitsToDouble(s.temperatureBits));
  const T *lse = pointer<const T>(s.givenLse ? s.givenLse : s.lse);
  const bool given = !ColumnSide && s.givenLse;
  const int width = tableWidth(s);

  T own[MaxD];
  loadFeatures(
      own, pointer<const T>(ColumnSide ? s.colFeatures : s.rowFeatures),
      position, depth, static_cast<T>(bitsToDouble(s.scaleBits)), active);
  T accumulator[MaxW] = {};
  // Row side, in units of the temperature: running max m, Σ exp(t − m) as
  // sum; or the given normaliser.
  T m = -INFINITY, sum = T(0);
  const T givenNormaliser =
      given && active ? lse[position] / temperature : T(0);

  for (int64_t base = 0; base < innerCount; base += kTile) {
    __syncthreads();
    stage(features, values, base, innerCount,
          pointer<const T>(ColumnSide ? s.rowFeatures : s.colFeatures), depth,
          s, width);
    if (ColumnSide)
      for (int i = threadIdx.x; i < kTile; i += blockDim.x)
        innerNormalisers[i] =
            base + i < innerCount ? lse[base + i] / temperature : T(0);
    __syncthreads();
    if (!active)
      continue;
    for (int c = 0; c < kTile; ++c) {
      int64_t inner = base + c;
      if (inner >= innerCount)
        break;
      if (!(ColumnSide ? admitted(s, inner, position)
                       : admitted(s, position, inner)))
        continue;
      T score = T(0);
#pragma unroll
      for (int d = 0; d < MaxD; ++d)
        score += own[d] * features[c][d];
      T t = score / temperature;
      T weight;
      if (ColumnSide) {
        weight = expOf(t - innerNormalisers[c]);
      } else if (given) {
        weight = expOf(t - givenNormaliser);
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
  if (ColumnSide)
    return writeOutputs(s, position, accumulator, T(1));
  T normaliser;
  if (given)
    normaliser = lse[position];
  else
    normaliser = sum > T(0) ? temperature * (m + logOf(sum)) : T(0);
  if (s.lse)
    pointer<T>(s.lse)[position] = normaliser;
  // A row without an admitted column has nothing accumulated: zeros.
  writeOutputs(s, position, accumulator, given || sum <= T(0) ? T(1) : sum);
}

} // namespace

// One entry per element type, bound on the depth and on the widths' sum;
// CudaContract.cpp picks the smallest that fits. They take the pass's
// ContractSlots, then the position count (rows or cols); blockIdx.y is the
// problem of the batch.
#define ENERGY_CONTRACT_KERNELS(T, SUFFIX, D, W)                               \
  extern "C" __global__ void __launch_bounds__(kBlockThreads)                  \
      energy_contract_rows_##SUFFIX##_##D##_##W(Slots s, int64_t) {            \
    contractPass<T, D, W, false>(energy::cuda::problemSlots<T>(s, false));     \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(kBlockThreads)                  \
      energy_contract_cols_##SUFFIX##_##D##_##W(Slots s, int64_t) {            \
    contractPass<T, D, W, true>(energy::cuda::problemSlots<T>(s, true));       \
  }

ENERGY_CONTRACT_KERNELS(float, f32, 32, 32)
ENERGY_CONTRACT_KERNELS(float, f32, 64, 64)
ENERGY_CONTRACT_KERNELS(float, f32, 128, 128)
ENERGY_CONTRACT_KERNELS(double, f64, 32, 32)
ENERGY_CONTRACT_KERNELS(double, f64, 64, 64)
