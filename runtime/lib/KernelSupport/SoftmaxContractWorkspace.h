//===- SoftmaxContractWorkspace.h - The kernel's memory ---------*- C++ -*-===//
//
// The memory of the CPU softmax contraction (SoftmaxContractKernel.h): each
// task's scratch, carved from one allocation, and the buffers of a call.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTWORKSPACE_H
#define ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTWORKSPACE_H

#include "SoftmaxContractPass.h"
#include "SoftmaxContractTiles.h"

#include "energy/KernelSupport/KernelSupport.h"

#include <stddef.h>
#include <stdint.h>

namespace energy::kernels::ENERGY_KERNEL_ISA {
namespace contract {

/// Memory aligned for any vector (kernels' scratch, reused between calls),
/// or null; freed with energy_support_scratch_free.
inline void *allocateAligned(size_t bytes) {
  return energy_support_scratch_alloc(static_cast<int64_t>(bytes));
}

/// Offsets of arrays carved from one allocation, each at a multiple of 64
/// bytes; `bytes` is the allocation's size.
struct Carving {
  size_t bytes = 0;
  size_t reserve(size_t size) {
    size_t at = bytes;
    bytes += (size + 63) / 64 * 64;
    return at;
  }
};

/// The scratch memory of one task, carved from one allocation: S (block
/// height × kPanel) and the accumulators (block height × each output's
/// width) among others, allocated once per task of the thread pool.
template <class V> struct Workspace {
  using T = typename V::Scalar;
  using Shape = Tiling<V>;
  // `rows` is the pass's block height.
  T *zeroRow; ///< zeros, as many as the deepest features: rows past the end
  T *scores;  ///< rows × kPanel
  T *rowMax, *rowSum;
  T **accumulators; ///< per output: rows × accumulatorStride[k]
  int64_t *accumulatorStride;
  int64_t *begin, *end; ///< admitted inner interval per outer index
  int64_t *holes;       ///< per outer index, numNotEqual excluded indices
  int64_t *holeCount;
  T **pairTiles;  ///< per pair term and product: rows × kPanel
  T *pairWeights; ///< rows × kPanel: one output's W_k
  void *memory = nullptr;

  bool allocate(const Pass<T> &pass) {
    const int64_t rows = pass.blockRows;
    // Sizes that no memory could hold would overflow the byte counts below.
    const int64_t limit = int64_t(1) << 40;
    if (pass.depth > limit || pass.numNotEqual > limit ||
        pass.numOutputs > limit)
      return false;
    for (int64_t k = 0; k < pass.numOutputs; ++k)
      if (pass.widths[k] > limit)
        return false;
    const PairWeights<T> &pairs = pass.pairs;
    if (pairs.numTerms > limit || pairs.numProducts > limit)
      return false;
    for (int64_t i = 0; i < pairs.numTerms; ++i)
      if (pairs.depths[i] > limit)
        return false;
    Carving carving;
    auto reserve = [&](size_t size) { return carving.reserve(size); };
    int64_t deepest = pass.depth;
    for (int64_t i = 0; i < pairs.numTerms; ++i)
      deepest = maxOf(deepest, pairs.depths[i]);
    size_t zeroRowAt = reserve(sizeof(T) * deepest);
    size_t scoresAt = reserve(sizeof(T) * rows * Shape::kPanel);
    size_t maxAt = reserve(sizeof(T) * rows);
    size_t sumAt = reserve(sizeof(T) * rows);
    size_t pointersAt = reserve(sizeof(T *) * pass.numOutputs);
    size_t strideAt = reserve(sizeof(int64_t) * pass.numOutputs);
    size_t beginAt = reserve(sizeof(int64_t) * rows);
    size_t endAt = reserve(sizeof(int64_t) * rows);
    size_t holesAt = reserve(sizeof(int64_t) * rows * pass.numNotEqual);
    size_t holeCountAt = reserve(sizeof(int64_t) * rows);
    size_t pairTilesAt = reserve(sizeof(T *) * pairs.numTiles());
    size_t pairWeightsAt =
        reserve(pairs.plain ? sizeof(T) * rows * Shape::kPanel : 0);
    size_t accumulatorAt = carving.bytes;
    for (int64_t k = 0; k < pass.numOutputs; ++k)
      reserve(sizeof(T) * rows * roundUp(pass.widths[k], V::kLanes));
    size_t pairAt = carving.bytes;
    for (int64_t i = 0; i < pairs.numTiles(); ++i)
      reserve(sizeof(T) * rows * Shape::kPanel);
    memory = allocateAligned(carving.bytes);
    if (!memory)
      return false;
    char *base = static_cast<char *>(memory);
    zeroRow = reinterpret_cast<T *>(base + zeroRowAt);
    for (int64_t d = 0; d < deepest; ++d)
      zeroRow[d] = 0;
    scores = reinterpret_cast<T *>(base + scoresAt);
    rowMax = reinterpret_cast<T *>(base + maxAt);
    rowSum = reinterpret_cast<T *>(base + sumAt);
    accumulators = reinterpret_cast<T **>(base + pointersAt);
    accumulatorStride = reinterpret_cast<int64_t *>(base + strideAt);
    begin = reinterpret_cast<int64_t *>(base + beginAt);
    end = reinterpret_cast<int64_t *>(base + endAt);
    holes = reinterpret_cast<int64_t *>(base + holesAt);
    holeCount = reinterpret_cast<int64_t *>(base + holeCountAt);
    pairTiles = reinterpret_cast<T **>(base + pairTilesAt);
    pairWeights = reinterpret_cast<T *>(base + pairWeightsAt);
    size_t at = accumulatorAt;
    for (int64_t k = 0; k < pass.numOutputs; ++k) {
      accumulatorStride[k] = roundUp(pass.widths[k], V::kLanes);
      accumulators[k] = reinterpret_cast<T *>(base + at);
      at += (sizeof(T) * rows * accumulatorStride[k] + 63) / 64 * 64;
    }
    at = pairAt;
    for (int64_t i = 0; i < pairs.numTiles(); ++i) {
      pairTiles[i] = reinterpret_cast<T *>(base + at);
      at += (sizeof(T) * rows * Shape::kPanel + 63) / 64 * 64;
    }
    return true;
  }

  ~Workspace() { energy_support_scratch_free(memory); }
};

/// Owns an aligned allocation.
struct Buffer {
  void *memory = nullptr;
  ~Buffer() { energy_support_scratch_free(memory); }
  template <class T> T *allocate(int64_t count) {
    // Sizes are validated to fit in int64_t; the byte count may not.
    if (count < 0 || (uint64_t)count > SIZE_MAX / sizeof(T) / 2)
      return nullptr;
    memory = allocateAligned(sizeof(T) * count);
    return static_cast<T *>(memory);
  }
};

} // namespace contract
} // namespace energy::kernels::ENERGY_KERNEL_ISA

#endif // ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTWORKSPACE_H
