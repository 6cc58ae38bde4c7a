/*===- KernelSupport.h - C functions that compiled kernels call -----------===*\
|*                                                                            *|
|* The operations kernels call out for rather than inline: dense matrix      *|
|* factorisations, special functions and the thread pool. Artifacts link     *|
|* them statically; the JIT resolves them in the running process. No MLIR.   *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef ENERGY_KERNELSUPPORT_KERNELSUPPORT_H
#define ENERGY_KERNELSUPPORT_KERNELSUPPORT_H

#include "energy/Runtime/ArtifactABI.h"

#include <stdint.h>

/* The symbols code generators call, by name. */
#define ENERGY_SUPPORT_LOGDET_F64 "energy_support_logdet_f64"
#define ENERGY_SUPPORT_LOGDET_F32 "energy_support_logdet_f32"
#define ENERGY_SUPPORT_INVERSE_F64 "energy_support_inverse_f64"
#define ENERGY_SUPPORT_INVERSE_F32 "energy_support_inverse_f32"
#define ENERGY_SUPPORT_PARALLEL_FOR "energy_support_parallel_for"
#define ENERGY_SUPPORT_SET_NUM_THREADS "energy_support_set_num_threads"
#define ENERGY_SUPPORT_EXP_F32 "energy_support_exp_f32"
#define ENERGY_SUPPORT_EXP_F64 "energy_support_exp_f64"
#define ENERGY_SUPPORT_SOFTMAX_WEIGHTS_F32 "energy_support_softmax_weights_f32"
#define ENERGY_SUPPORT_SOFTMAX_WEIGHTS_F64 "energy_support_softmax_weights_f64"
#define ENERGY_SUPPORT_TRANSPOSE_F32 "energy_support_transpose_f32"
#define ENERGY_SUPPORT_TRANSPOSE_F64 "energy_support_transpose_f64"
#define ENERGY_SUPPORT_SCRATCH_ALLOC "energy_support_scratch_alloc"
#define ENERGY_SUPPORT_SCRATCH_FREE "energy_support_scratch_free"
#define ENERGY_SUPPORT_CUDA_ALLOC "energy_support_cuda_alloc"
#define ENERGY_SUPPORT_CUDA_FREE "energy_support_cuda_free"
#define ENERGY_SUPPORT_CUDA_LAUNCH "energy_support_cuda_launch"
#define ENERGY_SUPPORT_CUDA_FENCE "energy_support_cuda_fence"

#ifdef __cplusplus
extern "C" {
#endif

/* Where the support code's notes and traces go (ArtifactABI.h's
 * ENERGY_ARTIFACT_SET_LOG_HANDLER_SYMBOL); NULL, the default, drops them. */
void energy_support_set_log_handler(energy_artifact_log_fn handler);

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

/* out[i] = exp(in[i]) for 0 <= i < n, vectorised (AVX-512, AVX2 + FMA or
 * scalar code, chosen at run time for the CPU); in == out is allowed, other
 * overlaps are not. A polynomial on the reduced argument: x = k·ln2 + r,
 * |r| <= ln2/2, exp(x) = 2^k · exp(r), with 2^k applied in one rounding, so
 * results in the subnormal range are rounded, not flushed. Over the whole
 * range: NaN -> NaN, +inf and overflow -> +inf, -inf and underflow -> +0,
 * tiny inputs -> 1.
 * Error bound, on every path, in the default floating-point environment
 * (round to nearest, no flush-to-zero):
 *   f32: at most 1 ulp from the correctly rounded exp (the result is the
 *        correctly rounded float or one of its two neighbours), subnormal
 *        results included;
 *   f64: less than 1 ulp from the exact exp, subnormal results included
 *        (at most 0.77 ulp seen, next to the subnormal range).
 * tests/unit/runtime/KernelSupport/ExpTest.cpp checks these on every path: f32
 * against (float)exp((double)x) on a stride through all 2^32 inputs and on
 * every input near the ends of the range, f64 against the x87 expl. */
void energy_support_exp_f32(int64_t n, const float *in, float *out);
void energy_support_exp_f64(int64_t n, const double *in, double *out);

/* Softmax weights: exp as above where the result is at least the smallest
 * normal number (2^-126 for f32, 2^-1022 for f64), +0 where it would be
 * smaller (x < -87.33654, or x < -708.39641; -inf included), NaN -> NaN.
 * Normalised weights are at most 1, so a dropped one is negligible; and a
 * subnormal or underflowing result costs the CPU a microcode assist per
 * element, some twenty times the exp of a normal one. Kernels of softmax
 * contractions call this on each panel of shifted scores. */
void energy_support_softmax_weights_f32(int64_t n, const float *in, float *out);
void energy_support_softmax_weights_f64(int64_t n, const double *in,
                                        double *out);

/* out[p] = in[p]^T for p < matrices: in[p] is columns x rows, out[p] rows x
 * columns, both row-major and back to back (a transpose a kernel stores). */
void energy_support_transpose_f32(int64_t matrices, int64_t rows,
                                  int64_t columns, const float *in, float *out);
void energy_support_transpose_f64(int64_t matrices, int64_t rows,
                                  int64_t columns, const double *in,
                                  double *out);

/* A kernel's scratch: `bytes` (at least 1) of host memory aligned to 64
 * bytes, or null. Freed blocks are kept for later requests of up to twice
 * their size instead of going back to malloc (whose large blocks are mapped
 * and page-faulted in at every call), at most ENERGY_SCRATCH_CACHE_MIB
 * mebibytes of them (default 256; 0 keeps none). Thread-safe. */
void *energy_support_scratch_alloc(int64_t bytes);
/* How many calls of energy_support_scratch_alloc and
 * energy_support_cuda_alloc on this thread have returned null: a kernel
 * compares it before and after its allocations, and returns
 * ENERGY_KERNEL_OUT_OF_MEMORY without running when it changed. */
#define ENERGY_SUPPORT_SCRATCH_FAILURES "energy_support_scratch_failures"
int64_t energy_support_scratch_failures(void);
/* Gives back a block of energy_support_scratch_alloc; null is ignored. */
void energy_support_scratch_free(void *pointer);

/* CUDA artifacts (CudaLaunch.cpp). The driver is opened with dlopen on first
 * use; the calling thread gets device 0's primary context. */
/* `bytes` of memory the host and the GPU both reach (managed), from a cache
 * of blocks freed before; null when none can be had. */
void *energy_support_cuda_alloc(int64_t bytes);
void energy_support_cuda_free(void *pointer);
/* Runs kernel `name` once per position [0, count) on the GPU, after the
 * kernels launched before it, without waiting for it (with ENERGY_CUDA_SYNC
 * or ENERGY_CUDA_TRACE set: waiting). `images` holds the artifact's PTX: pairs
 * of NUL-terminated strings (architecture "sm_90", code), then an empty string;
 * the newest architecture the device runs is loaded (once per `images`). The
 * kernel takes `slot_count` 8-byte values from `slots`, then count. `function`
 * caches the loaded kernel. Returns 0, or ENERGY_KERNEL_DEVICE_ERROR (4)
 * with the reason in energy_support_cuda_last_error. */
int32_t energy_support_cuda_launch(const char *images, const char *name,
                                   void **function, const int64_t *slots,
                                   int32_t slot_count, int64_t count);
/* The stream (a CUstream; NULL: the legacy default stream) that the calling
 * thread's kernels, products and copies go on from now, after what was
 * queued on it before; `queued` non-zero: work may be queued there that the
 * host must wait for before it touches device memory (the next fence waits
 * for it). The runtime calls it before each kernel of a CUDA artifact
 * (ENERGY_ARTIFACT_SET_STREAM_SYMBOL). */
void energy_support_cuda_set_stream(void *stream, int32_t queued);
/* Waits for the kernels (and cuBLAS products, MatrixProduct.h) this thread
 * queued without waiting, on its stream; then hands out again the blocks it
 * freed while they ran. 0, or
 * ENERGY_KERNEL_DEVICE_ERROR when one of them failed. Cheap when none is
 * pending: the code calls it before the host touches memory a kernel may
 * write. */
int32_t energy_support_cuda_fence(void);
/* The last failure of the functions above, or "". */
const char *energy_support_cuda_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* ENERGY_KERNELSUPPORT_KERNELSUPPORT_H */
