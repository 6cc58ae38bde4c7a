//===- ExpTest.cpp - The vectorised exp on every path ---------------------===//
//
// energy_support_exp_f32 against (float)exp((double)x), the correctly rounded
// result for all practical purposes, over a fixed stride through all 2^32
// float bit patterns and exhaustively where the range ends (subnormal
// results, overflow, underflow to zero, results next to 1); energy_support_
// exp_f64 against the x87 long-double expl on random and special inputs. Each
// instruction-set path the CPU supports runs, forced in turn, and must keep
// the bound documented in KernelSupport.h.
//
//===----------------------------------------------------------------------===//

#include "energy/KernelSupport/InstructionSet.h"
#include "energy/KernelSupport/KernelSupport.h"

#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

/// The bounds KernelSupport.h documents.
constexpr int64_t kF32BoundUlp = 1;
constexpr long double kF64BoundUlp = 1.0L;

/// The paths this CPU can run, from the scalar one up.
std::vector<int32_t> supportedPaths() {
  std::vector<int32_t> paths;
  for (int32_t isa = ENERGY_ISA_SCALAR; isa <= energy_support_supported_isa();
       ++isa)
    paths.push_back(isa);
  return paths;
}

std::string pathName(int32_t isa) {
  switch (isa) {
  case ENERGY_ISA_AVX512:
    return "avx512";
  case ENERGY_ISA_AVX2:
    return "avx2";
  default:
    return "scalar";
  }
}

/// Restores the automatic choice when a test case ends, however it ends.
struct ForcedPath {
  explicit ForcedPath(int32_t isa) {
    REQUIRE(energy_support_force_isa(isa) == 0);
  }
  ~ForcedPath() { energy_support_force_isa(ENERGY_ISA_AUTOMATIC); }
};

/// x in C's %a notation, exact.
std::string hex(double x) {
  char text[64];
  std::snprintf(text, sizeof text, "%a", x);
  return text;
}

float floatFromBits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

/// The float's position on the number line: consecutive floats differ by 1,
/// +0 and -0 are both 0, and +inf is one past FLT_MAX.
int64_t orderedIndex(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  int64_t magnitude = bits & 0x7fffffffu;
  return (bits >> 31) ? -magnitude : magnitude;
}

/// The largest error, in ulps, of one path over the inputs it has seen.
struct F32Errors {
  int64_t worst = 0;
  float worstInput = 0;
  int64_t beyondBound = 0;
  int64_t nanMismatches = 0;
  int64_t checked = 0;
};

/// Runs every path on `inputs` and records how far each result is from the
/// reference.
void checkF32(const std::vector<float> &inputs,
              std::vector<F32Errors> &errors) {
  std::vector<float> expected(inputs.size()), actual(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    expected[i] = static_cast<float>(std::exp(static_cast<double>(inputs[i])));
  std::vector<int32_t> paths = supportedPaths();
  for (size_t p = 0; p < paths.size(); ++p) {
    ForcedPath forced(paths[p]);
    energy_support_exp_f32(static_cast<int64_t>(inputs.size()), inputs.data(),
                           actual.data());
    F32Errors &error = errors[p];
    for (size_t i = 0; i < inputs.size(); ++i) {
      ++error.checked;
      if (std::isnan(expected[i]) || std::isnan(actual[i])) {
        error.nanMismatches += std::isnan(expected[i]) != std::isnan(actual[i]);
        continue;
      }
      int64_t distance = orderedIndex(actual[i]) - orderedIndex(expected[i]);
      distance = distance < 0 ? -distance : distance;
      error.beyondBound += distance > kF32BoundUlp;
      if (distance > error.worst) {
        error.worst = distance;
        error.worstInput = inputs[i];
      }
    }
  }
}

/// Every float with bit pattern in [first, last] (same sign), in batches.
void checkF32Range(uint32_t first, uint32_t last, uint32_t stride,
                   std::vector<F32Errors> &errors) {
  std::vector<float> batch;
  for (uint64_t bits = first; bits <= last; bits += stride) {
    batch.push_back(floatFromBits(static_cast<uint32_t>(bits)));
    if (batch.size() == (1u << 20)) {
      checkF32(batch, errors);
      batch.clear();
    }
  }
  if (!batch.empty())
    checkF32(batch, errors);
}

uint32_t bitsOf(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

/// Bit patterns of the floats between a and b (same sign), in order.
void checkF32Between(float a, float b, std::vector<F32Errors> &errors) {
  uint32_t first = bitsOf(a), last = bitsOf(b);
  if (first > last)
    std::swap(first, last);
  checkF32Range(first, last, 1, errors);
}

void reportF32(const std::vector<F32Errors> &errors) {
  std::vector<int32_t> paths = supportedPaths();
  for (size_t p = 0; p < paths.size(); ++p) {
    const F32Errors &error = errors[p];
    INFO("path " << pathName(paths[p]) << ": " << error.checked
                 << " inputs, worst " << error.worst << " ulp at x = "
                 << error.worstInput << " (" << hex(error.worstInput) << ")");
    CHECK(error.checked > 0);
    CHECK(error.nanMismatches == 0);
    CHECK(error.beyondBound == 0);
    CHECK(error.worst <= kF32BoundUlp);
    MESSAGE("exp f32, path " << pathName(paths[p]) << ": worst " << error.worst
                             << " ulp over " << error.checked << " inputs");
  }
}

} // namespace

TEST_CASE("exp f32: a stride through all 2^32 inputs, on every path") {
  std::vector<F32Errors> errors(supportedPaths().size());
  // An odd stride, so that every low mantissa bit pattern occurs.
  checkF32Range(0, 0xffffffffu, 101, errors);
  reportF32(errors);
}

TEST_CASE("exp f32: every input where the range ends, on every path") {
  std::vector<F32Errors> errors(supportedPaths().size());
  // Subnormal results (x below log(FLT_MIN) = -87.34) and the edge where
  // they round to zero (log(2^-150) = -103.97).
  checkF32Between(-87.0f, -105.0f, errors);
  // Overflow: log(FLT_MAX) = 88.72.
  checkF32Between(88.0f, 89.5f, errors);
  // Results next to 1: |x| around 2^-24, where exp rounds to 1 or a
  // neighbour of it.
  checkF32Between(0x1p-26f, 0x1p-24f, errors);
  checkF32Between(-0x1p-26f, -0x1p-24f, errors);
  reportF32(errors);
}

TEST_CASE("exp f32: special values are exact, on every path") {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> in = {0.0f,     -0.0f,     inf,       -inf,
                           NAN,      -NAN,      1000.0f,   -1000.0f,
                           FLT_MAX,  -FLT_MAX,  0x1p-149f, -0x1p-149f,
                           0x1p-30f, -0x1p-30f, 89.0f,     -104.0f};
  for (int32_t isa : supportedPaths()) {
    ForcedPath forced(isa);
    INFO("path " << pathName(isa));
    std::vector<float> out(in.size());
    energy_support_exp_f32(static_cast<int64_t>(in.size()), in.data(),
                           out.data());
    CHECK(out[0] == 1.0f);
    CHECK(out[1] == 1.0f);
    CHECK(out[2] == inf);
    CHECK(out[3] == 0.0f);
    CHECK(!std::signbit(out[3]));
    CHECK(std::isnan(out[4]));
    CHECK(std::isnan(out[5]));
    CHECK(out[6] == inf);
    CHECK(out[7] == 0.0f);
    CHECK(out[8] == inf);
    CHECK(out[9] == 0.0f);
    CHECK(out[10] == 1.0f);
    CHECK(out[11] == 1.0f);
    CHECK(out[12] == 1.0f);
    CHECK(out[13] == 1.0f);
    CHECK(out[14] == inf);
    CHECK(out[15] == 0.0f);
  }
}

TEST_CASE("softmax weights: exp where it is normal, 0 below, on every path") {
  // Every float from −100 to 5 in steps of 2^-10 (about 1e5 inputs, either
  // side of the threshold), plus the special values, in arrays whose length
  // is no multiple of a vector.
  std::vector<float> in;
  for (float x = -100.0f; x <= 5.0f; x += 0x1p-10f)
    in.push_back(x);
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {-inf, inf, float(NAN), -87.33654f, -87.33655f, -0.0f})
    in.push_back(x);
  std::vector<double> din(in.begin(), in.end());
  for (double x : {-708.39641, -708.39642, -709.0, -745.0, -800.0})
    din.push_back(x);
  for (int32_t isa : supportedPaths()) {
    ForcedPath forced(isa);
    INFO("path " << pathName(isa));
    std::vector<float> weights(in.size()), exps(in.size());
    energy_support_softmax_weights_f32(int64_t(in.size()), in.data(),
                                       weights.data());
    energy_support_exp_f32(int64_t(in.size()), in.data(), exps.data());
    for (size_t i = 0; i < in.size(); ++i) {
      INFO("x = " << hex(in[i]));
      if (std::isnan(in[i]))
        CHECK(std::isnan(weights[i]));
      else if (exps[i] < std::numeric_limits<float>::min())
        CHECK(weights[i] == 0.0f);
      else
        CHECK(weights[i] == exps[i]);
    }
    std::vector<double> dweights(din.size()), dexps(din.size());
    energy_support_softmax_weights_f64(int64_t(din.size()), din.data(),
                                       dweights.data());
    energy_support_exp_f64(int64_t(din.size()), din.data(), dexps.data());
    for (size_t i = 0; i < din.size(); ++i) {
      INFO("x = " << hex(din[i]));
      if (std::isnan(din[i]))
        CHECK(std::isnan(dweights[i]));
      else if (dexps[i] < std::numeric_limits<double>::min())
        CHECK(dweights[i] == 0.0);
      else
        CHECK(dweights[i] == dexps[i]);
    }
  }
}

TEST_CASE("exp: every length and in place give the same values") {
  std::mt19937 random(7);
  std::uniform_real_distribution<float> uniform(-110.0f, 95.0f);
  std::vector<float> in(100);
  for (float &x : in)
    x = uniform(random);
  std::vector<double> in64(in.begin(), in.end());
  for (int32_t isa : supportedPaths()) {
    ForcedPath forced(isa);
    INFO("path " << pathName(isa));
    std::vector<float> whole(in.size());
    std::vector<double> whole64(in.size());
    energy_support_exp_f32(100, in.data(), whole.data());
    energy_support_exp_f64(100, in64.data(), whole64.data());
    for (int64_t start : {0, 1, 3}) {
      for (int64_t length = 0; start + length <= 100; ++length) {
        // Guards past the end must stay untouched.
        std::vector<float> part(length + 1, -7.0f);
        std::vector<double> part64(length + 1, -7.0);
        energy_support_exp_f32(length, in.data() + start, part.data());
        energy_support_exp_f64(length, in64.data() + start, part64.data());
        int64_t wrong = part[length] != -7.0f || part64[length] != -7.0;
        for (int64_t i = 0; i < length; ++i)
          wrong += bitsOf(part[i]) != bitsOf(whole[start + i]) ||
                   part64[i] != whole64[start + i];
        INFO("start " << start << ", length " << length);
        CHECK(wrong == 0);
      }
    }
    std::vector<float> inPlace = in;
    std::vector<double> inPlace64 = in64;
    energy_support_exp_f32(100, inPlace.data(), inPlace.data());
    energy_support_exp_f64(100, inPlace64.data(), inPlace64.data());
    CHECK(std::memcmp(inPlace.data(), whole.data(), 100 * sizeof(float)) == 0);
    CHECK(inPlace64 == whole64);
  }
}

namespace {

/// The error of a double result in ulps of the exact value `exact` (an
/// x87 long double, 11 more bits than a double): the ulp of a subnormal is
/// 2^-1074, and +inf counts as 2^1024, one ulp past DBL_MAX (so an exact
/// value beyond it counts as 2^1024 too: it rounds to +inf).
long double f64ErrorUlp(double result, long double exact) {
  const long double overflow = std::ldexp(1.0L, 1024);
  long double value = std::isinf(result) ? overflow : (long double)result;
  exact = std::fmin(exact, overflow);
  long double ulp;
  if (exact < (long double)DBL_MIN) {
    ulp = std::ldexp(1.0L, -1074);
  } else {
    int exponent;
    std::frexp(exact, &exponent); // exact = m · 2^exponent, m in [1/2, 1)
    ulp = std::ldexp(1.0L, exponent - 53);
  }
  return std::fabs(value - exact) / ulp;
}

} // namespace

TEST_CASE("exp f64: random and special inputs against expl, on every path") {
  std::mt19937_64 random(20240611);
  std::vector<double> in;
  auto uniformIn = [&](double lo, double hi, int count) {
    std::uniform_real_distribution<double> uniform(lo, hi);
    for (int i = 0; i < count; ++i)
      in.push_back(uniform(random));
  };
  uniformIn(-750, 712, 400000);
  uniformIn(-1, 1, 200000);
  uniformIn(-0.35, 0.35, 200000);    // the reduced interval itself
  uniformIn(-745.2, -708.3, 200000); // subnormal results
  uniformIn(709.0, 709.9, 100000);   // overflow
  uniformIn(-1e-15, 1e-15, 100000);  // results next to 1
  for (int i = 0; i < 400000; ++i) { // any bit pattern
    uint64_t bits = random();
    double x;
    std::memcpy(&x, &bits, sizeof x);
    in.push_back(x);
  }
  // Around the edges, exhaustively for a few thousand doubles each.
  for (double edge : {709.782712893384, -708.3964185322641, -745.1332191019411,
                      -745.1332191019412, 0x1p-53, -0x1p-54}) {
    double x = edge;
    for (int i = 0; i < 2000; ++i)
      x = std::nextafter(x, -INFINITY);
    for (int i = 0; i < 4000; ++i, x = std::nextafter(x, INFINITY))
      in.push_back(x);
  }
  std::vector<long double> exact(in.size());
  for (size_t i = 0; i < in.size(); ++i)
    exact[i] = expl((long double)in[i]);

  for (int32_t isa : supportedPaths()) {
    ForcedPath forced(isa);
    std::vector<double> out(in.size());
    energy_support_exp_f64(static_cast<int64_t>(in.size()), in.data(),
                           out.data());
    long double worst = 0;
    double worstInput = 0;
    int64_t nanMismatches = 0, beyondBound = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      if (std::isnan(in[i])) {
        nanMismatches += !std::isnan(out[i]);
        continue;
      }
      long double error = f64ErrorUlp(out[i], exact[i]);
      beyondBound += !(error < kF64BoundUlp);
      if (!(error <= worst)) {
        worst = error;
        worstInput = in[i];
      }
    }
    INFO("path " << pathName(isa) << ": worst " << (double)worst
                 << " ulp at x = " << hex(worstInput));
    CHECK(nanMismatches == 0);
    CHECK(beyondBound == 0);
    MESSAGE("exp f64, path " << pathName(isa) << ": worst " << (double)worst
                             << " ulp over " << in.size() << " inputs");

    const double inf = std::numeric_limits<double>::infinity();
    std::vector<double> special = {0.0,   -0.0,   inf,       -inf,  NAN,
                                   1e300, -1e300, 0x1p-1074, 710.0, -746.0};
    energy_support_exp_f64(static_cast<int64_t>(special.size()), special.data(),
                           special.data());
    CHECK(special[0] == 1.0);
    CHECK(special[1] == 1.0);
    CHECK(special[2] == inf);
    CHECK(special[3] == 0.0);
    CHECK(!std::signbit(special[3]));
    CHECK(std::isnan(special[4]));
    CHECK(special[5] == inf);
    CHECK(special[6] == 0.0);
    CHECK(special[7] == 1.0);
    CHECK(special[8] == inf);
    CHECK(special[9] == 0.0);
  }
}

TEST_CASE("the forced path is the active one, and unsupported ones refuse") {
  int32_t supported = energy_support_supported_isa();
  for (int32_t isa : supportedPaths()) {
    REQUIRE(energy_support_force_isa(isa) == 0);
    CHECK(energy_support_active_isa() == isa);
  }
  CHECK(energy_support_force_isa(supported + 1) != 0);
  CHECK(energy_support_force_isa(-2) != 0);
  CHECK(energy_support_force_isa(ENERGY_ISA_AUTOMATIC) == 0);
  CHECK(energy_support_active_isa() <= supported);
  MESSAGE("this CPU supports the " << pathName(supported) << " path");
}
