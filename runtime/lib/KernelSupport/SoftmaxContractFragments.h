//===- SoftmaxContractFragments.h - Tensor-core passes' shared steps -*- C++
//-*-===//
//
// What the two tensor-core passes of the softmax contraction share
// (SoftmaxContractTensorCores.cu with mma.sync, SoftmaxContractWarpgroups.cu
// with sm_90's wgmma): asynchronous copies into shared memory, the tiles an
// admitted pair can fall in, and the steps on a thread's share of a tile of
// scores held in an accumulator's fragments: scaling and masking, the
// weights (online softmax or given normalisers), the weights as the next
// product's a fragments, and the pass's end (normalisers and outputs).
// CUDA only.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTFRAGMENTS_H
#define ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTFRAGMENTS_H

#include "SoftmaxContractDevice.h"

#include <cuda_bf16.h>
#include <stdint.h>

namespace energy::cuda::fragments {

constexpr double kLog2e = 1.4426950408889634;
constexpr float kLn2 = 0.6931471805599453f;
constexpr unsigned kAllLanes = 0xffffffffu;

/// Two floats as a pair of bf16 (round to nearest), `low` in the low half.
__device__ __forceinline__ uint32_t pack(float low, float high) {
  __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
  return *reinterpret_cast<uint32_t *>(&pair);
}

/// Starts copying `bytes` (16, or 4 with `available` of them read and the
/// rest zeros) from global to shared memory; they land once a later
/// waitForCopies returns.
template <int Bytes>
__device__ __forceinline__ void copyAsync(void *shared, const void *global,
                                          uint32_t available = Bytes) {
  uint32_t address = static_cast<uint32_t>(__cvta_generic_to_shared(shared));
  if (Bytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n"
                 :
                 : "r"(address), "l"(global)
                 : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
                 :
                 : "r"(address), "l"(global), "r"(available)
                 : "memory");
}

/// Closes the group of copies started since the last call.
__device__ __forceinline__ void commitCopies() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/// Waits for this thread's copies of every closed group but the last
/// `Pending`.
template <int Pending = 0> __device__ __forceinline__ void waitForCopies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
}

/// The first tile of `tile` inner positions at or after `base` with an
/// admitted pair for the block's outer positions [firstOuter, lastOuter],
/// or innerCount; the same for every thread of the block.
template <bool ColumnSide>
__device__ __forceinline__ int64_t nextAdmittedTile(
    const ContractSlots &s, bool constrained, int64_t base, int64_t innerCount,
    int tile, int64_t firstOuter, int64_t lastOuter) {
  for (; constrained && base < innerCount; base += tile) {
    int64_t lastInner =
        (base + tile < innerCount ? base + tile : innerCount) - 1;
    if (!(ColumnSide ? noneAdmitted(s, base, lastInner, firstOuter, lastOuter)
                     : noneAdmitted(s, firstOuter, lastOuter, base, lastInner)))
      break;
  }
  return base < innerCount ? base : innerCount;
}

/// A thread's share of one pass: its two outer positions (fragment rows
/// `group` and `group` + 8 of its warp's 16), its column pair in each block
/// of 8 (`member`), and the pass's scales.
struct PassThread {
  int64_t outer[2];
  int member;
  /// Scores in units of log2 of the softmax's base: s(r, c) / T · log2 e.
  float toLog2;
  float normaliserToLog2;
  double temperature;
  /// Whether the pass has pair constraints.
  bool constrained;
};

__device__ __forceinline__ PassThread passThread(const ContractSlots &s,
                                                 int64_t firstOfWarp,
                                                 int lane) {
  PassThread t;
  t.outer[0] = firstOfWarp + lane / 4;
  t.outer[1] = firstOfWarp + lane / 4 + 8;
  t.member = lane % 4;
  t.temperature = bitsToDouble(s.temperatureBits);
  t.toLog2 =
      static_cast<float>(bitsToDouble(s.scaleBits) / t.temperature * kLog2e);
  t.normaliserToLog2 = static_cast<float>(kLog2e / t.temperature);
  t.constrained = s.numConstraints > 0;
  return t;
}

/// The row side's given normalisers `lse` (or null) of this thread's outer
/// positions, in log2 units (zeros past the end, or where none are given).
__device__ __forceinline__ void givenNormalisers(float (&givenLog2)[2],
                                                 const PassThread &t,
                                                 const float *lse,
                                                 int64_t outerCount) {
#pragma unroll
  for (int r = 0; r < 2; ++r)
    givenLog2[r] = lse && t.outer[r] < outerCount
                       ? lse[t.outer[r]] * t.normaliserToLog2
                       : 0.f;
}

/// Scores (accumulator fragments of `Chunks` blocks of 8 inner positions
/// from `base`) in log2 units, masked pairs −∞ (only a last or constrained
/// tile has any; positions past the outer end are never written).
template <bool ColumnSide, int Chunks>
__device__ __forceinline__ void
scaleAndMask(float (&scores)[Chunks][4], const ContractSlots &s,
             const PassThread &t, int64_t base, int64_t innerCount) {
  const bool constrained = t.constrained;
  const bool masked = constrained || base + 8 * Chunks > innerCount;
#pragma unroll
  for (int nt = 0; nt < Chunks; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      int64_t inner = base + 8 * nt + 2 * t.member + (e & 1);
      bool valid =
          !masked ||
          (inner < innerCount &&
           (!constrained || (ColumnSide ? admitted(s, inner, t.outer[e / 2])
                                        : admitted(s, t.outer[e / 2], inner))));
      scores[nt][e] = valid ? scores[nt][e] * t.toLog2 : -INFINITY;
    }
}

/// Weights, in place, of scores whose normalisers are known (log2 units):
/// the column side's rows' (`innerNormalisers`, this tile's, in their
/// units) or the row side's given ones (`givenLog2`, null otherwise).
template <int Chunks>
__device__ __forceinline__ void
weightsWithNormalisers(float (&scores)[Chunks][4], const PassThread &t,
                       const float *innerNormalisers,
                       const float (&givenLog2)[2]) {
#pragma unroll
  for (int nt = 0; nt < Chunks; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      scores[nt][e] =
          exp2f(scores[nt][e] -
                (innerNormalisers
                     ? innerNormalisers[8 * nt + 2 * t.member + (e & 1)] *
                           t.normaliserToLog2
                     : givenLog2[e / 2]));
}

/// The row side's online softmax over one tile: weights in place relative
/// to the updated running maxima, this thread's share of Σ 2^(score − max)
/// in `sum`, and in `rescale` the factor of each fragment row's earlier
/// sums (1 where its maximum stayed).
template <int Chunks>
__device__ __forceinline__ void
softmaxStep(float (&scores)[Chunks][4], float (&runningMax)[2], float (&sum)[2],
            float (&rescale)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float tileMax = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < Chunks; ++nt)
      tileMax = fmaxf(tileMax, fmaxf(scores[nt][2 * r], scores[nt][2 * r + 1]));
    tileMax = fmaxf(tileMax, __shfl_xor_sync(kAllLanes, tileMax, 1));
    tileMax = fmaxf(tileMax, __shfl_xor_sync(kAllLanes, tileMax, 2));
    float newMax = fmaxf(runningMax[r], tileMax);
    // Until a row has an admitted column, everything stays 0.
    float reference = newMax == -INFINITY ? 0.f : newMax;
    rescale[r] = exp2f(runningMax[r] - reference);
    runningMax[r] = newMax;
    float tileSum = 0.f;
#pragma unroll
    for (int nt = 0; nt < Chunks; ++nt)
#pragma unroll
      for (int e = 2 * r; e < 2 * r + 2; ++e) {
        scores[nt][e] = exp2f(scores[nt][e] - reference);
        tileSum += scores[nt][e];
      }
    sum[r] = sum[r] * rescale[r] + tileSum;
  }
}

/// The accumulator's rows times `rescale` (softmaxStep's).
template <int OutputChunks>
__device__ __forceinline__ void
rescaleAccumulator(float (&accumulator)[OutputChunks][4],
                   const float (&rescale)[2]) {
  // Once the maxima settle, most tiles leave them (rescale 1).
  if (__any_sync(kAllLanes, rescale[0] != 1.f || rescale[1] != 1.f))
#pragma unroll
    for (int nw = 0; nw < OutputChunks; ++nw)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        accumulator[nw][e] *= rescale[e / 2];
}

/// softmaxStep, then the accumulator rescaled.
template <int Chunks, int OutputChunks>
__device__ __forceinline__ void
onlineWeights(float (&scores)[Chunks][4], float (&runningMax)[2],
              float (&sum)[2], float (&accumulator)[OutputChunks][4]) {
  float rescale[2];
  softmaxStep(scores, runningMax, sum, rescale);
  rescaleAccumulator(accumulator, rescale);
}

/// The weights of inner positions 16kk to 16kk + 15 as the a fragments of
/// the product with the value tables: an accumulator's fragments of two
/// blocks of 8 are an a fragment's layout.
template <int Chunks>
__device__ __forceinline__ void weightFragment(uint32_t (&weights)[4],
                                               const float (&scores)[Chunks][4],
                                               int kk) {
  weights[0] = pack(scores[2 * kk][0], scores[2 * kk][1]);
  weights[1] = pack(scores[2 * kk][2], scores[2 * kk][3]);
  weights[2] = pack(scores[2 * kk + 1][0], scores[2 * kk + 1][1]);
  weights[3] = pack(scores[2 * kk + 1][2], scores[2 * kk + 1][3]);
}

/// The pass's end for this thread's outer positions: on the row side the
/// normalisers (written to s.lse where asked) and the division by the
/// softmax's sums; then the outputs.
template <bool ColumnSide, int OutputChunks>
__device__ __forceinline__ void
finishPass(const ContractSlots &s, const PassThread &t,
           const float (&accumulator)[OutputChunks][4], float (&sum)[2],
           const float (&runningMax)[2], int64_t outerCount, const float *lse,
           bool given, int width) {
  float divisor[2] = {1.f, 1.f};
  if (!ColumnSide) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      sum[r] += __shfl_xor_sync(kAllLanes, sum[r], 1);
      sum[r] += __shfl_xor_sync(kAllLanes, sum[r], 2);
      if (t.outer[r] >= outerCount)
        continue;
      float normaliser;
      if (given) {
        normaliser = lse[t.outer[r]];
      } else if (sum[r] > 0.f) {
        normaliser = static_cast<float>(t.temperature) * kLn2 *
                     (runningMax[r] + log2f(sum[r]));
        divisor[r] = sum[r];
      } else {
        // A row without an admitted column: L = 0 and zero outputs.
        normaliser = 0.f;
      }
      if (s.lse && t.member == 0)
        pointer<float>(s.lse)[t.outer[r]] = normaliser;
    }
  }
#pragma unroll
  for (int nw = 0; nw < OutputChunks; ++nw)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      int w = 8 * nw + 2 * t.member + (e & 1);
      int64_t position = t.outer[e / 2];
      if (position < outerCount && w < width)
        storeOutput<float>(s, position, w, accumulator[nw][e] / divisor[e / 2]);
    }
}

} // namespace energy::cuda::fragments

// The kernels of a family of tensor-core passes (FAMILY: bf16 for
// mma.sync's, wgmma and wgmmap for wgmma's), from its file's packing
// function PACK and pass PASS (templates of the bounds and the side), with
// kPackThreads and kThreads, and MIN_BLOCKS blocks an SM. Every kernel
// takes the pass's ContractSlots, the device addresses of the launch's
// packed features and value tables, the packed rows of a problem, then the
// position count; blockIdx.y is the problem of the launch (ContractSlots'
// batchBase + blockIdx.y of the batch). CudaContract.cpp runs a pass's
// packing kernel energy_contract_SIDE_FAMILY_pack, one thread per 16-byte
// chunk of a problem's copies (kPackThreads to a block), then the pass's
// contraction energy_contract_SIDE_FAMILY_B_B for the smallest bound B on
// the depth and the widths' sum that fits, kThreads to a block, one block
// per the family's outer positions (with the wgmma families' dynamic
// shared memory).
#define ENERGY_TENSOR_CORE_PACKING(FAMILY, PACK, SIDE, COLUMN_SIDE)            \
  extern "C" __global__ void __launch_bounds__(kPackThreads)                   \
      energy_contract_##SIDE##_##FAMILY##_pack(                                \
          energy::cuda::ContractSlots s, int64_t features, int64_t values,     \
          int64_t rows, int64_t) {                                             \
    PACK<COLUMN_SIDE>(s, features, values, rows);                              \
  }
#define ENERGY_TENSOR_CORE_PASSES(FAMILY, PASS, MIN_BLOCKS, B)                 \
  extern "C" __global__ void __launch_bounds__(kThreads, MIN_BLOCKS)           \
      energy_contract_rows_##FAMILY##_##B##_##B(                               \
          energy::cuda::ContractSlots s, int64_t features, int64_t values,     \
          int64_t rows, int64_t) {                                             \
    PASS<B, B, false>(s, features, values, rows);                              \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(kThreads, MIN_BLOCKS)           \
      energy_contract_cols_##FAMILY##_##B##_##B(                               \
          energy::cuda::ContractSlots s, int64_t features, int64_t values,     \
          int64_t rows, int64_t) {                                             \
    PASS<B, B, true>(s, features, values, rows);                               \
  }
#define ENERGY_TENSOR_CORE_ENTRIES(FAMILY, PACK, PASS, MIN_BLOCKS)             \
  ENERGY_TENSOR_CORE_PACKING(FAMILY, PACK, rows, false)                        \
  ENERGY_TENSOR_CORE_PACKING(FAMILY, PACK, cols, true)                         \
  ENERGY_TENSOR_CORE_PASSES(FAMILY, PASS, MIN_BLOCKS, 32)                      \
  ENERGY_TENSOR_CORE_PASSES(FAMILY, PASS, MIN_BLOCKS, 64)                      \
  ENERGY_TENSOR_CORE_PASSES(FAMILY, PASS, MIN_BLOCKS, 128)

#endif // ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTFRAGMENTS_H
