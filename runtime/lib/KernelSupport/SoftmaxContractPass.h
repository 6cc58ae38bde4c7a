//===- SoftmaxContractPass.h - One pass of the contraction ------*- C++ -*-===//
//
// What one pass of the CPU softmax contraction (SoftmaxContractKernel.h)
// hands its blocks: sizes, features, normaliser, outputs, pair terms, tiles.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTPASS_H
#define ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTPASS_H

#include <stdint.h>

namespace energy::kernels::ENERGY_KERNEL_ISA {
namespace contract {

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
/// terms are those that some output of the pass weights or that a weighted
/// product multiplies, renumbered (tiles 0 .. numTerms), then the weighted
/// products of two of them (tiles numTerms + p, p < numProducts). The
/// weights an output sums are computed once for every output whose
/// coefficients are a multiple of them: a plain output (no α) sums W and
/// an output of the same α's in proportion as the last one computed sums
/// that one's weights (shared[k]); each is then scaled[k] times its sum.
template <class T> struct PairWeights {
  int64_t numTerms = 0;
  int64_t numProducts = 0;
  /// Per product: the two terms it multiplies (renumbered).
  const int64_t *productFactors = nullptr;
  const int64_t *depths = nullptr; ///< per term
  /// Per term: the problems' outerCount × depth, back to back.
  const T *const *outer = nullptr;
  /// Per term: the problems' strips, as Pass::packedInner.
  T *const *packedInner = nullptr;
  /// Per term: its inner features (innerCount × depth per problem), read
  /// only to pack them.
  const T *const *inner = nullptr;
  const bool *plain = nullptr;        ///< per output
  const bool *shared = nullptr;       ///< per output
  const T *scaled = nullptr;          ///< per output
  const T *kappa = nullptr;           ///< per output
  const int64_t *numAlphas = nullptr; ///< per output
  /// Per output, numTerms + numProducts slots.
  const T *alphas = nullptr;
  const int64_t *alphaTerms = nullptr;
  /// Per term: its index among the arguments' pair terms.
  const int64_t *sourceTerms = nullptr;
  /// The tiles a block computes: the terms', then the products'.
  int64_t numTiles() const { return numTerms + numProducts; }
};

/// The pair bias in a pass's orientation (SoftmaxContract.h): the score of
/// (outer o, inner i) of a problem gains bias[problem · length + outer · o +
/// inner · i + offset] / T.
template <class T> struct PassBias {
  const T *bias = nullptr; ///< problems × length, or null
  int64_t length = 0, outer = 0, inner = 0, offset = 0;
  T factor = 1; ///< 1 / temperature
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
  PassBias<T> pairBias = {};
  int64_t problems = 1;  ///< B >= 1
  int64_t blockRows = 0; ///< the height of a block (blockHeight)
  int64_t blocks = 0;    ///< blocks per problem
  /// The last numPairSums outputs (width 1) are pair sums: each block adds
  /// its pairs' weighted values at the pair bias's indices into its own
  /// partials (numPairSums × problems × blocks × pairBias.length, zeroed),
  /// which runPass adds up in block order into the outputs (pairBias.length
  /// elements a problem).
  int64_t numPairSums = 0;
  T *pairPartials = nullptr;
};

} // namespace contract
} // namespace energy::kernels::ENERGY_KERNEL_ISA

#endif // ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTPASS_H
