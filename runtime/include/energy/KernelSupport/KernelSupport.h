/*===- KernelSupport.h - C functions that compiled kernels call -----------===*\
|*                                                                            *|
|* The operations kernels call out for rather than inline: dense matrix      *|
|* factorisations, special functions and the thread pool. Artifacts link     *|
|* them statically; the JIT resolves them in the running process. No MLIR.   *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef ENERGY_KERNELSUPPORT_KERNELSUPPORT_H
#define ENERGY_KERNELSUPPORT_KERNELSUPPORT_H

#include <stdint.h>

/* The symbols code generators call, by name. */
#define ENERGY_SUPPORT_SILU_INT "energy_support_silu_int"
#define ENERGY_SUPPORT_LOGDET_F64 "energy_support_logdet_f64"
#define ENERGY_SUPPORT_LOGDET_F32 "energy_support_logdet_f32"
#define ENERGY_SUPPORT_INVERSE_F64 "energy_support_inverse_f64"
#define ENERGY_SUPPORT_INVERSE_F32 "energy_support_inverse_f32"
#define ENERGY_SUPPORT_PARALLEL_FOR "energy_support_parallel_for"
#define ENERGY_SUPPORT_SET_NUM_THREADS "energy_support_set_num_threads"

#ifdef __cplusplus
extern "C" {
#endif

/* ∫ silu: x · softplus(x) + Li₂(−eˣ). */
double energy_support_silu_int(double x);
/* log det of the symmetric part of an n × n SPD matrix (Cholesky); NaN when
 * the matrix is not positive definite. */
double energy_support_logdet_f64(int64_t n, const double *matrix);
double energy_support_logdet_f32(int64_t n, const float *matrix);
/* The inverse of an n × n matrix (Gauss-Jordan with partial pivoting).
 * Returns 0, or 1 with NaN everywhere when the matrix is singular. */
int32_t energy_support_inverse_f64(int64_t n, const double *matrix,
                                   double *inverse);
int32_t energy_support_inverse_f32(int64_t n, const float *matrix,
                                   float *inverse);

/* The iterations [begin, end) of a loop that a kernel shares out. */
typedef void (*energy_chunk_fn)(void *context, int64_t begin, int64_t end);
/* Runs iterations [0, count) of `chunk` on the kernel thread pool, in
 * chunks, and returns when all are done. The iterations must write
 * disjoint memory; a call from inside a loop runs on the calling thread. */
void energy_support_parallel_for(energy_chunk_fn chunk, void *context,
                                 int64_t count);
/* Sets the number of threads of the pool (at least 1; it starts with
 * ENERGY_NUM_THREADS, or one per core). */
void energy_support_set_num_threads(int32_t threads);
int32_t energy_support_num_threads(void);

#ifdef __cplusplus
}
#endif

#endif /* ENERGY_KERNELSUPPORT_KERNELSUPPORT_H */
