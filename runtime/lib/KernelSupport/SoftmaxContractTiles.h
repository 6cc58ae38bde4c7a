//===- SoftmaxContractTiles.h - Tile and block shapes -----------*- C++ -*-===//
//
// The tile, strip, panel and block shapes of the CPU softmax contraction
// (SoftmaxContractKernel.h) per vector type, with their index arithmetic.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTTILES_H
#define ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTTILES_H

#include <stdint.h>

#include <type_traits>

namespace energy::kernels::ENERGY_KERNEL_ISA {
namespace contract {

/// The vector type V with score strips of one vector: the kernel for passes
/// over so few inner indices that V's strips would be mostly padding.
template <class V> struct ShortStrips : V {};
template <class V> struct IsShortStrips : std::false_type {};
template <class V> struct IsShortStrips<ShortStrips<V>> : std::true_type {};

/// Tile and block shapes for one vector type. The micro-tiles fill the
/// register file (AVX-512: 6 × 4 zmm accumulators and 4 operands of 32; AVX2:
/// 6 × 2 of 16 ymm); a block of 48 rows with a panel of 4 strips keeps the
/// block's rows, a strip of packed columns and the score tile within L1/L2
/// (at D = 64, f32: 12 KiB, 16 KiB, 48 KiB); the other shapes tried were
/// no faster (docs/benchmarks.md, "Figures behind the code").
template <class V> struct Tiling {
  static constexpr int kLanes = V::kLanes;
  static constexpr bool kScalar = kLanes == 1;
  static constexpr bool kWide = V::kRegisters >= 32;
  /// Score micro-tile: rows × vectors of columns, accumulated in registers.
  static constexpr int kScoreRows = kScalar ? 4 : 6;
  static constexpr int kScoreVectors = IsShortStrips<V>::value ? 1
                                       : kScalar               ? 4
                                       : kWide                 ? 4
                                                               : 2;
  /// Weighted-sum micro-tile: rows × vectors of the value width.
  static constexpr int kSumRows = kScalar ? 4 : 6;
  static constexpr int kSumVectors = kScalar ? 4 : (kWide ? 4 : 2);
  /// Columns of a strip of packed inner features.
  static constexpr int kStrip = kScoreVectors * kLanes;
  /// The most outer indices of a block, a multiple of both tile heights.
  static constexpr int kBlockRows = kScalar ? 32 : 48;
  /// What block heights are a multiple of: both tile heights.
  static constexpr int kBlockStep = kScoreRows;
  /// Inner indices of a panel, a multiple of kStrip.
  static constexpr int kPanel = kScalar ? 64 : 4 * kStrip;

  static_assert(kBlockStep % kSumRows == 0 && kBlockRows % kBlockStep == 0);
  static_assert(kPanel % kStrip == 0);
};

inline int64_t minOf(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t maxOf(int64_t a, int64_t b) { return a < b ? b : a; }
inline int64_t roundUp(int64_t n, int64_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

/// The height of the blocks over `count` outer indices: the fewest blocks
/// of at most kBlockRows, of nearly equal heights that are multiples of
/// kBlockStep (64 rows: 36 and 28 rather than 48 and 16), so that the tasks
/// of small problems are even.
template <class V> int64_t blockHeight(int64_t count) {
  using Shape = Tiling<V>;
  const int64_t blocks =
      maxOf(1, (count + Shape::kBlockRows - 1) / Shape::kBlockRows);
  return maxOf(Shape::kBlockStep,
               roundUp((count + blocks - 1) / blocks, Shape::kBlockStep));
}

/// Runs `run(W{})` with W the vector type whose strips suit a pass over
/// `innerCount` inner indices: V's short strips where V's own would be at
/// least half padding (8 columns in strips of 64), else V.
template <class V, class Run> bool withStripsFor(int64_t innerCount, Run run) {
  if (roundUp(innerCount, Tiling<V>::kStrip) >=
      2 * roundUp(innerCount, Tiling<V>::kLanes))
    return run(ShortStrips<V>{});
  return run(V{});
}

} // namespace contract
} // namespace energy::kernels::ENERGY_KERNEL_ISA

#endif // ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTTILES_H
