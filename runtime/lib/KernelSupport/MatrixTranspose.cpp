//===- MatrixTranspose.cpp - The transposes kernels store -----------------===//
//
// energy_support_transpose_f32/f64: the C entry points, which hand the
// matrices to the transpose of the instruction-set path chosen at run time
// (IsaKernels.h; the algorithm is in MatrixTranspose.h).
//
//===----------------------------------------------------------------------===//

#include "IsaKernels.h"

#include "energy/KernelSupport/KernelSupport.h"

extern "C" {
void energy_support_transpose_f32(int64_t matrices, int64_t rows,
                                  int64_t columns, const float *in,
                                  float *out) {
  if (matrices > 0 && rows > 0 && columns > 0)
    ENERGY_KERNEL_FOR_ACTIVE_ISA(transposeF32)
    (matrices, rows, columns, in, out);
}

void energy_support_transpose_f64(int64_t matrices, int64_t rows,
                                  int64_t columns, const double *in,
                                  double *out) {
  if (matrices > 0 && rows > 0 && columns > 0)
    ENERGY_KERNEL_FOR_ACTIVE_ISA(transposeF64)
    (matrices, rows, columns, in, out);
}
}
