//===- SoftmaxContractTestSupport.h - Test helpers --------------*- C++ -*-===//
//
// What the softmax contraction tests share: problems in doubles, the
// double-precision reference, the kernel run on a batch, and the checks.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TESTS_UNIT_KERNELSUPPORT_SOFTMAXCONTRACTTESTSUPPORT_H
#define ENERGY_TESTS_UNIT_KERNELSUPPORT_SOFTMAXCONTRACTTESTSUPPORT_H

#include "energy/KernelSupport/SoftmaxContract.h"

#include <cstdint>
#include <string>
#include <vector>

namespace energy::testing::softmax {

/// The instruction-set paths the CPU runs, from the scalar one up.
std::vector<int32_t> supportedPaths();
/// The name of path `isa`.
std::string pathName(int32_t isa);

/// Restores the automatic path and the default thread count at the end.
struct ForcedPath {
  explicit ForcedPath(int32_t isa);
  ~ForcedPath();
};

energy_contract_constraint atLeast(int64_t a, int64_t b, int64_t offset);
energy_contract_constraint notEqual(int64_t a, int64_t b, int64_t offset);

/// Constraints a test runs its problems under, named after `what`: none,
/// causal (c <= r), and a window with a hole (r - 3 <= c <= r + 40,
/// c != r).
struct ConstraintCase {
  std::string name;
  std::vector<energy_contract_constraint> constraints;
};
std::vector<ConstraintCase> constraintCases(const std::string &what);

/// A problem in doubles; every value is representable in float, so both
/// element types see the same inputs.
struct Problem {
  int64_t rows = 0, cols = 0, depth = 0;
  double scale = 1, temperature = 1;
  std::vector<energy_contract_constraint> constraints;
  std::vector<double> rowFeatures, colFeatures;
  std::vector<int64_t> rowWidths, colWidths; // of row and col outputs
  std::vector<std::vector<double>> colValues, rowValues;
  bool givenLse = false;
  bool wantLse = true;
  std::vector<int64_t> pairDepths;
  std::vector<std::vector<double>> pairRowFeatures, pairColFeatures;
  /// Products of two pair terms: their indices, two per product.
  std::vector<int64_t> pairProducts;
  /// The coefficients of the row and col outputs, 1 + pairDepths.size() +
  /// pairProducts.size() / 2 each, or empty (null: κ = 1, α = 0).
  std::vector<double> rowWeights, colWeights;
  /// The pair bias (SoftmaxContract.h): added to the score of (r, c) at
  /// index a·r + b·c + o; empty for none.
  std::vector<double> pairBias;
  int64_t biasRowCoefficient = 0, biasColCoefficient = 0, biasOffset = 0;
  /// The last numPairSums col outputs (of width 1) are pair sums, over the
  /// pair bias's indices.
  int64_t numPairSums = 0;
  /// Whether col output j is a pair sum.
  bool pairSum(size_t j) const { return j + numPairSums >= colWidths.size(); }
};

/// Gives `p` a pair bias of one value per relative offset r − c (a
/// Toeplitz bias, T5's), drawn from `seed`.
void addRelativeBias(Problem &p, uint64_t seed);

/// A problem of rows × cols × depth with outputs of `rowWidths` and
/// `colWidths`, its features and values drawn from `seed`.
Problem makeProblem(int64_t rows, int64_t cols, int64_t depth,
                    std::vector<int64_t> rowWidths,
                    std::vector<int64_t> colWidths, uint64_t seed);

/// The outputs, in doubles, and for each output element the size
/// Σ w·|value| of the sum that produced it.
struct Result {
  std::vector<double> lse;
  std::vector<std::vector<double>> rowOutputs, colOutputs;
  std::vector<std::vector<double>> rowMagnitudes, colMagnitudes;
  double scoreMagnitude = 0; ///< max over pairs of |scale| · Σ_d |q_d k_d|
  double lseMagnitude = 0;   ///< max |L|
  double termMagnitude = 0;  ///< max over admitted pairs of F · |v|
};

/// Every pair's score s = scale·<q, k> + β, whether it is admitted, and the
/// largest |scale|·Σ_d |q_d k_d|.
struct PairScores {
  std::vector<double> scores;
  std::vector<char> admitted;
  double magnitude = 0;
};

/// The pair scores of `p`, for the reference.
PairScores pairScores(const Problem &p);

/// The definition, pair by pair, in double precision. `given` is the
/// normaliser to use, when not empty.
Result reference(const Problem &p, const PairScores &pairScores,
                 const std::vector<double> &given);

template <class T> std::vector<T> cast(const std::vector<double> &values) {
  return std::vector<T>(values.begin(), values.end());
}

/// Runs the kernel in element type T on a batch of problems of the same
/// sizes, widths, depths, scale, temperature, constraints and coefficients
/// (those of the first), back to back in every array; `given` holds each
/// problem's normaliser, or is empty; `tiles` and `tilesMode` are the
/// arguments' kept tiles. Outputs start as NaN, so that an output the kernel
/// does not overwrite shows.
template <class T>
std::vector<Result> runBatch(const std::vector<Problem> &problems,
                             const std::vector<std::vector<double>> &given,
                             int32_t *status = nullptr, void *tiles = nullptr,
                             int64_t tilesMode = ENERGY_CONTRACT_TILES_NONE);

/// Runs the kernel in element type T on one problem.
template <class T>
Result runKernel(const Problem &p, const std::vector<double> &given,
                 int32_t *status = nullptr);

/// The kernel on every path, f32 and f64, against the reference, on a batch
/// of problems (see runBatch) in one call; with a given normaliser too (the
/// reference's own, rounded to the element type).
void checkBatchEverywhere(const std::vector<Problem> &problems,
                          const char *name);
/// checkBatchEverywhere on one problem.
void checkEverywhere(const Problem &p, const char *name);

/// The coefficients (κ, α_0, α_1) of three outputs: plain, pair terms only,
/// κ and the second term.
extern const std::vector<double> kMixedWeights;
/// The same three in another order, with the first term in none of them.
extern const std::vector<double> kSecondTermWeights;

/// Gives `p` pair terms of `depths`, their features drawn from `seed`.
void addPairTerms(Problem &p, const std::vector<int64_t> &depths,
                  uint64_t seed);

/// `p` without pair terms or output weights: plain weighted sums.
void dropPairTerms(Problem &p);

/// `batch` problems of rows × cols × depth with two pair terms of depths 5
/// and 13 and three outputs a side, of widths that are multiples of no
/// vector width; the row outputs weighted by kMixedWeights, the col outputs
/// by `colWeights`.
std::vector<Problem> pairProblems(int64_t batch, int64_t rows, int64_t cols,
                                  int64_t depth,
                                  const std::vector<double> &colWeights,
                                  uint64_t seed);

/// pairProblems whose outputs are also weighted by products of their two
/// pair terms, t_0·t_1 and t_1·t_1: one output a side plain, one with both
/// terms and a product, and on the column side one whose factor reads
/// term 0 only through a product.
std::vector<Problem> productProblems(int64_t batch, int64_t rows, int64_t cols,
                                     int64_t depth, uint64_t seed);

} // namespace energy::testing::softmax

#endif // ENERGY_TESTS_UNIT_KERNELSUPPORT_SOFTMAXCONTRACTTESTSUPPORT_H
