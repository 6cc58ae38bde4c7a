//===- PanelProduct.h - Matrix products on packed column panels -*- C++ -*-===//
//
// C = op(A) · op(B), or C += it, for the vector paths: op(B) packed into
// panels of a register tile's width (or read from panels packed once for
// many products), op(A) read where it lies. Each entry of C sums over k in
// one order fixed by k alone, so any cut into pieces gives the same bits.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_KERNELSUPPORT_PANELPRODUCT_H
#define ENERGY_KERNELSUPPORT_PANELPRODUCT_H

#include "IsaKernels.h"
#include "RegisterTile.h"

#include "energy/KernelSupport/KernelSupport.h"

#include <stdint.h>

namespace energy::kernels::ENERGY_KERNEL_ISA {
namespace panels {

/// Register tiles of Rows × Vectors accumulators, Vectors·L columns of C:
/// the widest fills the register file (AVX-512: 6 × 4 of 32 zmm registers;
/// AVX2: 6 × 2 of 16 ymm), narrower ones, for products of few columns,
/// take more rows. A block of rows and a block of the inner dim keep their
/// A rows and the B panel within L2.
template <class V> struct Shape {
  static constexpr int kWideVectors = V::kRegisters >= 32 ? 4 : 2;
  static constexpr int64_t kBlockRows = 48;
  static constexpr int64_t kDepth = 512;
};

/// op(B)[first : first + depth, :], its n columns in panels of Width:
/// panel p holds, for each d, columns p·Width ... of row d, zero past n.
/// Panels from `firstPanel` on, the first of them at `packed`.
template <class V, int64_t Width>
void packPanels(const ProductArgs<typename V::Scalar> &args, int64_t first,
                int64_t depth, typename V::Scalar *packed,
                int64_t firstPanel = 0) {
  using T = typename V::Scalar;
  constexpr int L = V::kLanes;
  const int64_t n = args.n;
  for (int64_t p = firstPanel; p * Width < n; ++p) {
    T *panel = packed + (p - firstPanel) * depth * Width;
    const int64_t column = p * Width, columns = n - column;
    if (!args.transposeB) {
      for (int64_t d = 0; d < depth; ++d) {
        const T *row = args.b + (first + d) * args.ldb + column;
        T *out = panel + d * Width;
        for (int64_t c = 0; c < Width; c += L) {
          if (c + L <= columns)
            V::store(out + c, V::load(row + c));
          else if (c < columns)
            V::store(out + c, V::loadTail(row + c, V::tail(columns - c)));
          else
            V::store(out + c, V::zero());
        }
      }
      continue;
    }
    // op(B)[d, j] = b[j, d]: whole L × L blocks transposed, the rest one
    // by one.
    for (int64_t c = 0; c < Width; c += L) {
      int64_t d = 0;
      if (c + L <= columns)
        for (; d + L <= depth; d += L)
          V::transpose(args.b + (column + c) * args.ldb + first + d, args.ldb,
                       panel + d * Width + c, Width);
      for (; d < depth; ++d)
        for (int64_t l = 0; l < L; ++l)
          panel[d * Width + c + l] =
              c + l < columns ? args.b[(column + c + l) * args.ldb + first + d]
                              : T(0);
    }
  }
}

/// The width of the widest tiles' panels, those a cache holds.
template <class V>
constexpr int64_t kCachedWidth = int64_t(Shape<V>::kWideVectors) * V::kLanes;

/// The whole panels of op(B) (n / kCachedWidth of them, P), packed once for
/// every product that reads it: block by block of the inner dim as
/// tiledProduct packs them, the block at inner index d from cache +
/// d · P · kCachedWidth (at most n · k elements). False where op(B) has no
/// whole panel.
template <class V>
bool packPanelCache(const ProductArgs<typename V::Scalar> &args,
                    typename V::Scalar *cache) {
  constexpr int64_t width = kCachedWidth<V>, blockDepth = Shape<V>::kDepth;
  const int64_t whole = args.n / width;
  if (whole == 0)
    return false;
  ProductArgs<typename V::Scalar> panels = args;
  panels.n = whole * width;
  for (int64_t d = 0; d < args.k; d += blockDepth)
    packPanels<V, width>(panels, d,
                         args.k - d < blockDepth ? args.k - d : blockDepth,
                         cache + d * whole * width);
  return true;
}

/// Rows × Vectors·L entries of C (its first `columns` only) from `depth`
/// inner indices: op(A) rows from `a` (element (r, d) at a[r·rowStride +
/// d·depthStride]), B from a packed panel; added to C where `add`.
template <class V, int Rows, int Vectors>
inline void tile(int64_t depth, const typename V::Scalar *a, int64_t rowStride,
                 int64_t depthStride, const typename V::Scalar *panel,
                 typename V::Scalar *c, int64_t ldc, int64_t columns,
                 bool add) {
  using Vec = typename V::Vec;
  constexpr int L = V::kLanes;
  Vec acc[Rows][Vectors];
  auto row = [&](int r, int64_t d) {
    return a[d * depthStride + r * rowStride];
  };
  accumulateTile<V, Rows, Vectors, decltype(row), /*PrefetchPanel=*/true>(
      depth, row, panel, acc);
  for (int r = 0; r < Rows; ++r) {
    typename V::Scalar *out = c + r * ldc;
    for (int v = 0; v < Vectors && v * L < columns; ++v) {
      Vec value = acc[r][v];
      if ((v + 1) * L <= columns) {
        V::store(out + v * L,
                 add ? V::add(V::load(out + v * L), value) : value);
        continue;
      }
      auto tail = V::tail(columns - v * L);
      V::storeTail(out + v * L,
                   add ? V::add(V::loadTail(out + v * L, tail), value) : value,
                   tail);
    }
  }
}

/// The tile of the `rows` (at most Rows) that remain of a block.
template <class V, int Rows, int Vectors>
void lastTile(int64_t rows, int64_t depth, const typename V::Scalar *a,
              int64_t rowStride, int64_t depthStride,
              const typename V::Scalar *panel, typename V::Scalar *c,
              int64_t ldc, int64_t columns, bool add) {
  if (rows == Rows) {
    tile<V, Rows, Vectors>(depth, a, rowStride, depthStride, panel, c, ldc,
                           columns, add);
    return;
  }
  if constexpr (Rows > 1)
    lastTile<V, Rows - 1, Vectors>(rows, depth, a, rowStride, depthStride,
                                   panel, c, ldc, columns, add);
}

/// The product on tiles of Rows × Vectors: blocks of the inner dim
/// outermost (each packed once), then blocks of rows, then panels, then
/// tiles. Returns false where no scratch memory was to be had (C
/// untouched).
template <class V, int Rows, int Vectors>
bool tiledProduct(const ProductArgs<typename V::Scalar> &args) {
  using T = typename V::Scalar;
  constexpr int64_t width = int64_t(Vectors) * V::kLanes;
  constexpr int64_t blockRows = Shape<V>::kBlockRows,
                    blockDepth = Shape<V>::kDepth;
  static_assert(blockRows % Rows == 0);
  const int64_t panelCount = (args.n + width - 1) / width;
  // Whole panels come from the cache where there is one; the rest (the
  // last panel, when part of one) are packed here.
  const bool cached = width == kCachedWidth<V> && args.packedB;
  const int64_t firstPacked = cached ? args.n / width : 0;
  const int64_t depthFirst = args.k < blockDepth ? args.k : blockDepth;
  T *packed = nullptr;
  if (firstPacked < panelCount) {
    packed = static_cast<T *>(energy_support_scratch_alloc(
        (panelCount - firstPacked) * width * depthFirst * int64_t(sizeof(T))));
    if (!packed)
      return false;
  }
  const int64_t rowStride = args.transposeA ? 1 : args.lda;
  const int64_t depthStride = args.transposeA ? args.lda : 1;
  for (int64_t d = 0; d < args.k; d += blockDepth) {
    const int64_t depth = args.k - d < blockDepth ? args.k - d : blockDepth;
    if (packed)
      packPanels<V, width>(args, d, depth, packed, firstPacked);
    const T *cachedBlock =
        cached ? args.packedB + d * (args.packedColumns / width) * width +
                     (args.packedFirstColumn / width) * depth * width
               : nullptr;
    const bool add = args.accumulate || d > 0;
    for (int64_t block = 0; block < args.m; block += blockRows) {
      const int64_t blockEnd =
          args.m - block < blockRows ? args.m : block + blockRows;
      for (int64_t p = 0; p < panelCount; ++p) {
        const T *panel = p < firstPacked
                             ? cachedBlock + p * depth * width
                             : packed + (p - firstPacked) * depth * width;
        const int64_t column = p * width;
        const int64_t columns =
            args.n - column < width ? args.n - column : width;
        for (int64_t r = block; r < blockEnd; r += Rows) {
          const T *a = args.a + r * rowStride + d * depthStride;
          T *c = args.c + r * args.ldc + column;
          if (blockEnd - r >= Rows)
            tile<V, Rows, Vectors>(depth, a, rowStride, depthStride, panel, c,
                                   args.ldc, columns, add);
          else
            lastTile<V, Rows - 1, Vectors>(blockEnd - r, depth, a, rowStride,
                                           depthStride, panel, c, args.ldc,
                                           columns, add);
        }
      }
    }
  }
  if (packed)
    energy_support_scratch_free(packed);
  return true;
}

/// The product on the tiles that suit its width: the widest, or for up to
/// two vectors of columns, a tile that narrow with twice the rows.
template <class V>
bool panelProduct(const ProductArgs<typename V::Scalar> &args) {
  constexpr int wide = Shape<V>::kWideVectors;
  constexpr int L = V::kLanes;
  if (args.n <= L)
    return tiledProduct<V, 12, 1>(args);
  if (wide > 2 && args.n <= 2 * L)
    return tiledProduct<V, 12, 2>(args);
  return tiledProduct<V, 6, wide>(args);
}

} // namespace panels
} // namespace energy::kernels::ENERGY_KERNEL_ISA

#endif // ENERGY_KERNELSUPPORT_PANELPRODUCT_H
