//===- SoftmaxContractTest.cpp - The softmax contraction, checked ---------===//
//
// energy_support_softmax_contract_f32/f64 against a plain double-precision
// reference written here from the definition in SoftmaxContract.h (a loop
// over every pair with the textbook stable log-sum-exp), at sizes that are
// multiples of no tile or vector width, with causal, windowed and NE
// constraints, rows left empty, a given normaliser, temperatures other than
// 1, several outputs of different widths on both sides, pair terms with
// outputs weighted by them, batches, on every instruction-set path the CPU
// runs; then the same bits on 1, 2 and 3 threads, and refusals of invalid
// arguments.
//
//===----------------------------------------------------------------------===//

#include "energy/KernelSupport/SoftmaxContract.h"
#include "energy/KernelSupport/InstructionSet.h"
#include "energy/KernelSupport/KernelSupport.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::vector<int32_t> supportedPaths() {
  std::vector<int32_t> paths;
  for (int32_t isa = ENERGY_ISA_SCALAR; isa <= energy_support_supported_isa();
       ++isa)
    paths.push_back(isa);
  return paths;
}

std::string pathName(int32_t isa) {
  return isa == ENERGY_ISA_AVX512 ? "avx512"
         : isa == ENERGY_ISA_AVX2 ? "avx2"
                                  : "scalar";
}

/// Restores the automatic path and the default thread count at the end.
struct ForcedPath {
  explicit ForcedPath(int32_t isa) {
    REQUIRE(energy_support_force_isa(isa) == 0);
  }
  ~ForcedPath() { energy_support_force_isa(ENERGY_ISA_AUTOMATIC); }
};

energy_contract_constraint atLeast(int64_t a, int64_t b, int64_t offset) {
  return {a, b, offset, ENERGY_CONSTRAINT_GE};
}
energy_contract_constraint notEqual(int64_t a, int64_t b, int64_t offset) {
  return {a, b, offset, ENERGY_CONSTRAINT_NE};
}

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
  /// The coefficients of the row and col outputs, 1 + pairDepths.size()
  /// each, or empty (null: κ = 1, α = 0).
  std::vector<double> rowWeights, colWeights;
};

Problem makeProblem(int64_t rows, int64_t cols, int64_t depth,
                    std::vector<int64_t> rowWidths,
                    std::vector<int64_t> colWidths, uint64_t seed) {
  Problem p;
  p.rows = rows;
  p.cols = cols;
  p.depth = depth;
  p.scale = 1.5 / std::sqrt(static_cast<double>(depth));
  p.rowWidths = std::move(rowWidths);
  p.colWidths = std::move(colWidths);
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  auto fill = [&](int64_t count) {
    std::vector<double> values(count);
    for (double &v : values)
      v = uniform(random);
    return values;
  };
  p.rowFeatures = fill(rows * depth);
  p.colFeatures = fill(cols * depth);
  for (int64_t w : p.rowWidths)
    p.colValues.push_back(fill(cols * w));
  for (int64_t w : p.colWidths)
    p.rowValues.push_back(fill(rows * w));
  return p;
}

/// Gives `p` pair terms of `depths`, their features drawn from `seed`.
void addPairTerms(Problem &p, const std::vector<int64_t> &depths,
                  uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  auto fill = [&](int64_t count) {
    std::vector<double> values(count);
    for (double &v : values)
      v = uniform(random);
    return values;
  };
  p.pairDepths = depths;
  p.pairRowFeatures.clear();
  p.pairColFeatures.clear();
  for (int64_t depth : depths) {
    p.pairRowFeatures.push_back(fill(p.rows * depth));
    p.pairColFeatures.push_back(fill(p.cols * depth));
  }
}

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

bool admitted(const Problem &p, int64_t r, int64_t c) {
  for (const energy_contract_constraint &k : p.constraints) {
    int64_t value = k.row_coefficient * r + k.col_coefficient * c + k.offset;
    if (k.kind == ENERGY_CONSTRAINT_GE ? value < 0 : value == 0)
      return false;
  }
  return true;
}

/// Every pair's score s = scale·<q, k>, whether it is admitted, and the
/// largest |scale|·Σ_d |q_d k_d|.
struct PairScores {
  std::vector<double> scores;
  std::vector<char> admitted;
  double magnitude = 0;
};

PairScores pairScores(const Problem &p) {
  PairScores out;
  const int64_t rows = p.rows, cols = p.cols, depth = p.depth;
  out.scores.resize(rows * cols);
  out.admitted.resize(rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      double dot = 0, absDot = 0;
      for (int64_t d = 0; d < depth; ++d) {
        double term =
            p.rowFeatures[r * depth + d] * p.colFeatures[c * depth + d];
        dot += term;
        absDot += std::fabs(term);
      }
      out.scores[r * cols + c] = p.scale * dot;
      out.magnitude = std::max(out.magnitude, std::fabs(p.scale) * absDot);
      out.admitted[r * cols + c] = admitted(p, r, c);
    }
  return out;
}

/// The definition, pair by pair, in double precision. `given` is the
/// normaliser to use, when not empty.
Result reference(const Problem &p, const PairScores &pairScores,
                 const std::vector<double> &given) {
  Result out;
  const int64_t rows = p.rows, cols = p.cols;
  const double temperature = p.temperature;
  const std::vector<double> &scores = pairScores.scores;
  const std::vector<char> &pairs = pairScores.admitted;
  std::vector<double> weights(rows * cols, 0.0);
  out.scoreMagnitude = pairScores.magnitude;
  out.lse.assign(rows, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double highest = -std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < cols; ++c)
      if (pairs[r * cols + c])
        highest = std::max(highest, scores[r * cols + c] / temperature);
    if (std::isinf(highest) && given.empty())
      continue; // no admitted column: L = 0, no weights
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c)
      if (pairs[r * cols + c])
        sum += std::exp(scores[r * cols + c] / temperature - highest);
    double lse =
        given.empty() ? temperature * (highest + std::log(sum)) : given[r];
    out.lse[r] = lse;
    out.lseMagnitude = std::max(out.lseMagnitude, std::fabs(lse));
    for (int64_t c = 0; c < cols; ++c)
      if (pairs[r * cols + c])
        weights[r * cols + c] =
            std::exp((scores[r * cols + c] - lse) / temperature);
  }
  // The pair terms t_i(r, c) and their sizes Σ_d |a_d b_d|.
  const size_t terms = p.pairDepths.size();
  std::vector<std::vector<double>> tangents(terms), tangentSizes(terms);
  for (size_t i = 0; i < terms; ++i) {
    const int64_t depth = p.pairDepths[i];
    tangents[i].assign(rows * cols, 0.0);
    tangentSizes[i].assign(rows * cols, 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        for (int64_t d = 0; d < depth; ++d) {
          double term = p.pairRowFeatures[i][r * depth + d] *
                        p.pairColFeatures[i][c * depth + d];
          tangents[i][r * cols + c] += term;
          tangentSizes[i][r * cols + c] += std::fabs(term);
        }
  }
  // Output j's factor κ + Σ_i α_i·t_i at a pair, and its size
  // |κ| + Σ_i |α_i|·Σ_d |a_d b_d| in `size`.
  auto factor = [&](const std::vector<double> &coefficients, size_t j,
                    int64_t pair, double &size) {
    if (coefficients.empty()) {
      size = 1;
      return 1.0;
    }
    const double *k = &coefficients[j * (1 + terms)];
    double f = k[0];
    size = std::fabs(k[0]);
    for (size_t i = 0; i < terms; ++i) {
      f += k[1 + i] * tangents[i][pair];
      size += std::fabs(k[1 + i]) * tangentSizes[i][pair];
    }
    return f;
  };
  for (size_t j = 0; j < p.rowWidths.size(); ++j) {
    int64_t width = p.rowWidths[j];
    std::vector<double> sum(rows * width, 0.0), size(rows * width, 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        double w = weights[r * cols + c], factorSize;
        double f = factor(p.rowWeights, j, r * cols + c, factorSize);
        for (int64_t k = 0; k < width && w != 0; ++k) {
          double value = p.colValues[j][c * width + k];
          sum[r * width + k] += w * f * value;
          size[r * width + k] += w * factorSize * std::fabs(value);
          out.termMagnitude =
              std::max(out.termMagnitude, factorSize * std::fabs(value));
        }
      }
    out.rowOutputs.push_back(sum);
    out.rowMagnitudes.push_back(size);
  }
  for (size_t j = 0; j < p.colWidths.size(); ++j) {
    int64_t width = p.colWidths[j];
    std::vector<double> sum(cols * width, 0.0), size(cols * width, 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        double w = weights[r * cols + c], factorSize;
        double f = factor(p.colWeights, j, r * cols + c, factorSize);
        for (int64_t k = 0; k < width && w != 0; ++k) {
          double value = p.rowValues[j][r * width + k];
          sum[c * width + k] += w * f * value;
          size[c * width + k] += w * factorSize * std::fabs(value);
          out.termMagnitude =
              std::max(out.termMagnitude, factorSize * std::fabs(value));
        }
      }
    out.colOutputs.push_back(sum);
    out.colMagnitudes.push_back(size);
  }
  return out;
}

template <class T> std::vector<T> cast(const std::vector<double> &values) {
  return std::vector<T>(values.begin(), values.end());
}

template <class T> int32_t callKernel(const energy_softmax_contract_args &args);
template <>
int32_t callKernel<float>(const energy_softmax_contract_args &args) {
  return energy_support_softmax_contract_f32(&args);
}
template <>
int32_t callKernel<double>(const energy_softmax_contract_args &args) {
  return energy_support_softmax_contract_f64(&args);
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
                             int64_t tilesMode = ENERGY_CONTRACT_TILES_NONE) {
  const Problem &p = problems.front();
  const int64_t batch = static_cast<int64_t>(problems.size());
  const size_t terms = p.pairDepths.size();
  auto joined = [&](auto part) {
    std::vector<T> all;
    for (const Problem &q : problems) {
      const std::vector<double> &values = part(q);
      all.insert(all.end(), values.begin(), values.end());
    }
    return all;
  };
  std::vector<T> rowFeatures =
      joined([](const Problem &q) -> const auto & { return q.rowFeatures; });
  std::vector<T> colFeatures =
      joined([](const Problem &q) -> const auto & { return q.colFeatures; });
  std::vector<T> givenLse;
  for (const std::vector<double> &lse : given)
    givenLse.insert(givenLse.end(), lse.begin(), lse.end());
  const T nan = std::numeric_limits<T>::quiet_NaN();
  std::vector<T> lse(batch * p.rows, nan);
  std::vector<std::vector<T>> colValues, rowValues, rowOutputs, colOutputs;
  std::vector<std::vector<T>> pairRowFeatures, pairColFeatures;
  std::vector<const void *> colValuePointers, rowValuePointers;
  std::vector<const void *> pairRowPointers, pairColPointers;
  std::vector<void *> rowOutputPointers, colOutputPointers;
  for (size_t j = 0; j < p.rowWidths.size(); ++j) {
    colValues.push_back(joined([j](const Problem &q) -> const auto & {
      return q.colValues[j];
    }));
    rowOutputs.emplace_back(batch * p.rows * p.rowWidths[j], nan);
  }
  for (size_t j = 0; j < p.colWidths.size(); ++j) {
    rowValues.push_back(joined([j](const Problem &q) -> const auto & {
      return q.rowValues[j];
    }));
    colOutputs.emplace_back(batch * p.cols * p.colWidths[j], nan);
  }
  for (size_t i = 0; i < terms; ++i) {
    pairRowFeatures.push_back(joined([i](const Problem &q) -> const auto & {
      return q.pairRowFeatures[i];
    }));
    pairColFeatures.push_back(joined([i](const Problem &q) -> const auto & {
      return q.pairColFeatures[i];
    }));
  }
  for (size_t j = 0; j < p.rowWidths.size(); ++j) {
    colValuePointers.push_back(colValues[j].data());
    rowOutputPointers.push_back(rowOutputs[j].data());
  }
  for (size_t j = 0; j < p.colWidths.size(); ++j) {
    rowValuePointers.push_back(rowValues[j].data());
    colOutputPointers.push_back(colOutputs[j].data());
  }
  for (size_t i = 0; i < terms; ++i) {
    pairRowPointers.push_back(pairRowFeatures[i].data());
    pairColPointers.push_back(pairColFeatures[i].data());
  }
  energy_softmax_contract_args args{};
  args.batch = batch;
  args.rows = p.rows;
  args.cols = p.cols;
  args.depth = p.depth;
  args.row_features = rowFeatures.data();
  args.col_features = colFeatures.data();
  args.scale = p.scale;
  args.temperature = p.temperature;
  args.num_constraints = static_cast<int64_t>(p.constraints.size());
  args.constraints = p.constraints.data();
  args.lse = p.wantLse ? lse.data() : nullptr;
  args.given_lse = given.empty() ? nullptr : givenLse.data();
  args.num_row_outputs = static_cast<int64_t>(p.rowWidths.size());
  args.col_values = colValuePointers.data();
  args.row_output_widths = p.rowWidths.data();
  args.row_outputs = rowOutputPointers.data();
  args.num_col_outputs = static_cast<int64_t>(p.colWidths.size());
  args.row_values = rowValuePointers.data();
  args.col_output_widths = p.colWidths.data();
  args.col_outputs = colOutputPointers.data();
  args.num_pair_terms = static_cast<int64_t>(terms);
  args.pair_depths = p.pairDepths.data();
  args.pair_row_features = pairRowPointers.data();
  args.pair_col_features = pairColPointers.data();
  args.row_output_weights =
      p.rowWeights.empty() ? nullptr : p.rowWeights.data();
  args.col_output_weights =
      p.colWeights.empty() ? nullptr : p.colWeights.data();
  args.kept_tiles = tiles;
  args.kept_tiles_mode = tilesMode;
  int32_t result = callKernel<T>(args);
  if (status)
    *status = result;
  else
    REQUIRE(result == ENERGY_CONTRACT_OK);
  // Problem b's part of an array of `size` elements per problem.
  auto slice = [](const std::vector<T> &all, int64_t b, int64_t size) {
    return std::vector<double>(all.begin() + b * size,
                               all.begin() + (b + 1) * size);
  };
  std::vector<Result> out(batch);
  for (int64_t b = 0; b < batch; ++b) {
    out[b].lse = slice(lse, b, p.rows);
    for (size_t j = 0; j < p.rowWidths.size(); ++j)
      out[b].rowOutputs.push_back(
          slice(rowOutputs[j], b, p.rows * p.rowWidths[j]));
    for (size_t j = 0; j < p.colWidths.size(); ++j)
      out[b].colOutputs.push_back(
          slice(colOutputs[j], b, p.cols * p.colWidths[j]));
  }
  return out;
}

/// Runs the kernel in element type T on one problem.
template <class T>
Result runKernel(const Problem &p, const std::vector<double> &given,
                 int32_t *status = nullptr) {
  std::vector<std::vector<double>> givens;
  if (!given.empty())
    givens.push_back(given);
  return runBatch<T>({p}, givens, status).front();
}

/// γ(n) = n·u/(1 - n·u), the classical bound on the relative error of n
/// floating-point operations in a row (u the unit roundoff).
double gamma(double n, double u) { return n * u / (1 - n * u); }

/// Compares the kernel's results with the reference, element by element,
/// within bounds derived from the element type's unit roundoff u = eps/2:
///  - a score s = scale·<q, k> in T has |δs| <= γ(D+2)·S, S the largest
///    |scale|·Σ|q_d k_d| (dot product, times scale/T);
///  - a weight exp((s - L)/T) then has relative error <= (|δs| + |δL|)/T plus
///    that of the exp (2 ulp) and of forming the argument (u·|s - L|/T <=
///    u·2S/T); |δL| <= |δs|max + T·γ(N+2) (log-sum-exp of N terms);
///  - an output Σ w·v over N terms adds γ(N+2) relative to Σ w·|v|, and the
///    division by the sum of weights another γ(N+2);
///  - with pair terms, a factor f = κ + Σ_i α_i·t_i (m terms, of depth at
///    most P) has |δf| <= (γ(P+1) + γ(m+2) + 2u)·F, F = |κ| + Σ_i |α_i|·
///    Σ_d |a_d b_d| (the dot products, their sum, the rounded coefficients).
/// So |output - reference| <= M·(4·γ(D+4)·S/T + 3·γ(N+4) + 4u·(S + |L|)/T
/// + 8u [+ γ(P+4) + γ(m+4) with pair terms]), M = Σ w·F·|v| of that element
/// (F = 1 without pair terms); and |δL| <= 2γ(D+4)·S + 2T·γ(N+4) + 4u·|L|.
/// Weights below μ, the smallest normal number of T, lose their relative
/// precision or become 0: each term may be off by μ·F·|v| more, so the
/// outputs' bounds add 4·(N+4)·μ·max(F·|v|) (negligible beside outputs that
/// are not themselves tiny).
/// These are worst-case bounds: a missing or extra pair, a wrong mask, a
/// wrong normaliser or a wrong factor moves an output by about w·F·|v| of
/// that pair, far more than γ(N)·M when N <= 1000.
template <class T>
void compare(const Problem &p, const Result &expected, const Result &actual,
             const std::string &what) {
  const double u = std::numeric_limits<T>::epsilon() / 2;
  const double t = p.temperature, s = expected.scoreMagnitude;
  const double lseSize = expected.lseMagnitude;
  double pairs = 0;
  if (!p.rowWeights.empty() || !p.colWeights.empty()) {
    int64_t deepest = 0;
    for (int64_t depth : p.pairDepths)
      deepest = std::max(deepest, depth);
    pairs = gamma(deepest + 4, u) +
            gamma(static_cast<double>(p.pairDepths.size()) + 4, u);
  }
  auto relative = [&](int64_t n) {
    return 4 * gamma(p.depth + 4, u) * s / t + 3 * gamma(n + 4, u) +
           4 * u * (s + lseSize) / t + 8 * u + pairs;
  };
  auto underflow = [&](int64_t n) {
    return 4 * static_cast<double>(n + 4) * std::numeric_limits<T>::min() *
               expected.termMagnitude +
           1e-300;
  };
  int64_t failures = 0;
  double worst = 0;
  std::string worstAt;
  auto check = [&](double got, double want, double tolerance,
                   const std::string &where) {
    double error = std::fabs(got - want);
    if (!(error <= tolerance)) {
      ++failures;
      double ratio = tolerance > 0 ? error / tolerance : INFINITY;
      if (!(ratio <= worst)) {
        worst = ratio;
        std::ostringstream text;
        text << std::setprecision(17) << where << ": got " << got << ", want "
             << want << ", bound " << tolerance;
        worstAt = text.str();
      }
    }
  };
  if (p.wantLse)
    for (int64_t r = 0; r < p.rows; ++r)
      check(actual.lse[r], expected.lse[r],
            2 * gamma(p.depth + 4, u) * s + 2 * t * gamma(p.cols + 4, u) +
                4 * u * std::fabs(expected.lse[r]) + 1e-300,
            "lse[" + std::to_string(r) + "]");
  for (size_t j = 0; j < expected.rowOutputs.size(); ++j)
    for (size_t i = 0; i < expected.rowOutputs[j].size(); ++i)
      check(actual.rowOutputs[j][i], expected.rowOutputs[j][i],
            expected.rowMagnitudes[j][i] * relative(p.cols) + underflow(p.cols),
            "row output " + std::to_string(j) + "[" + std::to_string(i) + "]");
  for (size_t j = 0; j < expected.colOutputs.size(); ++j)
    for (size_t i = 0; i < expected.colOutputs[j].size(); ++i)
      check(actual.colOutputs[j][i], expected.colOutputs[j][i],
            expected.colMagnitudes[j][i] * relative(p.rows) + underflow(p.rows),
            "col output " + std::to_string(j) + "[" + std::to_string(i) + "]");
  INFO(what << ": " << failures << " elements beyond the bound, worst " << worst
            << " × the bound at " << worstAt);
  CHECK(failures == 0);
}

std::string describe(const Problem &p, const char *name) {
  return std::string(name) + " " + std::to_string(p.rows) + "×" +
         std::to_string(p.cols) + ", D = " + std::to_string(p.depth) +
         ", T = " + std::to_string(p.temperature) +
         (p.givenLse ? ", given lse" : "");
}

/// The kernel on every path, f32 and f64, against the reference, on a batch
/// of problems (see runBatch) in one call; with a given normaliser too (the
/// reference's own, rounded to the element type).
void checkBatchEverywhere(const std::vector<Problem> &problems,
                          const char *name) {
  std::vector<Result> expected, expectedGivenF32, expectedGivenF64;
  std::vector<std::vector<double>> givenF32, givenF64;
  for (const Problem &p : problems) {
    PairScores scores = pairScores(p);
    expected.push_back(reference(p, scores, {}));
    const std::vector<double> &lse = expected.back().lse;
    givenF64.push_back(lse);
    givenF32.emplace_back(lse.size());
    for (size_t r = 0; r < lse.size(); ++r)
      givenF32.back()[r] = static_cast<float>(lse[r]);
    expectedGivenF32.push_back(reference(p, scores, givenF32.back()));
    expectedGivenF64.push_back(reference(p, scores, givenF64.back()));
  }
  std::vector<Problem> given = problems;
  for (Problem &p : given)
    p.givenLse = true;
  const size_t batch = problems.size();
  for (int32_t isa : supportedPaths()) {
    ForcedPath forced(isa);
    std::vector<Result> f32 = runBatch<float>(problems, {});
    std::vector<Result> f64 = runBatch<double>(problems, {});
    std::vector<Result> givenResultF32 = runBatch<float>(given, givenF32);
    std::vector<Result> givenResultF64 = runBatch<double>(given, givenF64);
    for (size_t b = 0; b < batch; ++b) {
      std::string path = " on " + pathName(isa);
      if (batch > 1)
        path +=
            ", problem " + std::to_string(b) + " of " + std::to_string(batch);
      compare<float>(problems[b], expected[b], f32[b],
                     describe(problems[b], name) + ", f32" + path);
      compare<double>(problems[b], expected[b], f64[b],
                      describe(problems[b], name) + ", f64" + path);
      compare<float>(given[b], expectedGivenF32[b], givenResultF32[b],
                     describe(given[b], name) + ", f32" + path);
      compare<double>(given[b], expectedGivenF64[b], givenResultF64[b],
                      describe(given[b], name) + ", f64" + path);
    }
  }
}

void checkEverywhere(const Problem &p, const char *name) {
  checkBatchEverywhere({p}, name);
}

} // namespace

TEST_CASE("softmax contract: no constraints, sizes off every tile") {
  uint64_t seed = 1;
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {1, 33}, {7, 1}, {7, 33}, {33, 7}, {33, 1000}, {1000, 7}})
    for (int64_t depth : {1, 5, 16, 64, 67})
      checkEverywhere(
          makeProblem(rows, cols, depth, {1, 5, depth + 3}, {2, 17}, seed++),
          "plain");
  checkEverywhere(makeProblem(1000, 1000, 67, {67, 3}, {67}, seed++), "plain");
}

TEST_CASE("softmax contract: causal, windowed and NE constraints") {
  uint64_t seed = 100;
  struct Case {
    const char *name;
    std::vector<energy_contract_constraint> constraints;
    bool large; ///< also at 1000 × 1000
  };
  std::vector<Case> cases = {
      {"c <= r", {atLeast(1, -1, 0)}, true},
      {"c < r (row 0 empty)", {atLeast(1, -1, -1)}, false},
      {"c <= r + 5", {atLeast(1, -1, 5)}, false},
      {"r - 3 <= c <= r + 40", {atLeast(1, -1, 40), atLeast(-1, 1, 3)}, true},
      {"c != r", {notEqual(1, -1, 0)}, false},
      {"c <= r and c != r", {atLeast(1, -1, 0), notEqual(1, -1, 0)}, true},
      {"c != r, c != 2r - 7", {notEqual(1, -1, 0), notEqual(2, -1, -7)}, false},
      {"c >= r + 10 and r >= 3 (rows empty at both ends)",
       {atLeast(-1, 1, -10), atLeast(1, 0, -3)},
       true},
      {"3c <= 2r + 1", {atLeast(2, -3, 1)}, false},
      {"no pair at all", {atLeast(0, 0, -1)}, false},
  };
  struct Size {
    int64_t rows, cols, depth;
  };
  for (const Case &c : cases)
    for (Size size : std::vector<Size>{{7, 7, 5},
                                       {33, 33, 16},
                                       {33, 1000, 67},
                                       {1000, 33, 64},
                                       {1000, 1000, 67}}) {
      if (size.rows * size.cols > 100000 && !c.large)
        continue;
      Problem p = makeProblem(size.rows, size.cols, size.depth, {size.depth, 5},
                              {1, size.depth}, seed++);
      p.constraints = c.constraints;
      checkEverywhere(p, c.name);
    }
}

TEST_CASE("softmax contract: temperatures, large scores, lse not asked") {
  uint64_t seed = 200;
  // Scores up to ±60/T: without the running maximum, exp would overflow,
  // and row maxima grow from panel to panel, so accumulators are rescaled.
  for (double temperature : {0.37, 2.5}) {
    Problem p = makeProblem(1000, 1000, 64, {64, 7}, {9}, seed++);
    p.scale = 30.0 / 64 * 8;
    p.temperature = temperature;
    p.constraints = {atLeast(1, -1, 0)};
    checkEverywhere(p, "large scores");
  }
  Problem p = makeProblem(33, 1000, 16, {3}, {4}, seed++);
  p.temperature = 0.5;
  p.scale = -2;
  p.wantLse = false;
  checkEverywhere(p, "negative scale, no lse output");
}

namespace {
/// The coefficients (κ, α_0, α_1) of three outputs: plain, pair terms only,
/// κ and the second term.
const std::vector<double> kMixedWeights = {1, 0, 0, 0, 0.7, -1.3, 0.5, 0, 2};
/// The same three in another order, with the first term in none of them.
const std::vector<double> kSecondTermWeights = {0.5, 0, 2, 1, 0, 0, 0, 0, -1.3};

/// `p` without pair terms or output weights: plain weighted sums.
void dropPairTerms(Problem &p) {
  p.pairDepths.clear();
  p.pairRowFeatures.clear();
  p.pairColFeatures.clear();
  p.rowWeights.clear();
  p.colWeights.clear();
}

/// `batch` problems of rows × cols × depth with two pair terms of depths 5
/// and 13 and three outputs a side, of widths that are multiples of no
/// vector width; the row outputs weighted by kMixedWeights, the col outputs
/// by `colWeights`.
std::vector<Problem> pairProblems(int64_t batch, int64_t rows, int64_t cols,
                                  int64_t depth,
                                  const std::vector<double> &colWeights,
                                  uint64_t seed) {
  std::vector<Problem> problems;
  for (int64_t b = 0; b < batch; ++b) {
    Problem p =
        makeProblem(rows, cols, depth, {3, 19, 1}, {4, 7, 17}, seed + 2 * b);
    addPairTerms(p, {5, 13}, seed + 2 * b + 1);
    p.rowWeights = kMixedWeights;
    p.colWeights = colWeights;
    problems.push_back(p);
  }
  return problems;
}
} // namespace

TEST_CASE("softmax contract: pair terms weight the outputs") {
  uint64_t seed = 500;
  struct Case {
    const char *name;
    std::vector<energy_contract_constraint> constraints;
  };
  for (const Case &c : std::vector<Case>{
           {"pair terms", {}},
           {"pair terms, c <= r", {atLeast(1, -1, 0)}},
           {"pair terms, r - 3 <= c <= r + 40, c != r",
            {atLeast(1, -1, 40), atLeast(-1, 1, 3), notEqual(1, -1, 0)}}}) {
    for (const std::vector<double> *colWeights :
         {&kMixedWeights, &kSecondTermWeights}) {
      std::vector<Problem> problems =
          pairProblems(3, 70, 131, 19, *colWeights, seed);
      seed += 10;
      for (Problem &p : problems)
        p.constraints = c.constraints;
      checkBatchEverywhere(problems, c.name);
      // Plain row outputs and pair terms on the col side only.
      for (Problem &p : problems)
        p.rowWeights.clear();
      checkBatchEverywhere(problems, c.name);
    }
  }
  // Coefficients without pair terms: κ alone, 0 included.
  std::vector<Problem> scaled;
  for (uint64_t b = 0; b < 3; ++b) {
    scaled.push_back(makeProblem(70, 131, 19, {3, 19, 1}, {4, 7}, seed++));
    scaled.back().rowWeights = {1, -0.5, 3};
    scaled.back().colWeights = {0, 2};
    scaled.back().constraints = {atLeast(1, -1, 0)};
  }
  checkBatchEverywhere(scaled, "coefficients without pair terms");
  // Scores up to ±60/T, so that the running maximum grows from panel to
  // panel and the weighted accumulators are rescaled too.
  std::vector<Problem> problems =
      pairProblems(3, 100, 300, 64, kMixedWeights, seed);
  for (Problem &p : problems) {
    p.scale = 30.0 / 64 * 8;
    p.temperature = 0.37;
    p.constraints = {atLeast(1, -1, 0)};
  }
  checkBatchEverywhere(problems, "pair terms, large scores");
}

TEST_CASE("softmax contract: plain outputs ignore the pair terms") {
  // Outputs with κ = 1 and α = 0 sum the weights themselves: the same bits
  // as without pair terms and coefficients.
  for (bool causal : {false, true}) {
    std::vector<Problem> problems =
        pairProblems(3, 70, 131, 19, kSecondTermWeights, 600 + causal);
    if (causal)
      for (Problem &p : problems)
        p.constraints = {atLeast(1, -1, 0)};
    std::vector<Problem> plain = problems;
    for (Problem &p : plain) {
      dropPairTerms(p);
    }
    for (int32_t isa : supportedPaths()) {
      ForcedPath forced(isa);
      INFO("path " << pathName(isa) << (causal ? ", causal" : ""));
      std::vector<Result> weighted = runBatch<float>(problems, {});
      std::vector<Result> alone = runBatch<float>(plain, {});
      std::vector<Result> weighted64 = runBatch<double>(problems, {});
      std::vector<Result> alone64 = runBatch<double>(plain, {});
      for (size_t b = 0; b < problems.size(); ++b) {
        CHECK(weighted[b].lse == alone[b].lse);
        CHECK(weighted[b].rowOutputs[0] == alone[b].rowOutputs[0]);
        CHECK(weighted[b].colOutputs[1] == alone[b].colOutputs[1]);
        CHECK(weighted64[b].rowOutputs[0] == alone64[b].rowOutputs[0]);
        CHECK(weighted64[b].colOutputs[1] == alone64[b].colOutputs[1]);
      }
    }
  }
}

TEST_CASE("softmax contract: empty sides give zeros") {
  for (auto [rows, cols] :
       std::vector<std::pair<int64_t, int64_t>>{{0, 9}, {9, 0}, {0, 0}}) {
    Problem p = makeProblem(rows, cols, 5, {3}, {2}, 7);
    for (int32_t isa : supportedPaths()) {
      ForcedPath forced(isa);
      Result f32 = runKernel<float>(p, {});
      Result f64 = runKernel<double>(p, {});
      for (const Result *result : {&f32, &f64}) {
        for (double v : result->lse)
          CHECK(v == 0);
        for (const auto &o : result->rowOutputs)
          for (double v : o)
            CHECK(v == 0);
        for (const auto &o : result->colOutputs)
          for (double v : o)
            CHECK(v == 0);
      }
    }
  }
}

namespace {
/// The bits of results of type T, every output of every problem in turn.
template <class T>
std::vector<char> bytesOf(const std::vector<Result> &results) {
  std::vector<char> bytes;
  auto append = [&](const std::vector<double> &values) {
    for (double v : values) {
      T x = static_cast<T>(v); // exact: the values were of type T
      const char *raw = reinterpret_cast<const char *>(&x);
      bytes.insert(bytes.end(), raw, raw + sizeof x);
    }
  };
  for (const Result &result : results) {
    append(result.lse);
    for (const auto &o : result.rowOutputs)
      append(o);
    for (const auto &o : result.colOutputs)
      append(o);
  }
  return bytes;
}

/// The kernel's outputs for a batch on `threads` threads, as raw bytes.
template <class T>
std::vector<char> bytesOnThreads(const std::vector<Problem> &problems,
                                 int threads) {
  energy_support_set_num_threads(threads);
  std::vector<Result> results = runBatch<T>(problems, {});
  return bytesOf<T>(results);
}

/// On every instruction-set path, the outputs for `problems` on 2 and 3
/// threads have the bits of those on 1, in f32 and f64.
void checkSameBitsOnThreads(const std::vector<Problem> &problems,
                            const std::string &label) {
  for (int32_t isa : supportedPaths()) {
    ForcedPath forced(isa);
    INFO("path " << pathName(isa) << ", " << label);
    std::vector<char> f32 = bytesOnThreads<float>(problems, 1);
    std::vector<char> f64 = bytesOnThreads<double>(problems, 1);
    for (int threads : {2, 3}) {
      INFO(threads << " threads");
      CHECK(bytesOnThreads<float>(problems, threads) == f32);
      CHECK(bytesOnThreads<double>(problems, threads) == f64);
    }
  }
}
} // namespace

TEST_CASE("softmax contract: the same bits on 1, 2 and 3 threads") {
  int32_t initial = energy_support_num_threads();
  for (bool causal : {false, true}) {
    Problem p = makeProblem(1000, 777, 67, {67, 5}, {67, 3}, 300 + causal);
    if (causal)
      p.constraints = {atLeast(1, -1, 0), notEqual(1, -1, -5)};
    checkSameBitsOnThreads({p}, causal ? "causal" : "unconstrained");
  }
  energy_support_set_num_threads(initial);
}

TEST_CASE("softmax contract: pair terms, the same bits on 1, 2 and 3 threads") {
  int32_t initial = energy_support_num_threads();
  for (bool causal : {false, true}) {
    std::vector<Problem> problems =
        pairProblems(3, 300, 257, 67, kMixedWeights, 800 + 10 * causal);
    if (causal)
      for (Problem &p : problems)
        p.constraints = {atLeast(1, -1, 0), notEqual(1, -1, -5)};
    checkSameBitsOnThreads(problems, causal ? "causal" : "unconstrained");
  }
  energy_support_set_num_threads(initial);
}

TEST_CASE("softmax contract: invalid arguments are refused") {
  Problem good = makeProblem(9, 11, 4, {3}, {2}, 5);
  std::vector<float> rowFeatures = cast<float>(good.rowFeatures);
  std::vector<float> colFeatures = cast<float>(good.colFeatures);
  std::vector<float> colValues = cast<float>(good.colValues[0]);
  std::vector<float> rowValues = cast<float>(good.rowValues[0]);
  std::vector<float> rowOutput(9 * 3, -1.0f), colOutput(11 * 2, -1.0f);
  std::vector<float> lse(9, -1.0f);
  const void *colValuePointers[] = {colValues.data()};
  const void *rowValuePointers[] = {rowValues.data()};
  void *rowOutputPointers[] = {rowOutput.data()};
  void *colOutputPointers[] = {colOutput.data()};
  int64_t rowWidths[] = {3}, colWidths[] = {2};
  energy_contract_constraint constraint = atLeast(1, -1, 0);
  energy_softmax_contract_args valid{};
  valid.batch = 1;
  valid.rows = 9;
  valid.cols = 11;
  valid.depth = 4;
  valid.row_features = rowFeatures.data();
  valid.col_features = colFeatures.data();
  valid.scale = 1;
  valid.temperature = 1;
  valid.num_constraints = 1;
  valid.constraints = &constraint;
  valid.lse = lse.data();
  valid.num_row_outputs = 1;
  valid.col_values = colValuePointers;
  valid.row_output_widths = rowWidths;
  valid.row_outputs = rowOutputPointers;
  valid.num_col_outputs = 1;
  valid.row_values = rowValuePointers;
  valid.col_output_widths = colWidths;
  valid.col_outputs = colOutputPointers;

  energy_contract_constraint badKind = {1, -1, 0, 7};
  int64_t negativeWidth[] = {-1};
  const void *nullTable[] = {nullptr};
  void *nullOutput[] = {nullptr};
  std::vector<std::pair<const char *, void (*)(energy_softmax_contract_args &)>>
      breakers = {
          {"zero batch", [](auto &a) { a.batch = 0; }},
          {"batch times rows overflowing",
           [](auto &a) { a.batch = int64_t(1) << 62; }},
          {"a batch of features overflowing",
           [](auto &a) { a.batch = int64_t(1) << 59; }},
          {"a batch of value tables overflowing",
           [](auto &a) {
             a.batch = int64_t(1) << 59;
             a.depth = 0;
           }},
          {"negative rows", [](auto &a) { a.rows = -1; }},
          {"negative cols", [](auto &a) { a.cols = -1; }},
          {"negative depth", [](auto &a) { a.depth = -1; }},
          {"null row features", [](auto &a) { a.row_features = nullptr; }},
          {"null col features", [](auto &a) { a.col_features = nullptr; }},
          {"zero temperature", [](auto &a) { a.temperature = 0; }},
          {"negative temperature", [](auto &a) { a.temperature = -1; }},
          {"NaN temperature", [](auto &a) { a.temperature = NAN; }},
          {"infinite temperature", [](auto &a) { a.temperature = INFINITY; }},
          {"NaN scale", [](auto &a) { a.scale = NAN; }},
          {"negative constraint count",
           [](auto &a) { a.num_constraints = -1; }},
          {"null constraints", [](auto &a) { a.constraints = nullptr; }},
          {"negative output count", [](auto &a) { a.num_row_outputs = -2; }},
          {"null output array", [](auto &a) { a.row_outputs = nullptr; }},
          {"null widths", [](auto &a) { a.col_output_widths = nullptr; }},
          {"null table array", [](auto &a) { a.col_values = nullptr; }},
          {"unknown mode of kept tiles",
           [](auto &a) { a.kept_tiles_mode = 3; }},
      };
  auto expectRefused = [&](const char *what,
                           const energy_softmax_contract_args &args) {
    INFO(std::string(what));
    std::vector<float> before = rowOutput;
    CHECK(energy_support_softmax_contract_f32(&args) ==
          ENERGY_CONTRACT_INVALID_ARGUMENT);
    CHECK(energy_support_softmax_contract_f64(&args) ==
          ENERGY_CONTRACT_INVALID_ARGUMENT);
    CHECK(rowOutput == before);
    CHECK(lse == std::vector<float>(9, -1.0f));
  };
  for (auto &[what, breaker] : breakers) {
    energy_softmax_contract_args args = valid;
    breaker(args);
    expectRefused(what, args);
  }
  energy_softmax_contract_args args = valid;
  args.constraints = &badKind;
  expectRefused("unknown constraint kind", args);
  args = valid;
  args.row_output_widths = negativeWidth;
  expectRefused("negative width", args);
  args = valid;
  args.col_values = nullTable;
  expectRefused("null value table", args);
  args = valid;
  args.col_outputs = nullOutput;
  expectRefused("null output", args);
  CHECK(energy_support_softmax_contract_f32(nullptr) ==
        ENERGY_CONTRACT_INVALID_ARGUMENT);

  // Pair terms: two, of depths 2 and 3, weighting both sides.
  std::vector<float> pairRow0(9 * 2, 0.5f), pairCol0(11 * 2, 0.25f),
      pairRow1(9 * 3, -0.5f), pairCol1(11 * 3, 1.0f);
  const void *pairRowPointers[] = {pairRow0.data(), pairRow1.data()};
  const void *pairColPointers[] = {pairCol0.data(), pairCol1.data()};
  const void *nullPairRowFeatures[] = {pairRow0.data(), nullptr};
  const void *nullPairColFeatures[] = {pairCol0.data(), nullptr};
  int64_t pairDepths[] = {2, 3}, negativePairDepth[] = {2, -1};
  double rowWeights[] = {0.5, 1, -2}, colWeights[] = {1, 0, 0.7};
  double nanWeights[] = {0.5, NAN, -2}, infiniteWeights[] = {1, 0, INFINITY};
  energy_softmax_contract_args paired = valid;
  paired.num_pair_terms = 2;
  paired.pair_depths = pairDepths;
  paired.pair_row_features = pairRowPointers;
  paired.pair_col_features = pairColPointers;
  paired.row_output_weights = rowWeights;
  paired.col_output_weights = colWeights;
  std::vector<std::pair<const char *, void (*)(energy_softmax_contract_args &)>>
      pairBreakers = {
          {"negative pair term count", [](auto &a) { a.num_pair_terms = -1; }},
          {"null pair depths", [](auto &a) { a.pair_depths = nullptr; }},
          {"null pair row feature array",
           [](auto &a) { a.pair_row_features = nullptr; }},
          {"null pair col feature array",
           [](auto &a) { a.pair_col_features = nullptr; }},
          {"pair term count overflowing the coefficients",
           [](auto &a) { a.num_pair_terms = INT64_MAX; }},
      };
  for (auto &[what, breaker] : pairBreakers) {
    args = paired;
    breaker(args);
    expectRefused(what, args);
  }
  args = paired;
  args.pair_depths = negativePairDepth;
  expectRefused("negative pair depth", args);
  args = paired;
  args.pair_row_features = nullPairRowFeatures;
  expectRefused("null pair row features", args);
  args = paired;
  args.pair_col_features = nullPairColFeatures;
  expectRefused("null pair col features", args);
  args = paired;
  args.row_output_weights = nanWeights;
  expectRefused("NaN row coefficient", args);
  args = paired;
  args.col_output_weights = infiniteWeights;
  expectRefused("infinite col coefficient", args);
  args = paired;
  args.num_pair_terms = 0;
  args.col_output_weights = nanWeights + 1;
  expectRefused("NaN coefficient without pair terms", args);
  CHECK(energy_support_softmax_contract_f32(&paired) == ENERGY_CONTRACT_OK);
  // Pair features are not needed when a term is empty, nor anything but
  // the counts when there are no pair terms.
  args = paired;
  int64_t emptyTerm[] = {2, 0};
  args.pair_depths = emptyTerm;
  args.pair_row_features = nullPairRowFeatures;
  args.pair_col_features = nullPairColFeatures;
  CHECK(energy_support_softmax_contract_f32(&args) == ENERGY_CONTRACT_OK);
  args = valid;
  args.pair_depths = nullptr;
  args.pair_row_features = nullptr;
  args.pair_col_features = nullptr;
  args.row_output_weights = nullptr;
  CHECK(energy_support_softmax_contract_f32(&args) == ENERGY_CONTRACT_OK);

  // Null is fine where nothing is read or written.
  args = valid;
  args.depth = 0;
  args.row_features = nullptr;
  args.col_features = nullptr;
  CHECK(energy_support_softmax_contract_f32(&args) == ENERGY_CONTRACT_OK);
  args = valid;
  args.num_row_outputs = 0;
  args.col_values = nullptr;
  args.row_outputs = nullptr;
  args.row_output_widths = nullptr;
  args.lse = nullptr;
  CHECK(energy_support_softmax_contract_f32(&args) == ENERGY_CONTRACT_OK);
#if defined(__has_feature)
#if !__has_feature(address_sanitizer)
#define ENERGY_TEST_HUGE_ALLOCATIONS 1
#endif
#endif
#ifdef ENERGY_TEST_HUGE_ALLOCATIONS
  // 2^42 rows: the normaliser alone would take 16 TiB, so the kernel reports
  // that it is out of memory (reading nothing) instead of aborting.
  {
    float value = 1, output = -1;
    const void *table[] = {&value};
    void *outputs[] = {&output};
    int64_t width[] = {1};
    energy_softmax_contract_args huge{};
    huge.batch = 1;
    huge.rows = int64_t(1) << 42;
    huge.cols = 1;
    huge.depth = 0;
    huge.temperature = 1;
    huge.num_col_outputs = 1;
    huge.row_values = table;
    huge.col_output_widths = width;
    huge.col_outputs = outputs;
    CHECK(energy_support_softmax_contract_f32(&huge) ==
          ENERGY_CONTRACT_OUT_OF_MEMORY);
  }
#endif
  // Finally the valid arguments themselves.
  CHECK(energy_support_softmax_contract_f32(&valid) == ENERGY_CONTRACT_OK);
  CHECK(rowOutput != std::vector<float>(9 * 3, -1.0f));
}

TEST_CASE("softmax contract: a batch is each of its problems") {
  // Three problems of the same sizes, back to back in every array, in one
  // call: the same bits as three calls (the batch only slices the arrays).
  const int64_t batch = 3, rows = 9, cols = 37, depth = 6;
  std::vector<Problem> problems;
  for (uint64_t seed = 0; seed < batch; ++seed)
    problems.push_back(makeProblem(rows, cols, depth, {4, 1}, {3}, 700 + seed));
  for (Problem &p : problems)
    p.constraints = {{1, -1, 2, ENERGY_CONSTRAINT_GE}};
  auto concatenated = [&](auto member) {
    std::vector<float> all;
    for (const Problem &p : problems) {
      const std::vector<double> &part = member(p);
      all.insert(all.end(), part.begin(), part.end());
    }
    return all;
  };
  std::vector<float> rowFeatures =
      concatenated([](const Problem &p) -> auto & { return p.rowFeatures; });
  std::vector<float> colFeatures =
      concatenated([](const Problem &p) -> auto & { return p.colFeatures; });
  std::vector<float> colValues0 =
      concatenated([](const Problem &p) -> auto & { return p.colValues[0]; });
  std::vector<float> colValues1 =
      concatenated([](const Problem &p) -> auto & { return p.colValues[1]; });
  std::vector<float> rowValues0 =
      concatenated([](const Problem &p) -> auto & { return p.rowValues[0]; });
  std::vector<float> lse(batch * rows), rowOutput0(batch * rows * 4),
      rowOutput1(batch * rows), colOutput0(batch * cols * 3);
  const void *colValues[] = {colValues0.data(), colValues1.data()};
  const void *rowValues[] = {rowValues0.data()};
  void *rowOutputs[] = {rowOutput0.data(), rowOutput1.data()};
  void *colOutputs[] = {colOutput0.data()};
  int64_t rowWidths[] = {4, 1}, colWidths[] = {3};
  energy_softmax_contract_args args{};
  args.batch = batch;
  args.rows = rows;
  args.cols = cols;
  args.depth = depth;
  args.row_features = rowFeatures.data();
  args.col_features = colFeatures.data();
  args.scale = problems[0].scale;
  args.temperature = problems[0].temperature;
  args.num_constraints = 1;
  args.constraints = problems[0].constraints.data();
  args.lse = lse.data();
  args.num_row_outputs = 2;
  args.col_values = colValues;
  args.row_output_widths = rowWidths;
  args.row_outputs = rowOutputs;
  args.num_col_outputs = 1;
  args.row_values = rowValues;
  args.col_output_widths = colWidths;
  args.col_outputs = colOutputs;
  REQUIRE(energy_support_softmax_contract_f32(&args) == ENERGY_CONTRACT_OK);
  for (int64_t b = 0; b < batch; ++b) {
    INFO("problem " << b);
    Problem p = problems[b];
    p.scale = problems[0].scale;
    p.temperature = problems[0].temperature;
    Result alone = runKernel<float>(p, {});
    auto slice = [&](const std::vector<float> &all, int64_t size) {
      return std::vector<double>(all.begin() + b * size,
                                 all.begin() + (b + 1) * size);
    };
    CHECK(slice(lse, rows) == alone.lse);
    CHECK(slice(rowOutput0, rows * 4) == alone.rowOutputs[0]);
    CHECK(slice(rowOutput1, rows) == alone.rowOutputs[1]);
    CHECK(slice(colOutput0, cols * 3) == alone.colOutputs[0]);
  }
}

namespace {
/// The kernel's outputs for `problems` as raw bytes: in one call for the
/// batch, or (`separately`) one call per problem; `given` as runBatch's.
template <class T>
std::vector<char> batchBytes(const std::vector<Problem> &problems,
                             const std::vector<std::vector<double>> &given,
                             bool separately) {
  std::vector<Result> results;
  if (separately) {
    for (size_t b = 0; b < problems.size(); ++b) {
      std::vector<std::vector<double>> one;
      if (!given.empty())
        one.push_back(given[b]);
      results.push_back(runBatch<T>({problems[b]}, one).front());
    }
  } else {
    results = runBatch<T>(problems, given);
  }
  return bytesOf<T>(results);
}
} // namespace

TEST_CASE("softmax contract: a batch in one call, the bits of one call each") {
  // The kernel runs a batch as one loop over (problem, block) tasks a side:
  // every problem must read and write its own slices, with blocks of the
  // height one problem alone gets. Sizes that split into blocks of unequal
  // heights (64 rows: 36 and 28; 70: 36 and 34; 131 cols: 48, 48 and 35),
  // fewer rows than a block and counts that are multiples of no tile height
  // (6 or 4) nor strip; pair terms weighting outputs on both sides, a causal
  // constraint, an NE one, a given normaliser.
  struct Shape {
    int64_t batch, rows, cols, depth;
  };
  uint64_t seed = 900;
  for (Shape shape : std::vector<Shape>{{4, 64, 64, 64},
                                        {3, 70, 131, 19},
                                        {5, 31, 64, 7},
                                        {2, 100, 37, 13},
                                        {6, 13, 9, 5}}) {
    for (int variant = 0; variant < 3; ++variant) {
      std::vector<Problem> problems =
          pairProblems(shape.batch, shape.rows, shape.cols, shape.depth,
                       kSecondTermWeights, seed);
      seed += 2 * shape.batch;
      if (variant == 0) { // plain: no pair terms, no constraints
        for (Problem &p : problems) {
          dropPairTerms(p);
        }
      } else {
        for (Problem &p : problems)
          p.constraints =
              variant == 1
                  ? std::vector<energy_contract_constraint>{atLeast(1, -1, 0)}
                  : std::vector<energy_contract_constraint>{
                        atLeast(1, -1, 0), notEqual(1, -1, -5)};
      }
      // Each problem's own normaliser, as given_lse.
      std::vector<std::vector<double>> given;
      if (variant == 2)
        for (Problem &p : problems) {
          p.givenLse = true;
          given.push_back(reference(p, pairScores(p), {}).lse);
          for (double &v : given.back())
            v = static_cast<float>(v);
        }
      for (int32_t isa : supportedPaths()) {
        ForcedPath forced(isa);
        INFO("path " << pathName(isa) << ", batch " << shape.batch << " of "
                     << shape.rows << " × " << shape.cols
                     << ", D = " << shape.depth << ", variant " << variant);
        CHECK(batchBytes<float>(problems, given, false) ==
              batchBytes<float>(problems, given, true));
        CHECK(batchBytes<double>(problems, given, false) ==
              batchBytes<double>(problems, given, true));
      }
    }
  }
}

namespace {
/// Every output and normaliser of `results`, in order.
std::vector<double> allOf(const std::vector<Result> &results) {
  std::vector<double> all;
  for (const Result &result : results) {
    all.insert(all.end(), result.lse.begin(), result.lse.end());
    for (const auto *side : {&result.rowOutputs, &result.colOutputs})
      for (const std::vector<double> &output : *side)
        all.insert(all.end(), output.begin(), output.end());
  }
  return all;
}

/// How the column side of splitSides gets its scores and pair terms.
enum class ColumnTiles { Computed, Reused, ReusedAfterZeroing };

/// The row side of `problems` in one call that keeps its tiles, then the
/// column side with that normaliser given, reading them or computing them
/// (`how`); the outputs of both, in the order of one call.
template <class T>
std::vector<Result> splitSides(const std::vector<Problem> &problems,
                               ColumnTiles how) {
  const Problem &first = problems.front();
  std::vector<Problem> rowSides = problems, colSides = problems;
  for (Problem &p : rowSides) {
    p.colWidths.clear();
    p.rowValues.clear();
    p.colWeights.clear();
  }
  for (Problem &p : colSides) {
    p.rowWidths.clear();
    p.colValues.clear();
    p.rowWeights.clear();
    p.givenLse = true;
  }
  void *tiles = energy_support_softmax_contract_tiles(
      static_cast<int64_t>(problems.size()), first.rows, first.cols,
      static_cast<int64_t>(first.pairDepths.size()), sizeof(T));
  REQUIRE(tiles);
  std::vector<Result> rows =
      runBatch<T>(rowSides, {}, nullptr, tiles, ENERGY_CONTRACT_TILES_KEEP);
  std::vector<std::vector<double>> given;
  for (const Result &result : rows)
    given.push_back(result.lse);
  const bool reuse = how != ColumnTiles::Computed;
  if (how == ColumnTiles::ReusedAfterZeroing)
    memset(tiles, 0,
           sizeof(T) * problems.size() * (1 + first.pairDepths.size()) *
               first.rows * first.cols);
  std::vector<Result> cols = runBatch<T>(
      colSides, given, nullptr, reuse ? tiles : nullptr,
      reuse ? ENERGY_CONTRACT_TILES_REUSE : ENERGY_CONTRACT_TILES_NONE);
  free(tiles);
  for (size_t b = 0; b < rows.size(); ++b)
    rows[b].colOutputs = cols[b].colOutputs;
  return rows;
}
} // namespace

TEST_CASE("softmax contract: kept tiles give the bits of computed ones") {
  // The column side reads the scores and pair terms that the row side kept
  // (in one call, or across two) where it would compute them: the same
  // products in the same order, so the same bits. Pair terms weighting both
  // sides, constraints that leave pairs the row side never computes, sizes
  // off every tile and block, a batch.
  uint64_t seed = 1300;
  for (int variant = 0; variant < 3; ++variant) {
    std::vector<Problem> problems =
        pairProblems(3, 70, 131, 19, kMixedWeights, seed);
    seed += 10;
    for (Problem &p : problems) {
      if (variant == 0) {
        dropPairTerms(p);
      } else if (variant == 2) {
        p.constraints = {atLeast(1, -1, 40), atLeast(-1, 1, 3),
                         notEqual(1, -1, 0)};
      }
    }
    for (int32_t isa : supportedPaths()) {
      ForcedPath forced(isa);
      INFO("path " << pathName(isa) << ", variant " << variant);
      std::vector<double> oneCall = allOf(runBatch<float>(problems, {}));
      CHECK(allOf(splitSides<float>(problems, ColumnTiles::Reused)) == oneCall);
      CHECK(allOf(splitSides<float>(problems, ColumnTiles::Computed)) ==
            oneCall);
      // The column side does read them.
      CHECK(allOf(splitSides<float>(
                problems, ColumnTiles::ReusedAfterZeroing)) != oneCall);
      std::vector<double> oneCall64 = allOf(runBatch<double>(problems, {}));
      CHECK(allOf(splitSides<double>(problems, ColumnTiles::Reused)) ==
            oneCall64);
      CHECK(allOf(splitSides<double>(problems, ColumnTiles::Computed)) ==
            oneCall64);
    }
    // And within the bounds of the double-precision reference.
    checkBatchEverywhere(problems, "kept tiles");
  }
  // Too many elements, or counts that make no sense: no tiles.
  // 16 MiB: 2^22 floats, 2^21 doubles.
  CHECK(energy_support_softmax_contract_tiles(1, 4096, 1025, 0, 4) == nullptr);
  CHECK(energy_support_softmax_contract_tiles(1, 2048, 1025, 0, 8) == nullptr);
  for (int64_t bytes : {4, 8}) {
    void *largest = energy_support_softmax_contract_tiles(
        1, 2048, 2048 * 4 / bytes, 0, bytes);
    CHECK(largest != nullptr);
    free(largest);
  }
  CHECK(energy_support_softmax_contract_tiles(0, 8, 8, 0, 4) == nullptr);
  CHECK(energy_support_softmax_contract_tiles(1, 8, 8, -1, 4) == nullptr);
  CHECK(energy_support_softmax_contract_tiles(1, 8, 8, 0, 2) == nullptr);
  CHECK(energy_support_softmax_contract_tiles(INT64_MAX, 2, 2, 0, 4) ==
        nullptr);
}

TEST_CASE("softmax contract: tiles past a core's cache are kept only when "
          "deep") {
  // 1 × 600 × 600 floats, 1.4 MiB: read back at depth 64 (computing them
  // costs more), computed again at depth 8 by both calls of a split, whose
  // results then do not depend on what the tiles hold.
  static_assert(600 * 600 * 4 > ENERGY_CONTRACT_CACHED_TILE_BYTES);
  for (int64_t depth : {8, 64}) {
    std::vector<Problem> problems =
        pairProblems(1, 600, 600, depth, kMixedWeights, 1400 + depth);
    for (Problem &p : problems) {
      dropPairTerms(p);
    }
    INFO("depth " << depth);
    std::vector<double> oneCall = allOf(runBatch<float>(problems, {}));
    CHECK(allOf(splitSides<float>(problems, ColumnTiles::Reused)) == oneCall);
    bool read =
        allOf(splitSides<float>(problems, ColumnTiles::ReusedAfterZeroing)) !=
        oneCall;
    CHECK(read == (depth == 64));
  }
}

TEST_CASE("softmax contract: a batch of 8 problems of 64 rows, the same bits "
          "on 1, 2 and 3 threads") {
  // A training step's shape: more (problem, block) tasks than threads,
  // blocks of 36 and 28 rows.
  int32_t initial = energy_support_num_threads();
  for (bool causal : {false, true}) {
    std::vector<Problem> problems =
        pairProblems(8, 64, 64, 64, kMixedWeights, 1000 + 20 * causal);
    if (causal)
      for (Problem &p : problems)
        p.constraints = {atLeast(1, -1, 0)};
    energy_support_set_num_threads(2);
    checkBatchEverywhere(problems,
                         causal ? "batch of 8, causal" : "batch of 8");
    checkSameBitsOnThreads(problems, causal ? "causal" : "unconstrained");
  }
  energy_support_set_num_threads(initial);
}
