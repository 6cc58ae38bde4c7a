/*===- QuadraticContract.h - The Gaussian-mixture softmax contraction -----===*\
|*                                                                            *|
|* A softmax contraction whose score is a quadratic form about each column's *|
|* mean (a mixture's E-step), with its M-step's weighted moments as column   *|
|* sums: the plan's `quadratic` form. Plain C, for generated code.            *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef ENERGY_KERNELSUPPORT_QUADRATICCONTRACT_H
#define ENERGY_KERNELSUPPORT_QUADRATICCONTRACT_H

#include <stddef.h>
#include <stdint.h>

#define ENERGY_SUPPORT_QUADRATIC_CONTRACT_F32                                  \
  "energy_support_quadratic_contract_f32"
#define ENERGY_SUPPORT_QUADRATIC_CONTRACT_F64                                  \
  "energy_support_quadratic_contract_f64"
#define ENERGY_SUPPORT_CUDA_QUADRATIC_CONTRACT_F32                             \
  "energy_support_cuda_quadratic_contract_f32"
#define ENERGY_SUPPORT_CUDA_QUADRATIC_CONTRACT_F64                             \
  "energy_support_cuda_quadratic_contract_f64"

/* What a column output sums, weighted by w(r, c) over the rows r. */
#define ENERGY_MOMENT_WEIGHT 0  /* 1: width 1 */
#define ENERGY_MOMENT_POINT 1   /* x_r: width D */
#define ENERGY_MOMENT_CENTRED 2 /* x_r − μ_c: width D */
#define ENERGY_MOMENT_CENTRED_OUTER 3 /* (x_r − μ_c)(x_r − μ_c)ᵀ: width D·D */

#ifdef __cplusplus
extern "C" {
#endif

/* The arguments, 12 slots of 8 bytes each (int64_t, double or a pointer), in
 * this order, so that a code generator can fill them as an array of slots:
 *   0 rows  1 cols  2 depth  3 points  4 means  5 precisions  6 bias
 *   7 scale  8 lse  9 num_col_outputs  10 col_output_kinds  11 col_outputs
 * Arrays of the element type (float for _f32, double for _f64) are
 * row-major and contiguous.
 *
 * Semantics, with N = rows, K = cols, D = depth:
 *   s(r, c) = bias[c] + scale · (x_r − μ_c)ᵀ P_c (x_r − μ_c)
 *             (bias[c] = 0 when bias is null; x = points [N, D],
 *             μ = means [K, D], P = precisions [K, D, D], any matrices)
 *   L[r] = log Σ_c exp(s(r, c)), or 0 when K = 0 (computed with the
 *          row's largest score taken out, so that no finite score
 *          overflows or underflows it; −∞ when every score is −∞)
 *   w(r, c) = exp(s(r, c) − L[r]) (0 for every c when L[r] = −∞)
 *   lse[r] = L[r]
 *   col_outputs[j][c, :] = Σ_r w(r, c) · m_j(r, c), m_j the moment
 *                          col_output_kinds[j] names (ENERGY_MOMENT_*)
 * Every output is overwritten. Outputs must not overlap inputs or each
 * other. The results are the same, bit for bit, on every call with the same
 * inputs. */
typedef struct energy_quadratic_contract_args {
  int64_t rows, cols, depth;
  const void *points;     /* N × D */
  const void *means;      /* K × D */
  const void *precisions; /* K × D × D */
  const void *bias;       /* K, or null */
  double scale;           /* finite */
  void *lse;              /* out, N, or null */
  int64_t num_col_outputs;
  const int64_t *col_output_kinds; /* ENERGY_MOMENT_* */
  void *const *col_outputs;        /* output j: K × its kind's width */
} energy_quadratic_contract_args;

#ifdef __cplusplus
#define ENERGY_QUADRATIC_STATIC_ASSERT static_assert
#else
#define ENERGY_QUADRATIC_STATIC_ASSERT _Static_assert
#endif
ENERGY_QUADRATIC_STATIC_ASSERT(sizeof(energy_quadratic_contract_args) == 12 * 8,
                               "every field is one 8-byte slot");
ENERGY_QUADRATIC_STATIC_ASSERT(offsetof(energy_quadratic_contract_args,
                                        scale) == 7 * 8 &&
                                   offsetof(energy_quadratic_contract_args,
                                            col_outputs) == 11 * 8,
                               "the slots are in the documented order");
#undef ENERGY_QUADRATIC_STATIC_ASSERT

/* Computes the outputs the arguments ask for, on the host (in double, on
 * the kernel thread pool). Returns ENERGY_CONTRACT_OK (SoftmaxContract.h),
 * or ENERGY_CONTRACT_INVALID_ARGUMENT (negative sizes, sizes whose product
 * N·D, K·D or K·D·D overflows, a scale that is not finite, an unknown
 * moment kind, a null pointer that is needed: points, means, precisions or
 * an output that is not empty, the kinds and outputs arrays when there are
 * column outputs; bias and lse may be null), having written nothing, or
 * ENERGY_CONTRACT_OUT_OF_MEMORY. Never aborts. */
int32_t
energy_support_quadratic_contract_f32(const energy_quadratic_contract_args *a);
int32_t
energy_support_quadratic_contract_f64(const energy_quadratic_contract_args *a);

/* The same for CUDA artifacts: on the GPU when depth <= 64 (and N, K >= 1),
 * else on the host, which is also where invalid arguments are refused.
 * On the GPU its kernels queue after the work before them and the call
 * returns without waiting (as energy_support_cuda_launch;
 * energy_support_cuda_fence waits); on the host it waits first.
 * Every pointer must be memory both the GPU and the host reach (managed,
 * as energy_support_cuda_alloc's). May also return
 * ENERGY_CONTRACT_DEVICE_ERROR (energy_support_cuda_last_error says how).
 * The GPU computes in the element type (the partial sums' totals in
 * double): results agree with the host's to that type's rounding, not bit
 * for bit, but are the same on every call. */
int32_t energy_support_cuda_quadratic_contract_f32(
    const energy_quadratic_contract_args *a);
int32_t energy_support_cuda_quadratic_contract_f64(
    const energy_quadratic_contract_args *a);

#ifdef __cplusplus
}
#endif

#endif /* ENERGY_KERNELSUPPORT_QUADRATICCONTRACT_H */
