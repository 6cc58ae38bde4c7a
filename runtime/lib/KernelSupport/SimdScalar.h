//===- SimdScalar.h - One-lane vectors for the portable path ----*- C++ -*-===//
//
// The vector interface that the kernel templates (VectorExp.h,
// SoftmaxContractKernel.h) are written against, on plain scalars: the path
// for CPUs without AVX2. SimdAvx2.h and SimdAvx512.h implement the same
// interface on 256- and 512-bit registers:
//
//   Scalar, Vec, Tail, kLanes     element, vector, mask of a partial vector
//   kRegisters                    vector registers of the instruction set
//   zero, broadcast, load, store  (unaligned), loadTail / storeTail (the
//                                 first n lanes, tail(n) for 0 < n <= kLanes)
//   add, sub, mul, fma(a, b, c) = a·b + c, max, min
//   clamp(x, lo, hi)              NaN stays NaN
//   reduceAdd, reduceMax          in a fixed order
//   scalePow2(p, k, shifted, shifter)   p · 2^k in one rounding, for integral
//                                 k with |k| < 2^(mantissa bits - 1), and
//                                 shifted = k + shifter, shifter = 1.5 · 2^m
//   firstLane
//   transpose(src, srcStride, dst, dstStride)   a kLanes × kLanes block:
//                                 dst[d·dstStride + c] = src[c·srcStride + d]
//
// Each Simd header is included by one translation unit, compiled for its
// instruction set, inside the namespace ENERGY_KERNEL_ISA that the unit
// defines, so that no code compiled for one instruction set can be linked in
// place of another's.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_KERNELSUPPORT_SIMDSCALAR_H
#define ENERGY_KERNELSUPPORT_SIMDSCALAR_H

#include <stdint.h>

namespace energy::kernels::ENERGY_KERNEL_ISA {

/// The integer that holds a float's bits and the layout of its exponent.
template <class T> struct FloatBits;
template <> struct FloatBits<float> {
  using Int = int32_t;
  using UInt = uint32_t;
  static constexpr int kMantissaBits = 23;
  static constexpr int kExponentBias = 127;
};
template <> struct FloatBits<double> {
  using Int = int64_t;
  using UInt = uint64_t;
  static constexpr int kMantissaBits = 52;
  static constexpr int kExponentBias = 1023;
};

template <class T> struct Simd {
  using Scalar = T;
  using Vec = T;
  using Tail = int;
  static constexpr int kLanes = 1;
  /// Registers a micro-kernel may keep live (x86-64 has 16 XMM registers).
  static constexpr int kRegisters = 16;

  static Vec zero() { return 0; }
  static Vec broadcast(Scalar x) { return x; }
  static Vec load(const Scalar *p) { return *p; }
  static void store(Scalar *p, Vec v) { *p = v; }
  static Tail tail(int64_t) { return 0; }
  static Vec loadTail(const Scalar *p, Tail) { return *p; }
  static void storeTail(Scalar *p, Vec v, Tail) { *p = v; }
  static void transpose(const Scalar *src, int64_t, Scalar *dst, int64_t) {
    *dst = *src;
  }

  static Vec add(Vec a, Vec b) { return a + b; }
  static Vec sub(Vec a, Vec b) { return a - b; }
  static Vec mul(Vec a, Vec b) { return a * b; }
  /// Not fused: a CPU on this path may have no FMA, and a library fma would
  /// be slow. The error bounds hold either way (ExpTest checks this path).
  static Vec fma(Vec a, Vec b, Vec c) { return a * b + c; }
  static Vec max(Vec a, Vec b) { return a < b ? b : a; }
  static Vec min(Vec a, Vec b) { return b < a ? b : a; }
  static Vec clamp(Vec x, Vec lo, Vec hi) {
    // Comparisons with NaN are false, so NaN passes through.
    if (x < lo)
      return lo;
    if (x > hi)
      return hi;
    return x;
  }
  /// `value`, or 0 where x < threshold (NaN is not less).
  static Vec zeroWhereBelow(Vec value, Vec x, Vec threshold) {
    return x < threshold ? Vec(0) : value;
  }
  static Scalar reduceAdd(Vec v) { return v; }
  static Scalar reduceMax(Vec v) { return v; }
  static Scalar firstLane(Vec v) { return v; }

  static Vec scalePow2(Vec p, Vec, Vec shifted, Vec shifter) {
    // 2^k = 2^k1 · 2^k2 with k1 = floor(k/2): both factors are normal for
    // every k the exp range needs, p · 2^k1 is exact, and only the last
    // product rounds (to a subnormal or to infinity where it must).
    using Bits = FloatBits<T>;
    using UInt = typename Bits::UInt;
    using Int = typename Bits::Int;
    UInt k =
        __builtin_bit_cast(UInt, shifted) - __builtin_bit_cast(UInt, shifter);
    UInt half = static_cast<UInt>(static_cast<Int>(k) >> 1);
    UInt rest = k - half;
    T first = __builtin_bit_cast(T, (half + Bits::kExponentBias)
                                        << Bits::kMantissaBits);
    T second = __builtin_bit_cast(T, (rest + Bits::kExponentBias)
                                         << Bits::kMantissaBits);
    return p * first * second;
  }
};

} // namespace energy::kernels::ENERGY_KERNEL_ISA

#endif // ENERGY_KERNELSUPPORT_SIMDSCALAR_H
