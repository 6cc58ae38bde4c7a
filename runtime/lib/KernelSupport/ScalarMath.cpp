//===- ScalarMath.cpp - Scalar functions of the energy language -----------===//
//
// Double-precision definitions of the energy language's elementwise
// functions. The dilogarithm is reduced to a fast power series on [0, 1/2]
// by Landen's identity and the inversion formula.
//
//===----------------------------------------------------------------------===//

#include "energy/KernelSupport/ScalarMath.h"

#include <cmath>
#include <limits>

using namespace energy;

double scalar::negate(double x) { return -x; }

double scalar::sigmoid(double x) {
  if (x >= 0)
    return 1.0 / (1.0 + std::exp(-x));
  double ex = std::exp(x);
  return ex / (1.0 + ex);
}

double scalar::softplus(double x) {
  return std::log1p(std::exp(-std::fabs(x))) + std::fmax(x, 0.0);
}

double scalar::silu(double x) { return x * sigmoid(x); }

double scalar::gelu(double x) { return x * 0.5 * std::erfc(-x * M_SQRT1_2); }

double scalar::relu(double x) { return x > 0 ? x : 0.0; }

double scalar::elu(double x) { return x > 0 ? x : std::expm1(x); }

double scalar::heaviside(double x) { return x > 0 ? 1.0 : 0.0; }

double scalar::sign(double x) { return (x > 0) - (x < 0); }

/// Σ_{k≥1} wᵏ / k² for 0 ≤ w ≤ 1/2, where the terms fall at least as 2⁻ᵏ.
static double dilogarithmSeries(double w) {
  double sum = 0, power = 1;
  for (int k = 1; k < 200; ++k) {
    power *= w;
    double term = power / (static_cast<double>(k) * k);
    sum += term;
    if (term <= 1e-18 * sum)
      break;
  }
  return sum;
}

double scalar::dilogarithm(double z) {
  if (std::isnan(z) || z > 0)
    return std::numeric_limits<double>::quiet_NaN();
  if (z == 0)
    return 0.0;
  if (z < -1) {
    // Inversion: Li₂(z) = -π²/6 - ½ ln²(-z) - Li₂(1/z), with 1/z in (-1, 0).
    double logMinusZ = std::log(-z);
    return -M_PI * M_PI / 6 - 0.5 * logMinusZ * logMinusZ - dilogarithm(1 / z);
  }
  // Landen: Li₂(z) = -Li₂(z / (z - 1)) - ½ ln²(1 - z), z / (z - 1) in (0, ½].
  double log1MinusZ = std::log1p(-z);
  return -dilogarithmSeries(z / (z - 1)) - 0.5 * log1MinusZ * log1MinusZ;
}

double scalar::siluIntegral(double x) {
  if (x <= 0)
    return x * softplus(x) + dilogarithm(-std::exp(x));
  // For x > 0, -eˣ < -1 (and may overflow): apply the inversion formula with
  // ln(eˣ) = x directly.
  double li2 = -M_PI * M_PI / 6 - 0.5 * x * x - dilogarithm(-std::exp(-x));
  return x * softplus(x) + li2;
}

double scalar::add(double x, double y) { return x + y; }
double scalar::subtract(double x, double y) { return x - y; }
double scalar::multiply(double x, double y) { return x * y; }
double scalar::divide(double x, double y) { return x / y; }
double scalar::maximum(double x, double y) { return std::fmax(x, y); }
