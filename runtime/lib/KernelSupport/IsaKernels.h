//===- IsaKernels.h - The vector kernels per ISA ----------------*- C++ -*-===//
//
// Every vectorised support function exists once per instruction set: the
// templates of VectorExp.h, SoftmaxContractKernel.h and PanelProduct.h are
// instantiated in
// KernelsGeneric.cpp (no ISA flags), KernelsAvx2.cpp (-mavx2 -mfma) and
// KernelsAvx512.cpp (-mavx512f), each in its own namespace. This header
// declares those entry points and the run-time choice between them; only the
// dispatching C functions call them.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_KERNELSUPPORT_ISAKERNELS_H
#define ENERGY_KERNELSUPPORT_ISAKERNELS_H

#include "energy/KernelSupport/InstructionSet.h"
#include "energy/KernelSupport/SoftmaxContract.h"

#include <stdint.h>

namespace energy::kernels {

/// The path to take now: ENERGY_ISA_SCALAR, _AVX2 or _AVX512.
int32_t activeInstructionSet();

/// C = op(A) · op(B) (m × n, inner dim k), or C += it with `accumulate`;
/// row-major matrices with leading dims lda, ldb, ldc. Where `packedB` is
/// not null, op(B) is columns packedFirstColumn ... of a matrix of
/// packedColumns columns whose whole panels packPanelCache packed there
/// (the panel product reads them instead of packing its own).
template <class T> struct ProductArgs {
  bool transposeA, transposeB;
  int64_t m, n, k;
  const T *a;
  int64_t lda;
  const T *b;
  int64_t ldb;
  bool accumulate;
  T *c;
  int64_t ldc;
  const T *packedB = nullptr;
  int64_t packedColumns = 0, packedFirstColumn = 0;
};

#define ENERGY_DECLARE_ISA_KERNELS(isa)                                        \
  namespace isa {                                                              \
  void expF32(int64_t n, const float *in, float *out);                         \
  void expF64(int64_t n, const double *in, double *out);                       \
  void softmaxWeightsF32(int64_t n, const float *in, float *out);              \
  void softmaxWeightsF64(int64_t n, const double *in, double *out);            \
  int32_t softmaxContractF32(const energy_softmax_contract_args &args);        \
  int32_t softmaxContractF64(const energy_softmax_contract_args &args);        \
  bool panelProductF32(const ProductArgs<float> &args);                        \
  bool panelProductF64(const ProductArgs<double> &args);                       \
  bool packPanelCacheF32(const ProductArgs<float> &args, float *cache);        \
  bool packPanelCacheF64(const ProductArgs<double> &args, double *cache);      \
  void transposeF32(int64_t matrices, int64_t rows, int64_t columns,           \
                    const float *in, float *out);                              \
  void transposeF64(int64_t matrices, int64_t rows, int64_t columns,           \
                    const double *in, double *out);                            \
  }

ENERGY_DECLARE_ISA_KERNELS(generic)
#if ENERGY_KERNELS_X86
ENERGY_DECLARE_ISA_KERNELS(avx2)
ENERGY_DECLARE_ISA_KERNELS(avx512)
#endif
#undef ENERGY_DECLARE_ISA_KERNELS

/// Of one function per path (null where a path is not built), the function
/// of the active path, or of the best built path below it.
template <class Function>
Function forActiveIsa(Function generic, Function avx2, Function avx512) {
  int32_t isa = activeInstructionSet();
  if (isa >= ENERGY_ISA_AVX512 && avx512)
    return avx512;
  if (isa >= ENERGY_ISA_AVX2 && avx2)
    return avx2;
  return generic;
}

} // namespace energy::kernels

/// The function `name` of the active path, e.g.
/// ENERGY_KERNEL_FOR_ACTIVE_ISA(expF32)(n, in, out).
#if ENERGY_KERNELS_X86
#define ENERGY_KERNEL_FOR_ACTIVE_ISA(name)                                     \
  ::energy::kernels::forActiveIsa(::energy::kernels::generic::name,            \
                                  ::energy::kernels::avx2::name,               \
                                  ::energy::kernels::avx512::name)
#else
#define ENERGY_KERNEL_FOR_ACTIVE_ISA(name)                                     \
  ::energy::kernels::forActiveIsa(                                             \
      ::energy::kernels::generic::name,                                        \
      decltype(&::energy::kernels::generic::name){},                           \
      decltype(&::energy::kernels::generic::name){})
#endif

#endif // ENERGY_KERNELSUPPORT_ISAKERNELS_H
