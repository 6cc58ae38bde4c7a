//===- SoftmaxContractBlock.h - One block of a pass -------------*- C++ -*-===//
//
// One block of outer indices of a pass of the CPU softmax contraction
// (SoftmaxContractKernel.h): its admitted pairs, kept tiles and panels.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTBLOCK_H
#define ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTBLOCK_H

#include "SoftmaxContractMicroKernels.h"
#include "SoftmaxContractPass.h"
#include "SoftmaxContractTiles.h"
#include "SoftmaxContractWorkspace.h"
#include "VectorExp.h"

#include "energy/Runtime/IndexArithmetic.h"

#include <stdint.h>
#include <string.h>

namespace energy::kernels::ENERGY_KERNEL_ISA {
namespace contract {

inline float logOf(float x) { return __builtin_logf(x); }
inline double logOf(double x) { return __builtin_log(x); }

//===----------------------------------------------------------------------===//
// Constraints
//===----------------------------------------------------------------------===//

// For each outer index, the GE constraints leave an interval of inner
// indices and each NE constraint removes at most one index (exact integer
// arithmetic, so this is the corner test of the linear forms made exact for
// every row). A panel where every row of the block admits every column is
// computed unmasked; one where no row admits any column is skipped; others
// are computed only over the strips that some row admits, then masked.
// Panels outside the union of the block's intervals are never visited, so a
// causal pass does about half the work.

/// The admitted inner indices of outer index `outer`: [begin, end) within
/// [0, innerCount), without the `holes` (NE constraints), in order.
template <class T>
void admittedInterval(const Pass<T> &pass, int64_t outer, int64_t &begin,
                      int64_t &end, int64_t *holes, int64_t &holeCount) {
  holeCount = 0;
  if (pass.numConstraints == 0) {
    begin = 0;
    end = pass.innerCount;
    return;
  }
  __int128 lo = 0, hi = pass.innerCount; // [lo, hi)
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

// For each panel of kPanel inner indices:
//
//   S = (scale/T) · A_blk · B_panelᵀ       score micro-kernel, a register
//                                          tile of kScoreRows × kScoreVectors
//   S += β/T                               the pair bias, when given
//   mask S to -inf where a constraint fails (partial panels only)
//   online:  m' = max(m, rowmax S); rescale l and acc by exp(m - m') only
//            when the maximum grows; W = exp(S - m'); l += rowsum W
//   given:   W = exp(S - L/T)              (L per outer or per inner index)
//   acc += W · V_panel                     weighted-sum micro-kernel, a tile
//                                          of kSumRows × kSumVectors
//
// and at the end of the block, online: out = acc / l, L = T·(m + log l).
// A block's outer features are read in place (the score micro-kernel
// broadcasts one element of each of its rows at a time).

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

    // S = factor · A · Bᵀ, plus the pair bias over T (after the tile is
    // kept: both sides add it).
    fillTile(0, outer, packedInner, depth, pass.factor, space.scores);
    // Only at the row's admitted interval, which is all the bias need
    // cover (the rest is masked).
    if (const PassBias<T> &bias = pass.pairBias; bias.bias) {
      const T *problemBias = bias.bias + problem * bias.length + bias.offset;
      for (int64_t r = 0; r < rows; ++r) {
        T *row = scores + r * panel - from; // indexed by inner index
        const T *at = problemBias + bias.outer * (first + r);
        const int64_t begin = maxOf(from, space.begin[r]);
        const int64_t end = minOf(to, space.end[r]);
        // Unit strides (a bias per offset, per pair) as loops that vectorise.
        if (bias.inner == 1)
          for (int64_t j = begin; j < end; ++j)
            row[j] += bias.factor * at[j];
        else if (bias.inner == -1)
          for (int64_t j = begin; j < end; ++j)
            row[j] += bias.factor * at[-j];
        else
          for (int64_t j = begin; j < end; ++j)
            row[j] += bias.factor * at[bias.inner * j];
      }
    }
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
    // The products' tiles, element by element from the terms'.
    for (int64_t p = 0; p < pairs.numProducts; ++p) {
      const T *lhs = space.pairTiles[pairs.productFactors[2 * p]];
      const T *rhs = space.pairTiles[pairs.productFactors[2 * p + 1]];
      T *product = space.pairTiles[pairs.numTerms + p];
      for (int64_t r = 0; r < tileRows; ++r) {
        const int64_t at = r * panel + (from - start);
        for (int64_t j = 0; j < width; j += L)
          V::store(product + at + j,
                   V::mul(V::load(lhs + at + j), V::load(rhs + at + j)));
      }
    }

    // acc += W · V (or W_k · V) over the admitted inner indices.
    const int64_t count = minOf(to, pass.innerCount) - from;
    auto plainOutput = [&](int64_t k) {
      return !pairs.plain || pairs.plain[k];
    };
    // Outputs of one or two vectors (wider than a lane) that sum the same
    // weights are summed together, up to kMaxSumGroup vectors at a time:
    // the plain ones, and those that share the weights an output computed.
    auto vectorsOf = [&](int64_t k) -> int {
      const int64_t width = pass.widths[k];
      if (!Shape::kWide || width <= 1 || width > 2 * L)
        return 0;
      return width <= L ? 1 : 2;
    };
    auto sumGroup = [&](const T *weights, const int64_t *outputs, int size) {
      if (size == 1) {
        const int64_t k = outputs[0];
        sumPanel<V>(count, tileRows, weights,
                    pass.values[k] + (innerAt + from) * pass.widths[k],
                    pass.widths[k], space.accumulators[k],
                    space.accumulatorStride[k]);
        return;
      }
      const T *values[kMaxSumGroup];
      T *acc[kMaxSumGroup];
      int64_t widths[kMaxSumGroup], strides[kMaxSumGroup];
      for (int o = 0; o < size; ++o) {
        const int64_t k = outputs[o];
        values[o] = pass.values[k] + (innerAt + from) * pass.widths[k];
        acc[o] = space.accumulators[k];
        widths[o] = pass.widths[k];
        strides[o] = space.accumulatorStride[k];
      }
      sumPanelGroup<V>(count, tileRows, weights, size, vectorsOf(outputs[0]),
                       values, widths, acc, strides);
    };
    int64_t group[kMaxSumGroup];
    int size = 0;
    for (int vectors = 1; vectors <= 2; ++vectors) {
      for (int64_t k = 0; k < pass.numOutputs; ++k) {
        if (vectorsOf(k) != vectors || !plainOutput(k))
          continue;
        group[size++] = k;
        if ((size + 1) * vectors > kMaxSumGroup) {
          sumGroup(scores, group, size);
          size = 0;
        }
      }
      if (size > 0)
        sumGroup(scores, group, size);
      size = 0;
    }
    // Pair sums: each admitted pair's weighted value at the pair bias's
    // index, into the block's partials.
    const int64_t firstPairSum = pass.numOutputs - pass.numPairSums;
    auto scatterPairSum = [&](int64_t k, const T *weights) {
      const PassBias<T> &bias = pass.pairBias;
      T *partial = pass.pairPartials +
                   ((k - firstPairSum) * pass.problems * pass.blocks +
                    problem * pass.blocks + block) *
                       bias.length +
                   bias.offset;
      const T *values = pass.values[k] + innerAt;
      const T multiple = pairs.scaled ? pairs.scaled[k] : T(1);
      for (int64_t r = 0; r < rows; ++r) {
        const T *w = weights + r * panel - from; // indexed by inner index
        T *at = partial + bias.outer * (first + r);
        const int64_t begin = maxOf(from, space.begin[r]);
        const int64_t end = minOf(from + count, space.end[r]);
        // A unit stride (a bias per offset r − c seen from the column) as
        // a loop that vectorises.
        if (bias.inner == 1)
          for (int64_t j = begin; j < end; ++j)
            at[j] += multiple * (w[j] * values[j]);
        else
          for (int64_t j = begin; j < end; ++j)
            at[bias.inner * j] += multiple * (w[j] * values[j]);
      }
    };
    // The weights output k sums: W, or W ∘ its factor (computed unless the
    // last one computed is in proportion).
    auto weightsOf = [&](int64_t k) -> const T * {
      if (plainOutput(k))
        return scores;
      if (!pairs.shared[k])
        pairWeighted<V>(tileRows, space.scores, space.pairTiles, pairs.kappa[k],
                        pairs.numAlphas[k], pairs.alphas + k * pairs.numTiles(),
                        pairs.alphaTerms + k * pairs.numTiles(), from - start,
                        width, space.pairWeights);
      return space.pairWeights + (from - start);
    };
    for (int64_t k = 0; k < pass.numOutputs;) {
      if (k >= firstPairSum) {
        scatterPairSum(k, weightsOf(k));
        ++k;
        continue;
      }
      if (pass.widths[k] == 0 || (plainOutput(k) && vectorsOf(k) > 0)) {
        ++k;
        continue;
      }
      const T *weights = weightsOf(k);
      // With k, the outputs right after it that share its weights.
      size = 0;
      group[size++] = k++;
      if (const int vectors = vectorsOf(group[0]); vectors > 0)
        for (; (size + 1) * vectors <= kMaxSumGroup && k < pass.numOutputs &&
               vectorsOf(k) == vectors && !plainOutput(k) && pairs.shared[k];
             ++k)
          group[size++] = k;
      sumGroup(weights, group, size);
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
    for (int64_t k = 0; k < pass.numOutputs - pass.numPairSums; ++k) {
      const int64_t width = pass.widths[k];
      T *out = pass.outputs[k] + (outerAt + first + r) * width;
      const T *acc = space.accumulators[k] + r * space.accumulatorStride[k];
      const T multiple = pairs.scaled ? pairs.scaled[k] : T(1);
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
      if (multiple != 1 && !empty)
        for (int64_t c = 0; c < width; ++c)
          out[c] *= multiple;
    }
  }
}

} // namespace contract
} // namespace energy::kernels::ENERGY_KERNEL_ISA

#endif // ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTBLOCK_H
