//===- SoftmaxContractTensorCores.cu - The contraction on tensor cores ----===//
//
// The two passes of SoftmaxContract.h's f32 contraction with bf16 operands
// on tensor cores (mma.sync m16n8k16, fp32 accumulation), the way
// FlashAttention computes attention. Before a pass, its packing kernel
// writes the pass's inner side (features and value tables) once as bf16
// copies made of 16-byte chunks. The pass then gives a warp 16
// positions of the outer side (rows on the row side, columns on the column
// side; their features stay in registers), a block 64, and streams tiles of
// 32 inner positions of the copies through two shared-memory stages with
// cp.async, copying the next tile while it computes the current one. Scores,
// weights, sums and accumulators stay in registers. The row side runs an
// online softmax (or takes the given normaliser); the column side reads
// each row's normaliser L. Nothing of size rows × cols is stored.
//
//===----------------------------------------------------------------------===//

#include "SoftmaxContractFragments.h"

#include <cuda_bf16.h>
#include <stdint.h>

namespace {
using energy::cuda::ContractSlots;
using energy::cuda::pointer;
using namespace energy::cuda::fragments;

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
/// Blocks a pass keeps on one SM: three caps a thread at 168 registers
/// (no spills for the row pass; 24 bytes for the column pass) where it
/// took 210 and two blocks, too few warps to hide the latency of the
/// dependency chains.
constexpr int kMinBlocksPerSM = 3;
/// Outer positions per block (16 a warp) and inner positions per tile
/// (CudaContract.cpp pads the packed copies to a multiple of it).
constexpr int kOuter = 16 * kWarps;
constexpr int kInner = 32;
/// Tiles in shared memory at a time: the one computed, the one arriving.
constexpr int kStages = 2;
/// bf16 elements in one 16-byte copy.
constexpr int kChunk = 8;
/// bf16 elements after each staged row, so that the eight rows one
/// ldmatrix reads fall in distinct banks.
constexpr int kPad = 8;
/// Threads per block of the packing kernels (CudaLaunch.h's kBlockThreads).
constexpr int kPackThreads = 256;

static_assert(kInner % 16 == 0, "a tile is whole k blocks of the weights");

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

/// Four 8 × 8 bf16 matrices from shared memory: lanes 8i to 8i + 7 give the
/// addresses of matrix i's rows (16 bytes each), and each lane receives in
/// m[i] the pair at (lane / 4, 2 · (lane % 4)) of matrix i, or of its
/// transpose.
template <bool Transposed>
__device__ void loadMatrices(uint32_t (&m)[4], const __nv_bfloat16 *row) {
  uint32_t address = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  if (Transposed)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];\n"
                 : "=r"(m[0]), "=r"(m[1]), "=r"(m[2]), "=r"(m[3])
                 : "r"(address));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];\n"
                 : "=r"(m[0]), "=r"(m[1]), "=r"(m[2]), "=r"(m[3])
                 : "r"(address));
}

/// Elements in one packed row of `size` values: whole 16-byte chunks
/// (CudaContract.cpp computes the same).
__device__ int packedStride(int size) {
  return (size + kChunk - 1) / kChunk * kChunk;
}

/// One problem's bf16 copies of a pass's inner side, in two arrays: its
/// features, and its value tables side by side (as tableValue reads them).
/// Each has the inner positions padded with zero rows to a multiple of
/// kInner, and each row padded with zeros to its stride.
struct PackedInner {
  __nv_bfloat16 *features, *values;
  int featureStride, valueStride;
};

/// The copies of problem blockIdx.y of the launch in the arrays at
/// `features` and `values` (the launch's problems back to back, `rows` each).
__device__ PackedInner packedInner(const ContractSlots &s, int64_t features,
                                   int64_t values, int64_t rows) {
  PackedInner p;
  p.featureStride = packedStride(static_cast<int>(s.depth));
  p.valueStride = packedStride(energy::cuda::tableWidth(s));
  p.features =
      pointer<__nv_bfloat16>(features) + blockIdx.y * rows * p.featureStride;
  p.values = pointer<__nv_bfloat16>(values) + blockIdx.y * rows * p.valueStride;
  return p;
}

/// Writes one 16-byte chunk per thread of the launch's packed copies
/// (as the kernels take them): rows [0, packedRows) of the inner side of
/// problem blockIdx.y, zeros past its ends.
template <bool ColumnSide>
__device__ void packInner(const ContractSlots &slots, int64_t packedFeatures,
                          int64_t packedValues, int64_t packedRows) {
  // This problem's slots, in shared memory as contractPass keeps them.
  __shared__ ContractSlots s;
  if (threadIdx.x == 0)
    s = energy::cuda::problemSlots<float>(slots, ColumnSide);
  __syncthreads();
  const PackedInner packed =
      packedInner(s, packedFeatures, packedValues, packedRows);
  const int featureChunks = packed.featureStride / kChunk;
  const int chunks = featureChunks + packed.valueStride / kChunk;
  const int64_t index =
      static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= packedRows * chunks)
    return;
  const int64_t position = index / chunks;
  const int chunk = static_cast<int>(index % chunks);
  const bool isFeature = chunk < featureChunks;
  const int first = kChunk * (isFeature ? chunk : chunk - featureChunks);
  const int depth = static_cast<int>(s.depth);
  const int size = isFeature ? depth : energy::cuda::tableWidth(s);
  const bool inside = position < (ColumnSide ? s.rows : s.cols);
  const float *features =
      pointer<const float>(ColumnSide ? s.rowFeatures : s.colFeatures) +
      position * depth;
  float v[kChunk];
#pragma unroll
  for (int e = 0; e < kChunk; ++e) {
    int k = first + e;
    v[e] = !inside || k >= size ? 0.f
           : isFeature          ? features[k]
                       : energy::cuda::tableValue<float>(s, position, k);
  }
  __nv_bfloat16 *target =
      isFeature ? packed.features + position * packed.featureStride + first
                : packed.values + position * packed.valueStride + first;
  *reinterpret_cast<uint4 *>(target) = make_uint4(
      pack(v[0], v[1]), pack(v[2], v[3]), pack(v[4], v[5]), pack(v[6], v[7]));
}

/// Starts copying packed rows [base, base + kInner) (`stride` elements
/// each) into `tile`; the columns past `stride` keep what they hold.
template <int MaxSize>
__device__ void stageTile(__nv_bfloat16 (&tile)[kInner][MaxSize + kPad],
                          const __nv_bfloat16 *packed, int stride,
                          int64_t base) {
  constexpr int kRowChunks = MaxSize / kChunk;
  static_assert(kInner * kRowChunks % kThreads == 0, "whole rounds of copies");
#pragma unroll
  for (int round = 0; round < kInner * kRowChunks / kThreads; ++round) {
    int i = round * kThreads + threadIdx.x;
    int p = i / kRowChunks, column = kChunk * (i % kRowChunks);
    if (column < stride)
      copyAsync<16>(&tile[p][column], packed + (base + p) * stride + column);
  }
}

/// One pass, on the launch's `slots` and packed copies (as the kernels
/// take them). MaxD bounds the depth, MaxW the widths' sum (multiples of
/// 16). The row side (ColumnSide false) sums over columns for each row; the
/// column side over rows for each column, with the rows' normalisers.
template <int MaxD, int MaxW, bool ColumnSide>
__device__ void contractPass(const ContractSlots &slots, int64_t packedFeatures,
                             int64_t packedValues, int64_t packedRows) {
  __shared__ __align__(16) __nv_bfloat16 features[kStages][kInner][MaxD + kPad];
  __shared__ __align__(16) __nv_bfloat16 values[kStages][kInner][MaxW + kPad];
  __shared__ float innerNormalisers[kStages][kInner];
  // This problem's slots, read from shared memory where needed: held in
  // registers, the constraints alone would take 32 of them.
  __shared__ ContractSlots s;

  if (threadIdx.x == 0)
    s = energy::cuda::problemSlots<float>(slots, ColumnSide);
  // Zeros in every column the copies leave alone (past a row's stride),
  // which the products read when the depth is not a multiple of 16.
  for (int i = threadIdx.x; i < kStages * kInner * (MaxD + kPad) / 2;
       i += kThreads)
    reinterpret_cast<uint32_t *>(features)[i] = 0;
  for (int i = threadIdx.x; i < kStages * kInner * (MaxW + kPad) / 2;
       i += kThreads)
    reinterpret_cast<uint32_t *>(values)[i] = 0;
  __syncthreads();

  const PackedInner packed =
      packedInner(s, packedFeatures, packedValues, packedRows);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t outerCount = ColumnSide ? s.cols : s.rows;
  const int64_t innerCount = ColumnSide ? s.rows : s.cols;
  const float *outerFeatures =
      pointer<const float>(ColumnSide ? s.colFeatures : s.rowFeatures);
  const int depth = static_cast<int>(s.depth);
  const int width = energy::cuda::tableWidth(s);
  const float *lse = pointer<const float>(s.givenLse ? s.givenLse : s.lse);
  const bool given = !ColumnSide && s.givenLse;
  const int64_t blockOuter = static_cast<int64_t>(blockIdx.x) * kOuter;
  const int64_t lastOuter =
      (blockOuter + kOuter < outerCount ? blockOuter + kOuter : outerCount) - 1;
  const PassThread t = passThread(s, blockOuter + 16 * warp, lane);
  const int member = t.member;

  auto nextTile = [&](int64_t base) {
    return nextAdmittedTile<ColumnSide>(s, t.constrained, base, innerCount,
                                        kInner, blockOuter, lastOuter);
  };
  auto stage = [&](int into, int64_t base) {
    stageTile<MaxD>(features[into], packed.features, packed.featureStride,
                    base);
    stageTile<MaxW>(values[into], packed.values, packed.valueStride, base);
    if (ColumnSide && threadIdx.x < kInner) {
      int64_t inner = base + threadIdx.x;
      bool inside = inner < innerCount;
      copyAsync<4>(&innerNormalisers[into][threadIdx.x],
                   inside ? lse + inner : lse, inside ? 4 : 0);
    }
  };

  int64_t base = nextTile(0);
  if (base < innerCount)
    stage(0, base);
  commitCopies();

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
        bool inside = t.outer[r] < outerCount;
        const float *row = outerFeatures + t.outer[r] * depth;
        float low = inside && d < depth ? row[d] : 0.f;
        float high = inside && d + 1 < depth ? row[d + 1] : 0.f;
        a[kk][2 * half + r] = pack(low, high);
      }

  float accumulator[MaxW / 8][4] = {};
  // Row side: the running max (log2 units) and this thread's share of
  // Σ 2^(score − max), per fragment row; or the given normaliser.
  float runningMax[2] = {-INFINITY, -INFINITY}, sum[2] = {0.f, 0.f};
  float givenLog2[2];
  givenNormalisers(givenLog2, t, given ? lse : nullptr, outerCount);

  for (int current = 0; base < innerCount; current ^= 1) {
    // This tile's copies have landed, and every warp is done with the
    // other stage, which the next tile's copies may now overwrite.
    waitForCopies();
    __syncthreads();
    const int64_t next = nextTile(base + kInner);
    if (next < innerCount)
      stage(current ^ 1, next);
    commitCopies();

    // Scores: b fragments of inner positions 8nt to 8nt + 15 at once.
    float scores[kInner / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < MaxD / 16; ++kk) {
      if (16 * kk >= depth)
        break;
#pragma unroll
      for (int nt = 0; nt < kInner / 8; nt += 2) {
        uint32_t b[4];
        loadMatrices<false>(
            b, &features[current][8 * nt + 8 * (lane / 16) + lane % 8]
                        [16 * kk + 8 * (lane / 8 % 2)]);
        mma(scores[nt], a[kk], b[0], b[1]);
        mma(scores[nt + 1], a[kk], b[2], b[3]);
      }
    }

    scaleAndMask<ColumnSide>(scores, s, t, base, innerCount);
    if (ColumnSide || given)
      weightsWithNormalisers(scores, t,
                             ColumnSide ? innerNormalisers[current] : nullptr,
                             givenLog2);
    else
      onlineWeights(scores, runningMax, sum, accumulator);

      // accumulator += weights · values, the weights' c fragments reused as
      // a fragments; b fragments of value columns 8nw to 8nw + 15 at once.
#pragma unroll
    for (int kk = 0; kk < kInner / 16; ++kk) {
      uint32_t weights[4];
      weightFragment(weights, scores, kk);
#pragma unroll
      for (int nw = 0; nw < MaxW / 8; nw += 2) {
        if (8 * nw >= width)
          break;
        uint32_t b[4];
        loadMatrices<true>(
            b, &values[current][16 * kk + lane % 16][8 * nw + 8 * (lane / 16)]);
        mma(accumulator[nw], weights, b[0], b[1]);
        if (8 * nw + 8 < width)
          mma(accumulator[nw + 1], weights, b[2], b[3]);
      }
    }
    base = next;
  }

  finishPass<ColumnSide>(s, t, accumulator, sum, runningMax, outerCount, lse,
                         given, width);
}

} // namespace

ENERGY_TENSOR_CORE_ENTRIES(bf16, packInner, contractPass, kMinBlocksPerSM)
