//===- SoftmaxContractMicroKernels.h - Inner loops --------------*- C++ -*-===//
//
// The inner loops of the CPU softmax contraction (SoftmaxContractKernel.h):
// inner features packed into strips, and the register-tile micro-kernels.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTMICROKERNELS_H
#define ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTMICROKERNELS_H

#include "RegisterTile.h"
#include "SoftmaxContractTiles.h"

#include <stdint.h>

namespace energy::kernels::ENERGY_KERNEL_ISA {
namespace contract {

//===----------------------------------------------------------------------===//
// Packing
//===----------------------------------------------------------------------===//

// The inner features are packed once per pass, transposed into strips of
// kStrip columns (O(B·N·D) memory for B problems).

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
  accumulateTile<V, Rows, Vectors>(
      depth, [&](int r, int64_t d) { return rowOf[r][d]; }, b, acc);
  Vec scale = V::broadcast(factor);
  for (int r = 0; r < Rows; ++r)
    for (int v = 0; v < Vectors; ++v)
      V::store(scores + r * scoreStride + v * L, V::mul(acc[r][v], scale));
}

/// acc_o[r, :] += Σ_j weights[r, j] · values_o[j, :] for j < count, for
/// Outputs outputs of Vectors·L columns each (row j of values_o at
/// values[o] + j · valueStrides[o]; the last vector's lanes past tails[o]
/// masked when Masked): a tile of Rows × Outputs · Vectors accumulators in
/// registers, each weight broadcast once for all the outputs.
template <class V, int Rows, int Outputs, int Vectors, bool Masked>
inline void
sumGroupTile(int64_t count, const typename V::Scalar *weights,
             int64_t weightStride, const typename V::Scalar *const *values,
             const int64_t *valueStrides, const typename V::Tail *tails,
             typename V::Scalar *const *acc, const int64_t *accStrides) {
  using Vec = typename V::Vec;
  constexpr int L = V::kLanes;
  Vec sum[Rows][Outputs][Vectors];
  for (int r = 0; r < Rows; ++r)
    for (int o = 0; o < Outputs; ++o)
      for (int v = 0; v < Vectors; ++v)
        sum[r][o][v] = V::load(acc[o] + r * accStrides[o] + v * L);
  for (int64_t j = 0; j < count; ++j) {
    Vec value[Outputs][Vectors];
    for (int o = 0; o < Outputs; ++o) {
      const typename V::Scalar *valueRow = values[o] + j * valueStrides[o];
      for (int v = 0; v < Vectors; ++v)
        value[o][v] = (Masked && v == Vectors - 1)
                          ? V::loadTail(valueRow + v * L, tails[o])
                          : V::load(valueRow + v * L);
    }
    for (int r = 0; r < Rows; ++r) {
      Vec weight = V::broadcast(weights[r * weightStride + j]);
      for (int o = 0; o < Outputs; ++o)
        for (int v = 0; v < Vectors; ++v)
          sum[r][o][v] = V::fma(weight, value[o][v], sum[r][o][v]);
    }
  }
  for (int r = 0; r < Rows; ++r)
    for (int o = 0; o < Outputs; ++o)
      for (int v = 0; v < Vectors; ++v)
        V::store(acc[o] + r * accStrides[o] + v * L, sum[r][o][v]);
}

/// acc[r, :] += Σ_j weights[r, j] · values[j, :] for j < count, over
/// Vectors·L columns of the values, the last vector only up to `tail` when
/// Masked: sumGroupTile for one output.
template <class V, int Rows, int Vectors, bool Masked>
inline void sumTile(int64_t count, const typename V::Scalar *weights,
                    int64_t weightStride, const typename V::Scalar *values,
                    int64_t valueStride, typename V::Tail tail,
                    typename V::Scalar *acc, int64_t accStride) {
  sumGroupTile<V, Rows, 1, Vectors, Masked>(count, weights, weightStride,
                                            &values, &valueStride, &tail, &acc,
                                            &accStride);
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
  if constexpr (Shape::kWide) {
    // One vector across: tiles of twice the rows, so that twelve chains of
    // multiply-adds, not six, cover the latency of each.
    if (width <= L) {
      const typename V::Tail tail = V::tail(width);
      int64_t r = 0;
      for (; r + 2 * Rows <= tileRows; r += 2 * Rows)
        sumTile<V, 2 * Rows, 1, true>(count, weights + r * weightStride,
                                      weightStride, values, width, tail,
                                      acc + r * accStride, accStride);
      if (r < tileRows)
        sumTile<V, Rows, 1, true>(count, weights + r * weightStride,
                                  weightStride, values, width, tail,
                                  acc + r * accStride, accStride);
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
      case 3:
        sumTile<V, Rows, 3, true>(count, w, weightStride, values + c, width,
                                  tail, a + c, accStride);
        break;
      default:
        sumTile<V, Rows, 4, true>(count, w, weightStride, values + c, width,
                                  tail, a + c, accStride);
        break;
      }
    }
  }
}

/// The most vectors across that one pass over a panel's weights sums for
/// several outputs together.
constexpr int kMaxSumGroup = 4;

/// sumPanel for `outputs` outputs of the same weights, each `vectors`
/// vectors wide (1 or 2; its width past (vectors − 1) lanes), outputs ·
/// vectors from 2 to kMaxSumGroup: tiles of kSumRows rows × the outputs.
template <class V>
void sumPanelGroup(int64_t count, int64_t tileRows,
                   const typename V::Scalar *weights, int outputs, int vectors,
                   const typename V::Scalar *const *values,
                   const int64_t *widths, typename V::Scalar *const *acc,
                   const int64_t *accStrides) {
  using Shape = Tiling<V>;
  constexpr int Rows = Shape::kSumRows, L = V::kLanes;
  constexpr int64_t weightStride = Shape::kPanel;
  typename V::Tail tails[kMaxSumGroup];
  for (int o = 0; o < outputs; ++o)
    tails[o] = V::tail(widths[o] - (vectors - 1) * L);
  for (int64_t r = 0; r < tileRows; r += Rows) {
    typename V::Scalar *rowAcc[kMaxSumGroup];
    for (int o = 0; o < outputs; ++o)
      rowAcc[o] = acc[o] + r * accStrides[o];
    const auto *w = weights + r * weightStride;
    auto run = [&](auto tile) {
      tile(count, w, weightStride, values, widths, tails, rowAcc, accStrides);
    };
    switch (vectors * 8 + outputs) {
    case 8 + 2:
      run(sumGroupTile<V, Rows, 2, 1, true>);
      break;
    case 8 + 3:
      run(sumGroupTile<V, Rows, 3, 1, true>);
      break;
    case 8 + 4:
      run(sumGroupTile<V, Rows, 4, 1, true>);
      break;
    default:
      run(sumGroupTile<V, Rows, 2, 2, true>);
      break;
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

} // namespace contract
} // namespace energy::kernels::ENERGY_KERNEL_ISA

#endif // ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTMICROKERNELS_H
