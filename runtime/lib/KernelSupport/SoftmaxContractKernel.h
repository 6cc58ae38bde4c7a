//===- SoftmaxContractKernel.h - The softmax contraction --------*- C++ -*-===//
//
// The body of energy_support_softmax_contract_f32/f64 (SoftmaxContract.h),
// a template over the vector interface of SimdScalar.h, instantiated once per
// instruction set (IsaKernels.h). The arguments arrive validated.
//
// Both sides are one kind of pass, over "outer" indices (the rows of the
// outputs it writes) and "inner" ones (what it sums over):
//
//   child side:  outer = rows, inner = cols, values = col_values; the
//                normaliser is computed on the fly (online softmax), or given
//   parent side: outer = cols, inner = rows, values = row_values; the
//                normaliser of each inner row is the final L (given, or from
//                the child side), so there is no running maximum
//
// A pass runs over blocks of outer indices, in parallel on the kernel thread
// pool: a block writes only its own output rows, so results do not depend on
// the thread count. A batch of problems is one pass a side: one parallel
// loop packs the inner features of every problem, one runs the (problem,
// block) tasks, so that a batch of small problems costs two fork/joins a
// pass rather than two per problem. Blocks are at most kBlockRows high;
// fewer outer indices are split into blocks of nearly equal heights that are
// multiples of the micro-tiles' (blockHeight), and a block computes only the
// tiles its rows reach. The blocks depend only on one problem's sizes, so a
// batch gives the bits of its problems run one at a time (and, for finite
// inputs, a row's results do not depend on the other rows of its block).
// For each panel of kPanel inner indices:
//
//   S = (scale/T) · A_blk · B_panelᵀ       score micro-kernel, a register
//                                          tile of kScoreRows × kScoreVectors
//   mask S to -inf where a constraint fails (partial panels only)
//   online:  m' = max(m, rowmax S); rescale l and acc by exp(m - m') only
//            when the maximum grows; W = exp(S - m'); l += rowsum W
//   given:   W = exp(S - L/T)              (L per outer or per inner index)
//   acc += W · V_panel                     weighted-sum micro-kernel, a tile
//                                          of kSumRows × kSumVectors
//
// and at the end of the block, online: out = acc / l, L = T·(m + log l).
// The inner features are packed once per pass, transposed into strips of
// kStrip columns (O(B·N·D) memory for B problems); a block's outer features
// are read in place (the score micro-kernel broadcasts one element of each
// of its rows at a time); S (block height × kPanel) and
// the accumulators (block height × each output's width) are scratch per
// task, allocated once per task of the thread pool.
//
// Kept tiles: S and the pair terms' tiles are the same products on both
// sides, transposed (the same fma in the same order of d, so the same
// bits). When they are few (at most ENERGY_CONTRACT_MAX_TILE_BYTES) and
// reading them back costs less than computing them (they stay in a core's
// cache, or their products are deep: tilesWorthKeeping), the
// row side of a call with both sides copies each of its tiles, before any
// mask, into a batch × (1 + m) × rows × cols array, and the column side
// reads them transposed instead of computing them (nor packing its inner
// features); two calls can share the array the same way (kept_tiles). Only
// the column side's pairs that the row side admitted are ever read
// unmasked; with constraints the array starts as zeros, so that the others
// are finite. Nothing else of size rows × cols is stored.
//
// Pair terms: an output with coefficients other than κ = 1, α = 0 sums
// W_k = W ∘ (κ + Σ_i α_i T_i) instead of W, with T_i = A_i B_iᵀ the tile of
// pair term i over the same strips, by the same score micro-kernel (factor
// 1); W_k is formed in scratch per output, just before its weighted sum.
// Only the terms that some output of the pass weights are packed (inner
// features in strips once per pass) and multiplied. The rescaling of the
// online normaliser applies to W_k as to W.
//
// Constraints: for each outer index, the GE constraints leave an interval of
// inner indices and each NE constraint removes at most one index (exact
// integer arithmetic, so this is the corner test of the linear forms made
// exact for every row). A panel where every row of the block admits every
// column is computed unmasked; one where no row admits any column is
// skipped; others are computed only over the strips that some row admits,
// then masked. Panels outside the union of the block's intervals are never
// visited, so a causal pass does about half the work.
//
// Code compiled here must not use C++ standard library templates or inline
// functions: their out-of-line copies could be compiled for this instruction
// set and linked into code that runs on any CPU.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTKERNEL_H
#define ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTKERNEL_H

#include "VectorExp.h"

#include "energy/KernelSupport/KernelSupport.h"
#include "energy/KernelSupport/SoftmaxContract.h"
#include "energy/Runtime/IndexArithmetic.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>

namespace energy::kernels::ENERGY_KERNEL_ISA {
namespace contract {

/// The vector type V with score strips of one vector: the kernel for passes
/// over so few inner indices that V's strips would be mostly padding.
template <class V> struct ShortStrips : V {};
template <class V> struct IsShortStrips : std::false_type {};
template <class V> struct IsShortStrips<ShortStrips<V>> : std::true_type {};

/// Tile and block shapes for one vector type. The micro-tiles fill the
/// register file (AVX-512: 6 × 4 zmm accumulators and 4 operands of 32; AVX2:
/// 6 × 2 of 16 ymm); a block of 48 rows with a panel of 4 strips keeps the
/// block's rows, a strip of packed columns and the score tile within L1/L2
/// (at D = 64, f32: 12 KiB, 16 KiB, 48 KiB); the other shapes tried were
/// no faster (docs/benchmarks.md, "Figures behind the code").
template <class V> struct Tiling {
  static constexpr int kLanes = V::kLanes;
  static constexpr bool kScalar = kLanes == 1;
  static constexpr bool kWide = V::kRegisters >= 32;
  /// Score micro-tile: rows × vectors of columns, accumulated in registers.
  static constexpr int kScoreRows = kScalar ? 4 : 6;
  static constexpr int kScoreVectors = IsShortStrips<V>::value ? 1
                                       : kScalar               ? 4
                                       : kWide                 ? 4
                                                               : 2;
  /// Weighted-sum micro-tile: rows × vectors of the value width.
  static constexpr int kSumRows = kScalar ? 4 : 6;
  static constexpr int kSumVectors = kScalar ? 4 : (kWide ? 4 : 2);
  /// Columns of a strip of packed inner features.
  static constexpr int kStrip = kScoreVectors * kLanes;
  /// The most outer indices of a block, a multiple of both tile heights.
  static constexpr int kBlockRows = kScalar ? 32 : 48;
  /// What block heights are a multiple of: both tile heights.
  static constexpr int kBlockStep = kScoreRows;
  /// Inner indices of a panel, a multiple of kStrip.
  static constexpr int kPanel = kScalar ? 64 : 4 * kStrip;

  static_assert(kBlockStep % kSumRows == 0 && kBlockRows % kBlockStep == 0);
  static_assert(kPanel % kStrip == 0);
};

inline int64_t minOf(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t maxOf(int64_t a, int64_t b) { return a < b ? b : a; }
inline int64_t roundUp(int64_t n, int64_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

inline float logOf(float x) { return __builtin_logf(x); }
inline double logOf(double x) { return __builtin_log(x); }

/// A constraint in the orientation of a pass: outer·i + inner·j + offset
/// >= 0 (or != 0).
struct PassConstraint {
  int64_t outer, inner, offset;
  bool notEqual;
};

/// How a pass normalises its weights.
enum class Normaliser {
  Online,   ///< computed with a running maximum (child side)
  PerOuter, ///< L/T given per outer index
  PerInner, ///< L/T given per inner index (parent side)
};

/// How the outputs of a pass weight their sums: output k sums
/// W ∘ (kappa[k] + Σ_a alphas[k, a] · T_{alphaTerms[k, a]}) over
/// a < numAlphas[k], or W itself when plain[k] (or when plain is null). The
/// terms are those that some output of the pass weights, renumbered.
template <class T> struct PairWeights {
  int64_t numTerms = 0;
  const int64_t *depths = nullptr; ///< per term
  /// Per term: the problems' outerCount × depth, back to back.
  const T *const *outer = nullptr;
  /// Per term: the problems' strips, as Pass::packedInner.
  T *const *packedInner = nullptr;
  /// Per term: its inner features (innerCount × depth per problem), read
  /// only to pack them.
  const T *const *inner = nullptr;
  const bool *plain = nullptr;         ///< per output
  const T *kappa = nullptr;            ///< per output
  const int64_t *numAlphas = nullptr;  ///< per output
  const T *alphas = nullptr;           ///< per output, numTerms slots
  const int64_t *alphaTerms = nullptr; ///< per output, numTerms slots
  /// Per term: its index among the arguments' pair terms.
  const int64_t *sourceTerms = nullptr;
};

/// Tiles kept by one pass for a later pass over the same pairs (kept_tiles
/// in SoftmaxContract.h): per problem, plane 0 the scores times the factor,
/// plane 1 + i pair term i, each rows × cols in the row side's orientation.
template <class T> struct KeptTiles {
  T *tiles = nullptr;   ///< problems × planes × rows × cols, or null
  int64_t planes = 0;   ///< 1 + the arguments' pair terms
  bool writing = false; ///< the row side writes them, the column side reads
};

/// One pass: everything a block needs, shared by the tasks. Every array
/// holds `problems` problems of the sizes below back to back: problem b's
/// part of an array of outerCount rows of w elements starts b · outerCount ·
/// w elements in; packed inner features and per-inner normalisers are padded
/// per problem to whole strips (problem b's starts at inner index
/// b · roundUp(innerCount, kStrip)).
template <class T> struct Pass {
  int64_t outerCount, innerCount, depth; ///< of each problem
  const T *outerFeatures;                ///< outerCount × depth
  const T *packedInner; ///< strips of kStrip inner indices × depth
  T factor;             ///< scale / temperature
  T temperature;
  const PassConstraint *constraints;
  int64_t numConstraints, numNotEqual;
  Normaliser normaliser;
  /// PerOuter: L/T per outer index; PerInner: L/T per inner index, padded
  /// with zeros to whole strips.
  const T *normalisers;
  T *lse; ///< Online: L per outer index, or null
  int64_t numOutputs;
  const T *const *values; ///< table k: innerCount × widths[k]
  const int64_t *widths;
  T *const *outputs; ///< output k: outerCount × widths[k]
  int failed;        ///< set (atomically) when a task cannot allocate
  PairWeights<T> pairs = {};
  KeptTiles<T> kept = {};
  int64_t problems = 1;  ///< B >= 1
  int64_t blockRows = 0; ///< the height of a block (blockHeight)
  int64_t blocks = 0;    ///< blocks per problem
};

/// The height of the blocks over `count` outer indices: the fewest blocks
/// of at most kBlockRows, of nearly equal heights that are multiples of
/// kBlockStep (64 rows: 36 and 28 rather than 48 and 16), so that the tasks
/// of small problems are even.
template <class V> int64_t blockHeight(int64_t count) {
  using Shape = Tiling<V>;
  const int64_t blocks =
      maxOf(1, (count + Shape::kBlockRows - 1) / Shape::kBlockRows);
  return maxOf(Shape::kBlockStep,
               roundUp((count + blocks - 1) / blocks, Shape::kBlockStep));
}

/// Memory aligned for any vector (kernels' scratch, reused between calls),
/// or null; freed with energy_support_scratch_free.
inline void *allocateAligned(size_t bytes) {
  return energy_support_scratch_alloc(static_cast<int64_t>(bytes));
}

/// Offsets of arrays carved from one allocation, each at a multiple of 64
/// bytes; `bytes` is the allocation's size.
struct Carving {
  size_t bytes = 0;
  size_t reserve(size_t size) {
    size_t at = bytes;
    bytes += (size + 63) / 64 * 64;
    return at;
  }
};

/// The scratch memory of one task, carved from one allocation.
template <class V> struct Workspace {
  using T = typename V::Scalar;
  using Shape = Tiling<V>;
  // `rows` is the pass's block height.
  T *zeroRow; ///< zeros, as many as the deepest features: rows past the end
  T *scores;  ///< rows × kPanel
  T *rowMax, *rowSum;
  T **accumulators; ///< per output: rows × accumulatorStride[k]
  int64_t *accumulatorStride;
  int64_t *begin, *end; ///< admitted inner interval per outer index
  int64_t *holes;       ///< per outer index, numNotEqual excluded indices
  int64_t *holeCount;
  T **pairTiles;  ///< per pair term: rows × kPanel
  T *pairWeights; ///< rows × kPanel: one output's W_k
  void *memory = nullptr;

  bool allocate(const Pass<T> &pass) {
    const int64_t rows = pass.blockRows;
    // Sizes that no memory could hold would overflow the byte counts below.
    const int64_t limit = int64_t(1) << 40;
    if (pass.depth > limit || pass.numNotEqual > limit ||
        pass.numOutputs > limit)
      return false;
    for (int64_t k = 0; k < pass.numOutputs; ++k)
      if (pass.widths[k] > limit)
        return false;
    const PairWeights<T> &pairs = pass.pairs;
    if (pairs.numTerms > limit)
      return false;
    for (int64_t i = 0; i < pairs.numTerms; ++i)
      if (pairs.depths[i] > limit)
        return false;
    Carving carving;
    auto reserve = [&](size_t size) { return carving.reserve(size); };
    int64_t deepest = pass.depth;
    for (int64_t i = 0; i < pairs.numTerms; ++i)
      deepest = maxOf(deepest, pairs.depths[i]);
    size_t zeroRowAt = reserve(sizeof(T) * deepest);
    size_t scoresAt = reserve(sizeof(T) * rows * Shape::kPanel);
    size_t maxAt = reserve(sizeof(T) * rows);
    size_t sumAt = reserve(sizeof(T) * rows);
    size_t pointersAt = reserve(sizeof(T *) * pass.numOutputs);
    size_t strideAt = reserve(sizeof(int64_t) * pass.numOutputs);
    size_t beginAt = reserve(sizeof(int64_t) * rows);
    size_t endAt = reserve(sizeof(int64_t) * rows);
    size_t holesAt = reserve(sizeof(int64_t) * rows * pass.numNotEqual);
    size_t holeCountAt = reserve(sizeof(int64_t) * rows);
    size_t pairTilesAt = reserve(sizeof(T *) * pairs.numTerms);
    size_t pairWeightsAt =
        reserve(pairs.plain ? sizeof(T) * rows * Shape::kPanel : 0);
    size_t accumulatorAt = carving.bytes;
    for (int64_t k = 0; k < pass.numOutputs; ++k)
      reserve(sizeof(T) * rows * roundUp(pass.widths[k], V::kLanes));
    size_t pairAt = carving.bytes;
    for (int64_t i = 0; i < pairs.numTerms; ++i)
      reserve(sizeof(T) * rows * Shape::kPanel);
    memory = allocateAligned(carving.bytes);
    if (!memory)
      return false;
    char *base = static_cast<char *>(memory);
    zeroRow = reinterpret_cast<T *>(base + zeroRowAt);
    for (int64_t d = 0; d < deepest; ++d)
      zeroRow[d] = 0;
    scores = reinterpret_cast<T *>(base + scoresAt);
    rowMax = reinterpret_cast<T *>(base + maxAt);
    rowSum = reinterpret_cast<T *>(base + sumAt);
    accumulators = reinterpret_cast<T **>(base + pointersAt);
    accumulatorStride = reinterpret_cast<int64_t *>(base + strideAt);
    begin = reinterpret_cast<int64_t *>(base + beginAt);
    end = reinterpret_cast<int64_t *>(base + endAt);
    holes = reinterpret_cast<int64_t *>(base + holesAt);
    holeCount = reinterpret_cast<int64_t *>(base + holeCountAt);
    pairTiles = reinterpret_cast<T **>(base + pairTilesAt);
    pairWeights = reinterpret_cast<T *>(base + pairWeightsAt);
    size_t at = accumulatorAt;
    for (int64_t k = 0; k < pass.numOutputs; ++k) {
      accumulatorStride[k] = roundUp(pass.widths[k], V::kLanes);
      accumulators[k] = reinterpret_cast<T *>(base + at);
      at += (sizeof(T) * rows * accumulatorStride[k] + 63) / 64 * 64;
    }
    at = pairAt;
    for (int64_t i = 0; i < pairs.numTerms; ++i) {
      pairTiles[i] = reinterpret_cast<T *>(base + at);
      at += (sizeof(T) * rows * Shape::kPanel + 63) / 64 * 64;
    }
    return true;
  }

  ~Workspace() { energy_support_scratch_free(memory); }
};

//===----------------------------------------------------------------------===//
// Packing
//===----------------------------------------------------------------------===//

/// Inner features, transposed into strips: strip s of problem b of matrix i
/// holds, for each d, the kStrip values of features[i] at row s·kStrip + c
/// of problem b and column d, zero past the end of the problem; problem b's
/// strips follow problem b − 1's. One loop over the strips of all the
/// problems of all the matrices (of `count` rows a problem each).
template <class V> struct PackStrips {
  using T = typename V::Scalar;
  const T *const *features;
  const int64_t *depths;
  T *const *packed;
  int64_t count, strips; ///< rows, and strips, of each problem
  int64_t problems;

  static void run(void *context, int64_t first, int64_t last) {
    const auto &self = *static_cast<const PackStrips *>(context);
    constexpr int64_t strip = Tiling<V>::kStrip;
    const int64_t perMatrix = self.problems * self.strips;
    for (int64_t at = first; at < last; ++at) {
      const int64_t i = at / perMatrix, b = at % perMatrix / self.strips,
                    s = at % self.strips;
      const int64_t depth = self.depths[i];
      T *out = self.packed[i] + (b * self.strips + s) * depth * strip;
      const T *features = self.features[i] + b * self.count * depth;
      constexpr int64_t L = V::kLanes;
      if ((s + 1) * strip <= self.count && depth % L == 0) {
        // A whole strip, in blocks of L × L.
        const T *rows = features + s * strip * depth;
        for (int64_t d = 0; d < depth; d += L)
          for (int64_t c = 0; c < strip; c += L)
            V::transpose(rows + c * depth + d, depth, out + d * strip + c,
                         strip);
        continue;
      }
      for (int64_t c = 0; c < strip; ++c) {
        int64_t index = s * strip + c;
        if (index < self.count) {
          const T *row = features + index * depth;
          for (int64_t d = 0; d < depth; ++d)
            out[d * strip + c] = row[d];
        } else {
          for (int64_t d = 0; d < depth; ++d)
            out[d * strip + c] = 0;
        }
      }
    }
  }
};

//===----------------------------------------------------------------------===//
// Micro-kernels
//===----------------------------------------------------------------------===//

/// scores[r, v·L + l] = factor · Σ_d a[r, d] · b[d, v·L + l]: a tile of
/// Rows × Vectors·L scores, accumulated in registers. Row r of a is at
/// a + r · aStride for r < aRows and is `zeros` past them.
template <class V, int Rows, int Vectors>
inline void scoreTile(int64_t depth, const typename V::Scalar *a,
                      int64_t aStride, int64_t aRows,
                      const typename V::Scalar *zeros,
                      const typename V::Scalar *b, typename V::Scalar factor,
                      typename V::Scalar *scores, int64_t scoreStride) {
  using Vec = typename V::Vec;
  constexpr int L = V::kLanes;
  const typename V::Scalar *rowOf[Rows];
  for (int r = 0; r < Rows; ++r)
    rowOf[r] = r < aRows ? a + r * aStride : zeros;
  Vec acc[Rows][Vectors];
  for (int r = 0; r < Rows; ++r)
    for (int v = 0; v < Vectors; ++v)
      acc[r][v] = V::zero();
  for (int64_t d = 0; d < depth; ++d) {
    Vec column[Vectors];
    for (int v = 0; v < Vectors; ++v)
      column[v] = V::load(b + d * Vectors * L + v * L);
    for (int r = 0; r < Rows; ++r) {
      Vec row = V::broadcast(rowOf[r][d]);
      for (int v = 0; v < Vectors; ++v)
        acc[r][v] = V::fma(row, column[v], acc[r][v]);
    }
  }
  Vec scale = V::broadcast(factor);
  for (int r = 0; r < Rows; ++r)
    for (int v = 0; v < Vectors; ++v)
      V::store(scores + r * scoreStride + v * L, V::mul(acc[r][v], scale));
}

/// acc[r, :] += Σ_j weights[r, j] · values[j, :] for j < count, over
/// Vectors·L columns of the values, the last vector only up to `tail` when
/// Masked: a tile of Rows × Vectors·L accumulators in registers.
template <class V, int Rows, int Vectors, bool Masked>
inline void sumTile(int64_t count, const typename V::Scalar *weights,
                    int64_t weightStride, const typename V::Scalar *values,
                    int64_t valueStride, typename V::Tail tail,
                    typename V::Scalar *acc, int64_t accStride) {
  using Vec = typename V::Vec;
  constexpr int L = V::kLanes;
  Vec sum[Rows][Vectors];
  for (int r = 0; r < Rows; ++r)
    for (int v = 0; v < Vectors; ++v)
      sum[r][v] = V::load(acc + r * accStride + v * L);
  for (int64_t j = 0; j < count; ++j) {
    const typename V::Scalar *valueRow = values + j * valueStride;
    Vec value[Vectors];
    for (int v = 0; v < Vectors; ++v)
      value[v] = (Masked && v == Vectors - 1)
                     ? V::loadTail(valueRow + v * L, tail)
                     : V::load(valueRow + v * L);
    for (int r = 0; r < Rows; ++r) {
      Vec weight = V::broadcast(weights[r * weightStride + j]);
      for (int v = 0; v < Vectors; ++v)
        sum[r][v] = V::fma(weight, value[v], sum[r][v]);
    }
  }
  for (int r = 0; r < Rows; ++r)
    for (int v = 0; v < Vectors; ++v)
      V::store(acc + r * accStride + v * L, sum[r][v]);
}

/// The weighted sums of one output over a panel, for the `tileRows` (a
/// multiple of kSumRows) rows of the block: whole tiles of kSumVectors
/// vectors across the width, then one tile of the vectors that remain, its
/// last one masked.
template <class V>
void sumPanel(int64_t count, int64_t tileRows,
              const typename V::Scalar *weights,
              const typename V::Scalar *values, int64_t width,
              typename V::Scalar *acc, int64_t accStride) {
  using Shape = Tiling<V>;
  constexpr int L = V::kLanes;
  constexpr int Rows = Shape::kSumRows, Vectors = Shape::kSumVectors;
  constexpr int64_t weightStride = Shape::kPanel;
  if constexpr (L > 1) {
    // One value per inner index: a dot product of each row's weights with
    // the values, across the lanes, instead of one lane of a vector each.
    if (width == 1) {
      const int64_t whole = count - count % L;
      const typename V::Tail tail = V::tail(count - whole);
      for (int64_t r = 0; r < tileRows; ++r) {
        const auto *w = weights + r * weightStride;
        auto sum = V::zero();
        for (int64_t j = 0; j < whole; j += L)
          sum = V::fma(V::load(w + j), V::load(values + j), sum);
        if (whole < count)
          sum = V::fma(V::loadTail(w + whole, tail),
                       V::loadTail(values + whole, tail), sum);
        acc[r * accStride] += V::reduceAdd(sum);
      }
      return;
    }
  }
  for (int64_t r = 0; r < tileRows; r += Rows) {
    const auto *w = weights + r * weightStride;
    auto *a = acc + r * accStride;
    int64_t c = 0;
    for (; c + Vectors * L <= width; c += Vectors * L)
      sumTile<V, Rows, Vectors, false>(count, w, weightStride, values + c,
                                       width, typename V::Tail(), a + c,
                                       accStride);
    int64_t rest = width - c;
    if (rest == 0)
      continue;
    int64_t vectors = (rest + L - 1) / L;
    typename V::Tail tail = V::tail(rest - (vectors - 1) * L);
    if constexpr (L == 1) {
      // No partial vectors: the rest is whole one-lane vectors.
      for (; c < width; ++c)
        sumTile<V, Rows, 1, false>(count, w, weightStride, values + c, width,
                                   tail, a + c, accStride);
    } else {
      static_assert(Vectors <= 4, "one case per count of remaining vectors");
      switch (vectors) {
      case 1:
        sumTile<V, Rows, 1, true>(count, w, weightStride, values + c, width,
                                  tail, a + c, accStride);
        break;
      case 2:
        sumTile<V, Rows, 2, true>(count, w, weightStride, values + c, width,
                                  tail, a + c, accStride);
        break;
      default:
        sumTile<V, Rows, 3, true>(count, w, weightStride, values + c, width,
                                  tail, a + c, accStride);
        break;
      }
    }
  }
}

/// W_k = W ∘ (kappa + Σ_a alphas[a] · tiles[terms[a]]) over `width`
/// columns (a multiple of L) of the `tileRows` rows of the block, each a row
/// of kPanel.
template <class V>
void pairWeighted(int64_t tileRows, const typename V::Scalar *weights,
                  typename V::Scalar *const *tiles, typename V::Scalar kappa,
                  int64_t numAlphas, const typename V::Scalar *alphas,
                  const int64_t *terms, int64_t offset, int64_t width,
                  typename V::Scalar *out) {
  using Vec = typename V::Vec;
  constexpr int L = V::kLanes;
  constexpr int64_t panel = Tiling<V>::kPanel;
  const Vec base = V::broadcast(kappa);
  for (int64_t r = 0; r < tileRows; ++r) {
    const int64_t at = r * panel + offset;
    for (int64_t j = 0; j < width; j += L) {
      Vec factor = base;
      for (int64_t a = 0; a < numAlphas; ++a)
        factor = V::fma(V::broadcast(alphas[a]),
                        V::load(tiles[terms[a]] + at + j), factor);
      V::store(out + at + j, V::mul(V::load(weights + at + j), factor));
    }
  }
}

//===----------------------------------------------------------------------===//
// Constraints
//===----------------------------------------------------------------------===//

/// The admitted inner indices of outer index `outer`: [begin, end) within
/// [0, innerCount), without the `holes` (NE constraints), in order.
template <class T>
void admittedInterval(const Pass<T> &pass, int64_t outer, int64_t &begin,
                      int64_t &end, int64_t *holes, int64_t &holeCount) {
  __int128 lo = 0, hi = pass.innerCount; // [lo, hi)
  holeCount = 0;
  for (int64_t k = 0; k < pass.numConstraints && lo < hi; ++k) {
    const PassConstraint &c = pass.constraints[k];
    if (c.notEqual)
      continue;
    // inner·j >= t, with t = -(outer·i + offset).
    __int128 t = -((__int128)c.outer * outer + c.offset);
    if (c.inner == 0) {
      if (t > 0)
        hi = lo;
    } else if (c.inner > 0) {
      __int128 first = ceilDivide(t, (__int128)c.inner);
      lo = lo > first ? lo : first;
    } else {
      __int128 last = floorDivide(t, (__int128)c.inner);
      hi = hi < last + 1 ? hi : last + 1;
    }
  }
  for (int64_t k = 0; k < pass.numConstraints && lo < hi; ++k) {
    const PassConstraint &c = pass.constraints[k];
    if (!c.notEqual)
      continue;
    __int128 t = -((__int128)c.outer * outer + c.offset);
    if (c.inner == 0) {
      if (t == 0)
        hi = lo;
    } else if (t % c.inner == 0) {
      __int128 hole = t / c.inner;
      if (hole >= lo && hole < hi)
        holes[holeCount++] = static_cast<int64_t>(hole);
    }
  }
  if (lo >= hi)
    lo = hi = 0;
  begin = static_cast<int64_t>(lo);
  end = static_cast<int64_t>(hi);
}

//===----------------------------------------------------------------------===//
// Kept tiles
//===----------------------------------------------------------------------===//

/// The row side keeps plane `plane` of its tile (rows of kPanel, column j at
/// j − start) for its `rows` outer indices from `first` and the inner indices
/// [from, to) that exist.
template <class V>
void keepTile(const Pass<typename V::Scalar> &pass, int64_t problem,
              int64_t plane, int64_t first, int64_t rows, int64_t start,
              int64_t from, int64_t to, const typename V::Scalar *tile) {
  using T = typename V::Scalar;
  constexpr int64_t panel = Tiling<V>::kPanel;
  const int64_t cols = pass.innerCount, end = minOf(to, cols);
  if (end <= from)
    return;
  T *kept =
      pass.kept.tiles +
      ((problem * pass.kept.planes + plane) * pass.outerCount + first) * cols;
  for (int64_t r = 0; r < rows; ++r)
    memcpy(kept + r * cols + from, tile + r * panel + (from - start),
           sizeof(T) * (end - from));
}

/// The column side reads plane `plane` for its block (outer indices
/// [first, first + rows), the row side's columns) over the inner indices
/// [from, to), transposed into a tile of `tileRows` rows of kPanel (column j
/// at j − start): zero past the rows and the inner indices, as the features
/// there are.
template <class V>
void loadTile(const Pass<typename V::Scalar> &pass, int64_t problem,
              int64_t plane, int64_t first, int64_t rows, int64_t tileRows,
              int64_t start, int64_t from, int64_t to,
              typename V::Scalar *tile) {
  using T = typename V::Scalar;
  constexpr int64_t panel = Tiling<V>::kPanel;
  constexpr int64_t L = V::kLanes;
  const int64_t cols = pass.outerCount, inner = pass.innerCount;
  const T *kept = pass.kept.tiles +
                  (problem * pass.kept.planes + plane) * inner * cols + first;
  const int64_t end = minOf(to, inner);
  T *at = tile - start; // indexed by inner index
  int64_t r = 0;
  for (; r + L <= rows; r += L) {
    int64_t j = from;
    for (; j + L <= end; j += L)
      V::transpose(kept + j * cols + r, cols, at + r * panel + j, panel);
    for (; j < end; ++j)
      for (int64_t k = 0; k < L; ++k)
        at[(r + k) * panel + j] = kept[j * cols + r + k];
    for (int64_t k = 0; k < L; ++k)
      for (int64_t i = end; i < to; ++i)
        at[(r + k) * panel + i] = 0;
  }
  for (; r < tileRows; ++r)
    for (int64_t j = from; j < to; ++j)
      at[r * panel + j] = r < rows && j < end ? kept[j * cols + r] : T(0);
}

//===----------------------------------------------------------------------===//
// One block of outer indices
//===----------------------------------------------------------------------===//

/// Block `block` of problem `problem`: its rows of every output (and of
/// lse). Only the tiles that its rows reach are computed: rows past the end
/// of the problem up to a multiple of kBlockStep are zero and admit nothing.
template <class V>
void processBlock(const Pass<typename V::Scalar> &pass, Workspace<V> &space,
                  int64_t problem, int64_t block) {
  using T = typename V::Scalar;
  using Vec = typename V::Vec;
  using Shape = Tiling<V>;
  constexpr int L = V::kLanes;
  constexpr int64_t panel = Shape::kPanel, strip = Shape::kStrip;
  const T minusInfinity = -__builtin_huge_val();
  const int64_t first = block * pass.blockRows;
  const int64_t rows = minOf(pass.blockRows, pass.outerCount - first);
  const int64_t tileRows = roundUp(rows, Shape::kBlockStep);
  const int64_t depth = pass.depth;
  const int64_t innerStrips = roundUp(pass.innerCount, strip);

  // The problem's slices of the arrays (Pass).
  const int64_t outerAt = problem * pass.outerCount;
  const int64_t innerAt = problem * pass.innerCount;
  const int64_t packedAt = problem * innerStrips;
  const T *const packedInner = pass.packedInner + packedAt * depth;
  const T *const normalisers =
      pass.normaliser == Normaliser::PerOuter   ? pass.normalisers + outerAt
      : pass.normaliser == Normaliser::PerInner ? pass.normalisers + packedAt
                                                : nullptr;
  T *const lseOut = pass.lse ? pass.lse + outerAt : nullptr;

  const PairWeights<T> &pairs = pass.pairs;
  // The block's outer features, read in place: row r of the block at
  // (outerAt + first + r) · depth.
  const T *const outer = pass.outerFeatures + (outerAt + first) * depth;
  // The admitted intervals; rows past the end admit nothing, and the union
  // [lowest, highest) bounds the panels to visit.
  int64_t lowest = pass.innerCount, highest = 0;
  for (int64_t r = 0; r < tileRows; ++r) {
    int64_t *holes = space.holes + r * pass.numNotEqual;
    if (r < rows)
      admittedInterval(pass, first + r, space.begin[r], space.end[r], holes,
                       space.holeCount[r]);
    else
      space.begin[r] = space.end[r] = space.holeCount[r] = 0;
    if (space.begin[r] < space.end[r]) {
      lowest = minOf(lowest, space.begin[r]);
      highest = maxOf(highest, space.end[r]);
    }
  }
  for (int64_t r = 0; r < tileRows; ++r) {
    space.rowMax[r] = minusInfinity;
    space.rowSum[r] = 0;
  }
  for (int64_t k = 0; k < pass.numOutputs; ++k)
    memset(space.accumulators[k], 0,
           sizeof(T) * tileRows * space.accumulatorStride[k]);

  for (int64_t start = lowest / panel * panel; start < highest;
       start += panel) {
    const int64_t stop = minOf(start + panel, innerStrips);
    // Classify the panel: full (every row admits every column), empty, or
    // partial, with the columns some row admits.
    bool full = rows == tileRows, any = false;
    int64_t columnsFrom = stop, columnsTo = start;
    for (int64_t r = 0; r < rows; ++r) {
      int64_t from = maxOf(space.begin[r], start);
      int64_t to = minOf(space.end[r], stop);
      if (from >= to) {
        full = false;
        continue;
      }
      any = true;
      columnsFrom = minOf(columnsFrom, from);
      columnsTo = maxOf(columnsTo, to);
      if (from > start || to < stop)
        full = false;
      const int64_t *holes = space.holes + r * pass.numNotEqual;
      for (int64_t h = 0; h < space.holeCount[r]; ++h)
        if (holes[h] >= start && holes[h] < stop)
          full = false;
    }
    if (!any)
      continue;
    // Whole strips from the first admitted column to the last.
    const int64_t from = start + (columnsFrom - start) / strip * strip;
    const int64_t to = minOf(stop, start + roundUp(columnsTo - start, strip));
    T *const scores = space.scores + (from - start);

    // One tile, plane `plane` (rows of kPanel, column j at j − start):
    // factor · A Bᵀ over the strips [from, to) of the block's rows of
    // `outerRows` and the packed `innerStrips` (kept, when the pass keeps
    // them), or the row side's kept tile.
    const KeptTiles<T> &kept = pass.kept;
    auto fillTile = [&](int64_t plane, const T *outerRows, const T *innerStrips,
                        int64_t tileDepth, T factor, T *tile) {
      if (kept.tiles && !kept.writing) {
        loadTile<V>(pass, problem, plane, first, rows, tileRows, start, from,
                    to, tile);
        return;
      }
      for (int64_t s = from; s < to; s += strip) {
        const T *b = innerStrips + (s / strip) * tileDepth * strip;
        for (int64_t g = 0; g < tileRows; g += Shape::kScoreRows)
          scoreTile<V, Shape::kScoreRows, Shape::kScoreVectors>(
              tileDepth, outerRows + g * tileDepth, tileDepth, rows - g,
              space.zeroRow, b, factor, tile + g * panel + (s - start), panel);
      }
      if (kept.tiles)
        keepTile<V>(pass, problem, plane, first, rows, start, from, to, tile);
    };

    // S = factor · A · Bᵀ.
    fillTile(0, outer, packedInner, depth, pass.factor, space.scores);
    // Excluded pairs score -inf, so that their weight is 0.
    if (!full) {
      for (int64_t r = 0; r < tileRows; ++r) {
        T *row = scores + r * panel - from; // indexed by inner index
        int64_t admittedFrom = maxOf(space.begin[r], from);
        int64_t admittedTo = minOf(space.end[r], to);
        if (admittedFrom >= admittedTo) {
          for (int64_t j = from; j < to; ++j)
            row[j] = minusInfinity;
          continue;
        }
        for (int64_t j = from; j < admittedFrom; ++j)
          row[j] = minusInfinity;
        for (int64_t j = admittedTo; j < to; ++j)
          row[j] = minusInfinity;
        const int64_t *holes = space.holes + r * pass.numNotEqual;
        for (int64_t h = 0; h < space.holeCount[r]; ++h)
          if (holes[h] >= from && holes[h] < to)
            row[holes[h]] = minusInfinity;
      }
    }

    // The weights, in place of the scores.
    const int64_t width = to - from; // a multiple of L
    for (int64_t r = 0; r < tileRows; ++r) {
      T *row = scores + r * panel;
      if (pass.normaliser == Normaliser::Online) {
        Vec highestScore = V::broadcast(minusInfinity);
        for (int64_t j = 0; j < width; j += L)
          highestScore = V::max(highestScore, V::load(row + j));
        T previous = space.rowMax[r];
        T next = V::reduceMax(highestScore);
        next = next > previous ? next : previous;
        if (next == minusInfinity) { // nothing admitted yet
          for (int64_t j = 0; j < width; j += L)
            V::store(row + j, V::zero());
          continue;
        }
        if (next > previous) {
          if (previous != minusInfinity) {
            T alpha = V::firstLane(expVector<V>(V::broadcast(previous - next)));
            space.rowSum[r] *= alpha;
            Vec scale = V::broadcast(alpha);
            for (int64_t k = 0; k < pass.numOutputs; ++k) {
              T *acc = space.accumulators[k] + r * space.accumulatorStride[k];
              for (int64_t c = 0; c < space.accumulatorStride[k]; c += L)
                V::store(acc + c, V::mul(V::load(acc + c), scale));
            }
          }
          space.rowMax[r] = next;
        }
        Vec shift = V::broadcast(next), sum = V::zero();
        for (int64_t j = 0; j < width; j += L) {
          Vec weight = weightVector<V>(V::sub(V::load(row + j), shift));
          V::store(row + j, weight);
          sum = V::add(sum, weight);
        }
        space.rowSum[r] += V::reduceAdd(sum);
      } else if (pass.normaliser == Normaliser::PerOuter) {
        Vec shift = V::broadcast(r < rows ? normalisers[first + r] : 0);
        for (int64_t j = 0; j < width; j += L)
          V::store(row + j, weightVector<V>(V::sub(V::load(row + j), shift)));
      } else {
        const T *shift = normalisers + from;
        for (int64_t j = 0; j < width; j += L)
          V::store(row + j, weightVector<V>(
                                V::sub(V::load(row + j), V::load(shift + j))));
      }
    }

    // The pair terms' tiles T_i = A_i · B_iᵀ over the same strips.
    for (int64_t i = 0; i < pairs.numTerms; ++i) {
      const int64_t termDepth = pairs.depths[i];
      fillTile(1 + pairs.sourceTerms[i],
               pairs.outer[i] + (outerAt + first) * termDepth,
               pairs.packedInner[i] + packedAt * termDepth, termDepth, T(1),
               space.pairTiles[i]);
    }

    // acc += W · V (or W_k · V) over the admitted inner indices.
    const int64_t count = minOf(to, pass.innerCount) - from;
    for (int64_t k = 0; k < pass.numOutputs; ++k) {
      const int64_t valueWidth = pass.widths[k];
      if (valueWidth == 0)
        continue;
      const T *weights = scores;
      if (pairs.plain && !pairs.plain[k]) {
        pairWeighted<V>(tileRows, space.scores, space.pairTiles, pairs.kappa[k],
                        pairs.numAlphas[k], pairs.alphas + k * pairs.numTerms,
                        pairs.alphaTerms + k * pairs.numTerms, from - start,
                        width, space.pairWeights);
        weights = space.pairWeights + (from - start);
      }
      sumPanel<V>(count, tileRows, weights,
                  pass.values[k] + (innerAt + from) * valueWidth, valueWidth,
                  space.accumulators[k], space.accumulatorStride[k]);
    }
  }

  // Write the block's rows of every output.
  for (int64_t r = 0; r < rows; ++r) {
    T divisor = 1, lse = 0;
    bool empty = false;
    if (pass.normaliser == Normaliser::Online) {
      empty = space.rowMax[r] == minusInfinity; // no admitted column
      if (!empty) {
        divisor = space.rowSum[r];
        lse = pass.temperature * (space.rowMax[r] + logOf(space.rowSum[r]));
      }
      if (lseOut)
        lseOut[first + r] = lse;
    }
    for (int64_t k = 0; k < pass.numOutputs; ++k) {
      const int64_t width = pass.widths[k];
      T *out = pass.outputs[k] + (outerAt + first + r) * width;
      const T *acc = space.accumulators[k] + r * space.accumulatorStride[k];
      if (empty) {
        for (int64_t c = 0; c < width; ++c)
          out[c] = 0;
      } else if (pass.normaliser == Normaliser::Online) {
        for (int64_t c = 0; c < width; ++c)
          out[c] = acc[c] / divisor;
      } else {
        for (int64_t c = 0; c < width; ++c)
          out[c] = acc[c];
      }
    }
  }
}

/// The task of the thread pool: tasks [first, last) of the pass, task t
/// block t % blocks of problem t / blocks, with one workspace.
template <class V> void runBlocks(void *context, int64_t first, int64_t last) {
  auto &pass = *static_cast<Pass<typename V::Scalar> *>(context);
  Workspace<V> space;
  if (!space.allocate(pass)) {
    __atomic_store_n(&pass.failed, 1, __ATOMIC_RELAXED);
    return;
  }
  for (int64_t task = first; task < last; ++task)
    processBlock<V>(pass, space, task / pass.blocks, task % pass.blocks);
}

/// Owns an aligned allocation.
struct Buffer {
  void *memory = nullptr;
  ~Buffer() { energy_support_scratch_free(memory); }
  template <class T> T *allocate(int64_t count) {
    // Sizes are validated to fit in int64_t; the byte count may not.
    if (count < 0 || (uint64_t)count > SIZE_MAX / sizeof(T) / 2)
      return nullptr;
    memory = allocateAligned(sizeof(T) * count);
    return static_cast<T *>(memory);
  }
};

/// Elements of `problems` problems of `count` inner features of `depth`
/// each, packed into strips, in `size`; false when that overflows.
template <class V>
bool packedSize(int64_t problems, int64_t count, int64_t depth, int64_t &size) {
  constexpr int64_t strip = Tiling<V>::kStrip;
  int64_t perProblem;
  return !__builtin_mul_overflow(roundUp(count, strip), depth, &perProblem) &&
         !__builtin_mul_overflow(perProblem, problems, &size);
}

/// The pair weights of a pass whose `numOutputs` outputs have `weights`
/// (numOutputs × (1 + numTerms) coefficients, or null), the pair terms
/// having `depths`, `outer` features (outerCount rows a problem) and `inner`
/// ones (innerCount rows a problem, `problems` problems): in `pairs`, with
/// its memory in `buffer`, and room in `packed` for the inner features in
/// strips, which packPass fills. With `allTerms` (a pass that keeps its
/// tiles), every term is computed, weighted or not. False when out of memory.
template <class V>
bool preparePairs(PairWeights<typename V::Scalar> &pairs, Buffer &buffer,
                  Buffer &packed, int64_t numOutputs, const double *weights,
                  int64_t numTerms, const int64_t *depths,
                  const void *const *outer, const void *const *inner,
                  int64_t problems, int64_t innerCount, bool allTerms) {
  using T = typename V::Scalar;
  if (!allTerms && (!weights || numOutputs == 0))
    return true;
  const int64_t stride = numTerms + 1;
  // Without weights, every output is plain (κ = 1, α = 0).
  auto kappaOf = [&](int64_t k) { return weights ? weights[k * stride] : 1; };
  auto alpha = [&](int64_t k, int64_t i) {
    return weights ? weights[k * stride + 1 + i] : 0;
  };
  auto needed = [&](int64_t i) {
    if (allTerms)
      return true;
    for (int64_t k = 0; k < numOutputs; ++k)
      if (alpha(k, i) != 0)
        return true;
    return false;
  };
  // The terms some output weights, and whether any output is not plain.
  int64_t used = 0;
  bool anyWeighted = false;
  for (int64_t k = 0; k < numOutputs; ++k)
    anyWeighted = anyWeighted || kappaOf(k) != 1;
  for (int64_t i = 0; i < numTerms; ++i)
    used += needed(i);
  if (!anyWeighted && used == 0)
    return true;

  // The arrays; numOutputs · stride coefficients fit in memory, so these
  // do too.
  Carving carving;
  auto reserve = [&](size_t size) { return carving.reserve(size); };
  size_t depthsAt = reserve(sizeof(int64_t) * used);
  size_t outerAt = reserve(sizeof(T *) * used);
  size_t innerAt = reserve(sizeof(T *) * used);
  size_t sourcesAt = reserve(sizeof(T *) * used);
  size_t sourceTermsAt = reserve(sizeof(int64_t) * used);
  size_t plainAt = reserve(sizeof(bool) * numOutputs);
  size_t kappaAt = reserve(sizeof(T) * numOutputs);
  size_t numAlphasAt = reserve(sizeof(int64_t) * numOutputs);
  size_t alphasAt = reserve(sizeof(T) * numOutputs * used);
  size_t alphaTermsAt = reserve(sizeof(int64_t) * numOutputs * used);
  char *base = buffer.allocate<char>(static_cast<int64_t>(carving.bytes));
  if (!base)
    return false;
  auto *termDepths = reinterpret_cast<int64_t *>(base + depthsAt);
  auto *termOuter = reinterpret_cast<const T **>(base + outerAt);
  auto *termInner = reinterpret_cast<T **>(base + innerAt);
  auto *sources = reinterpret_cast<const T **>(base + sourcesAt);
  auto *sourceTerms = reinterpret_cast<int64_t *>(base + sourceTermsAt);
  auto *plain = reinterpret_cast<bool *>(base + plainAt);
  auto *kappa = reinterpret_cast<T *>(base + kappaAt);
  auto *numAlphas = reinterpret_cast<int64_t *>(base + numAlphasAt);
  auto *alphas = reinterpret_cast<T *>(base + alphasAt);
  auto *alphaTerms = reinterpret_cast<int64_t *>(base + alphaTermsAt);

  // Each output's kappa and nonzero alphas, with the terms renumbered.
  for (int64_t k = 0; k < numOutputs; ++k) {
    kappa[k] = static_cast<T>(kappaOf(k));
    numAlphas[k] = 0;
    for (int64_t i = 0, term = 0; i < numTerms; ++i) {
      if (!needed(i))
        continue;
      if (alpha(k, i) != 0) {
        alphas[k * used + numAlphas[k]] = static_cast<T>(alpha(k, i));
        alphaTerms[k * used + numAlphas[k]] = term;
        ++numAlphas[k];
      }
      ++term;
    }
    plain[k] = kappaOf(k) == 1 && numAlphas[k] == 0;
  }

  // Room for the inner features of the terms in strips.
  int64_t total = 0;
  for (int64_t i = 0, term = 0; i < numTerms; ++i) {
    if (!needed(i))
      continue;
    int64_t size;
    if (!packedSize<V>(problems, innerCount, depths[i], size) ||
        __builtin_add_overflow(total, size, &total))
      return false;
    termDepths[term] = depths[i];
    termOuter[term] = static_cast<const T *>(outer[i]);
    sources[term] = static_cast<const T *>(inner[i]);
    sourceTerms[term] = i;
    ++term;
  }
  T *strips = packed.allocate<T>(total);
  if (!strips)
    return false;
  for (int64_t term = 0; term < used; ++term) {
    termInner[term] = strips;
    strips +=
        problems * roundUp(innerCount, Tiling<V>::kStrip) * termDepths[term];
  }

  pairs.numTerms = used;
  pairs.depths = termDepths;
  pairs.outer = termOuter;
  pairs.packedInner = termInner;
  pairs.inner = sources;
  pairs.plain = plain;
  pairs.kappa = kappa;
  pairs.numAlphas = numAlphas;
  pairs.alphas = alphas;
  pairs.alphaTerms = alphaTerms;
  pairs.sourceTerms = sourceTerms;
  return true;
}

/// Packs the inner features of a pass, `features` (innerCount × depth a
/// problem), into strips in `buffer` (pass.packedInner), and those of its
/// pair terms (pairs.inner into pairs.packedInner): one loop on the thread
/// pool over the strips of every problem of every matrix. False when out of
/// memory.
template <class V>
bool packPass(Pass<typename V::Scalar> &pass,
              const typename V::Scalar *features, Buffer &buffer,
              Buffer &lists) {
  using T = typename V::Scalar;
  constexpr int64_t strip = Tiling<V>::kStrip;
  int64_t size;
  if (!packedSize<V>(pass.problems, pass.innerCount, pass.depth, size))
    return false;
  T *packed = buffer.allocate<T>(size);
  if (!packed)
    return false;
  pass.packedInner = packed;
  // The matrices: the features, then the pair terms'.
  const PairWeights<T> &pairs = pass.pairs;
  const int64_t matrices = 1 + pairs.numTerms;
  char *base = lists.allocate<char>(
      static_cast<int64_t>(2 * sizeof(T *) + sizeof(int64_t)) * matrices);
  if (!base)
    return false;
  auto *sources = reinterpret_cast<const T **>(base);
  auto *targets = reinterpret_cast<T **>(base + sizeof(T *) * matrices);
  auto *depths = reinterpret_cast<int64_t *>(base + 2 * sizeof(T *) * matrices);
  sources[0] = features;
  targets[0] = packed;
  depths[0] = pass.depth;
  for (int64_t i = 0; i < pairs.numTerms; ++i) {
    sources[1 + i] = pairs.inner[i];
    targets[1 + i] = pairs.packedInner[i];
    depths[1 + i] = pairs.depths[i];
  }
  const int64_t strips = roundUp(pass.innerCount, strip) / strip;
  PackStrips<V> pack{sources,         depths, targets,
                     pass.innerCount, strips, pass.problems};
  int64_t total;
  if (__builtin_mul_overflow(matrices, pass.problems, &total) ||
      __builtin_mul_overflow(total, strips, &total))
    return false;
  energy_support_parallel_for(PackStrips<V>::run, &pack, total);
  return true;
}

/// Runs a pass over all the blocks of all its problems, in one loop on the
/// thread pool; false when some task ran out of memory.
template <class V> bool runPass(Pass<typename V::Scalar> &pass) {
  pass.failed = 0;
  pass.blockRows = blockHeight<V>(pass.outerCount);
  pass.blocks = roundUp(pass.outerCount, pass.blockRows) / pass.blockRows;
  // At most problems · outerCount, which fits.
  const int64_t tasks = pass.problems * pass.blocks;
  energy_support_parallel_for(runBlocks<V>, &pass, tasks);
  return !__atomic_load_n(&pass.failed, __ATOMIC_RELAXED);
}

/// One side's pass from its Pass: the pair terms' weights (`outer` the
/// pass's own side's pair features, `inner` the other's), the other side's
/// `features` packed (unless the pass reads kept tiles), then the blocks;
/// false when memory runs out.
template <class V>
bool preparePackRun(Pass<typename V::Scalar> &pass, const double *weights,
                    const energy_softmax_contract_args &args,
                    const void *const *outer, const void *const *inner,
                    const typename V::Scalar *features) {
  Buffer packedBuffer, listBuffer, pairBuffer, pairPackedBuffer;
  const bool reading = pass.kept.tiles && !pass.kept.writing;
  return preparePairs<V>(
             pass.pairs, pairBuffer, pairPackedBuffer, pass.numOutputs, weights,
             args.num_pair_terms, args.pair_depths, outer, inner, pass.problems,
             pass.innerCount, pass.kept.tiles && pass.kept.writing) &&
         (reading || packPass<V>(pass, features, packedBuffer, listBuffer)) &&
         runPass<V>(pass);
}

/// Runs `run(W{})` with W the vector type whose strips suit a pass over
/// `innerCount` inner indices: V's short strips where V's own would be at
/// least half padding (8 columns in strips of 64), else V.
template <class V, class Run> bool withStripsFor(int64_t innerCount, Run run) {
  if (roundUp(innerCount, Tiling<V>::kStrip) >=
      2 * roundUp(innerCount, Tiling<V>::kLanes))
    return run(ShortStrips<V>{});
  return run(V{});
}

/// Whether the column side reads the row side's tiles rather than computing
/// them again: when they stay in a core's cache (ENERGY_CONTRACT_CACHED_
/// TILE_BYTES), or when their products are deep enough to cost more than a
/// read from memory (a mean depth of kDeepTiles per plane).
inline bool tilesWorthKeeping(const energy_softmax_contract_args &args,
                              int64_t elementBytes) {
  constexpr int64_t kDeepTiles = 48;
  const int64_t planes = 1 + args.num_pair_terms;
  int64_t bytes, depths = args.depth;
  if (__builtin_mul_overflow(args.batch, args.rows, &bytes) ||
      __builtin_mul_overflow(bytes, args.cols, &bytes) ||
      __builtin_mul_overflow(bytes, planes, &bytes) ||
      __builtin_mul_overflow(bytes, elementBytes, &bytes))
    return false;
  if (bytes <= ENERGY_CONTRACT_CACHED_TILE_BYTES)
    return true;
  for (int64_t i = 0; i < args.num_pair_terms; ++i)
    if (__builtin_add_overflow(depths, args.pair_depths[i], &depths))
      return true;
  return depths >= kDeepTiles * planes;
}

} // namespace contract

/// The whole kernel for validated arguments (see SoftmaxContract.h), all the
/// problems of the batch at once: a pass a side over all of them.
template <class V>
int32_t softmaxContract(const energy_softmax_contract_args &args) {
  using namespace contract;
  using T = typename V::Scalar;
  const int64_t rows = args.rows, cols = args.cols, depth = args.depth;
  // Every array holds the batch's problems back to back; the validation
  // checked that batch · rows and batch · cols fit.
  const int64_t batch = args.batch, allRows = batch * rows;
  const T *given = static_cast<const T *>(args.given_lse);
  bool rowSide = args.num_row_outputs > 0 || (args.lse && !given) ||
                 (args.num_col_outputs > 0 && !given);
  const bool colSide = args.num_col_outputs > 0;

  // The constraints in each pass's orientation, NE ones counted.
  Buffer constraintBuffer;
  const int64_t numConstraints = args.num_constraints;
  PassConstraint *rowConstraints =
      constraintBuffer.allocate<PassConstraint>(2 * numConstraints);
  if (!rowConstraints)
    return ENERGY_CONTRACT_OUT_OF_MEMORY;
  PassConstraint *colConstraints = rowConstraints + numConstraints;
  int64_t numNotEqual = 0;
  for (int64_t k = 0; k < numConstraints; ++k) {
    const energy_contract_constraint &c = args.constraints[k];
    bool notEqual = c.kind == ENERGY_CONSTRAINT_NE;
    numNotEqual += notEqual;
    rowConstraints[k] = {c.row_coefficient, c.col_coefficient, c.offset,
                         notEqual};
    colConstraints[k] = {c.col_coefficient, c.row_coefficient, c.offset,
                         notEqual};
  }
  const T factor = static_cast<T>(args.scale / args.temperature);
  const T temperature = static_cast<T>(args.temperature);

  if (given && args.lse)
    memcpy(args.lse, given, sizeof(T) * allRows);

  // The normaliser L of every row, when the column side needs it and it is
  // not given: written to lse, or to scratch.
  Buffer lseBuffer;
  T *lse = given ? nullptr : static_cast<T *>(args.lse);
  if (colSide && !given && !lse) {
    lse = lseBuffer.allocate<T>(allRows);
    if (!lse)
      return ENERGY_CONTRACT_OUT_OF_MEMORY;
  }

  // The tiles the row side keeps (the caller's, or its own when the call
  // has both sides and they are small) and the column side reads, where
  // that costs less than computing them again (both calls over the same
  // pairs decide alike).
  T *const callersTiles = tilesWorthKeeping(args, sizeof(T))
                              ? static_cast<T *>(args.kept_tiles)
                              : nullptr;
  const bool keeping =
      callersTiles && args.kept_tiles_mode == ENERGY_CONTRACT_TILES_KEEP;
  const bool reusing =
      callersTiles && args.kept_tiles_mode == ENERGY_CONTRACT_TILES_REUSE;
  rowSide = rowSide || keeping;
  Buffer ownTiles;
  KeptTiles<T> kept;
  kept.planes = 1 + args.num_pair_terms;
  if (keeping || reusing) {
    kept.tiles = callersTiles;
  } else if (rowSide && colSide && tilesWorthKeeping(args, sizeof(T))) {
    ownTiles.memory = energy_support_softmax_contract_tiles(
        batch, rows, cols, args.num_pair_terms, sizeof(T));
    kept.tiles = static_cast<T *>(ownTiles.memory);
  }
  // Constraints leave pairs that the row side never computes; the column
  // side reads zeros there, and masks them.
  if (kept.tiles && !reusing && numConstraints > 0)
    memset(kept.tiles, 0, sizeof(T) * batch * kept.planes * rows * cols);

  if (rowSide) {
    Buffer normaliserBuffer;
    T *normalisers = nullptr;
    if (given) {
      normalisers = normaliserBuffer.allocate<T>(allRows);
      if (!normalisers)
        return ENERGY_CONTRACT_OUT_OF_MEMORY;
      for (int64_t r = 0; r < allRows; ++r)
        normalisers[r] = static_cast<T>(given[r] / args.temperature);
    }
    Pass<T> pass{rows,
                 cols,
                 depth,
                 static_cast<const T *>(args.row_features),
                 nullptr, // packPass
                 factor,
                 temperature,
                 rowConstraints,
                 numConstraints,
                 numNotEqual,
                 given ? Normaliser::PerOuter : Normaliser::Online,
                 normalisers,
                 lse,
                 args.num_row_outputs,
                 reinterpret_cast<const T *const *>(args.col_values),
                 args.row_output_widths,
                 reinterpret_cast<T *const *>(args.row_outputs),
                 0};
    pass.problems = batch;
    if (!reusing) {
      pass.kept = kept;
      pass.kept.writing = true;
    }
    if (!withStripsFor<V>(cols, [&](auto strips) {
          return preparePackRun<decltype(strips)>(
              pass, args.row_output_weights, args, args.pair_row_features,
              args.pair_col_features,
              static_cast<const T *>(args.col_features));
        }))
      return ENERGY_CONTRACT_OUT_OF_MEMORY;
  }

  if (colSide) {
    auto runColumnSide = [&](auto strips) {
      using W = decltype(strips);
      Buffer normaliserBuffer;
      // L/T per inner index, each problem's padded to whole strips.
      const int64_t padded = roundUp(rows, Tiling<W>::kStrip);
      int64_t allPadded;
      if (__builtin_mul_overflow(batch, padded, &allPadded))
        return false;
      T *normalisers = normaliserBuffer.allocate<T>(allPadded);
      if (!normalisers)
        return false;
      const T *source = given ? given : lse;
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t r = 0; r < padded; ++r)
          normalisers[b * padded + r] =
              r < rows ? static_cast<T>(source[b * rows + r] / args.temperature)
                       : T(0);
      Pass<T> pass{cols,
                   rows,
                   depth,
                   static_cast<const T *>(args.col_features),
                   nullptr, // packPass
                   factor,
                   temperature,
                   colConstraints,
                   numConstraints,
                   numNotEqual,
                   Normaliser::PerInner,
                   normalisers,
                   nullptr,
                   args.num_col_outputs,
                   reinterpret_cast<const T *const *>(args.row_values),
                   args.col_output_widths,
                   reinterpret_cast<T *const *>(args.col_outputs),
                   0};
      pass.problems = batch;
      pass.kept = kept;
      return preparePackRun<W>(pass, args.col_output_weights, args,
                               args.pair_col_features, args.pair_row_features,
                               static_cast<const T *>(args.row_features));
    };
    if (!withStripsFor<V>(rows, runColumnSide))
      return ENERGY_CONTRACT_OUT_OF_MEMORY;
  }
  return ENERGY_CONTRACT_OK;
}

} // namespace energy::kernels::ENERGY_KERNEL_ISA

#endif // ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTKERNEL_H
