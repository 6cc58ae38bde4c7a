//===- ElementwiseOps.cpp - What each element-wise op computes ------------===//
//
// Each element-wise op's function, once: on doubles (the scalar functions
// of ScalarMath.h, which the reference interpreter applies) and on lanes
// (the ops code generation emits, through its LaneBuilder).
//
//===----------------------------------------------------------------------===//

#include "energy/IR/EnergyOps.h"
#include "energy/KernelSupport/ScalarMath.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/TypeUtilities.h"

#include <cmath>

using namespace mlir;
using namespace mlir::energy;
namespace scalar = ::energy::scalar;

namespace {
ScalarFunction unaryOf(double (*function)(double)) {
  return {function, nullptr};
}
ScalarFunction binaryOf(double (*function)(double, double)) {
  return {nullptr, function};
}

Value sigmoidLanes(LaneBuilder &lanes, Value x) {
  Value one = lanes.constant(1.0, x);
  Value negated = arith::NegFOp::create(lanes.getBuilder(), lanes.getLoc(), x);
  return lanes.div(one, lanes.add(one, lanes.exp(negated)));
}
} // namespace

//===----------------------------------------------------------------------===//
// Arithmetic
//===----------------------------------------------------------------------===//

ScalarFunction AddOp::getScalarFunction() { return binaryOf(scalar::add); }
Value AddOp::buildLanes(LaneBuilder &lanes, ValueRange operands) {
  return lanes.add(operands[0], operands[1]);
}

ScalarFunction SubOp::getScalarFunction() { return binaryOf(scalar::subtract); }
Value SubOp::buildLanes(LaneBuilder &lanes, ValueRange operands) {
  return lanes.sub(operands[0], operands[1]);
}

ScalarFunction MulOp::getScalarFunction() { return binaryOf(scalar::multiply); }
Value MulOp::buildLanes(LaneBuilder &lanes, ValueRange operands) {
  return lanes.mul(operands[0], operands[1]);
}

ScalarFunction DivOp::getScalarFunction() { return binaryOf(scalar::divide); }
Value DivOp::buildLanes(LaneBuilder &lanes, ValueRange operands) {
  return lanes.div(operands[0], operands[1]);
}

ScalarFunction MaximumOp::getScalarFunction() {
  return binaryOf(scalar::maximum);
}
Value MaximumOp::buildLanes(LaneBuilder &lanes, ValueRange operands) {
  return lanes.maximum(operands[0], operands[1]);
}

ScalarFunction NegOp::getScalarFunction() { return unaryOf(scalar::negate); }
Value NegOp::buildLanes(LaneBuilder &lanes, ValueRange operands) {
  return arith::NegFOp::create(lanes.getBuilder(), lanes.getLoc(), operands[0]);
}

ScalarFunction PowOp::getScalarFunction() {
  double exponent = static_cast<double>(getExponent());
  return {[exponent](double x) { return std::pow(x, exponent); }, nullptr};
}
Value PowOp::buildLanes(LaneBuilder &lanes, ValueRange operands) {
  Value x = operands[0], one = lanes.constant(1.0, x);
  int64_t exponent = getExponent();
  Value result = one;
  for (int64_t i = 0; i < std::abs(exponent); ++i)
    result = lanes.mul(result, x);
  return exponent < 0 ? lanes.div(one, result) : result;
}

//===----------------------------------------------------------------------===//
// Functions
//===----------------------------------------------------------------------===//

ScalarFunction ExpOp::getScalarFunction() {
  return unaryOf(static_cast<double (*)(double)>(std::exp));
}
Value ExpOp::buildLanes(LaneBuilder &lanes, ValueRange operands) {
  return lanes.exp(operands[0]);
}

ScalarFunction LogOp::getScalarFunction() {
  return unaryOf(static_cast<double (*)(double)>(std::log));
}
Value LogOp::buildLanes(LaneBuilder &lanes, ValueRange operands) {
  return lanes.log(operands[0]);
}

ScalarFunction TanhOp::getScalarFunction() {
  return unaryOf(static_cast<double (*)(double)>(std::tanh));
}
Value TanhOp::buildLanes(LaneBuilder &lanes, ValueRange operands) {
  return math::TanhOp::create(lanes.getBuilder(), lanes.getLoc(), operands[0]);
}

ScalarFunction SigmoidOp::getScalarFunction() {
  return unaryOf(scalar::sigmoid);
}
Value SigmoidOp::buildLanes(LaneBuilder &lanes, ValueRange operands) {
  return sigmoidLanes(lanes, operands[0]);
}

ScalarFunction SiluOp::getScalarFunction() { return unaryOf(scalar::silu); }
Value SiluOp::buildLanes(LaneBuilder &lanes, ValueRange operands) {
  return lanes.mul(operands[0], sigmoidLanes(lanes, operands[0]));
}

ScalarFunction SoftplusOp::getScalarFunction() {
  return unaryOf(scalar::softplus);
}
Value SoftplusOp::buildLanes(LaneBuilder &lanes, ValueRange operands) {
  // log1p(exp(−|x|)) + max(x, 0): no overflow for large |x|.
  OpBuilder &b = lanes.getBuilder();
  Location loc = lanes.getLoc();
  Value x = operands[0], zero = lanes.constant(0.0, x);
  Value magnitude = math::AbsFOp::create(b, loc, x);
  Value tail = math::Log1pOp::create(
      b, loc, lanes.exp(arith::NegFOp::create(b, loc, magnitude)));
  return lanes.add(tail, lanes.maximum(x, zero));
}

ScalarFunction GeluOp::getScalarFunction() { return unaryOf(scalar::gelu); }
Value GeluOp::buildLanes(LaneBuilder &lanes, ValueRange operands) {
  // x/2 · erfc(−x/√2).
  Value x = operands[0];
  Value scaled = lanes.mul(x, lanes.constant(-M_SQRT1_2, x));
  return lanes.mul(
      lanes.mul(x, lanes.constant(0.5, x)),
      math::ErfcOp::create(lanes.getBuilder(), lanes.getLoc(), scaled));
}

ScalarFunction ErfOp::getScalarFunction() {
  return unaryOf(static_cast<double (*)(double)>(std::erf));
}
Value ErfOp::buildLanes(LaneBuilder &lanes, ValueRange operands) {
  return math::ErfOp::create(lanes.getBuilder(), lanes.getLoc(), operands[0]);
}

ScalarFunction ReluOp::getScalarFunction() { return unaryOf(scalar::relu); }
Value ReluOp::buildLanes(LaneBuilder &lanes, ValueRange operands) {
  Value x = operands[0], zero = lanes.constant(0.0, x);
  return lanes.select(lanes.compare(arith::CmpFPredicate::OGT, x, zero), x,
                      zero);
}

ScalarFunction EluOp::getScalarFunction() { return unaryOf(scalar::elu); }
Value EluOp::buildLanes(LaneBuilder &lanes, ValueRange operands) {
  // eˣ - 1 = 2t / (1 - t) with t = tanh(x / 2): no cancellation for x ≤ 0,
  // where the polynomial expm1 would take a logarithm besides its
  // exponential (and is not exact in f64).
  Value x = operands[0], zero = lanes.constant(0.0, x);
  Value half = math::TanhOp::create(lanes.getBuilder(), lanes.getLoc(),
                                    lanes.mul(x, lanes.constant(0.5, x)));
  Value below =
      lanes.div(lanes.add(half, half), lanes.sub(lanes.constant(1.0, x), half));
  return lanes.select(lanes.compare(arith::CmpFPredicate::OGT, x, zero), x,
                      below);
}

ScalarFunction SinOp::getScalarFunction() {
  return unaryOf(static_cast<double (*)(double)>(std::sin));
}
Value SinOp::buildLanes(LaneBuilder &lanes, ValueRange operands) {
  return math::SinOp::create(lanes.getBuilder(), lanes.getLoc(), operands[0]);
}

ScalarFunction CosOp::getScalarFunction() {
  return unaryOf(static_cast<double (*)(double)>(std::cos));
}
Value CosOp::buildLanes(LaneBuilder &lanes, ValueRange operands) {
  return math::CosOp::create(lanes.getBuilder(), lanes.getLoc(), operands[0]);
}

ScalarFunction HeavisideOp::getScalarFunction() {
  return unaryOf(scalar::heaviside);
}
Value HeavisideOp::buildLanes(LaneBuilder &lanes, ValueRange operands) {
  Value x = operands[0], zero = lanes.constant(0.0, x);
  return lanes.select(lanes.compare(arith::CmpFPredicate::OGT, x, zero),
                      lanes.constant(1.0, x), zero);
}

ScalarFunction SignOp::getScalarFunction() { return unaryOf(scalar::sign); }
Value SignOp::buildLanes(LaneBuilder &lanes, ValueRange operands) {
  Value x = operands[0], zero = lanes.constant(0.0, x);
  Value one = lanes.constant(1.0, x);
  Value positive = lanes.select(
      lanes.compare(arith::CmpFPredicate::OGT, x, zero), one, zero);
  Value negative = lanes.select(
      lanes.compare(arith::CmpFPredicate::OLT, x, zero), one, zero);
  return lanes.sub(positive, negative);
}

ScalarFunction SqrtOp::getScalarFunction() {
  return unaryOf(static_cast<double (*)(double)>(std::sqrt));
}
Value SqrtOp::buildLanes(LaneBuilder &lanes, ValueRange operands) {
  return math::SqrtOp::create(lanes.getBuilder(), lanes.getLoc(), operands[0]);
}

ScalarFunction AbsOp::getScalarFunction() {
  return unaryOf(static_cast<double (*)(double)>(std::fabs));
}
Value AbsOp::buildLanes(LaneBuilder &lanes, ValueRange operands) {
  return math::AbsFOp::create(lanes.getBuilder(), lanes.getLoc(), operands[0]);
}

ScalarFunction SiluIntOp::getScalarFunction() {
  return unaryOf(scalar::siluIntegral);
}
Value SiluIntOp::buildLanes(LaneBuilder &lanes, ValueRange operands) {
  // x · softplus(x) + Li₂(−eˣ). With L = Li₂(−e^−|x|): Li₂(−eˣ) is L where
  // x ≤ 0 and −π²/6 − x²/2 − L where x > 0 (the inversion formula). L =
  // −S(w) − ½ ln²(1 + e^−|x|) with w = σ(−|x|) in (0, ½] (Landen's
  // identity); S(w) = Σₖ wᵏ / k² by Horner's rule, to the element type's
  // precision (the first term left out is below 2⁻ᵏ / k² of S(½) ≈ 0.58).
  OpBuilder &b = lanes.getBuilder();
  Location loc = lanes.getLoc();
  Value x = operands[0], zero = lanes.constant(0.0, x);
  Value decay =
      lanes.exp(arith::NegFOp::create(b, loc, math::AbsFOp::create(b, loc, x)));
  Value logOnePlusDecay = math::Log1pOp::create(b, loc, decay);
  Value softplus = lanes.add(logOnePlusDecay, lanes.maximum(x, zero));
  Value w = lanes.div(decay, lanes.add(lanes.constant(1.0, x), decay));
  unsigned width = getElementTypeOrSelf(x.getType()).getIntOrFloatBitWidth();
  int terms = width >= 64 ? 48 : 20;
  Value series = lanes.constant(1.0 / (double(terms) * terms), x);
  for (int k = terms - 1; k >= 1; --k)
    series = lanes.add(lanes.constant(1.0 / (double(k) * k), x),
                       lanes.mul(w, series));
  Value dilogarithm =
      lanes.sub(lanes.mul(lanes.constant(-0.5, x),
                          lanes.mul(logOnePlusDecay, logOnePlusDecay)),
                lanes.mul(w, series));
  Value inverted =
      lanes.sub(lanes.sub(lanes.constant(-M_PI * M_PI / 6, x),
                          lanes.mul(lanes.constant(0.5, x), lanes.mul(x, x))),
                dilogarithm);
  Value positive = lanes.compare(arith::CmpFPredicate::OGT, x, zero);
  return lanes.add(lanes.mul(x, softplus),
                   lanes.select(positive, inverted, dilogarithm));
}
