//===- QuadraticContractTest.cpp - The quadratic contraction, checked -----===//
//
// energy_support_quadratic_contract_f32/f64 against a long-double reference
// written here from QuadraticContract.h's formulas; refusals, also by the
// CUDA entry points, which need no GPU to refuse or to fall back.
//
//===----------------------------------------------------------------------===//

#include "energy/KernelSupport/QuadraticContract.h"
#include "energy/KernelSupport/KernelSupport.h"
#include "energy/KernelSupport/SoftmaxContract.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

// The reference sums exp(s) without a shift: long double must reach far
// below double's smallest exp (e^-745) for the very negative scores below.
static_assert(std::numeric_limits<long double>::min_exponent10 < -4000,
              "the reference needs the x87 (or quad) long double range");

/// A problem in doubles; every value is representable in float, so both
/// element types see the same inputs.
struct Problem {
  int64_t rows = 0, cols = 0, depth = 0;
  double scale = -0.5;
  std::vector<double> points, means, precisions, bias; // bias empty: null
  std::vector<int64_t> kinds;                          // the column outputs
  bool wantLse = true;
};

/// A mixture: means in [-1.5, 1.5]^D, each point one component's mean plus
/// N(0, 1) noise, precisions 1 on the diagonal plus U(-0.3, 0.3) entries
/// (not symmetric, not always definite: any matrices), bias in [-2, 0].
Problem makeProblem(int64_t rows, int64_t cols, int64_t depth,
                    std::vector<int64_t> kinds, uint64_t seed,
                    bool withBias = true) {
  Problem p;
  p.rows = rows;
  p.cols = cols;
  p.depth = depth;
  p.kinds = std::move(kinds);
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::normal_distribution<double> normal;
  auto asFloat = [](double v) { return static_cast<double>(float(v)); };
  for (int64_t i = 0; i < cols * depth; ++i)
    p.means.push_back(asFloat(1.5 * uniform(random)));
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t i = 0; i < depth; ++i)
      for (int64_t j = 0; j < depth; ++j)
        p.precisions.push_back(asFloat((i == j) + 0.3 * uniform(random)));
  if (withBias)
    for (int64_t c = 0; c < cols; ++c)
      p.bias.push_back(asFloat(-1 + uniform(random)));
  std::uniform_int_distribution<int64_t> component(
      0, std::max<int64_t>(cols, 1) - 1);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t c = component(random);
    for (int64_t i = 0; i < depth; ++i)
      p.points.push_back(
          asFloat((cols ? p.means[c * depth + i] : 0) + normal(random)));
  }
  return p;
}

int64_t widthOf(int64_t kind, int64_t depth) {
  return kind == ENERGY_MOMENT_WEIGHT          ? 1
         : kind == ENERGY_MOMENT_CENTRED_OUTER ? depth * depth
                                               : depth;
}

/// γ(n) = n·u/(1 - n·u), the classical bound on the relative error of n
/// floating-point operations in a row (u the unit roundoff).
double gamma(double n, double u) { return n * u / (1 - n * u); }

/// The definition, pair by pair, in long double, with a bound on the
/// host's error for each value (of its computation in double; the rounding
/// of the result to the element type is added by compare).
struct Reference {
  std::vector<long double> lse;
  std::vector<double> lseBound;
  std::vector<std::vector<long double>> outputs;
  std::vector<std::vector<double>> bounds;
};

/// The error bounds, with u the unit roundoff of double (the host computes
/// in double, from the same inputs):
///  - s(r, c) sums 2D + 2 products and the bias, after forming d in double
///    (exact for f32 inputs): |δs| <= γ(2D + 5) · S, S = |bias| + |scale| ·
///    Σ_ij |P_ij d_i d_j|;
///  - L = max + log Σ exp(s − max) over K scores: |δL| <= max |δs| +
///    2γ(K + 4) + 4u|L|;
///  - w = exp(s − L): relative error <= |δs| + |δL| + 2u|s − L| + 2u; a
///    moment w·m (m a product of at most two d's) adds 4u;
///  - an output sums N such terms: γ(N + 4) relative to Σ w·|m|.
/// So |output − reference| <= Σ_r w·|m|·(|δs| + |δL| + 2u|s − L| + 6u) +
/// γ(N + 4)·Σ_r w·|m|. For the sizes here that is 1e-14 to 1e-12 of the
/// outputs; a wrong weight, mean or moment moves them by far more.
Reference reference(const Problem &p) {
  const double u = std::numeric_limits<double>::epsilon() / 2;
  const int64_t rows = p.rows, cols = p.cols, depth = p.depth;
  Reference out;
  out.lse.assign(rows, 0);
  out.lseBound.assign(rows, 0);
  for (int64_t kind : p.kinds) {
    out.outputs.emplace_back(cols * widthOf(kind, depth), 0);
    out.bounds.emplace_back(cols * widthOf(kind, depth), 0);
  }
  std::vector<long double> scores(cols), difference(depth);
  std::vector<double> scoreBounds(cols);
  for (int64_t r = 0; r < rows; ++r) {
    if (cols == 0)
      continue;
    double largestBound = 0;
    long double sum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      long double form = 0, size = 0;
      for (int64_t i = 0; i < depth; ++i)
        for (int64_t j = 0; j < depth; ++j) {
          long double term =
              (static_cast<long double>(p.points[r * depth + i]) -
               p.means[c * depth + i]) *
              p.precisions[(c * depth + i) * depth + j] *
              (static_cast<long double>(p.points[r * depth + j]) -
               p.means[c * depth + j]);
          form += term;
          size += std::fabs(term);
        }
      long double bias = p.bias.empty() ? 0 : p.bias[c];
      scores[c] = bias + p.scale * form;
      scoreBounds[c] =
          gamma(2 * depth + 5, u) *
          static_cast<double>(std::fabs(bias) + std::fabs(p.scale) * size);
      if (std::isinf(bias))
        scoreBounds[c] = 0;
      largestBound = std::max(largestBound, scoreBounds[c]);
      sum += std::exp(scores[c]);
    }
    const long double L = std::log(sum); // −∞ when every score is −∞
    out.lse[r] = L;
    if (std::isinf(L))
      continue; // no weights
    const double lseBound = largestBound + 2 * gamma(cols + 4, u) +
                            4 * u * std::fabs(static_cast<double>(L));
    out.lseBound[r] = lseBound;
    for (int64_t c = 0; c < cols; ++c) {
      const long double w = std::exp(scores[c] - L);
      if (w == 0)
        continue;
      const double relative =
          scoreBounds[c] + lseBound +
          2 * u * std::fabs(static_cast<double>(scores[c] - L)) + 6 * u;
      for (int64_t i = 0; i < depth; ++i)
        difference[i] = static_cast<long double>(p.points[r * depth + i]) -
                        p.means[c * depth + i];
      for (size_t k = 0; k < p.kinds.size(); ++k) {
        std::vector<long double> &sums = out.outputs[k];
        std::vector<double> &bounds = out.bounds[k];
        auto add = [&](int64_t at, long double moment) {
          sums[at] += w * moment;
          bounds[at] += static_cast<double>(w * std::fabs(moment)) *
                        (relative + gamma(rows + 4, u));
        };
        switch (p.kinds[k]) {
        case ENERGY_MOMENT_WEIGHT:
          add(c, 1);
          break;
        case ENERGY_MOMENT_POINT:
          for (int64_t i = 0; i < depth; ++i)
            add(c * depth + i, p.points[r * depth + i]);
          break;
        case ENERGY_MOMENT_CENTRED:
          for (int64_t i = 0; i < depth; ++i)
            add(c * depth + i, difference[i]);
          break;
        case ENERGY_MOMENT_CENTRED_OUTER:
          for (int64_t i = 0; i < depth; ++i)
            for (int64_t j = 0; j < depth; ++j)
              add((c * depth + i) * depth + j, difference[i] * difference[j]);
          break;
        }
      }
    }
  }
  return out;
}

template <class T> std::vector<T> cast(const std::vector<double> &values) {
  return std::vector<T>(values.begin(), values.end());
}

/// The entry points of element type T: the host's, or the CUDA one.
template <class T>
int32_t callHost(const energy_quadratic_contract_args &a, bool cuda = false);
template <>
int32_t callHost<float>(const energy_quadratic_contract_args &a, bool cuda) {
  return cuda ? energy_support_cuda_quadratic_contract_f32(&a)
              : energy_support_quadratic_contract_f32(&a);
}
template <>
int32_t callHost<double>(const energy_quadratic_contract_args &a, bool cuda) {
  return cuda ? energy_support_cuda_quadratic_contract_f64(&a)
              : energy_support_quadratic_contract_f64(&a);
}

/// The outputs of one call, in T, with its status.
template <class T> struct Result {
  int32_t status = -1;
  std::vector<T> lse;
  std::vector<std::vector<T>> outputs;
};

/// Calls the host function (or the CUDA one) in element type T. Outputs
/// start as NaN, so that an output it does not overwrite shows.
template <class T> Result<T> run(const Problem &p, bool cuda = false) {
  std::vector<T> points = cast<T>(p.points), means = cast<T>(p.means);
  std::vector<T> precisions = cast<T>(p.precisions), bias = cast<T>(p.bias);
  const T nan = std::numeric_limits<T>::quiet_NaN();
  Result<T> result;
  result.lse.assign(p.rows, nan);
  std::vector<void *> outputs;
  for (int64_t kind : p.kinds)
    result.outputs.emplace_back(p.cols * widthOf(kind, p.depth), nan);
  for (std::vector<T> &output : result.outputs)
    outputs.push_back(output.data());
  energy_quadratic_contract_args args{};
  args.rows = p.rows;
  args.cols = p.cols;
  args.depth = p.depth;
  args.points = points.data();
  args.means = means.data();
  args.precisions = precisions.data();
  args.bias = p.bias.empty() ? nullptr : bias.data();
  args.scale = p.scale;
  args.lse = p.wantLse ? result.lse.data() : nullptr;
  args.num_col_outputs = static_cast<int64_t>(p.kinds.size());
  args.col_output_kinds = p.kinds.data();
  args.col_outputs = outputs.data();
  result.status = callHost<T>(args, cuda);
  return result;
}

/// Compares a result with the reference: each value within the bound on
/// the host's double-precision error plus the rounding of the result to T,
/// u_T·|value| (the host computes in double and rounds each output once;
/// for f32 that rounding, 6e-8 relative, is nearly all of the bound).
template <class T>
void compare(const Problem &p, const Reference &expected,
             const Result<T> &actual, const std::string &what) {
  INFO(what);
  REQUIRE(actual.status == ENERGY_CONTRACT_OK);
  const double u = std::numeric_limits<T>::epsilon() / 2;
  int64_t failures = 0;
  double worst = 0;
  std::string worstAt;
  auto check = [&](double got, long double want, double bound,
                   const std::string &where) {
    bool ok;
    double ratio = 0;
    if (std::isinf(want)) {
      ok = got == want;
      ratio = ok ? 0 : INFINITY;
    } else {
      const double tolerance =
          bound + u * std::fabs(static_cast<double>(want)) + 1e-300;
      const double error =
          static_cast<double>(std::fabs(static_cast<long double>(got) - want));
      ok = error <= tolerance;
      ratio = ok ? error / tolerance : INFINITY;
      if (std::isnan(error))
        ratio = INFINITY;
    }
    failures += !ok;
    if (!(ratio <= worst)) {
      worst = ratio;
      worstAt = where + ": got " + std::to_string(got) + ", want " +
                std::to_string(static_cast<double>(want));
    }
  };
  if (p.wantLse)
    for (int64_t r = 0; r < p.rows; ++r)
      check(actual.lse[r], expected.lse[r], expected.lseBound[r],
            "lse[" + std::to_string(r) + "]");
  for (size_t k = 0; k < p.kinds.size(); ++k)
    for (size_t i = 0; i < expected.outputs[k].size(); ++i)
      check(actual.outputs[k][i], expected.outputs[k][i], expected.bounds[k][i],
            "output " + std::to_string(k) + "[" + std::to_string(i) + "]");
  INFO(failures << " values beyond the bound; the worst at " << worst
                << " × its bound, " << worstAt);
  CHECK(failures == 0);
}

std::string describe(const Problem &p, const char *name) {
  return std::string(name) + ": N = " + std::to_string(p.rows) +
         ", K = " + std::to_string(p.cols) + ", D = " + std::to_string(p.depth);
}

/// f32 and f64 against the reference.
void checkBoth(const Problem &p, const char *name) {
  Reference expected = reference(p);
  compare(p, expected, run<float>(p), describe(p, name) + ", f32");
  compare(p, expected, run<double>(p), describe(p, name) + ", f64");
}

const std::vector<int64_t> kAllKinds = {
    ENERGY_MOMENT_WEIGHT, ENERGY_MOMENT_POINT, ENERGY_MOMENT_CENTRED,
    ENERGY_MOMENT_CENTRED_OUTER};

} // namespace

TEST_CASE("quadratic contract: mixtures of several shapes") {
  uint64_t seed = 1;
  struct Shape {
    int64_t rows, cols, depth;
  };
  for (Shape s : std::vector<Shape>{{1, 1, 1},
                                    {7, 1, 5},
                                    {1000, 1, 1},
                                    {64, 2, 1},
                                    {1000, 7, 5},
                                    {333, 4, 17},
                                    {200, 64, 3},
                                    {2500, 16, 32},
                                    {50, 3, 70}}) {
    checkBoth(makeProblem(s.rows, s.cols, s.depth, kAllKinds, seed++),
              "all moments");
    // No bias, a positive scale, an output kind twice, no lse.
    Problem p = makeProblem(s.rows, s.cols, s.depth,
                            {ENERGY_MOMENT_CENTRED_OUTER, ENERGY_MOMENT_WEIGHT,
                             ENERGY_MOMENT_WEIGHT},
                            seed++, false);
    p.scale = 0.01;
    p.wantLse = false;
    checkBoth(p, "no bias, positive scale, no lse");
  }
  Problem lseOnly = makeProblem(100, 5, 4, {}, seed++);
  checkBoth(lseOnly, "lse only");
}

/// Every column output of `result` is zero.
template <typename T> static void checkOutputsZero(const Result<T> &result) {
  for (const auto &output : result.outputs)
    for (T v : output)
      CHECK(v == 0);
}

TEST_CASE("quadratic contract: no rows, no columns, no depth") {
  // N = 0: every column output is zero.
  Problem noRows = makeProblem(0, 3, 2, kAllKinds, 11);
  Result<float> f32 = run<float>(noRows);
  Result<double> f64 = run<double>(noRows);
  CHECK(f32.status == ENERGY_CONTRACT_OK);
  CHECK(f64.status == ENERGY_CONTRACT_OK);
  checkOutputsZero(f32);
  checkOutputsZero(f64);
  // K = 0: L = 0, no column outputs to write.
  Problem noCols = makeProblem(5, 0, 3, kAllKinds, 12);
  Result<float> lse32 = run<float>(noCols);
  Result<double> lse64 = run<double>(noCols);
  CHECK(lse32.status == ENERGY_CONTRACT_OK);
  CHECK(lse64.status == ENERGY_CONTRACT_OK);
  CHECK(lse32.lse == std::vector<float>(5, 0.0f));
  CHECK(lse64.lse == std::vector<double>(5, 0.0));
  // D = 0: every score is the bias; the null arrays are not needed.
  Problem noDepth = makeProblem(9, 4, 0, kAllKinds, 13);
  checkBoth(noDepth, "no depth");
  Result<double> weights = run<double>(noDepth);
  double total = 0;
  for (double w : weights.outputs[0])
    total += w;
  CHECK(total == doctest::Approx(9).epsilon(1e-14));
}

TEST_CASE("quadratic contract: very negative scores stay finite") {
  // Points 30 away from every mean in each of 5 dimensions: every score
  // is about −0.5 · 5 · 900 = −2250, so exp(s) underflows in double (below
  // e^-745) and only the shift by the largest score keeps L finite.
  Problem p = makeProblem(300, 6, 5, kAllKinds, 21);
  for (int64_t r = 0; r < p.rows; r += 2)
    for (int64_t i = 0; i < p.depth; ++i)
      p.points[r * p.depth + i] = float(p.points[r * p.depth + i] + 30);
  for (double &entry : p.precisions)
    entry = 0;
  for (int64_t c = 0; c < p.cols; ++c)
    for (int64_t i = 0; i < p.depth; ++i)
      p.precisions[(c * p.depth + i) * p.depth + i] = 1;
  Reference expected = reference(p);
  CHECK(expected.lse[0] < -1000);
  Result<float> f32 = run<float>(p);
  Result<double> f64 = run<double>(p);
  for (int64_t r = 0; r < p.rows; ++r) {
    CHECK(std::isfinite(f32.lse[r]));
    CHECK(std::isfinite(f64.lse[r]));
  }
  compare(p, expected, f32, describe(p, "far points") + ", f32");
  compare(p, expected, f64, describe(p, "far points") + ", f64");
  // Each row's weights sum to 1: the WEIGHT sums to N.
  double total = 0;
  for (double w : f64.outputs[0])
    total += w;
  CHECK(total == doctest::Approx(p.rows).epsilon(1e-12));
}

TEST_CASE("quadratic contract: components of bias −∞") {
  const double infinity = std::numeric_limits<double>::infinity();
  // One component never weighs anything.
  Problem some = makeProblem(100, 4, 3, kAllKinds, 31);
  some.bias[2] = -infinity;
  checkBoth(some, "a bias of −∞");
  // Every one: L = −∞ and no weight anywhere (not exp(−∞ + ∞)).
  Problem all = makeProblem(10, 3, 2, kAllKinds, 32);
  for (double &b : all.bias)
    b = -infinity;
  Result<float> f32 = run<float>(all);
  Result<double> f64 = run<double>(all);
  REQUIRE(f32.status == ENERGY_CONTRACT_OK);
  REQUIRE(f64.status == ENERGY_CONTRACT_OK);
  for (int64_t r = 0; r < all.rows; ++r) {
    CHECK(f32.lse[r] == -std::numeric_limits<float>::infinity());
    CHECK(f64.lse[r] == -infinity);
  }
  checkOutputsZero(f32);
  checkOutputsZero(f64);
}

namespace {
/// A result's bytes.
template <class T> std::vector<char> bytesOf(const Result<T> &result) {
  std::vector<char> bytes;
  auto append = [&](const std::vector<T> &values) {
    const char *raw = reinterpret_cast<const char *>(values.data());
    bytes.insert(bytes.end(), raw, raw + values.size() * sizeof(T));
  };
  append(result.lse);
  for (const auto &output : result.outputs)
    append(output);
  return bytes;
}
} // namespace

TEST_CASE("quadratic contract: the same bits on every call and thread count") {
  int32_t initial = energy_support_num_threads();
  // Several chunks of rows (1024 each at least) and items.
  Problem p = makeProblem(5000, 5, 7, kAllKinds, 41);
  energy_support_set_num_threads(1);
  std::vector<char> f32 = bytesOf(run<float>(p));
  std::vector<char> f64 = bytesOf(run<double>(p));
  for (int threads : {1, 2, 3}) {
    INFO(threads << " threads");
    energy_support_set_num_threads(threads);
    CHECK(bytesOf(run<float>(p)) == f32);
    CHECK(bytesOf(run<double>(p)) == f64);
  }
  energy_support_set_num_threads(initial);
}

TEST_CASE("quadratic contract: invalid arguments are refused") {
  Problem good = makeProblem(9, 3, 4, kAllKinds, 51);
  std::vector<float> points = cast<float>(good.points);
  std::vector<float> means = cast<float>(good.means);
  std::vector<float> precisions = cast<float>(good.precisions);
  std::vector<float> bias = cast<float>(good.bias);
  std::vector<float> lse(9, -1.0f), weight(3, -1.0f), outer(3 * 16, -1.0f);
  void *outputs[] = {weight.data(), outer.data()};
  int64_t kinds[] = {ENERGY_MOMENT_WEIGHT, ENERGY_MOMENT_CENTRED_OUTER};
  energy_quadratic_contract_args valid{};
  valid.rows = 9;
  valid.cols = 3;
  valid.depth = 4;
  valid.points = points.data();
  valid.means = means.data();
  valid.precisions = precisions.data();
  valid.bias = bias.data();
  valid.scale = -0.5;
  valid.lse = lse.data();
  valid.num_col_outputs = 2;
  valid.col_output_kinds = kinds;
  valid.col_outputs = outputs;

  int64_t unknownKind[] = {ENERGY_MOMENT_WEIGHT, 4};
  int64_t negativeKind[] = {-1, ENERGY_MOMENT_WEIGHT};
  void *nullOutput[] = {weight.data(), nullptr};
  std::vector<
      std::pair<const char *, void (*)(energy_quadratic_contract_args &)>>
      breakers = {
          {"negative rows", [](auto &a) { a.rows = -1; }},
          {"negative cols", [](auto &a) { a.cols = -1; }},
          {"negative depth", [](auto &a) { a.depth = -1; }},
          {"rows · depth overflowing",
           [](auto &a) {
             a.rows = int64_t(1) << 40;
             a.depth = int64_t(1) << 30;
           }},
          {"cols · depth overflowing",
           [](auto &a) {
             a.cols = int64_t(1) << 40;
             a.depth = int64_t(1) << 30;
             a.rows = 0;
           }},
          {"cols · depth · depth overflowing",
           [](auto &a) {
             a.cols = int64_t(1) << 20;
             a.depth = int64_t(1) << 22;
             a.rows = 0;
           }},
          {"NaN scale", [](auto &a) { a.scale = NAN; }},
          {"infinite scale", [](auto &a) { a.scale = INFINITY; }},
          {"-infinite scale", [](auto &a) { a.scale = -INFINITY; }},
          {"null points", [](auto &a) { a.points = nullptr; }},
          {"null means", [](auto &a) { a.means = nullptr; }},
          {"null precisions", [](auto &a) { a.precisions = nullptr; }},
          {"negative output count", [](auto &a) { a.num_col_outputs = -1; }},
          {"null kinds", [](auto &a) { a.col_output_kinds = nullptr; }},
          {"null output array", [](auto &a) { a.col_outputs = nullptr; }},
      };
  auto expectRefused = [&](const char *what,
                           const energy_quadratic_contract_args *args) {
    INFO(what);
    CHECK(energy_support_quadratic_contract_f32(args) ==
          ENERGY_CONTRACT_INVALID_ARGUMENT);
    CHECK(energy_support_quadratic_contract_f64(args) ==
          ENERGY_CONTRACT_INVALID_ARGUMENT);
    CHECK(energy_support_cuda_quadratic_contract_f32(args) ==
          ENERGY_CONTRACT_INVALID_ARGUMENT);
    CHECK(energy_support_cuda_quadratic_contract_f64(args) ==
          ENERGY_CONTRACT_INVALID_ARGUMENT);
    CHECK(lse == std::vector<float>(9, -1.0f));
    CHECK(weight == std::vector<float>(3, -1.0f));
    CHECK(outer == std::vector<float>(3 * 16, -1.0f));
  };
  expectRefused("null arguments", nullptr);
  for (auto &[what, breaker] : breakers) {
    energy_quadratic_contract_args broken = valid;
    breaker(broken);
    expectRefused(what, &broken);
  }
  energy_quadratic_contract_args broken = valid;
  broken.col_output_kinds = unknownKind;
  expectRefused("an unknown moment kind", &broken);
  broken.col_output_kinds = negativeKind;
  expectRefused("a negative moment kind", &broken);
  broken = valid;
  broken.col_outputs = nullOutput;
  expectRefused("a null output", &broken);

  // What may be null: the bias, the lse, arrays that are empty.
  energy_quadratic_contract_args lenient = valid;
  lenient.bias = nullptr;
  lenient.lse = nullptr;
  CHECK(energy_support_quadratic_contract_f32(&lenient) == ENERGY_CONTRACT_OK);
  lenient = valid;
  lenient.depth = 0;
  lenient.points = lenient.means = lenient.precisions = nullptr;
  void *weightOnly[] = {weight.data(), nullptr}; // the outer one is empty
  lenient.col_outputs = weightOnly;
  CHECK(energy_support_quadratic_contract_f32(&lenient) == ENERGY_CONTRACT_OK);
  lenient = valid;
  lenient.cols = 0;
  lenient.means = lenient.precisions = nullptr;
  void *none[] = {nullptr, nullptr};
  lenient.col_outputs = none;
  CHECK(energy_support_quadratic_contract_f32(&lenient) == ENERGY_CONTRACT_OK);
  lenient.num_col_outputs = 0;
  lenient.col_output_kinds = nullptr;
  lenient.col_outputs = nullptr;
  CHECK(energy_support_quadratic_contract_f32(&lenient) == ENERGY_CONTRACT_OK);
}

TEST_CASE("quadratic contract: the CUDA entry points' host fallbacks") {
  // Depth over 64, no rows, no columns: the host computes, with or without
  // a GPU, and gives the host function's bits.
  for (Problem p : {makeProblem(40, 3, 70, kAllKinds, 61),
                    makeProblem(0, 3, 4, kAllKinds, 62),
                    makeProblem(6, 0, 4, kAllKinds, 63)}) {
    INFO(describe(p, "fallback"));
    Result<float> f32 = run<float>(p, true);
    Result<double> f64 = run<double>(p, true);
    REQUIRE(f32.status == ENERGY_CONTRACT_OK);
    REQUIRE(f64.status == ENERGY_CONTRACT_OK);
    CHECK(bytesOf(f32) == bytesOf(run<float>(p)));
    CHECK(bytesOf(f64) == bytesOf(run<double>(p)));
  }
}
