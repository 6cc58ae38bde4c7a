//===- IsaKernelDefinitions.h - Entry points of one ISA ---------*- C++ -*-===//
//
// Instantiates the kernel templates for the instruction set of the including
// translation unit (which defines ENERGY_KERNEL_ISA and includes its Simd
// header first) as the functions IsaKernels.h declares. One body serves
// every path.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_KERNELSUPPORT_ISAKERNELDEFINITIONS_H
#define ENERGY_KERNELSUPPORT_ISAKERNELDEFINITIONS_H

#include "IsaKernels.h"
#include "VectorExp.h"

namespace energy::kernels::ENERGY_KERNEL_ISA {

void expF32(int64_t n, const float *in, float *out) {
  expArray<Simd<float>>(n, in, out);
}

void expF64(int64_t n, const double *in, double *out) {
  expArray<Simd<double>>(n, in, out);
}

} // namespace energy::kernels::ENERGY_KERNEL_ISA

#endif // ENERGY_KERNELSUPPORT_ISAKERNELDEFINITIONS_H
