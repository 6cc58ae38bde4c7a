//===- SoftmaxContractTestSupport.cpp - Test helpers ----------------------===//
//
// The reference, the batch runner and the bounds of the softmax contraction
// tests (SoftmaxContractTestSupport.h).
//
//===----------------------------------------------------------------------===//

#include "SoftmaxContractTestSupport.h"

#include "energy/KernelSupport/InstructionSet.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <random>
#include <sstream>

namespace energy::testing::softmax {

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

ForcedPath::ForcedPath(int32_t isa) {
  REQUIRE(energy_support_force_isa(isa) == 0);
}
ForcedPath::~ForcedPath() { energy_support_force_isa(ENERGY_ISA_AUTOMATIC); }

energy_contract_constraint atLeast(int64_t a, int64_t b, int64_t offset) {
  return {a, b, offset, ENERGY_CONSTRAINT_GE};
}
energy_contract_constraint notEqual(int64_t a, int64_t b, int64_t offset) {
  return {a, b, offset, ENERGY_CONSTRAINT_NE};
}

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

std::vector<ConstraintCase> constraintCases(const std::string &what) {
  return {{what, {}},
          {what + ", c <= r", {atLeast(1, -1, 0)}},
          {what + ", r - 3 <= c <= r + 40, c != r",
           {atLeast(1, -1, 40), atLeast(-1, 1, 3), notEqual(1, -1, 0)}}};
}

void addRelativeBias(Problem &p, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  p.pairBias.assign(p.rows + p.cols - 1, 0);
  for (double &value : p.pairBias)
    value = uniform(random);
  p.biasRowCoefficient = 1;
  p.biasColCoefficient = -1;
  p.biasOffset = p.cols - 1;
}

namespace {

bool admitted(const Problem &p, int64_t r, int64_t c) {
  for (const energy_contract_constraint &k : p.constraints) {
    int64_t value = k.row_coefficient * r + k.col_coefficient * c + k.offset;
    if (k.kind == ENERGY_CONSTRAINT_GE ? value < 0 : value == 0)
      return false;
  }
  return true;
}

} // namespace

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
      double bias = 0;
      if (!p.pairBias.empty() && admitted(p, r, c))
        bias = p.pairBias[p.biasRowCoefficient * r + p.biasColCoefficient * c +
                          p.biasOffset];
      out.scores[r * cols + c] = p.scale * dot + bias;
      out.magnitude = std::max(out.magnitude,
                               std::fabs(p.scale) * absDot + std::fabs(bias));
      out.admitted[r * cols + c] = admitted(p, r, c);
    }
  return out;
}

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
  // Output j's factor κ + Σ_i α_i·t_i + Σ_p α_p·t_a·t_b at a pair, and its
  // size |κ| + Σ_i |α_i|·Σ_d |a_d b_d| + Σ_p |α_p|·(size of t_a)·(of t_b)
  // in `size`.
  const size_t products = p.pairProducts.size() / 2;
  auto factor = [&](const std::vector<double> &coefficients, size_t j,
                    int64_t pair, double &size) {
    if (coefficients.empty()) {
      size = 1;
      return 1.0;
    }
    const double *k = &coefficients[j * (1 + terms + products)];
    double f = k[0];
    size = std::fabs(k[0]);
    for (size_t i = 0; i < terms; ++i) {
      f += k[1 + i] * tangents[i][pair];
      size += std::fabs(k[1 + i]) * tangentSizes[i][pair];
    }
    for (size_t q = 0; q < products; ++q) {
      const int64_t a = p.pairProducts[2 * q], b = p.pairProducts[2 * q + 1];
      f += k[1 + terms + q] * tangents[a][pair] * tangents[b][pair];
      size += std::fabs(k[1 + terms + q]) * tangentSizes[a][pair] *
              tangentSizes[b][pair];
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
    // A pair sum's element u sums the pairs at a·r + b·c + o = u.
    const bool pairSum = p.pairSum(j);
    const int64_t elements =
        pairSum ? static_cast<int64_t>(p.pairBias.size()) : cols * width;
    std::vector<double> sum(elements, 0.0), size(elements, 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        double w = weights[r * cols + c], factorSize;
        double f = factor(p.colWeights, j, r * cols + c, factorSize);
        const int64_t at = pairSum ? p.biasRowCoefficient * r +
                                         p.biasColCoefficient * c + p.biasOffset
                                   : c * width;
        for (int64_t k = 0; k < width && w != 0; ++k) {
          double value = p.rowValues[j][r * width + k];
          sum[at + k] += w * f * value;
          size[at + k] += w * factorSize * std::fabs(value);
          out.termMagnitude =
              std::max(out.termMagnitude, factorSize * std::fabs(value));
        }
      }
    out.colOutputs.push_back(sum);
    out.colMagnitudes.push_back(size);
  }
  return out;
}

namespace {

template <class T> int32_t callKernel(const energy_softmax_contract_args &args);
template <>
int32_t callKernel<float>(const energy_softmax_contract_args &args) {
  return energy_support_softmax_contract_f32(&args);
}
template <>
int32_t callKernel<double>(const energy_softmax_contract_args &args) {
  return energy_support_softmax_contract_f64(&args);
}

} // namespace

template <class T>
std::vector<Result> runBatch(const std::vector<Problem> &problems,
                             const std::vector<std::vector<double>> &given,
                             int32_t *status, void *tiles, int64_t tilesMode) {
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
  std::vector<T> pairBias =
      joined([](const Problem &q) -> const auto & { return q.pairBias; });
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
    colOutputs.emplace_back(
        batch * (p.pairSum(j) ? p.pairBias.size() : p.cols * p.colWidths[j]),
        nan);
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
  args.num_pair_products = static_cast<int64_t>(p.pairProducts.size() / 2);
  args.pair_products = p.pairProducts.data();
  args.row_output_weights =
      p.rowWeights.empty() ? nullptr : p.rowWeights.data();
  args.col_output_weights =
      p.colWeights.empty() ? nullptr : p.colWeights.data();
  args.kept_tiles = tiles;
  args.kept_tiles_mode = tilesMode;
  if (!p.pairBias.empty()) {
    args.pair_bias = pairBias.data();
    args.pair_bias_length = static_cast<int64_t>(p.pairBias.size());
    args.pair_bias_row_coefficient = p.biasRowCoefficient;
    args.pair_bias_col_coefficient = p.biasColCoefficient;
    args.pair_bias_offset = p.biasOffset;
  }
  args.num_pair_sums = p.numPairSums;
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
          slice(colOutputs[j], b,
                p.pairSum(j) ? static_cast<int64_t>(p.pairBias.size())
                             : p.cols * p.colWidths[j]));
  }
  return out;
}

template std::vector<Result>
runBatch<float>(const std::vector<Problem> &,
                const std::vector<std::vector<double>> &, int32_t *, void *,
                int64_t);
template std::vector<Result>
runBatch<double>(const std::vector<Problem> &,
                 const std::vector<std::vector<double>> &, int32_t *, void *,
                 int64_t);

template <class T>
Result runKernel(const Problem &p, const std::vector<double> &given,
                 int32_t *status) {
  std::vector<std::vector<double>> givens;
  if (!given.empty())
    givens.push_back(given);
  return runBatch<T>({p}, givens, status).front();
}

template Result runKernel<float>(const Problem &, const std::vector<double> &,
                                 int32_t *);
template Result runKernel<double>(const Problem &, const std::vector<double> &,
                                  int32_t *);

namespace {

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
///    Σ_d |a_d b_d| (the dot products, their sum, the rounded coefficients);
///    q products t_a·t_b more make it (2γ(P+1) + γ(m+q+2) + 3u)·F, F
///    counting |α_p|·Σ_d |a_d b_d|·Σ_d |a'_d b'_d| for each.
/// So |output - reference| <= M·(4·γ(D+4)·S/T + 3·γ(N+4) + 4u·(S + |L|)/T
/// + 8u [+ γ(P+4) + γ(m+4) with pair terms, 2γ(P+4) + γ(m+q+4) with
/// products]), M = Σ w·F·|v| of that element
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
    // A product of two terms adds both terms' errors.
    const double products = static_cast<double>(p.pairProducts.size() / 2);
    pairs = (products > 0 ? 2 : 1) * gamma(deepest + 4, u) +
            gamma(static_cast<double>(p.pairDepths.size()) + products + 4, u);
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
  // A pair sum's element may sum any number of pairs.
  for (size_t j = 0; j < expected.colOutputs.size(); ++j) {
    const int64_t terms = p.pairSum(j) ? p.rows * p.cols : p.rows;
    for (size_t i = 0; i < expected.colOutputs[j].size(); ++i)
      check(actual.colOutputs[j][i], expected.colOutputs[j][i],
            expected.colMagnitudes[j][i] * relative(terms) + underflow(terms),
            "col output " + std::to_string(j) + "[" + std::to_string(i) + "]");
  }
  INFO(what << ": " << failures << " elements beyond the bound, worst " << worst
            << " × the bound at " << worstAt);
  CHECK(failures == 0);
}

std::string describe(const Problem &p, const char *name) {
  return std::string(name) + " " + std::to_string(p.rows) + "×" +
         std::to_string(p.cols) + ", D = " + std::to_string(p.depth) +
         ", T = " + std::to_string(p.temperature) +
         (p.givenLse ? ", given lse" : "") +
         (p.pairBias.empty() ? "" : ", pair bias");
}

} // namespace

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

const std::vector<double> kMixedWeights = {1, 0, 0, 0, 0.7, -1.3, 0.5, 0, 2};
const std::vector<double> kSecondTermWeights = {0.5, 0, 2, 1, 0, 0, 0, 0, -1.3};

void dropPairTerms(Problem &p) {
  p.pairDepths.clear();
  p.pairRowFeatures.clear();
  p.pairColFeatures.clear();
  p.rowWeights.clear();
  p.colWeights.clear();
}

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

std::vector<Problem> productProblems(int64_t batch, int64_t rows, int64_t cols,
                                     int64_t depth, uint64_t seed) {
  // (κ, α_0, α_1, α_{t0·t1}, α_{t1·t1}) of three outputs a side.
  const std::vector<double> rowWeights = {1,   0,    0,   0,    0, //
                                          0.7, -1.3, 0.5, 0.25, 0, //
                                          0,   0,    2,   0,    -0.5};
  const std::vector<double> colWeights = {0.5, 0, 0, 1.5,   0, //
                                          0,   0, 1, 0,     0, //
                                          0,   0, 0, -0.75, 0.3};
  std::vector<Problem> problems =
      pairProblems(batch, rows, cols, depth, kMixedWeights, seed);
  for (Problem &p : problems) {
    p.pairProducts = {0, 1, 1, 1};
    p.rowWeights = rowWeights;
    p.colWeights = colWeights;
  }
  return problems;
}

} // namespace energy::testing::softmax
