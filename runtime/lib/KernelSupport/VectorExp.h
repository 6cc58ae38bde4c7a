//===- VectorExp.h - exp on vectors, for every path -------------*- C++ -*-===//
//
// The exponential that energy_support_exp_f32/f64 and the softmax-contract
// kernel share: a template over the vector interface of SimdScalar.h,
// instantiated once per instruction set (see IsaKernels.h).
//
//   x = k·ln2 + r, k = round(x / ln2), |r| <= ln2/2 (+ rounding)
//   exp(r) ~ 1 + r + r²·P(r)          P: weighted minimax fit of
//                                     (exp(r) - 1 - r)/r² on the interval
//   exp(x) = 2^k · exp(r)             applied in one rounding (scalePow2)
//
// k is rounded by adding 1.5·2^m (m mantissa bits), which leaves k in the low
// bits of the sum; ln2 is split into a short high part (k·ln2_hi and
// x - k·ln2_hi are exact) and a low part. Inputs are first clamped to
// [kLowest, kHighest], just beyond the underflow and overflow thresholds, so
// that the result there is exactly +0 or +inf; NaN passes through.
//
// The polynomials (relative error of the fit, before rounding):
//   f32: degree 4 in P, 2^-28.3;  f64: degree 9 in P, 2^-57.9.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_KERNELSUPPORT_VECTOREXP_H
#define ENERGY_KERNELSUPPORT_VECTOREXP_H

#include <stdint.h>

namespace energy::kernels::ENERGY_KERNEL_ISA {

template <class T> struct ExpConstants;

template <> struct ExpConstants<float> {
  /// exp(x) for x below this is below the smallest normal number, 2^-126.
  static constexpr float kNormalLowest = -87.33654f;
  /// exp(-104) < 2^-150 rounds to +0; exp(89) > FLT_MAX.
  static constexpr float kLowest = -104.0f, kHighest = 89.0f;
  static constexpr float kShifter = 0x1.8p23f;
  static constexpr float kLog2e = 1.44269504088896341f;
  /// ln2 = kLn2High + kLn2Low, kLn2High with 15 significant bits.
  static constexpr float kLn2High = 0x1.62e4p-1f;
  static constexpr float kLn2Low = 0x1.7f7d1cp-20f;
  static constexpr int kDegree = 4;
  /// 1 + r + r²·P in plain arithmetic: within 1 ulp.
  static constexpr bool kCompensated = false;
  static constexpr float kPolynomial[kDegree + 1] = {
      0.49999993440415663f, 0.1666652052207697f, 0.041668389335570516f,
      0.008368730184105633f, 0.0013814571089710292f};
};

template <> struct ExpConstants<double> {
  /// exp(x) for x below this is below the smallest normal number, 2^-1022.
  static constexpr double kNormalLowest = -708.39641;
  /// exp(-746) < 2^-1075 rounds to +0; exp(710) > DBL_MAX.
  static constexpr double kLowest = -746.0, kHighest = 710.0;
  static constexpr double kShifter = 0x1.8p52;
  static constexpr double kLog2e = 1.4426950408889634;
  /// ln2 = kLn2High + kLn2Low, kLn2High with 32 significant bits.
  static constexpr double kLn2High = 0x1.62e42feep-1;
  static constexpr double kLn2Low = 0x1.a39ef35793c76p-33;
  static constexpr int kDegree = 9;
  /// 1 + r + r²·P with the first sum compensated: well below 1 ulp.
  static constexpr bool kCompensated = true;
  static constexpr double kPolynomial[kDegree + 1] = {
      0.5000000000000010646731129,   0.166666666666664120449436,
      0.04166666666652995588239207,  0.008333333333494704509623054,
      0.001388888894369128682884168, 0.0001984126950619949574712728,
      2.480149302856914862091215e-5, 2.755758657648010863980489e-6,
      2.763027565379759838399226e-7, 2.500004144593712251657573e-8};
};

/// P(r) by Horner's rule.
template <class V> inline typename V::Vec polynomial(typename V::Vec r) {
  using Constants = ExpConstants<typename V::Scalar>;
  typename V::Vec p = V::broadcast(Constants::kPolynomial[Constants::kDegree]);
  for (int i = Constants::kDegree - 1; i >= 0; --i)
    p = V::fma(p, r, V::broadcast(Constants::kPolynomial[i]));
  return p;
}

/// exp of every lane of x.
template <class V> inline typename V::Vec expVector(typename V::Vec x) {
  using Constants = ExpConstants<typename V::Scalar>;
  using Vec = typename V::Vec;
  x = V::clamp(x, V::broadcast(Constants::kLowest),
               V::broadcast(Constants::kHighest));
  Vec shifter = V::broadcast(Constants::kShifter);
  Vec shifted = V::fma(x, V::broadcast(Constants::kLog2e), shifter);
  Vec k = V::sub(shifted, shifter);
  // r = high - low: high = x - k·ln2_high is exact, low = k·ln2_low tiny.
  Vec high = V::fma(k, V::broadcast(-Constants::kLn2High), x);
  Vec one = V::broadcast(1);
  Vec expR;
  if constexpr (Constants::kCompensated) {
    // 1 + high + (r²·P - low) with 1 + high split exactly (Fast2Sum, as
    // |high| < 1): only the last addition rounds at the result's scale.
    Vec low = V::mul(k, V::broadcast(Constants::kLn2Low));
    Vec r = V::sub(high, low);
    Vec p = polynomial<V>(r);
    Vec sum = V::add(one, high);
    Vec sumError = V::sub(high, V::sub(sum, one));
    Vec tail = V::fma(V::mul(r, r), p, V::sub(sumError, low));
    expR = V::add(sum, tail);
  } else {
    Vec r = V::fma(k, V::broadcast(-Constants::kLn2Low), high);
    expR = V::add(V::fma(V::mul(r, r), polynomial<V>(r), r), one);
  }
  return V::scalePow2(expR, k, shifted, shifter);
}

/// out[i] = exp(in[i]) for 0 <= i < n; in == out is allowed.
template <class V>
void expArray(int64_t n, const typename V::Scalar *in,
              typename V::Scalar *out) {
  int64_t i = 0;
  for (; i + V::kLanes <= n; i += V::kLanes)
    V::store(out + i, expVector<V>(V::load(in + i)));
  if (i < n) {
    typename V::Tail tail = V::tail(n - i);
    V::storeTail(out + i, expVector<V>(V::loadTail(in + i, tail)), tail);
  }
}

/// A softmax weight: exp(x), except that a result below the smallest normal
/// number is +0. Subnormal results, and the 0 of a very negative or −∞ x,
/// cost the CPU a microcode assist per element, some twenty times the cost
/// of a normal one; as weights they are negligible.
template <class V> inline typename V::Vec weightVector(typename V::Vec x) {
  using Constants = ExpConstants<typename V::Scalar>;
  typename V::Vec lowest = V::broadcast(Constants::kNormalLowest);
  typename V::Vec inRange =
      V::clamp(x, lowest, V::broadcast(Constants::kHighest));
  return V::zeroWhereBelow(expVector<V>(inRange), x, lowest);
}

/// out[i] = weightVector(in[i]) for 0 <= i < n; in == out is allowed.
template <class V>
void softmaxWeightsArray(int64_t n, const typename V::Scalar *in,
                         typename V::Scalar *out) {
  int64_t i = 0;
  for (; i + V::kLanes <= n; i += V::kLanes)
    V::store(out + i, weightVector<V>(V::load(in + i)));
  if (i < n) {
    typename V::Tail tail = V::tail(n - i);
    V::storeTail(out + i, weightVector<V>(V::loadTail(in + i, tail)), tail);
  }
}

} // namespace energy::kernels::ENERGY_KERNEL_ISA

#endif // ENERGY_KERNELSUPPORT_VECTOREXP_H
