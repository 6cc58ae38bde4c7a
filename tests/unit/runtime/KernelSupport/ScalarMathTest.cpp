//===- ScalarMathTest.cpp - Scalar functions against known values ---------===//
//
// The interpreter's scalar functions against closed forms and identities:
// the dilogarithm's special values and functional equations, the SiLU
// integral's value at 0 and its derivative, GELU, softplus, sigmoid and ELU.
//
//===----------------------------------------------------------------------===//

#include "energy/KernelSupport/ScalarMath.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>

using namespace energy;

namespace {
const double kPi2 = M_PI * M_PI;

/// The dilogarithm by its defining power series (for |z| ≤ 1/2), an
/// independent check of the Landen and inversion reductions.
double dilogarithmBySeries(double z) {
  double sum = 0, power = 1;
  for (int k = 1; k < 2000; ++k) {
    power *= z;
    sum += power / (static_cast<double>(k) * k);
  }
  return sum;
}
} // namespace

TEST_CASE("dilogarithm: special values") {
  CHECK(scalar::dilogarithm(0.0) == 0.0);
  CHECK(scalar::dilogarithm(-1.0) ==
        doctest::Approx(-kPi2 / 12).epsilon(1e-15));
  // Li₂(-1/2) by its series, and Li₂(-2), Li₂(-1/2) linked by inversion.
  CHECK(scalar::dilogarithm(-0.5) ==
        doctest::Approx(dilogarithmBySeries(-0.5)).epsilon(1e-15));
  CHECK(scalar::dilogarithm(-0.3) ==
        doctest::Approx(dilogarithmBySeries(-0.3)).epsilon(1e-15));
  double logTwo = std::log(2.0);
  CHECK(scalar::dilogarithm(-2.0) ==
        doctest::Approx(-kPi2 / 6 - 0.5 * logTwo * logTwo -
                        dilogarithmBySeries(-0.5))
            .epsilon(1e-14));
  CHECK(std::isnan(scalar::dilogarithm(0.5)));
}

TEST_CASE("dilogarithm: derivative is -log(1 - z) / z") {
  for (double z : {-0.01, -0.4, -0.99, -1.0, -1.7, -25.0, -1e4}) {
    double h = 1e-6 * std::max(1.0, std::fabs(z));
    double numeric =
        (scalar::dilogarithm(z + h) - scalar::dilogarithm(z - h)) / (2 * h);
    CHECK(numeric == doctest::Approx(-std::log1p(-z) / z).epsilon(1e-7));
  }
}

TEST_CASE("silu_int: value at 0, asymptotes, derivative is SiLU") {
  CHECK(scalar::siluIntegral(0.0) ==
        doctest::Approx(-kPi2 / 12).epsilon(1e-15));
  // ∫_{-∞}^{x} SiLU → 0 as x → -∞, and ≈ x²/2 - π²/6 for large x.
  CHECK(std::fabs(scalar::siluIntegral(-40.0)) < 1e-15);
  CHECK(scalar::siluIntegral(40.0) ==
        doctest::Approx(800.0 - kPi2 / 6).epsilon(1e-14));
  CHECK(std::isfinite(scalar::siluIntegral(800.0)));
  for (double x : {-8.0, -2.0, -0.5, -1e-3, 0.0, 0.3, 1.0, 3.0, 12.0}) {
    double h = 1e-6 * std::max(1.0, std::fabs(x));
    double numeric =
        (scalar::siluIntegral(x + h) - scalar::siluIntegral(x - h)) / (2 * h);
    CHECK(numeric == doctest::Approx(scalar::silu(x)).epsilon(1e-7));
  }
}

TEST_CASE("gelu, softplus, sigmoid, heaviside, sign") {
  CHECK(scalar::gelu(1.0) ==
        doctest::Approx(0.8413447460685429).epsilon(1e-15));
  CHECK(scalar::gelu(-1.0) ==
        doctest::Approx(-0.15865525393145705).epsilon(1e-14));
  CHECK(scalar::softplus(0.0) == doctest::Approx(std::log(2.0)));
  CHECK(scalar::softplus(800.0) == 800.0);
  CHECK(scalar::softplus(-800.0) == 0.0);
  CHECK(scalar::softplus(-30.0) ==
        doctest::Approx(std::exp(-30.0)).epsilon(1e-14));
  CHECK(scalar::sigmoid(-800.0) == 0.0);
  CHECK(scalar::sigmoid(2.0) == doctest::Approx(1 / (1 + std::exp(-2.0))));
  CHECK(scalar::heaviside(0.0) == 0.0);
  CHECK(scalar::heaviside(1e-300) == 1.0);
  CHECK(scalar::sign(-3.0) == -1.0);
  CHECK(scalar::sign(0.0) == 0.0);
  CHECK(scalar::relu(-2.0) == 0.0);
}

TEST_CASE("elu: the identity above 0, eˣ - 1 below, continuous at 0") {
  CHECK(scalar::elu(2.5) == 2.5);
  CHECK(scalar::elu(-1.0) ==
        doctest::Approx(std::exp(-1.0) - 1).epsilon(1e-15));
  // expm1 keeps the digits that exp(x) - 1 would cancel.
  CHECK(scalar::elu(-1e-10) == doctest::Approx(-1e-10 + 5e-21).epsilon(1e-15));
  CHECK(scalar::elu(-800.0) == -1.0);
  CHECK(scalar::elu(0.0) == 0.0);
}
