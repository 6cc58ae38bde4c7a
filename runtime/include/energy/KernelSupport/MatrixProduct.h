/*===- MatrixProduct.h - Matrix products that compiled kernels call -------===*\
|*                                                                            *|
|* C = A · B for row-major matrices, through a tuned BLAS (OpenBLAS, loaded  *|
|* when the process first needs it) or, where none can be loaded, a blocked  *|
|* loop of ours. Plain C, so that generated code calls it by name.           *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef ENERGY_KERNELSUPPORT_MATRIXPRODUCT_H
#define ENERGY_KERNELSUPPORT_MATRIXPRODUCT_H

#include <stdint.h>

#define ENERGY_SUPPORT_MATMUL_F32 "energy_support_matmul_f32"
#define ENERGY_SUPPORT_MATMUL_F64 "energy_support_matmul_f64"
#define ENERGY_SUPPORT_MATMUL_BATCH_F32 "energy_support_matmul_batch_f32"
#define ENERGY_SUPPORT_MATMUL_BATCH_F64 "energy_support_matmul_batch_f64"
#define ENERGY_SUPPORT_MATMUL_BATCH_PACKED_F32                                 \
  "energy_support_matmul_batch_packed_f32"
#define ENERGY_SUPPORT_MATMUL_BATCH_PACKED_F64                                 \
  "energy_support_matmul_batch_packed_f64"

/* Flags of a batch of products (energy.batch_matmul): a operand stored
 * transposed (k × m), b stored transposed (n × k), the products added into
 * one c instead of one c each, the products added to what c holds (an
 * `energy.accumulate` of the product into a tensor) instead of replacing
 * it. */
#define ENERGY_PRODUCT_TRANSPOSE_A 1
#define ENERGY_PRODUCT_TRANSPOSE_B 2
#define ENERGY_PRODUCT_SUM_BATCH 4
#define ENERGY_PRODUCT_ACCUMULATE 8

#ifdef __cplusplus
extern "C" {
#endif

/* c[m × n] = a[m × k] · b[k × n], all row-major and contiguous; c must not
 * overlap a or b. Sizes of 0 are fine (c is then zero, or empty). Within one
 * process every call of the same sizes takes the same path, and the result
 * does not depend on the number of threads. */
void energy_support_matmul_f32(int64_t m, int64_t n, int64_t k, const float *a,
                               const float *b, float *c);
void energy_support_matmul_f64(int64_t m, int64_t n, int64_t k, const double *a,
                               const double *b, double *c);

/* For p < batch: op(a + p·aStride) · op(b + p·bStride), m × n, into
 * c + p·m·n, or with ENERGY_PRODUCT_SUM_BATCH all added into c (m × n);
 * op transposes an operand whose flag is set. A stride of 0 takes the same
 * matrix at every p. c must not overlap a or b. Where every a[p], or every
 * b[p], is all zeros the products are zeros without being computed (as
 * reference BLAS skips zero entries): a NaN or an infinity of the other
 * operand does not reach c. */
void energy_support_matmul_batch_f32(int64_t batch, int64_t m, int64_t n,
                                     int64_t k, const float *a, int64_t aStride,
                                     const float *b, int64_t bStride, float *c,
                                     int64_t flags);
void energy_support_matmul_batch_f64(int64_t batch, int64_t m, int64_t n,
                                     int64_t k, const double *a,
                                     int64_t aStride, const double *b,
                                     int64_t bStride, double *c, int64_t flags);

/* The same, for a b that every call of the runtime reads unchanged (a
 * parameter, or what is computed of parameters and inputs): its matrices,
 * packed for the products' tiles, are kept in `cache` (batch·n·k elements
 * where b has a batch axis, else n·k) within one call, under the kernel's
 * flag `valid` as for a value the kernels keep (1 kept, 0 to keep, -1 not to
 * keep): the first product of a call packs them and sets it to 1, later
 * ones read them. The results are those of the plain function, bit for
 * bit. A sum over a batch of a and b matrices, not both transposed, runs as
 * one product of the matrices stacked along the inner dim, and keeps
 * nothing. */
void energy_support_matmul_batch_packed_f32(int64_t batch, int64_t m, int64_t n,
                                            int64_t k, const float *a,
                                            int64_t aStride, const float *b,
                                            int64_t bStride, float *c,
                                            int64_t flags, float *cache,
                                            float *valid);
void energy_support_matmul_batch_packed_f64(int64_t batch, int64_t m, int64_t n,
                                            int64_t k, const double *a,
                                            int64_t aStride, const double *b,
                                            int64_t bStride, double *c,
                                            int64_t flags, double *cache,
                                            double *valid);

/* Which implementation products use: on a CPU with AVX2 or AVX-512, "panel
 * products (ISA), thin ones on X" (the support library's own kernels;
 * ENERGY_NO_PANEL_PRODUCTS set turns them off), where X, or alone, is
 * "openblas (CORE)" with OpenBLAS's core name, or "fallback" when OpenBLAS
 * could not be loaded (or was disabled with ENERGY_BLAS=none). Loads
 * OpenBLAS if that has not happened yet. */
const char *energy_support_matmul_backend(void);

/* The same for CUDA artifacts (CudaMatmul.cpp): through cuBLAS (opened with
 * dlopen: libcublas.so.13, or ENERGY_CUBLAS) on memory the GPU reaches,
 * queued after the kernels launched before them without waiting (as
 * energy_support_cuda_launch; energy_support_cuda_fence waits), or on the
 * host, after waiting for the GPU, when cuBLAS cannot be had or a size
 * exceeds its 32-bit sizes (or is 0). */
#define ENERGY_SUPPORT_CUDA_MATMUL_F32 "energy_support_cuda_matmul_f32"
#define ENERGY_SUPPORT_CUDA_MATMUL_F64 "energy_support_cuda_matmul_f64"
#define ENERGY_SUPPORT_CUDA_MATMUL_BATCH_F32                                   \
  "energy_support_cuda_matmul_batch_f32"
#define ENERGY_SUPPORT_CUDA_MATMUL_BATCH_F64                                   \
  "energy_support_cuda_matmul_batch_f64"
#define ENERGY_SUPPORT_CUDA_MATMUL_BATCH_BF16                                  \
  "energy_support_cuda_matmul_batch_bf16"
void energy_support_cuda_matmul_f32(int64_t m, int64_t n, int64_t k,
                                    const float *a, const float *b, float *c);
void energy_support_cuda_matmul_f64(int64_t m, int64_t n, int64_t k,
                                    const double *a, const double *b,
                                    double *c);
/* f32 products whose inputs cuBLAS may round to bf16 on tensor cores
 * (CUBLAS_COMPUTE_32F_FAST_16BF; fp32 accumulation): energyc --dtype bf16. */
#define ENERGY_SUPPORT_CUDA_MATMUL_BF16 "energy_support_cuda_matmul_bf16"
void energy_support_cuda_matmul_bf16(int64_t m, int64_t n, int64_t k,
                                     const float *a, const float *b, float *c);
void energy_support_cuda_matmul_batch_f32(int64_t batch, int64_t m, int64_t n,
                                          int64_t k, const float *a,
                                          int64_t aStride, const float *b,
                                          int64_t bStride, float *c,
                                          int64_t flags);
void energy_support_cuda_matmul_batch_f64(int64_t batch, int64_t m, int64_t n,
                                          int64_t k, const double *a,
                                          int64_t aStride, const double *b,
                                          int64_t bStride, double *c,
                                          int64_t flags);
void energy_support_cuda_matmul_batch_bf16(int64_t batch, int64_t m, int64_t n,
                                           int64_t k, const float *a,
                                           int64_t aStride, const float *b,
                                           int64_t bStride, float *c,
                                           int64_t flags);

#ifdef __cplusplus
}
#endif

#endif /* ENERGY_KERNELSUPPORT_MATRIXPRODUCT_H */
