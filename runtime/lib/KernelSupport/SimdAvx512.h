//===- SimdAvx512.h - 512-bit vectors for the AVX-512 path ------*- C++ -*-===//
//
// The vector interface of SimdScalar.h on AVX-512F registers: 16 floats or
// 8 doubles a vector, tails through mask registers, and 2^k applied by
// vscalef (one rounding, subnormal results and overflow included). Included
// only by KernelsAvx512.cpp, which is compiled with -mavx512f.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_KERNELSUPPORT_SIMDAVX512_H
#define ENERGY_KERNELSUPPORT_SIMDAVX512_H

#if !defined(__AVX512F__)
#error "SimdAvx512.h is for a translation unit compiled with -mavx512f"
#endif

#include <immintrin.h>
#include <stdint.h>

namespace energy::kernels::ENERGY_KERNEL_ISA {

template <class T> struct Simd;

template <> struct Simd<float> {
  using Scalar = float;
  using Vec = __m512;
  using Tail = __mmask16;
  static constexpr int kLanes = 16;
  static constexpr int kRegisters = 32;

  static Vec zero() { return _mm512_setzero_ps(); }
  static Vec broadcast(float x) { return _mm512_set1_ps(x); }
  static Vec load(const float *p) { return _mm512_loadu_ps(p); }
  static void store(float *p, Vec v) { _mm512_storeu_ps(p, v); }
  static Tail tail(int64_t n) {
    return static_cast<Tail>((1u << static_cast<unsigned>(n)) - 1u);
  }
  static Vec loadTail(const float *p, Tail t) {
    return _mm512_maskz_loadu_ps(t, p);
  }
  static void storeTail(float *p, Vec v, Tail t) {
    _mm512_mask_storeu_ps(p, t, v);
  }

  /// A 16 × 16 block, in registers: pairs of rows interleaved by 32 and
  /// 64 bits (each 128-bit lane of quad q then holds, for rows 4q ... 4q +
  /// 3, one column), then the lanes gathered across the quads.
  static void transpose(const float *src, int64_t srcStride, float *dst,
                        int64_t dstStride) {
    __m512 row[16], pair[16];
    for (int r = 0; r < 16; ++r)
      row[r] = _mm512_loadu_ps(src + r * srcStride);
    for (int r = 0; r < 16; r += 2) {
      pair[r] = _mm512_unpacklo_ps(row[r], row[r + 1]);
      pair[r + 1] = _mm512_unpackhi_ps(row[r], row[r + 1]);
    }
    // column[q][c]: lane l holds column 4l + c of rows 4q ... 4q + 3.
    __m512 column[4][4];
    for (int q = 0; q < 4; ++q)
      for (int half = 0; half < 2; ++half) {
        __m512d low = _mm512_castps_pd(pair[4 * q + half]);
        __m512d high = _mm512_castps_pd(pair[4 * q + half + 2]);
        column[q][2 * half] = _mm512_castpd_ps(_mm512_unpacklo_pd(low, high));
        column[q][2 * half + 1] =
            _mm512_castpd_ps(_mm512_unpackhi_pd(low, high));
      }
    for (int c = 0; c < 4; ++c) {
      __m512 lanes01 = _mm512_shuffle_f32x4(column[0][c], column[1][c], 0x44);
      __m512 lanes23 = _mm512_shuffle_f32x4(column[0][c], column[1][c], 0xEE);
      __m512 lanes01High =
          _mm512_shuffle_f32x4(column[2][c], column[3][c], 0x44);
      __m512 lanes23High =
          _mm512_shuffle_f32x4(column[2][c], column[3][c], 0xEE);
      _mm512_storeu_ps(dst + c * dstStride,
                       _mm512_shuffle_f32x4(lanes01, lanes01High, 0x88));
      _mm512_storeu_ps(dst + (4 + c) * dstStride,
                       _mm512_shuffle_f32x4(lanes01, lanes01High, 0xDD));
      _mm512_storeu_ps(dst + (8 + c) * dstStride,
                       _mm512_shuffle_f32x4(lanes23, lanes23High, 0x88));
      _mm512_storeu_ps(dst + (12 + c) * dstStride,
                       _mm512_shuffle_f32x4(lanes23, lanes23High, 0xDD));
    }
  }

  static Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  static Vec sub(Vec a, Vec b) { return _mm512_sub_ps(a, b); }
  static Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  static Vec max(Vec a, Vec b) { return _mm512_max_ps(a, b); }
  static Vec min(Vec a, Vec b) { return _mm512_min_ps(a, b); }
  /// maxps/minps return their second operand when either is NaN.
  static Vec clamp(Vec x, Vec lo, Vec hi) {
    return _mm512_min_ps(hi, _mm512_max_ps(lo, x));
  }
  /// `value`, with 0 in the lanes where x < threshold (NaN is not less).
  static Vec zeroWhereBelow(Vec value, Vec x, Vec threshold) {
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, threshold, _CMP_NLT_UQ),
                               value);
  }
  static float reduceAdd(Vec v) {
    __m256 h = _mm256_add_ps(
        _mm512_castps512_ps256(v),
        _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 s =
        _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float reduceMax(Vec v) {
    __m256 h = _mm256_max_ps(
        _mm512_castps512_ps256(v),
        _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 s =
        _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float firstLane(Vec v) { return _mm512_cvtss_f32(v); }

  static Vec scalePow2(Vec p, Vec k, Vec, Vec) {
    return _mm512_scalef_ps(p, k);
  }
};

template <> struct Simd<double> {
  using Scalar = double;
  using Vec = __m512d;
  using Tail = __mmask8;
  static constexpr int kLanes = 8;
  static constexpr int kRegisters = 32;

  static Vec zero() { return _mm512_setzero_pd(); }
  static Vec broadcast(double x) { return _mm512_set1_pd(x); }
  static Vec load(const double *p) { return _mm512_loadu_pd(p); }
  static void store(double *p, Vec v) { _mm512_storeu_pd(p, v); }
  static Tail tail(int64_t n) {
    return static_cast<Tail>((1u << static_cast<unsigned>(n)) - 1u);
  }
  static Vec loadTail(const double *p, Tail t) {
    return _mm512_maskz_loadu_pd(t, p);
  }
  static void storeTail(double *p, Vec v, Tail t) {
    _mm512_mask_storeu_pd(p, t, v);
  }

  /// Element by element (not yet an in-register transpose).
  static void transpose(const double *src, int64_t srcStride, double *dst,
                        int64_t dstStride) {
    for (int c = 0; c < kLanes; ++c)
      for (int d = 0; d < kLanes; ++d)
        dst[d * dstStride + c] = src[c * srcStride + d];
  }

  static Vec add(Vec a, Vec b) { return _mm512_add_pd(a, b); }
  static Vec sub(Vec a, Vec b) { return _mm512_sub_pd(a, b); }
  static Vec mul(Vec a, Vec b) { return _mm512_mul_pd(a, b); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_pd(a, b, c); }
  static Vec max(Vec a, Vec b) { return _mm512_max_pd(a, b); }
  static Vec min(Vec a, Vec b) { return _mm512_min_pd(a, b); }
  static Vec clamp(Vec x, Vec lo, Vec hi) {
    return _mm512_min_pd(hi, _mm512_max_pd(lo, x));
  }
  static Vec zeroWhereBelow(Vec value, Vec x, Vec threshold) {
    return _mm512_maskz_mov_pd(_mm512_cmp_pd_mask(x, threshold, _CMP_NLT_UQ),
                               value);
  }
  static double reduceAdd(Vec v) {
    __m256d h =
        _mm256_add_pd(_mm512_castpd512_pd256(v), _mm512_extractf64x4_pd(v, 1));
    __m128d s =
        _mm_add_pd(_mm256_castpd256_pd128(h), _mm256_extractf128_pd(h, 1));
    s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
    return _mm_cvtsd_f64(s);
  }
  static double reduceMax(Vec v) {
    __m256d h =
        _mm256_max_pd(_mm512_castpd512_pd256(v), _mm512_extractf64x4_pd(v, 1));
    __m128d s =
        _mm_max_pd(_mm256_castpd256_pd128(h), _mm256_extractf128_pd(h, 1));
    s = _mm_max_sd(s, _mm_unpackhi_pd(s, s));
    return _mm_cvtsd_f64(s);
  }
  static double firstLane(Vec v) { return _mm512_cvtsd_f64(v); }

  static Vec scalePow2(Vec p, Vec k, Vec, Vec) {
    return _mm512_scalef_pd(p, k);
  }
};

} // namespace energy::kernels::ENERGY_KERNEL_ISA

#endif // ENERGY_KERNELSUPPORT_SIMDAVX512_H
