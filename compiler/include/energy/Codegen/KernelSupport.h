//===- KernelSupport.h - C functions that compiled kernels call -*- C++ -*-===//
//
// The few operations kernels call out for rather than inline: dense matrix
// factorisations and special functions. Artifacts link them statically; the
// JIT resolves them in the running process.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_CODEGEN_KERNELSUPPORT_H
#define ENERGY_CODEGEN_KERNELSUPPORT_H

#include <stdint.h>

namespace mlir::energy {
inline constexpr const char *kSiluIntegralSymbol = "energy_support_silu_int";
inline constexpr const char *kLogDetSymbolF64 = "energy_support_logdet_f64";
inline constexpr const char *kLogDetSymbolF32 = "energy_support_logdet_f32";
inline constexpr const char *kInverseSymbolF64 = "energy_support_inverse_f64";
inline constexpr const char *kInverseSymbolF32 = "energy_support_inverse_f32";
} // namespace mlir::energy

extern "C" {
/// ∫ silu: x · softplus(x) + Li₂(−eˣ).
double energy_support_silu_int(double x);
/// log det of the symmetric part of an n × n SPD matrix (Cholesky); NaN when
/// the matrix is not positive definite.
double energy_support_logdet_f64(int64_t n, const double *matrix);
double energy_support_logdet_f32(int64_t n, const float *matrix);
/// The inverse of an n × n matrix (Gauss-Jordan with partial pivoting).
/// Returns 0, or 1 with NaN everywhere when the matrix is singular.
int32_t energy_support_inverse_f64(int64_t n, const double *matrix,
                                   double *inverse);
int32_t energy_support_inverse_f32(int64_t n, const float *matrix,
                                   float *inverse);
}

#endif // ENERGY_CODEGEN_KERNELSUPPORT_H
