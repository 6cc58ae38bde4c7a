//===- ScalarMath.h - Scalar functions of the energy language -------------===//
//
// The elementwise functions of the energy language on doubles, each computed
// the way the language specifies (stable softplus and sigmoid, exact erf GELU,
// the SiLU integral through the dilogarithm). One definition serves every
// elementwise op of the interpreter.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_KERNELSUPPORT_SCALARMATH_H
#define ENERGY_KERNELSUPPORT_SCALARMATH_H

namespace energy::scalar {

/// A function of one real argument.
using UnaryFunction = double (*)(double);
/// A function of two real arguments.
using BinaryFunction = double (*)(double, double);

double negate(double x);
double sigmoid(double x);
/// log(1 + eˣ) = log1p(e^-|x|) + max(x, 0), with no cut-off.
double softplus(double x);
double silu(double x);
/// x · Φ(x) with Φ the standard normal distribution function.
double gelu(double x);
double relu(double x);
/// x where x > 0, eˣ - 1 elsewhere (ELU with α = 1).
double elu(double x);
/// 1 where x > 0, else 0.
double heaviside(double x);
/// -1, 0 or 1.
double sign(double x);
/// The dilogarithm Li₂(z) = -∫₀^z log(1 - t)/t dt for real z ≤ 0 (NaN for
/// z > 0, which the language never needs).
double dilogarithm(double z);
/// ∫_{-∞}^{x} SiLU(t) dt = x · softplus(x) + Li₂(-eˣ).
double siluIntegral(double x);

double add(double x, double y);
double subtract(double x, double y);
double multiply(double x, double y);
double divide(double x, double y);
double maximum(double x, double y);

} // namespace energy::scalar

#endif // ENERGY_KERNELSUPPORT_SCALARMATH_H
