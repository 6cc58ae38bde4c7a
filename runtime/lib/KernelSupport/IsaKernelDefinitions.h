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
#include "MatrixTranspose.h"
#include "PanelProduct.h"
#include "SoftmaxContractKernel.h"
#include "VectorExp.h"

namespace energy::kernels::ENERGY_KERNEL_ISA {

void expF32(int64_t n, const float *in, float *out) {
  expArray<Simd<float>>(n, in, out);
}

void expF64(int64_t n, const double *in, double *out) {
  expArray<Simd<double>>(n, in, out);
}

void softmaxWeightsF32(int64_t n, const float *in, float *out) {
  softmaxWeightsArray<Simd<float>>(n, in, out);
}

void softmaxWeightsF64(int64_t n, const double *in, double *out) {
  softmaxWeightsArray<Simd<double>>(n, in, out);
}

int32_t softmaxContractF32(const energy_softmax_contract_args &args) {
  return softmaxContract<Simd<float>>(args);
}

int32_t softmaxContractF64(const energy_softmax_contract_args &args) {
  return softmaxContract<Simd<double>>(args);
}

bool panelProductF32(const ProductArgs<float> &args) {
  return panels::panelProduct<Simd<float>>(args);
}

bool panelProductF64(const ProductArgs<double> &args) {
  return panels::panelProduct<Simd<double>>(args);
}

bool packPanelCacheF32(const ProductArgs<float> &args, float *cache) {
  return panels::packPanelCache<Simd<float>>(args, cache);
}

bool packPanelCacheF64(const ProductArgs<double> &args, double *cache) {
  return panels::packPanelCache<Simd<double>>(args, cache);
}

void transposeF32(int64_t matrices, int64_t rows, int64_t columns,
                  const float *in, float *out) {
  transposeMatrices<Simd<float>>(matrices, rows, columns, in, out);
}

void transposeF64(int64_t matrices, int64_t rows, int64_t columns,
                  const double *in, double *out) {
  transposeMatrices<Simd<double>>(matrices, rows, columns, in, out);
}

} // namespace energy::kernels::ENERGY_KERNEL_ISA

#endif // ENERGY_KERNELSUPPORT_ISAKERNELDEFINITIONS_H
