//===- SoftmaxContractWarpgroupShapes.h - wgmma kernels' sizes --*- C++ -*-===//
//
// The sizes SoftmaxContractWarpgroups.cu's kernels and CudaContract.cpp,
// which packs their inputs and launches them, must agree on.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTWARPGROUPSHAPES_H
#define ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTWARPGROUPSHAPES_H

#ifdef __CUDACC__
#define ENERGY_WARPGROUP_SHAPE __host__ __device__
#else
#define ENERGY_WARPGROUP_SHAPE
#endif

namespace energy::cuda::warpgroups {

/// Warpgroups (128 threads each) of a block, and the block's threads.
constexpr int kWarpgroups = 2;
constexpr int kThreads = 128 * kWarpgroups;
/// Outer positions of a block (64 a warpgroup: wgmma's m64).
constexpr int kOuter = 64 * kWarpgroups;
/// Inner positions of a tile (the packed copies are whole tiles of them).
constexpr int kInner = 64;
/// Tiles in shared memory at a time: the plain passes' the one computed
/// and the one arriving; the pipelined passes' also the one before, whose
/// sums run while the next one's scores do.
constexpr int kPlainStages = 2;
constexpr int kPipelinedStages = 3;

/// Elements of one packed row of features of `depth` (whole k16 steps) and
/// of value tables `width` wide (whole core matrices of 8).
ENERGY_WARPGROUP_SHAPE constexpr long long packedDepth(long long depth) {
  return (depth + 15) / 16 * 16;
}
ENERGY_WARPGROUP_SHAPE constexpr long long packedWidth(long long width) {
  return (width + 7) / 8 * 8;
}

/// Dynamic shared memory of a block of the kernels for depths up to
/// `maxDepth` and widths up to `maxWidth` (bf16) with `stages` stages: the
/// block's outer features, then each stage's inner features and value
/// tables, then each stage's inner normalisers (floats).
ENERGY_WARPGROUP_SHAPE constexpr int sharedBytes(int maxDepth, int maxWidth,
                                                 int stages) {
  return 2 * (maxDepth * kOuter + stages * (maxDepth + maxWidth) * kInner) +
         4 * stages * kInner;
}

} // namespace energy::cuda::warpgroups

#endif // ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTWARPGROUPSHAPES_H
