//===- RegisterTile.h - Products of rows and packed panels -----*- C++ -*-===//
//
// The inner loop that the matrix products and the softmax contraction's
// scores share: a tile of Rows × Vectors·L sums over the inner dim, in
// registers, of row values times a packed panel's vectors.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_KERNELSUPPORT_REGISTERTILE_H
#define ENERGY_KERNELSUPPORT_REGISTERTILE_H

#include <stdint.h>

namespace energy::kernels::ENERGY_KERNEL_ISA {

/// acc[r][v] = Σ_d row(r, d) · panel[d · Vectors·L + v·L ...], for d <
/// depth: each entry one chain of fused multiply-adds in the order of d.
/// With PrefetchPanel, the panel's rows a few steps ahead are prefetched
/// (a panel that a product packed once a call streams from the last-level
/// cache, docs/benchmarks.md).
template <class V, int Rows, int Vectors, class RowValue,
          bool PrefetchPanel = false>
inline void accumulateTile(int64_t depth, RowValue row,
                           const typename V::Scalar *panel,
                           typename V::Vec (&acc)[Rows][Vectors]) {
  using Vec = typename V::Vec;
  constexpr int L = V::kLanes;
  constexpr int64_t kPrefetchSteps = 8;
  constexpr int kLineElements = 64 / int(sizeof(typename V::Scalar));
  for (int r = 0; r < Rows; ++r)
    for (int v = 0; v < Vectors; ++v)
      acc[r][v] = V::zero();
  for (int64_t d = 0; d < depth; ++d) {
    if constexpr (PrefetchPanel)
      for (int e = 0; e < Vectors * L; e += kLineElements)
        __builtin_prefetch(panel + (d + kPrefetchSteps) * Vectors * L + e);
    Vec column[Vectors];
    for (int v = 0; v < Vectors; ++v)
      column[v] = V::load(panel + d * Vectors * L + v * L);
    for (int r = 0; r < Rows; ++r) {
      Vec value = V::broadcast(row(r, d));
      for (int v = 0; v < Vectors; ++v)
        acc[r][v] = V::fma(value, column[v], acc[r][v]);
    }
  }
}

} // namespace energy::kernels::ENERGY_KERNEL_ISA

#endif // ENERGY_KERNELSUPPORT_REGISTERTILE_H
