//===- QuadraticContractShapes.h - GPU kernels' sizes -----------*- C++ -*-===//
//
// The sizes QuadraticContract.cu's kernels and CudaQuadraticContract.cpp,
// which launches them and lays out their scratch, must agree on.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_KERNELSUPPORT_QUADRATICCONTRACTSHAPES_H
#define ENERGY_KERNELSUPPORT_QUADRATICCONTRACTSHAPES_H

#ifdef __CUDACC__
#define ENERGY_QUADRATIC_SHAPE __host__ __device__
#else
#define ENERGY_QUADRATIC_SHAPE
#endif

namespace energy::cuda::quadratic {

/// Threads per block of every kernel (CudaLaunch.h's kBlockThreads).
constexpr int kThreads = 256;

/// The bounds DMAX on the depth that kernels exist for.
constexpr int kDepthBounds[] = {8, 16, 32, 64};

/// The elements of one component's record: U (DMAX × DMAX), μ (DMAX), then
/// the bias and three zeros.
ENERGY_QUADRATIC_SHAPE constexpr int recordSize(int dmax) {
  return dmax * dmax + dmax + 4;
}

/// Rows of one thread of the row pass: two where both rows' x and d fit in
/// registers, so that each element of U read serves both.
ENERGY_QUADRATIC_SHAPE constexpr int rowsPerThread(int dmax, int elementBytes) {
  return dmax * elementBytes <= 128 ? 2 : 1;
}

/// The side of the square patches of a column-pass block's sums, one patch
/// per thread: 8 × 8 for f32 (64 fused multiply-adds for 16 elements read
/// from shared memory), 4 × 4 for f64 (whose multiply-adds are half as
/// fast).
ENERGY_QUADRATIC_SHAPE constexpr int patchSize(int elementBytes) {
  return elementBytes == 4 ? 8 : 4;
}

/// The patches of a column-pass block: of the blocks of e eᵀ, e = √w (d, 1,
/// 0, ...) of DMAX + patchSize elements, those on and above the diagonal
/// with the outer product (`outer`), else the last block column only.
ENERGY_QUADRATIC_SHAPE constexpr int patchCount(int dmax, int elementBytes,
                                                bool outer) {
  return outer ? (dmax / patchSize(elementBytes) + 1) *
                     (dmax / patchSize(elementBytes) + 2) / 2
               : dmax / patchSize(elementBytes) + 1;
}

/// Rows of a tile of the column pass: the largest power of two up to
/// kThreads whose staged rows (DMAX + patchSize elements each) take at most
/// 24 KiB.
ENERGY_QUADRATIC_SHAPE constexpr int tileRows(int dmax, int elementBytes) {
  int rows = kThreads;
  while (rows > 1 &&
         rows * (dmax + patchSize(elementBytes)) * elementBytes > 24 * 1024)
    rows /= 2;
  return rows;
}

} // namespace energy::cuda::quadratic

#undef ENERGY_QUADRATIC_SHAPE

#endif // ENERGY_KERNELSUPPORT_QUADRATICCONTRACTSHAPES_H
