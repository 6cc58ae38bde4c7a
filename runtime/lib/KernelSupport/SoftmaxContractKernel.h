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
// Pair terms: an output with coefficients other than α = 0 sums
// W_k = W ∘ (κ + Σ_i α_i T_i) instead of W, with T_i = A_i B_iᵀ the tile of
// pair term i over the same strips, by the same score micro-kernel (factor
// 1); W_k is formed in scratch, just before its weighted sum, once for the
// outputs whose coefficients are multiples of its own (a backward pass's
// scalar and vector sums over one difference of pair terms): those sum it
// and scale their results, as an output with κ alone scales W's sum.
// Only the terms that some output of the pass weights are packed (inner
// features in strips once per pass) and multiplied. The rescaling of the
// online normaliser applies to W_k as to W.
//
// The pieces, each a header included here:
//
//   SoftmaxContractTiles.h         tile and block shapes
//   SoftmaxContractPass.h          what a pass hands its blocks (Pass)
//   SoftmaxContractWorkspace.h     scratch memory and buffers
//   SoftmaxContractMicroKernels.h  packing into strips, register tiles
//   SoftmaxContractBlock.h         one block: constraints, kept tiles, panels
//
// Code compiled here, in this file and in its pieces, must not use C++
// standard library templates or inline functions: their out-of-line copies
// could be compiled for this instruction set and linked into code that runs
// on any CPU.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTKERNEL_H
#define ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTKERNEL_H

#include "SoftmaxContractBlock.h"
#include "SoftmaxContractMicroKernels.h"
#include "SoftmaxContractPass.h"
#include "SoftmaxContractTiles.h"
#include "SoftmaxContractWorkspace.h"

#include "energy/KernelSupport/KernelSupport.h"
#include "energy/KernelSupport/SoftmaxContract.h"

#include <stdint.h>
#include <string.h>

namespace energy::kernels::ENERGY_KERNEL_ISA {
namespace contract {

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

/// Elements of `problems` problems of `count` inner features of `depth`
/// each, packed into strips, in `size`; false when that overflows.
template <class V>
bool packedSize(int64_t problems, int64_t count, int64_t depth, int64_t &size) {
  constexpr int64_t strip = Tiling<V>::kStrip;
  int64_t perProblem;
  return !__builtin_mul_overflow(roundUp(count, strip), depth, &perProblem) &&
         !__builtin_mul_overflow(perProblem, problems, &size);
}

/// Whether row `k` of the coefficients `weights` (rows of `stride`) is
/// exactly `multiple` times row `of`, whose α's are not all zero.
template <class T>
bool proportionalRows(const double *weights, int64_t stride, int64_t of,
                      int64_t k, T &multiple) {
  const double *base = weights + of * stride, *row = weights + k * stride;
  int64_t lead = 1;
  while (base[lead] == 0)
    ++lead;
  const double ratio = row[lead] / base[lead];
  for (int64_t i = 0; i < stride; ++i)
    if (row[i] != ratio * base[i])
      return false;
  multiple = static_cast<T>(ratio);
  return true;
}

/// The pair weights of a pass whose `numOutputs` outputs of `widths` have
/// `weights` (numOutputs × (1 + numTerms + numProducts) coefficients, or
/// null), the pair terms having `depths`, `outer` features (outerCount rows
/// a problem) and `inner` ones (innerCount rows a problem, `problems`
/// problems), and `products` the two terms of each product: in `pairs`,
/// with its memory in `buffer`, and room in `packed` for the inner features
/// in strips, which packPass fills. With `allTerms` (a pass that keeps its
/// tiles), every term is computed, weighted or not. False when out of
/// memory.
template <class V>
bool preparePairs(PairWeights<typename V::Scalar> &pairs, Buffer &buffer,
                  Buffer &packed, int64_t numOutputs, const int64_t *widths,
                  const double *weights, int64_t numTerms,
                  const int64_t *depths, const void *const *outer,
                  const void *const *inner, int64_t numProducts,
                  const int64_t *products, int64_t problems, int64_t innerCount,
                  bool allTerms) {
  using T = typename V::Scalar;
  if (!allTerms && (!weights || numOutputs == 0))
    return true;
  const int64_t stride = 1 + numTerms + numProducts;
  // Without weights, every output is plain (κ = 1, α = 0).
  auto kappaOf = [&](int64_t k) { return weights ? weights[k * stride] : 1; };
  // Coefficient i of output k: of term i < numTerms, else of product
  // i − numTerms.
  auto alpha = [&](int64_t k, int64_t i) {
    return weights ? weights[k * stride + 1 + i] : 0;
  };
  auto weighted = [&](int64_t i) {
    for (int64_t k = 0; k < numOutputs; ++k)
      if (alpha(k, i) != 0)
        return true;
    return false;
  };
  auto productNeeded = [&](int64_t p) { return weighted(numTerms + p); };
  auto needed = [&](int64_t i) {
    if (allTerms || weighted(i))
      return true;
    for (int64_t p = 0; p < numProducts; ++p)
      if ((products[2 * p] == i || products[2 * p + 1] == i) &&
          productNeeded(p))
        return true;
    return false;
  };
  // The terms and products some output weights, and whether any output is
  // not plain.
  int64_t used = 0, usedProducts = 0;
  bool anyWeighted = false;
  for (int64_t k = 0; k < numOutputs; ++k)
    anyWeighted = anyWeighted || kappaOf(k) != 1;
  for (int64_t i = 0; i < numTerms; ++i)
    used += needed(i);
  for (int64_t p = 0; p < numProducts; ++p)
    usedProducts += productNeeded(p);
  if (!anyWeighted && used == 0)
    return true;
  const int64_t tiles = used + usedProducts;

  // The arrays; numOutputs · stride coefficients fit in memory, so these
  // do too.
  Carving carving;
  auto reserve = [&](size_t size) { return carving.reserve(size); };
  size_t depthsAt = reserve(sizeof(int64_t) * used);
  size_t outerAt = reserve(sizeof(T *) * used);
  size_t innerAt = reserve(sizeof(T *) * used);
  size_t sourcesAt = reserve(sizeof(T *) * used);
  size_t sourceTermsAt = reserve(sizeof(int64_t) * used);
  size_t renumberedAt = reserve(sizeof(int64_t) * numTerms);
  size_t factorsAt = reserve(sizeof(int64_t) * 2 * usedProducts);
  size_t plainAt = reserve(sizeof(bool) * numOutputs);
  size_t sharedAt = reserve(sizeof(bool) * numOutputs);
  size_t scaledAt = reserve(sizeof(T) * numOutputs);
  size_t kappaAt = reserve(sizeof(T) * numOutputs);
  size_t numAlphasAt = reserve(sizeof(int64_t) * numOutputs);
  size_t alphasAt = reserve(sizeof(T) * numOutputs * tiles);
  size_t alphaTermsAt = reserve(sizeof(int64_t) * numOutputs * tiles);
  char *base = buffer.allocate<char>(static_cast<int64_t>(carving.bytes));
  if (!base)
    return false;
  auto *termDepths = reinterpret_cast<int64_t *>(base + depthsAt);
  auto *termOuter = reinterpret_cast<const T **>(base + outerAt);
  auto *termInner = reinterpret_cast<T **>(base + innerAt);
  auto *sources = reinterpret_cast<const T **>(base + sourcesAt);
  auto *sourceTerms = reinterpret_cast<int64_t *>(base + sourceTermsAt);
  auto *renumbered = reinterpret_cast<int64_t *>(base + renumberedAt);
  auto *factors = reinterpret_cast<int64_t *>(base + factorsAt);
  auto *plain = reinterpret_cast<bool *>(base + plainAt);
  auto *shared = reinterpret_cast<bool *>(base + sharedAt);
  auto *scaled = reinterpret_cast<T *>(base + scaledAt);
  auto *kappa = reinterpret_cast<T *>(base + kappaAt);
  auto *numAlphas = reinterpret_cast<int64_t *>(base + numAlphasAt);
  auto *alphas = reinterpret_cast<T *>(base + alphasAt);
  auto *alphaTerms = reinterpret_cast<int64_t *>(base + alphaTermsAt);

  // The terms renumbered, then the products' factors in those numbers.
  for (int64_t i = 0, term = 0; i < numTerms; ++i)
    renumbered[i] = needed(i) ? term++ : -1;
  for (int64_t p = 0, product = 0; p < numProducts; ++p)
    if (productNeeded(p)) {
      factors[2 * product] = renumbered[products[2 * p]];
      factors[2 * product + 1] = renumbered[products[2 * p + 1]];
      ++product;
    }
  // Each output's kappa and nonzero alphas, over the renumbered tiles.
  for (int64_t k = 0; k < numOutputs; ++k) {
    kappa[k] = static_cast<T>(kappaOf(k));
    numAlphas[k] = 0;
    auto add = [&](int64_t i, int64_t tile) {
      if (alpha(k, i) == 0)
        return;
      alphas[k * tiles + numAlphas[k]] = static_cast<T>(alpha(k, i));
      alphaTerms[k * tiles + numAlphas[k]] = tile;
      ++numAlphas[k];
    };
    for (int64_t i = 0; i < numTerms; ++i)
      if (renumbered[i] >= 0)
        add(i, renumbered[i]);
    for (int64_t p = 0, product = 0; p < numProducts; ++p)
      if (productNeeded(p))
        add(numTerms + p, used + product++);
  }
  // Which outputs sum weights computed for another, and by what multiple.
  for (int64_t k = 0, last = -1; k < numOutputs; ++k) {
    plain[k] = numAlphas[k] == 0 || widths[k] == 0;
    shared[k] = !plain[k] && last >= 0 &&
                proportionalRows(weights, stride, last, k, scaled[k]);
    if (plain[k])
      scaled[k] = kappa[k];
    else if (!shared[k]) {
      scaled[k] = 1;
      last = k;
    }
  }

  // Room for the inner features of the terms in strips.
  int64_t total = 0;
  for (int64_t i = 0; i < numTerms; ++i) {
    const int64_t term = renumbered[i];
    if (term < 0)
      continue;
    int64_t size;
    if (!packedSize<V>(problems, innerCount, depths[i], size) ||
        __builtin_add_overflow(total, size, &total))
      return false;
    termDepths[term] = depths[i];
    termOuter[term] = static_cast<const T *>(outer[i]);
    sources[term] = static_cast<const T *>(inner[i]);
    sourceTerms[term] = i;
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
  pairs.numProducts = usedProducts;
  pairs.productFactors = factors;
  pairs.depths = termDepths;
  pairs.outer = termOuter;
  pairs.packedInner = termInner;
  pairs.inner = sources;
  pairs.plain = plain;
  pairs.shared = shared;
  pairs.scaled = scaled;
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
/// thread pool, then adds up the blocks' partial pair sums; false when some
/// task ran out of memory.
template <class V> bool runPass(Pass<typename V::Scalar> &pass) {
  using T = typename V::Scalar;
  pass.failed = 0;
  pass.blockRows = blockHeight<V>(pass.outerCount);
  pass.blocks = roundUp(pass.outerCount, pass.blockRows) / pass.blockRows;
  // At most problems · outerCount, which fits.
  const int64_t tasks = pass.problems * pass.blocks;
  Buffer partialBuffer;
  const int64_t length = pass.pairBias.length;
  if (pass.numPairSums > 0) {
    int64_t partials;
    if (__builtin_mul_overflow(tasks, length, &partials) ||
        __builtin_mul_overflow(partials, pass.numPairSums, &partials))
      return false;
    pass.pairPartials = partialBuffer.allocate<T>(partials);
    if (!pass.pairPartials)
      return false;
    memset(pass.pairPartials, 0, sizeof(T) * partials);
  }
  energy_support_parallel_for(runBlocks<V>, &pass, tasks);
  if (__atomic_load_n(&pass.failed, __ATOMIC_RELAXED))
    return false;
  for (int64_t s = 0; s < pass.numPairSums; ++s) {
    T *out = pass.outputs[pass.numOutputs - pass.numPairSums + s];
    for (int64_t problem = 0; problem < pass.problems; ++problem) {
      const T *partial =
          pass.pairPartials + (s * tasks + problem * pass.blocks) * length;
      T *sums = out + problem * length;
      for (int64_t u = 0; u < length; ++u)
        sums[u] = 0;
      for (int64_t block = 0; block < pass.blocks; ++block)
        for (int64_t u = 0; u < length; ++u)
          sums[u] += partial[block * length + u];
    }
  }
  return true;
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
             pass.pairs, pairBuffer, pairPackedBuffer, pass.numOutputs,
             pass.widths, weights, args.num_pair_terms, args.pair_depths, outer,
             inner, args.num_pair_products, args.pair_products, pass.problems,
             pass.innerCount, pass.kept.tiles && pass.kept.writing) &&
         (reading || packPass<V>(pass, features, packedBuffer, listBuffer)) &&
         runPass<V>(pass);
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

/// The arguments' pair bias in the orientation of the row side's pass or
/// the column side's (whose outer indices are the columns).
template <class T>
PassBias<T> passBias(const energy_softmax_contract_args &args, bool rowSide) {
  PassBias<T> bias;
  if (!args.pair_bias)
    return bias;
  bias.bias = static_cast<const T *>(args.pair_bias);
  bias.length = args.pair_bias_length;
  bias.outer =
      rowSide ? args.pair_bias_row_coefficient : args.pair_bias_col_coefficient;
  bias.inner =
      rowSide ? args.pair_bias_col_coefficient : args.pair_bias_row_coefficient;
  bias.offset = args.pair_bias_offset;
  bias.factor = static_cast<T>(1 / args.temperature);
  return bias;
}

/// Whether the pair bias's index a·r + b·c + o is within [0, length) at
/// every admitted pair (the ends of each row's admitted interval bound a
/// linear form over it; pairs the constraints exclude are never read).
template <class T>
bool biasWithinAdmitted(const energy_softmax_contract_args &args,
                        const PassConstraint *constraints,
                        int64_t numConstraints) {
  Buffer holeBuffer;
  int64_t *holes = holeBuffer.allocate<int64_t>(numConstraints + 1);
  if (!holes)
    return false;
  Pass<T> pass{};
  pass.innerCount = args.cols;
  pass.constraints = constraints;
  pass.numConstraints = numConstraints;
  for (int64_t r = 0; r < args.rows; ++r) {
    int64_t begin, end, holeCount;
    admittedInterval(pass, r, begin, end, holes, holeCount);
    if (begin >= end)
      continue;
    const int64_t ends[2] = {begin, end - 1};
    for (int64_t c : ends) {
      __int128 index = (__int128)args.pair_bias_row_coefficient * r +
                       (__int128)args.pair_bias_col_coefficient * c +
                       args.pair_bias_offset;
      if (index < 0 || index >= args.pair_bias_length)
        return false;
    }
  }
  return true;
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
  if (args.pair_bias &&
      !biasWithinAdmitted<T>(args, rowConstraints, numConstraints))
    return ENERGY_CONTRACT_INVALID_ARGUMENT;
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
    pass.pairBias = passBias<T>(args, /*rowSide=*/true);
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
      pass.pairBias = passBias<T>(args, /*rowSide=*/false);
      pass.numPairSums = args.num_pair_sums;
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
