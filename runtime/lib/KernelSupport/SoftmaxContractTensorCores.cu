//===- SoftmaxContractTensorCores.cu - The contraction on tensor cores ----===//
//
// The two passes of SoftmaxContract.h's f32 contraction with bf16 operands
// on tensor cores (mma.sync m16n8k16, fp32 accumulation), the way
// FlashAttention computes attention: a warp owns 16 positions of the outer
// side (rows on the row side, columns on the column side), a block 64;
// tiles of 64 inner positions are staged in shared memory as bf16, and
// scores, weights, sums and accumulators stay in registers. The row side
// runs an online softmax (or takes the given normaliser); the column side
// reads each row's normaliser L. Nothing of size rows × cols is stored.
//
//===----------------------------------------------------------------------===//

#include "SoftmaxContractDevice.h"

#include <cuda_bf16.h>
#include <stdint.h>

namespace {
using energy::cuda::ContractSlots;

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
/// Outer positions per block (16 a warp) and inner positions per tile.
constexpr int kOuter = 16 * kWarps;
constexpr int kInner = 64;
/// bf16 elements after each staged row, so that a warp's fragment reads
/// fall in distinct banks.
constexpr int kPad = 8;
constexpr double kLog2e = 1.4426950408889634;
constexpr float kLn2 = 0.6931471805599453f;
constexpr unsigned kAllLanes = 0xffffffffu;

/// Two floats as a pair of bf16 (round to nearest), `low` in the low half.
__device__ uint32_t pack(float low, float high) {
  __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
  return *reinterpret_cast<uint32_t *>(&pair);
}

/// d += a · b on one 16 × 8 × 16 tile: a row-major (four registers of bf16
/// pairs), b column-major (two), d fp32 (four), in mma.sync's fragments.
__device__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                    uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// The b fragment (16 k × 8 n) of a row-major k × n bf16 tile in shared
/// memory whose first element is `tile` and rows `stride` apart.
__device__ void loadTransposed(uint32_t &b0, uint32_t &b1,
                               const __nv_bfloat16 *tile, int stride) {
  // Lanes 0-15 give the addresses of rows 0-15; the others' are ignored.
  const __nv_bfloat16 *row = tile + (threadIdx.x % 16) * stride;
  uint32_t address = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
      : "=r"(b0), "=r"(b1)
      : "r"(address));
}

/// Stages rows [base, base + kInner) of `source` (`count` rows of `width`
/// floats) in `tile` as bf16, zeros past the ends; four at a time when the
/// width and the alignment allow.
template <int MaxW>
__device__ void stageTable(__nv_bfloat16 (&tile)[kInner][MaxW + kPad],
                           const float *source, int64_t count, int width,
                           int64_t base) {
  if (width % 4 == 0 && reinterpret_cast<uintptr_t>(source) % 16 == 0) {
    for (int i = threadIdx.x; i < kInner * MaxW / 4; i += kThreads) {
      int p = i / (MaxW / 4), w = 4 * (i % (MaxW / 4));
      int64_t position = base + p;
      float4 v =
          position < count && w < width
              ? *reinterpret_cast<const float4 *>(source + position * width + w)
              : make_float4(0.f, 0.f, 0.f, 0.f);
      *reinterpret_cast<uint2 *>(&tile[p][w]) =
          make_uint2(pack(v.x, v.y), pack(v.z, v.w));
    }
    return;
  }
  for (int i = threadIdx.x; i < kInner * MaxW / 2; i += kThreads) {
    int p = i / (MaxW / 2), w = 2 * (i % (MaxW / 2));
    int64_t position = base + p;
    bool inside = position < count;
    const float *row = source + position * width;
    float low = inside && w < width ? row[w] : 0.f;
    float high = inside && w + 1 < width ? row[w + 1] : 0.f;
    *reinterpret_cast<uint32_t *>(&tile[p][w]) = pack(low, high);
  }
}

/// Stages the value tables' rows [base, base + kInner) side by side
/// (`width` in all) in `tile` as bf16, zeros past the ends.
template <int MaxW>
__device__ void stageValues(__nv_bfloat16 (&tile)[kInner][MaxW + kPad],
                            const ContractSlots &s, int64_t count, int width,
                            int64_t base) {
  if (s.numTables == 1)
    return stageTable<MaxW>(tile,
                            energy::cuda::pointer<const float>(s.values[0]),
                            count, width, base);
  for (int i = threadIdx.x; i < kInner * MaxW / 2; i += kThreads) {
    int p = i / (MaxW / 2), w = 2 * (i % (MaxW / 2));
    int64_t position = base + p;
    bool inside = position < count;
    float low = inside && w < width
                    ? energy::cuda::tableValue<float>(s, position, w)
                    : 0.f;
    float high = inside && w + 1 < width
                     ? energy::cuda::tableValue<float>(s, position, w + 1)
                     : 0.f;
    *reinterpret_cast<uint32_t *>(&tile[p][w]) = pack(low, high);
  }
}

/// One pass. MaxD bounds the depth, MaxW the widths' sum (multiples of 16).
/// The row side (ColumnSide false) sums over columns for each row; the
/// column side over rows for each column, with the rows' normalisers.
template <int MaxD, int MaxW, bool ColumnSide>
__device__ void contractPass(const ContractSlots &s) {
  using energy::cuda::pointer;
  __shared__ __align__(16) __nv_bfloat16 features[kInner][MaxD + kPad];
  __shared__ __align__(16) __nv_bfloat16 values[kInner][MaxW + kPad];
  __shared__ float innerNormalisers[kInner];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane / 4, member = lane % 4;
  const int64_t outerCount = ColumnSide ? s.cols : s.rows;
  const int64_t innerCount = ColumnSide ? s.rows : s.cols;
  const float *outerFeatures =
      pointer<const float>(ColumnSide ? s.colFeatures : s.rowFeatures);
  const float *innerFeatures =
      pointer<const float>(ColumnSide ? s.rowFeatures : s.colFeatures);
  const int depth = static_cast<int>(s.depth);
  const int width = energy::cuda::tableWidth(s);
  const double temperature = energy::cuda::bitsToDouble(s.temperatureBits);
  // Scores in units of log2 of the softmax's base: s(r, c) / T · log2 e.
  const float toLog2 = static_cast<float>(
      energy::cuda::bitsToDouble(s.scaleBits) / temperature * kLog2e);
  const float normaliserToLog2 = static_cast<float>(kLog2e / temperature);
  const float *lse = pointer<const float>(s.givenLse ? s.givenLse : s.lse);
  const bool given = !ColumnSide && s.givenLse;
  const bool constrained = s.numConstraints > 0;
  const int64_t blockOuter = static_cast<int64_t>(blockIdx.x) * kOuter;
  // This thread's two outer positions: fragment rows `group` and + 8.
  const int64_t outer[2] = {blockOuter + 16 * warp + group,
                            blockOuter + 16 * warp + group + 8};

  // The warp's outer features as a fragments. (Scaling the products rather
  // than the features keeps both passes' scores the same numbers.)
  uint32_t a[MaxD / 16][4];
#pragma unroll
  for (int kk = 0; kk < MaxD / 16; ++kk)
#pragma unroll
    for (int half = 0; half < 2; ++half)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        int d = 16 * kk + 8 * half + 2 * member;
        bool inside = outer[r] < outerCount;
        const float *row = outerFeatures + outer[r] * depth;
        float low = inside && d < depth ? row[d] : 0.f;
        float high = inside && d + 1 < depth ? row[d + 1] : 0.f;
        a[kk][2 * half + r] = pack(low, high);
      }

  float accumulator[MaxW / 8][4] = {};
  // Row side: the running max (log2 units) and this thread's share of
  // Σ 2^(score − max), per fragment row; or the given normaliser.
  float runningMax[2] = {-INFINITY, -INFINITY}, sum[2] = {0.f, 0.f};
  float givenLog2[2] = {0.f, 0.f};
  if (given)
    for (int r = 0; r < 2; ++r)
      if (outer[r] < outerCount)
        givenLog2[r] = lse[outer[r]] * normaliserToLog2;

  const int64_t lastOuter =
      (blockOuter + kOuter < outerCount ? blockOuter + kOuter : outerCount) - 1;
  for (int64_t base = 0; base < innerCount; base += kInner) {
    if (constrained) {
      int64_t lastInner =
          (base + kInner < innerCount ? base + kInner : innerCount) - 1;
      if (ColumnSide ? energy::cuda::noneAdmitted(s, base, lastInner,
                                                  blockOuter, lastOuter)
                     : energy::cuda::noneAdmitted(s, blockOuter, lastOuter,
                                                  base, lastInner))
        continue;
    }
    __syncthreads();
    stageTable<MaxD>(features, innerFeatures, innerCount, depth, base);
    stageValues<MaxW>(values, s, innerCount, width, base);
    if (ColumnSide)
      for (int i = threadIdx.x; i < kInner; i += kThreads)
        innerNormalisers[i] =
            base + i < innerCount ? lse[base + i] * normaliserToLog2 : 0.f;
    __syncthreads();

    float scores[kInner / 8][4] = {};
#pragma unroll
    for (int nt = 0; nt < kInner / 8; ++nt)
#pragma unroll
      for (int kk = 0; kk < MaxD / 16; ++kk) {
        if (16 * kk >= depth)
          break;
        const __nv_bfloat16 *key = &features[8 * nt + group][16 * kk];
        mma(scores[nt], a[kk],
            *reinterpret_cast<const uint32_t *>(key + 2 * member),
            *reinterpret_cast<const uint32_t *>(key + 2 * member + 8));
      }

      // Scores in log2 units, masked pairs −∞; then weights, in place.
#pragma unroll
    for (int nt = 0; nt < kInner / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int64_t inner = base + 8 * nt + 2 * member + (e & 1);
        int64_t position = outer[e / 2];
        bool valid =
            inner < innerCount && position < outerCount &&
            (!constrained ||
             (ColumnSide ? energy::cuda::admitted(s, inner, position)
                         : energy::cuda::admitted(s, position, inner)));
        scores[nt][e] = valid ? scores[nt][e] * toLog2 : -INFINITY;
      }
    if (ColumnSide || given) {
#pragma unroll
      for (int nt = 0; nt < kInner / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          scores[nt][e] = exp2f(
              scores[nt][e] -
              (ColumnSide ? innerNormalisers[8 * nt + 2 * member + (e & 1)]
                          : givenLog2[e / 2]));
    } else {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float tileMax = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < kInner / 8; ++nt)
          tileMax =
              fmaxf(tileMax, fmaxf(scores[nt][2 * r], scores[nt][2 * r + 1]));
        tileMax = fmaxf(tileMax, __shfl_xor_sync(kAllLanes, tileMax, 1));
        tileMax = fmaxf(tileMax, __shfl_xor_sync(kAllLanes, tileMax, 2));
        float newMax = fmaxf(runningMax[r], tileMax);
        // Until a row has an admitted column, everything stays 0.
        float reference = newMax == -INFINITY ? 0.f : newMax;
        float rescale = exp2f(runningMax[r] - reference);
        runningMax[r] = newMax;
        float tileSum = 0.f;
#pragma unroll
        for (int nt = 0; nt < kInner / 8; ++nt)
#pragma unroll
          for (int e = 2 * r; e < 2 * r + 2; ++e) {
            scores[nt][e] = exp2f(scores[nt][e] - reference);
            tileSum += scores[nt][e];
          }
        sum[r] = sum[r] * rescale + tileSum;
#pragma unroll
        for (int nw = 0; nw < MaxW / 8; ++nw) {
          accumulator[nw][2 * r] *= rescale;
          accumulator[nw][2 * r + 1] *= rescale;
        }
      }
    }

    // accumulator += weights · values, the weights' c fragments reused as
    // a fragments.
#pragma unroll
    for (int kk = 0; kk < kInner / 16; ++kk) {
      uint32_t weights[4] = {
          pack(scores[2 * kk][0], scores[2 * kk][1]),
          pack(scores[2 * kk][2], scores[2 * kk][3]),
          pack(scores[2 * kk + 1][0], scores[2 * kk + 1][1]),
          pack(scores[2 * kk + 1][2], scores[2 * kk + 1][3])};
#pragma unroll
      for (int nw = 0; nw < MaxW / 8; ++nw) {
        if (8 * nw >= width)
          break;
        uint32_t b0, b1;
        loadTransposed(b0, b1, &values[16 * kk][8 * nw], MaxW + kPad);
        mma(accumulator[nw], weights, b0, b1);
      }
    }
  }

  float divisor[2] = {1.f, 1.f};
  if (!ColumnSide) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      sum[r] += __shfl_xor_sync(kAllLanes, sum[r], 1);
      sum[r] += __shfl_xor_sync(kAllLanes, sum[r], 2);
      if (outer[r] >= outerCount)
        continue;
      float normaliser;
      if (given) {
        normaliser = lse[outer[r]];
      } else if (sum[r] > 0.f) {
        normaliser = static_cast<float>(temperature) * kLn2 *
                     (runningMax[r] + log2f(sum[r]));
        divisor[r] = sum[r];
      } else {
        // A row without an admitted column: L = 0 and zero outputs.
        normaliser = 0.f;
      }
      if (s.lse && member == 0)
        pointer<float>(s.lse)[outer[r]] = normaliser;
    }
  }
#pragma unroll
  for (int nw = 0; nw < MaxW / 8; ++nw)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      int w = 8 * nw + 2 * member + (e & 1);
      int64_t position = outer[e / 2];
      if (position < outerCount && w < width)
        energy::cuda::storeOutput<float>(s, position, w,
                                         accumulator[nw][e] / divisor[e / 2]);
    }
}

} // namespace

// One pair of entries per bound on the depth and the widths' sum;
// CudaContract.cpp picks the smallest that fits and launches kThreads to a
// block, one block per kOuter positions, blockIdx.y the problem of the
// batch. They take the pass's ContractSlots, then the position count.
#define ENERGY_TENSOR_CORE_KERNELS(B)                                          \
  extern "C" __global__ void __launch_bounds__(kThreads)                       \
      energy_contract_rows_bf16_##B##_##B(ContractSlots s, int64_t) {          \
    contractPass<B, B, false>(energy::cuda::problemSlots<float>(s, false));    \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(kThreads)                       \
      energy_contract_cols_bf16_##B##_##B(ContractSlots s, int64_t) {          \
    contractPass<B, B, true>(energy::cuda::problemSlots<float>(s, true));      \
  }

ENERGY_TENSOR_CORE_KERNELS(32)
ENERGY_TENSOR_CORE_KERNELS(64)
ENERGY_TENSOR_CORE_KERNELS(128)
