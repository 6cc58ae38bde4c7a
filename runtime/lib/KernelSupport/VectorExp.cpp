//===- VectorExp.cpp - The vectorised exp of the kernel support library ---===//
//
// energy_support_exp_f32/f64: the C entry points, which hand the array to
// the exp of the instruction-set path chosen at run time (IsaKernels.h). The
// algorithm and its constants are in VectorExp.h.
//
//===----------------------------------------------------------------------===//

#include "IsaKernels.h"

#include "energy/KernelSupport/KernelSupport.h"

extern "C" {
void energy_support_exp_f32(int64_t n, const float *in, float *out) {
  if (n > 0)
    ENERGY_KERNEL_FOR_ACTIVE_ISA(expF32)(n, in, out);
}

void energy_support_exp_f64(int64_t n, const double *in, double *out) {
  if (n > 0)
    ENERGY_KERNEL_FOR_ACTIVE_ISA(expF64)(n, in, out);
}

void energy_support_softmax_weights_f32(int64_t n, const float *in,
                                        float *out) {
  if (n > 0)
    ENERGY_KERNEL_FOR_ACTIVE_ISA(softmaxWeightsF32)(n, in, out);
}

void energy_support_softmax_weights_f64(int64_t n, const double *in,
                                        double *out) {
  if (n > 0)
    ENERGY_KERNEL_FOR_ACTIVE_ISA(softmaxWeightsF64)(n, in, out);
}
}
