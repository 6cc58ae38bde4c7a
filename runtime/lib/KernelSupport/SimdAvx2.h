//===- SimdAvx2.h - 256-bit vectors for the AVX2 + FMA path -----*- C++ -*-===//
//
// The vector interface of SimdScalar.h on AVX2 registers with FMA: 8 floats
// or 4 doubles a vector, tails through maskload/maskstore. Included only by
// KernelsAvx2.cpp, which is compiled with -mavx2 -mfma.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_KERNELSUPPORT_SIMDAVX2_H
#define ENERGY_KERNELSUPPORT_SIMDAVX2_H

#if !defined(__AVX2__) || !defined(__FMA__)
#error "SimdAvx2.h is for a translation unit compiled with -mavx2 -mfma"
#endif

#include <immintrin.h>
#include <stdint.h>

namespace energy::kernels::ENERGY_KERNEL_ISA {

template <class T> struct Simd;

template <> struct Simd<float> {
  using Scalar = float;
  using Vec = __m256;
  using Tail = __m256i;
  static constexpr int kLanes = 8;
  static constexpr int kRegisters = 16;

  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec broadcast(float x) { return _mm256_set1_ps(x); }
  static Vec load(const float *p) { return _mm256_loadu_ps(p); }
  static void store(float *p, Vec v) { _mm256_storeu_ps(p, v); }
  static Tail tail(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static Vec loadTail(const float *p, Tail t) {
    return _mm256_maskload_ps(p, t);
  }
  static void storeTail(float *p, Vec v, Tail t) {
    _mm256_maskstore_ps(p, t, v);
  }

  static void transpose(const float *src, int64_t srcStride, float *dst,
                        int64_t dstStride) {
    Vec r[8], t[8], u[8];
    for (int i = 0; i < 8; ++i)
      r[i] = load(src + i * srcStride);
    for (int i = 0; i < 8; i += 2) {
      t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
      t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    // u[4h + k]: elements k and k + 4 of rows 4h … 4h + 3.
    for (int h = 0; h < 2; ++h) {
      u[4 * h] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0x44);
      u[4 * h + 1] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0xEE);
      u[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
      u[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xEE);
    }
    for (int k = 0; k < 4; ++k) {
      store(dst + k * dstStride, _mm256_permute2f128_ps(u[k], u[k + 4], 0x20));
      store(dst + (k + 4) * dstStride,
            _mm256_permute2f128_ps(u[k], u[k + 4], 0x31));
    }
  }

  static Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static Vec sub(Vec a, Vec b) { return _mm256_sub_ps(a, b); }
  static Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  static Vec max(Vec a, Vec b) { return _mm256_max_ps(a, b); }
  static Vec min(Vec a, Vec b) { return _mm256_min_ps(a, b); }
  /// maxps/minps return their second operand when either is NaN.
  static Vec clamp(Vec x, Vec lo, Vec hi) {
    return _mm256_min_ps(hi, _mm256_max_ps(lo, x));
  }
  /// `value`, with 0 in the lanes where x < threshold (NaN is not less).
  static Vec zeroWhereBelow(Vec value, Vec x, Vec threshold) {
    return _mm256_and_ps(value, _mm256_cmp_ps(x, threshold, _CMP_NLT_UQ));
  }
  static float reduceAdd(Vec v) {
    __m128 s =
        _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float reduceMax(Vec v) {
    __m128 s =
        _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float firstLane(Vec v) { return _mm256_cvtss_f32(v); }

  static Vec scalePow2(Vec p, Vec, Vec shifted, Vec shifter) {
    // 2^k = 2^k1 · 2^k2, k1 = floor(k/2): see SimdScalar.h.
    __m256i k = _mm256_sub_epi32(_mm256_castps_si256(shifted),
                                 _mm256_castps_si256(shifter));
    __m256i half = _mm256_srai_epi32(k, 1);
    __m256i rest = _mm256_sub_epi32(k, half);
    __m256i bias = _mm256_set1_epi32(127);
    Vec first = _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(half, bias), 23));
    Vec second = _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(rest, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, first), second);
  }
};

template <> struct Simd<double> {
  using Scalar = double;
  using Vec = __m256d;
  using Tail = __m256i;
  static constexpr int kLanes = 4;
  static constexpr int kRegisters = 16;

  static Vec zero() { return _mm256_setzero_pd(); }
  static Vec broadcast(double x) { return _mm256_set1_pd(x); }
  static Vec load(const double *p) { return _mm256_loadu_pd(p); }
  static void store(double *p, Vec v) { _mm256_storeu_pd(p, v); }
  static Tail tail(int64_t n) {
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x(n),
                              _mm256_setr_epi64x(0, 1, 2, 3));
  }
  static Vec loadTail(const double *p, Tail t) {
    return _mm256_maskload_pd(p, t);
  }
  static void storeTail(double *p, Vec v, Tail t) {
    _mm256_maskstore_pd(p, t, v);
  }

  static void transpose(const double *src, int64_t srcStride, double *dst,
                        int64_t dstStride) {
    Vec r[4];
    for (int i = 0; i < 4; ++i)
      r[i] = load(src + i * srcStride);
    Vec low01 = _mm256_unpacklo_pd(r[0], r[1]),
        high01 = _mm256_unpackhi_pd(r[0], r[1]),
        low23 = _mm256_unpacklo_pd(r[2], r[3]),
        high23 = _mm256_unpackhi_pd(r[2], r[3]);
    store(dst, _mm256_permute2f128_pd(low01, low23, 0x20));
    store(dst + dstStride, _mm256_permute2f128_pd(high01, high23, 0x20));
    store(dst + 2 * dstStride, _mm256_permute2f128_pd(low01, low23, 0x31));
    store(dst + 3 * dstStride, _mm256_permute2f128_pd(high01, high23, 0x31));
  }

  static Vec add(Vec a, Vec b) { return _mm256_add_pd(a, b); }
  static Vec sub(Vec a, Vec b) { return _mm256_sub_pd(a, b); }
  static Vec mul(Vec a, Vec b) { return _mm256_mul_pd(a, b); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_pd(a, b, c); }
  static Vec max(Vec a, Vec b) { return _mm256_max_pd(a, b); }
  static Vec min(Vec a, Vec b) { return _mm256_min_pd(a, b); }
  static Vec clamp(Vec x, Vec lo, Vec hi) {
    return _mm256_min_pd(hi, _mm256_max_pd(lo, x));
  }
  static Vec zeroWhereBelow(Vec value, Vec x, Vec threshold) {
    return _mm256_and_pd(value, _mm256_cmp_pd(x, threshold, _CMP_NLT_UQ));
  }
  static double reduceAdd(Vec v) {
    __m128d s =
        _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
    return _mm_cvtsd_f64(s);
  }
  static double reduceMax(Vec v) {
    __m128d s =
        _mm_max_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    s = _mm_max_sd(s, _mm_unpackhi_pd(s, s));
    return _mm_cvtsd_f64(s);
  }
  static double firstLane(Vec v) { return _mm256_cvtsd_f64(v); }

  static Vec scalePow2(Vec p, Vec k, Vec shifted, Vec shifter) {
    // AVX2 has no 64-bit arithmetic shift: k1 = floor(k/2) is rounded in
    // floating point and read back through the shifter.
    __m256i kBits = _mm256_sub_epi64(_mm256_castpd_si256(shifted),
                                     _mm256_castpd_si256(shifter));
    Vec halfK = _mm256_floor_pd(_mm256_mul_pd(k, _mm256_set1_pd(0.5)));
    __m256i half =
        _mm256_sub_epi64(_mm256_castpd_si256(_mm256_add_pd(halfK, shifter)),
                         _mm256_castpd_si256(shifter));
    __m256i rest = _mm256_sub_epi64(kBits, half);
    __m256i bias = _mm256_set1_epi64x(1023);
    Vec first = _mm256_castsi256_pd(
        _mm256_slli_epi64(_mm256_add_epi64(half, bias), 52));
    Vec second = _mm256_castsi256_pd(
        _mm256_slli_epi64(_mm256_add_epi64(rest, bias), 52));
    return _mm256_mul_pd(_mm256_mul_pd(p, first), second);
  }
};

} // namespace energy::kernels::ENERGY_KERNEL_ISA

#endif // ENERGY_KERNELSUPPORT_SIMDAVX2_H
