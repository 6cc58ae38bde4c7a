//===- SoftmaxContractWarpgroups.cu - The contraction on sm_90's wgmma ----===//
//
// The two passes of SoftmaxContract.h's f32 contraction with bf16 operands
// on Hopper's warpgroup tensor-core instructions (wgmma.mma_async, fp32
// accumulation; PTX for sm_90a), the way FlashAttention-3 computes
// attention, in the steps SoftmaxContractFragments.h shares with the
// mma.sync kernels. A block is two warpgroups of 64 outer positions each
// (rows on the row side, columns on the column side). Its outer features
// go to shared memory once, as bf16; the inner side comes from packed
// copies that the pass's packing kernel writes once, tile by tile in the
// order wgmma reads shared memory (8 × 8 core matrices, no swizzle), so
// that staging a tile of 64 inner positions is one contiguous copy, which
// cp.async brings into a shared-memory stage while earlier tiles are
// computed. Each tile's scores are one chain of m64n64k16 products of
// shared memory; the weights stay in registers as the a operand of the
// products with the value tables (m64nWk16). Two forms: the plain one
// (two stages, two blocks an SM) waits for each chain in turn; the
// pipelined one (three stages, one block an SM) issues a tile's sums with
// the next tile's scores and computes the next weights while the sums
// run, FlashAttention-3's order inside a warpgroup. The row side runs an
// online softmax (or takes the given normaliser); the column side reads
// each row's normaliser L. Nothing of size rows × cols is stored.
//
//===----------------------------------------------------------------------===//

#include "SoftmaxContractFragments.h"
#include "SoftmaxContractWarpgroupShapes.h"

#include <cuda_bf16.h>
#include <stdint.h>

namespace {
using energy::cuda::ContractSlots;
using energy::cuda::pointer;
using namespace energy::cuda::fragments;
using namespace energy::cuda::warpgroups;

/// bf16 elements of one core matrix (8 rows of 16 bytes) and its bytes.
constexpr int kCore = 64;
constexpr uint32_t kCoreBytes = 128;
/// bf16 elements in one 16-byte copy.
constexpr int kChunk = 8;
/// Threads per block of the packing kernels (CudaLaunch.h's kBlockThreads).
constexpr int kPackThreads = 256;

static_assert(kInner == 64, "a tile's scores are one m64n64 product");

/// The descriptor of a matrix in shared memory at `start` made of core
/// matrices (no swizzle): `leadingBytes` from one to the next along k,
/// `strideBytes` along m or n.
__device__ __forceinline__ uint64_t descriptor(const void *start,
                                               uint32_t leadingBytes,
                                               uint32_t strideBytes) {
  uint32_t address = static_cast<uint32_t>(__cvta_generic_to_shared(start));
  return static_cast<uint64_t>((address & 0x3FFFF) >> 4) |
         static_cast<uint64_t>(leadingBytes >> 4) << 16 |
         static_cast<uint64_t>(strideBytes >> 4) << 32;
}

/// Makes this thread's writes to shared memory (stores, and copies it has
/// waited for) visible to the products, which read through the async proxy.
__device__ __forceinline__ void fenceSharedForProducts() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/// Orders the registers' accesses before the products that follow (every
/// warp of the warpgroup).
__device__ __forceinline__ void beginProducts() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

/// Closes the group of products issued since the last call.
__device__ __forceinline__ void commitProducts() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

/// Waits until at most `Pending` of this warpgroup's closed groups of
/// products are still running.
template <int Pending> __device__ __forceinline__ void waitForProducts() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(Pending) : "memory");
}

/// Closes the products issued since the last call and waits for all of
/// this warpgroup's.
__device__ __forceinline__ void finishProducts() {
  commitProducts();
  waitForProducts<0>();
}

/// Keeps `values` in their registers up to here: the products read and
/// write them asynchronously, so none may be moved or reused before
/// finishProducts.
template <int Chunks>
__device__ __forceinline__ void pin(float (&values)[Chunks][4]) {
#pragma unroll
  for (int j = 0; j < Chunks; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      asm volatile("" : "+f"(values[j][e])::"memory");
}
__device__ __forceinline__ void pin(uint64_t &descriptor) {
  asm volatile("" : "+l"(descriptor)::"memory");
}
template <int Chunks>
__device__ __forceinline__ void pin(uint32_t (&values)[Chunks][4]) {
#pragma unroll
  for (int j = 0; j < Chunks; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      asm volatile("" : "+r"(values[j][e])::"memory");
}

#define ENERGY_ACCUMULATOR_CHUNK(d, j)                                         \
  "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])

/// The products of n = N (accumulators of N / 8 chunks in the layout of
/// mma.sync's c fragments, 16 rows a warp): d = a · b, or d += a · b where
/// `accumulate`; a is 64 × 16 (from registers in a fragments, or for the
/// scores' n = 64 from shared memory), b 16 × N in shared memory, both
/// k-major.
template <int N> struct Product;

/// d (+)= a · b on m64n32k16, a from registers.
template <> struct Product<32> {
  __device__ static void fromRegisters(float (&d)[4][4], const uint32_t (&a)[4],
                                       uint64_t b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, "
        "%15}, "
        "{%16, %17, %18, %19}, %20, p, 1, 1, 0;\n}\n"
        : ENERGY_ACCUMULATOR_CHUNK(d, 0), ENERGY_ACCUMULATOR_CHUNK(d, 1),
          ENERGY_ACCUMULATOR_CHUNK(d, 2), ENERGY_ACCUMULATOR_CHUNK(d, 3)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
  }
};

/// d (+)= a · b on m64n64k16, a from registers.
template <> struct Product<64> {
  __device__ static void fromRegisters(float (&d)[8][4], const uint32_t (&a)[4],
                                       uint64_t b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, "
        "%15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, "
        "%29, %30, %31}, "
        "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
        : ENERGY_ACCUMULATOR_CHUNK(d, 0), ENERGY_ACCUMULATOR_CHUNK(d, 1),
          ENERGY_ACCUMULATOR_CHUNK(d, 2), ENERGY_ACCUMULATOR_CHUNK(d, 3),
          ENERGY_ACCUMULATOR_CHUNK(d, 4), ENERGY_ACCUMULATOR_CHUNK(d, 5),
          ENERGY_ACCUMULATOR_CHUNK(d, 6), ENERGY_ACCUMULATOR_CHUNK(d, 7)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
  }
  __device__ static void fromShared(float (&d)[8][4], uint64_t a, uint64_t b,
                                    int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, "
        "%15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, "
        "%29, %30, %31}, "
        "%32, %33, p, 1, 1, 0, 0;\n}\n"
        : ENERGY_ACCUMULATOR_CHUNK(d, 0), ENERGY_ACCUMULATOR_CHUNK(d, 1),
          ENERGY_ACCUMULATOR_CHUNK(d, 2), ENERGY_ACCUMULATOR_CHUNK(d, 3),
          ENERGY_ACCUMULATOR_CHUNK(d, 4), ENERGY_ACCUMULATOR_CHUNK(d, 5),
          ENERGY_ACCUMULATOR_CHUNK(d, 6), ENERGY_ACCUMULATOR_CHUNK(d, 7)
        : "l"(a), "l"(b), "r"(accumulate));
  }
};

/// d (+)= a · b on m64n128k16, a from registers.
template <> struct Product<128> {
  __device__ static void fromRegisters(float (&d)[16][4],
                                       const uint32_t (&a)[4], uint64_t b,
                                       int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, "
        "%15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, "
        "%29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, "
        "%43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
        "%57, %58, %59, %60, %61, %62, %63}, "
        "{%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
        : ENERGY_ACCUMULATOR_CHUNK(d, 0), ENERGY_ACCUMULATOR_CHUNK(d, 1),
          ENERGY_ACCUMULATOR_CHUNK(d, 2), ENERGY_ACCUMULATOR_CHUNK(d, 3),
          ENERGY_ACCUMULATOR_CHUNK(d, 4), ENERGY_ACCUMULATOR_CHUNK(d, 5),
          ENERGY_ACCUMULATOR_CHUNK(d, 6), ENERGY_ACCUMULATOR_CHUNK(d, 7),
          ENERGY_ACCUMULATOR_CHUNK(d, 8), ENERGY_ACCUMULATOR_CHUNK(d, 9),
          ENERGY_ACCUMULATOR_CHUNK(d, 10), ENERGY_ACCUMULATOR_CHUNK(d, 11),
          ENERGY_ACCUMULATOR_CHUNK(d, 12), ENERGY_ACCUMULATOR_CHUNK(d, 13),
          ENERGY_ACCUMULATOR_CHUNK(d, 14), ENERGY_ACCUMULATOR_CHUNK(d, 15)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
  }
};

#undef ENERGY_ACCUMULATOR_CHUNK

/// Writes one 16-byte chunk per thread of the launch's packed copies (as
/// the kernels take them) of problem blockIdx.y's inner side: `rows`
/// positions (whole tiles, zeros past its end) of features, tile by tile,
/// each tile's core matrices ordered by depth then position; then its value
/// tables transposed, tile by tile, each tile's core matrices ordered by
/// table column then position.
template <bool ColumnSide>
__device__ void packTiles(const ContractSlots &slots, int64_t packedFeatures,
                          int64_t packedValues, int64_t rows) {
  __shared__ ContractSlots s;
  if (threadIdx.x == 0)
    s = energy::cuda::problemSlots<float>(slots, ColumnSide);
  __syncthreads();
  const int depth = static_cast<int>(s.depth);
  const int width = energy::cuda::tableWidth(s);
  const int featureGroups = static_cast<int>(packedDepth(depth)) / kChunk;
  const int valueGroups = static_cast<int>(packedWidth(width)) / kChunk;
  const int64_t featureChunks = rows * featureGroups;
  const int64_t index =
      static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= rows * (featureGroups + valueGroups))
    return;
  const int64_t innerCount = ColumnSide ? s.rows : s.cols;
  const bool isFeature = index < featureChunks;
  // Chunk c is row c % 8 of core matrix c / 8 (8 positions by 8 depths or
  // 8 columns by 8 positions), core matrix (group, block) of its tile.
  const int64_t c = isFeature ? index : index - featureChunks;
  const int row = static_cast<int>(c % 8);
  const int block = static_cast<int>(c / 8 % (kInner / 8));
  const int groups = isFeature ? featureGroups : valueGroups;
  const int group = static_cast<int>(c / kCore % groups);
  const int64_t tile = c / kCore / groups;
  float v[kChunk];
  if (isFeature) {
    int64_t position = tile * kInner + 8 * block + row;
    const float *features =
        pointer<const float>(ColumnSide ? s.rowFeatures : s.colFeatures) +
        position * depth;
#pragma unroll
    for (int e = 0; e < kChunk; ++e) {
      int k = kChunk * group + e;
      v[e] = position < innerCount && k < depth ? features[k] : 0.f;
    }
  } else {
    int w = kChunk * group + row;
#pragma unroll
    for (int e = 0; e < kChunk; ++e) {
      int64_t position = tile * kInner + 8 * block + e;
      v[e] = position < innerCount && w < width
                 ? energy::cuda::tableValue<float>(s, position, w)
                 : 0.f;
    }
  }
  __nv_bfloat16 *target = isFeature
                              ? pointer<__nv_bfloat16>(packedFeatures) +
                                    blockIdx.y * rows * featureGroups * kChunk
                              : pointer<__nv_bfloat16>(packedValues) +
                                    blockIdx.y * rows * valueGroups * kChunk;
  *reinterpret_cast<uint4 *>(target + c * kChunk) = make_uint4(
      pack(v[0], v[1]), pack(v[2], v[3]), pack(v[4], v[5]), pack(v[6], v[7]));
}

/// Starts copying `count` 16-byte chunks from `from` to `to`.
__device__ __forceinline__ void
stageChunks(__nv_bfloat16 *to, const __nv_bfloat16 *from, int count) {
  for (int i = threadIdx.x; i < count; i += kThreads)
    copyAsync<16>(to + kChunk * i, from + kChunk * i);
}

/// One pass, on the launch's `slots` and packed copies (as the kernels
/// take them). MaxD bounds the depth, MaxW the widths' sum (multiples of
/// 16). The row side (ColumnSide false) sums over columns for each row; the
/// column side over rows for each column, with the rows' normalisers.
/// Pipelined, a warpgroup issues a tile's sums with the next tile's scores
/// and computes the next tile's weights while its sums run (three stages,
/// FlashAttention-3's order); otherwise it waits for each chain in turn
/// (two stages).
template <int MaxD, int MaxW, bool ColumnSide, bool Pipelined>
__device__ void contractPass(const ContractSlots &slots, int64_t packedFeatures,
                             int64_t packedValues, int64_t packedRows) {
  constexpr int kStages = Pipelined ? kPipelinedStages : kPlainStages;
  // sharedBytes(MaxD, MaxW, kStages) of it: the block's outer features (core
  // matrices ordered by depth, then position), the stages' inner features
  // (as packTiles writes them) and value tables (the same, MaxW columns:
  // the products read them all), and the stages' inner normalisers.
  extern __shared__ __align__(128) unsigned char dynamicShared[];
  __nv_bfloat16 *outerTile = reinterpret_cast<__nv_bfloat16 *>(dynamicShared);
  __nv_bfloat16 *featureStages = outerTile + MaxD * kOuter;
  __nv_bfloat16 *valueStages = featureStages + kStages * MaxD * kInner;
  float *innerNormalisers =
      reinterpret_cast<float *>(valueStages + kStages * MaxW * kInner);
  __shared__ ContractSlots s;

  if (threadIdx.x == 0)
    s = energy::cuda::problemSlots<float>(slots, ColumnSide);
  // Zeros in the depths and the columns past the inner side's, which the
  // copies leave alone and the products read.
  for (int i = threadIdx.x; i < kStages * (MaxD + MaxW) * kInner / 2;
       i += kThreads)
    reinterpret_cast<uint32_t *>(featureStages)[i] = 0;
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warpgroup = warp / 4;
  const int64_t outerCount = ColumnSide ? s.cols : s.rows;
  const int64_t innerCount = ColumnSide ? s.rows : s.cols;
  const float *outerFeatures =
      pointer<const float>(ColumnSide ? s.colFeatures : s.rowFeatures);
  const int depth = static_cast<int>(s.depth);
  const int width = energy::cuda::tableWidth(s);
  const int featureChunks =
      kInner * static_cast<int>(packedDepth(depth)) / kChunk;
  const int valueChunks =
      kInner * static_cast<int>(packedWidth(width)) / kChunk;
  const __nv_bfloat16 *packedFeatureTiles =
      pointer<const __nv_bfloat16>(packedFeatures) +
      blockIdx.y * packedRows * packedDepth(depth);
  const __nv_bfloat16 *packedValueTiles =
      pointer<const __nv_bfloat16>(packedValues) +
      blockIdx.y * packedRows * packedWidth(width);
  const float *lse = pointer<const float>(s.givenLse ? s.givenLse : s.lse);
  const bool given = !ColumnSide && s.givenLse;
  const int64_t blockOuter = static_cast<int64_t>(blockIdx.x) * kOuter;
  const int64_t lastOuter =
      (blockOuter + kOuter < outerCount ? blockOuter + kOuter : outerCount) - 1;
  const PassThread t = passThread(s, blockOuter + 16 * warp, lane);

  auto nextTile = [&](int64_t base) {
    return nextAdmittedTile<ColumnSide>(s, t.constrained, base, innerCount,
                                        kInner, blockOuter, lastOuter);
  };
  auto stage = [&](int into, int64_t base) {
    stageChunks(featureStages + into * MaxD * kInner,
                packedFeatureTiles + base * packedDepth(depth), featureChunks);
    stageChunks(valueStages + into * MaxW * kInner,
                packedValueTiles + base * packedWidth(width), valueChunks);
    if (ColumnSide && threadIdx.x < kInner) {
      int64_t inner = base + threadIdx.x;
      bool inside = inner < innerCount;
      copyAsync<4>(&innerNormalisers[into * kInner + threadIdx.x],
                   inside ? lse + inner : lse, inside ? 4 : 0);
    }
  };

  int64_t base = nextTile(0);
  if (base < innerCount)
    stage(0, base);
  commitCopies();
  // Pipelined: the tile after it, in the second stage.
  int64_t next = innerCount;
  if (Pipelined && base < innerCount) {
    next = nextTile(base + kInner);
    if (next < innerCount)
      stage(1, next);
  }
  if (Pipelined)
    commitCopies();

  // The block's outer features, a chunk of 8 depths of one position a
  // thread at a time. (Scaling the products rather than the features keeps
  // both passes' scores the same numbers.)
  for (int i = threadIdx.x; i < kOuter * MaxD / kChunk; i += kThreads) {
    int m = i % kOuter, group = i / kOuter;
    int64_t position = blockOuter + m;
    const float *row = outerFeatures + position * depth;
    float v[kChunk];
#pragma unroll
    for (int e = 0; e < kChunk; ++e) {
      int k = kChunk * group + e;
      v[e] = position < outerCount && k < depth ? row[k] : 0.f;
    }
    *reinterpret_cast<uint4 *>(
        outerTile + (group * (kOuter / 8) + m / 8) * kCore + (m % 8) * kChunk) =
        make_uint4(pack(v[0], v[1]), pack(v[2], v[3]), pack(v[4], v[5]),
                   pack(v[6], v[7]));
  }
  fenceSharedForProducts();

  // This warpgroup's 64 outer positions as the a operand of the scores.
  const uint64_t outerDescriptor = descriptor(
      outerTile + warpgroup * 8 * kCore, kOuter / 8 * kCoreBytes, kCoreBytes);
  // Steps (in descriptor units of 16 bytes) from one k16 block to the next.
  constexpr uint64_t kOuterStep = 2 * (kOuter / 8) * kCoreBytes / 16;
  constexpr uint64_t kFeatureStep = 2 * (kInner / 8) * kCoreBytes / 16;
  constexpr uint64_t kValueStep = 2 * kCoreBytes / 16;

  float accumulator[MaxW / 8][4] = {};
  // Row side: the running max (log2 units) and this thread's share of
  // Σ 2^(score − max), per fragment row; or the given normaliser.
  float runningMax[2] = {-INFINITY, -INFINITY}, sum[2] = {0.f, 0.f};
  float givenLog2[2];
  givenNormalisers(givenLog2, t, given ? lse : nullptr, outerCount);

  // The descriptors of the inner features and value tables of stage `into`.
  auto featureDescriptor = [&](int into) {
    return descriptor(featureStages + into * MaxD * kInner,
                      kInner / 8 * kCoreBytes, kCoreBytes);
  };
  auto valueDescriptor = [&](int into) {
    return descriptor(valueStages + into * MaxW * kInner, kCoreBytes,
                      kInner / 8 * kCoreBytes);
  };
  // Scores of a tile (its features at `features`): 64 outer by 64 inner
  // positions, a k16 block of depth at a time (zeros past the depth).
  auto issueScores = [&](float(&scores)[kInner / 8][4], uint64_t features) {
#pragma unroll
    for (int kk = 0; kk < MaxD / 16; ++kk)
      Product<kInner>::fromShared(scores, outerDescriptor + kk * kOuterStep,
                                  features + kk * kFeatureStep, kk > 0);
  };
  // accumulator += weights · values of a tile (at `values`), the weights'
  // accumulator fragments reused as a fragments, a k16 block of inner
  // positions at a time.
  auto issueSums = [&](const uint32_t(&weights)[kInner / 16][4],
                       uint64_t values) {
#pragma unroll
    for (int kk = 0; kk < kInner / 16; ++kk)
      Product<MaxW>::fromRegisters(accumulator, weights[kk],
                                   values + kk * kValueStep, 1);
  };
  // The weights of the tile at `base` in stage `into`, in place of its
  // scores; `rescale` the factors of the sums so far (softmaxStep's; 1
  // where the normalisers are known).
  auto weigh = [&](float(&scores)[kInner / 8][4], int into, int64_t base,
                   float(&rescale)[2]) {
    scaleAndMask<ColumnSide>(scores, s, t, base, innerCount);
    rescale[0] = rescale[1] = 1.f;
    if (ColumnSide || given)
      weightsWithNormalisers(
          scores, t, ColumnSide ? innerNormalisers + into * kInner : nullptr,
          givenLog2);
    else
      softmaxStep(scores, runningMax, sum, rescale);
  };
  // The weights as the a fragments of the sums.
  auto fragments = [&](const float(&scores)[kInner / 8][4],
                       uint32_t(&weights)[kInner / 16][4]) {
#pragma unroll
    for (int kk = 0; kk < kInner / 16; ++kk)
      weightFragment(weights[kk], scores, kk);
  };

  float scores[kInner / 8][4];
  uint32_t weights[kInner / 16][4];
  float rescale[2];
  if constexpr (!Pipelined) {
    for (int current = 0; base < innerCount; current ^= 1) {
      // This tile's copies have landed and are visible to the products,
      // and every warpgroup is done with the other stage, which the next
      // tile's copies may now overwrite.
      waitForCopies();
      fenceSharedForProducts();
      __syncthreads();
      const int64_t next = nextTile(base + kInner);
      if (next < innerCount)
        stage(current ^ 1, next);
      commitCopies();

      const uint64_t features = featureDescriptor(current);
      beginProducts();
      issueScores(scores, features);
      finishProducts();
      pin(scores);
      weigh(scores, current, base, rescale);
      fragments(scores, weights);
      if (!ColumnSide && !given)
        rescaleAccumulator(accumulator, rescale);

      const uint64_t values = valueDescriptor(current);
      pin(accumulator);
      beginProducts();
      issueSums(weights, values);
      finishProducts();
      pin(accumulator);
      pin(weights);
      base = next;
    }
  } else if (base < innerCount) {
    // Tile k is in stage k % 3; `next` (the tile after `base`) was staged
    // with it. The first tile's scores and weights on their own.
    waitForCopies<1>();
    fenceSharedForProducts();
    __syncthreads();
    const uint64_t firstFeatures = featureDescriptor(0);
    beginProducts();
    issueScores(scores, firstFeatures);
    finishProducts();
    pin(scores);
    weigh(scores, 0, base, rescale);
    fragments(scores, weights);
    for (int current = 0;; current = (current + 1) % kStages) {
      // The next tile's copies have landed and are visible to the
      // products, and every warpgroup is done with the stage of the tile
      // before this one, which the tile after the next may now overwrite.
      waitForCopies();
      fenceSharedForProducts();
      __syncthreads();
      const int nextStage = (current + 1) % kStages;
      const int64_t afterNext =
          next < innerCount ? nextTile(next + kInner) : innerCount;
      if (afterNext < innerCount)
        stage((current + 2) % kStages, afterNext);
      commitCopies();
      uint64_t values = valueDescriptor(current);
      uint64_t nextFeatures = featureDescriptor(nextStage);
      pin(accumulator);
      if (next >= innerCount) {
        beginProducts();
        issueSums(weights, values);
        finishProducts();
        pin(accumulator);
        pin(weights);
        break;
      }
      // The next tile's scores, then this tile's sums; the next tile's
      // weights while the sums run (which own the accumulator and this
      // tile's weights until they are done).
      beginProducts();
      issueScores(scores, nextFeatures);
      commitProducts();
      issueSums(weights, values);
      commitProducts();
      waitForProducts<1>();
      pin(scores);
      pin(nextFeatures);
      weigh(scores, nextStage, next, rescale);
      waitForProducts<0>();
      pin(accumulator);
      pin(weights);
      pin(values);
      if (!ColumnSide && !given)
        rescaleAccumulator(accumulator, rescale);
      fragments(scores, weights);
      next = afterNext;
    }
  }

  finishPass<ColumnSide>(s, t, accumulator, sum, runningMax, outerCount, lse,
                         given, width);
}

} // namespace

template <int MaxD, int MaxW, bool ColumnSide>
__device__ void plainPass(const ContractSlots &slots, int64_t packedFeatures,
                          int64_t packedValues, int64_t packedRows) {
  contractPass<MaxD, MaxW, ColumnSide, false>(slots, packedFeatures,
                                              packedValues, packedRows);
}
template <int MaxD, int MaxW, bool ColumnSide>
__device__ void pipelinedPass(const ContractSlots &slots,
                              int64_t packedFeatures, int64_t packedValues,
                              int64_t packedRows) {
  contractPass<MaxD, MaxW, ColumnSide, true>(slots, packedFeatures,
                                             packedValues, packedRows);
}

ENERGY_TENSOR_CORE_ENTRIES(wgmma, packTiles, plainPass, 2)
ENERGY_TENSOR_CORE_ENTRIES(wgmmap, packTiles, pipelinedPass, 1)
