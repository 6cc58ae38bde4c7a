/*===- ArtifactABI.h - The contract between artifacts and the runtime -----===*\
|*                                                                            *|
|* What a compiled artifact exports and how the runtime calls it: the        *|
|* manifest symbol, the kernel signature and the kernels' error codes.       *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef ENERGY_RUNTIME_ARTIFACTABI_H
#define ENERGY_RUNTIME_ARTIFACTABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The manifest format this runtime reads; an artifact carrying another
 * `format_version` is refused with a message naming both versions. */
#define ENERGY_ARTIFACT_FORMAT_VERSION 6

/* Every artifact exports this function: it returns the manifest, a
 * NUL-terminated JSON object (see docs/api.md, "Artifacts"). */
#define ENERGY_ARTIFACT_MANIFEST_SYMBOL "energy_artifact_manifest"
typedef const char *(*energy_manifest_fn)(void);

/* Every kernel the manifest names has this signature.
 *   buffers: one pointer per manifest buffer, in manifest order, to its
 *            contiguous row-major elements of the artifact's dtype;
 *   dims:    one value per manifest dim, in manifest order (derived dims
 *            included, already evaluated);
 *   consts:  one value per manifest const, in manifest order;
 *   step:    the dynamics step, counted from 0 (what `step` reads);
 *   result:  where a kernel that computes a scalar (the energy, the stopping
 *            rule as 0 or 1) writes it; unused by the others.
 * Kernels allocate their own scratch memory and free it before returning;
 * they write only the buffers their manifest entry names. */
typedef int32_t (*energy_kernel_fn)(void **buffers, const int64_t *dims,
                                    const double *consts, int64_t step,
                                    double *result);

/* Kernel return codes. */
enum {
  ENERGY_KERNEL_OK = 0,
  /* An adaptive loop (`energy.repeat`) ran its maximum number of rounds. */
  ENERGY_KERNEL_NO_CONVERGENCE = 1,
  /* Scratch memory could not be allocated. */
  ENERGY_KERNEL_OUT_OF_MEMORY = 2,
  /* A value a kernel needs is outside its domain (a temperature that is
   * not finite and positive). */
  ENERGY_KERNEL_INVALID_ARGUMENT = 3,
  /* The GPU failed (a kernel that did not load or launch); the artifact's
   * ENERGY_ARTIFACT_DEVICE_ERROR_SYMBOL says how. */
  ENERGY_KERNEL_DEVICE_ERROR = 4
};

/* CUDA artifacts (manifest target.device "cuda") run their parallel loops
 * on the GPU and the rest on the host: every pointer a kernel gets (the
 * buffers array, each buffer, dims, consts, result) must be memory that
 * both reach (cuMemAllocManaged), as the runtime's CUDA sessions give. They
 * export this function, which describes the last device failure. */
#define ENERGY_ARTIFACT_DEVICE_ERROR_SYMBOL "energy_support_cuda_last_error"
typedef const char *(*energy_device_error_fn)(void);

/* CUDA artifacts export this function too: the runtime calls it before
 * each kernel with the stream the kernel's GPU work goes on (the
 * application's, energy_session_set_stream; NULL: the legacy default
 * stream), and `queued` non-zero where work queued on it before (the
 * application's, the runtime's copies) may write what the kernel's host
 * code reads: that code waits for it first. The kernel returns with its
 * work on the stream done. */
#define ENERGY_ARTIFACT_SET_STREAM_SYMBOL "energy_support_cuda_set_stream"
typedef void (*energy_set_stream_fn)(void *stream, int32_t queued);

/* A kernel that calls a plugin's run-time code (a function or aggregation
 * of plugins/include/energy/Plugin/RuntimeCode.h) reads its address from the
 * artifact's pointer slot named this prefix + the code's symbol; the
 * manifest's `plugins` list the symbols, and the runtime stores their
 * addresses before any kernel runs. */
#define ENERGY_ARTIFACT_PLUGIN_SLOT_PREFIX "energy_plugin_code_"

/* One rank of a sharded run (energy-run --shard) steps with the gradient
 * the ranks put together: its step program reads tensor X's gradient from
 * the input named X + this suffix, which the runtime sets before each step
 * (the pass energy-supplied-gradients adds these inputs). */
#define ENERGY_ARTIFACT_SUPPLIED_GRADIENT_SUFFIX ".supplied_gradient"

/* In that rank's backward program, the part of a backward step's gradient
 * of state X that the rank's own energy gives, where every rank holds X
 * whole: the state X + this suffix, which the runtime sums over the ranks
 * into X's adjoint after each backward step. */
#define ENERGY_ARTIFACT_RANK_ADJOINT_SUFFIX ".rank_adjoint"

/* Optional: an artifact built with threads exports this to set how many
 * threads its kernels use; results do not depend on the count. */
#define ENERGY_ARTIFACT_SET_THREADS_SYMBOL "energy_artifact_set_num_threads"
typedef void (*energy_set_threads_fn)(int32_t threads);

/* An artifact's support code reports notes (a fallback it took, once per
 * reason) and traces (ENERGY_CUDA_TRACE's timings) through a handler and
 * prints nothing: one that has any exports this setter, which the runtime
 * calls with its own handler (energy_set_log_handler) when it loads the
 * artifact. */
#define ENERGY_ARTIFACT_SET_LOG_HANDLER_SYMBOL "energy_support_set_log_handler"
/* Traces are asked for by ENERGY_CUDA_TRACE, set to anything but "" or
 * "0": the one rule of the runtime and the support code. ENERGY_CUDA_WAITS,
 * by the same rule, asks for a trace line at each wait of the host for the
 * GPU and at the start and end of each kernel a session calls, without
 * making launches wait (ENERGY_CUDA_TRACE does). */
static inline int energy_cuda_trace_requested(const char *value) {
  return value && value[0] && !(value[0] == '0' && value[1] == 0);
}
enum { ENERGY_ARTIFACT_LOG_NOTE = 0, ENERGY_ARTIFACT_LOG_TRACE = 1 };
typedef void (*energy_artifact_log_fn)(int32_t level, const char *message);
typedef void (*energy_set_log_handler_fn)(energy_artifact_log_fn handler);

/* The x86 CPU features a manifest's `target.features` may name: the
 * compiler lists, among the features the code may use, those in this table;
 * the runtime checks each one against the running CPU before it calls a
 * kernel, and refuses a manifest naming any other. One entry per feature, in
 * the order manifests list them: LLVM's name of the feature, then the name
 * `__builtin_cpu_supports` checks it by (crc32 comes with SSE 4.2). The
 * x86-64 baseline features that cpuid checks cannot name (x87, cx8, fxsr)
 * are left out: every x86-64 CPU has them. Expand with a macro
 * FEATURE(llvmName, checkName). */
#define ENERGY_X86_CPU_FEATURES(FEATURE)                                       \
  FEATURE("cmov", "cmov")                                                      \
  FEATURE("mmx", "mmx")                                                        \
  FEATURE("sse", "sse")                                                        \
  FEATURE("sse2", "sse2")                                                      \
  FEATURE("sse3", "sse3")                                                      \
  FEATURE("ssse3", "ssse3")                                                    \
  FEATURE("sse4.1", "sse4.1")                                                  \
  FEATURE("sse4.2", "sse4.2")                                                  \
  FEATURE("crc32", "sse4.2")                                                   \
  FEATURE("popcnt", "popcnt")                                                  \
  FEATURE("cx16", "cx16")                                                      \
  FEATURE("sahf", "sahf")                                                      \
  FEATURE("avx", "avx")                                                        \
  FEATURE("avx2", "avx2")                                                      \
  FEATURE("bmi", "bmi")                                                        \
  FEATURE("bmi2", "bmi2")                                                      \
  FEATURE("f16c", "f16c")                                                      \
  FEATURE("fma", "fma")                                                        \
  FEATURE("lzcnt", "lzcnt")                                                    \
  FEATURE("movbe", "movbe")                                                    \
  FEATURE("xsave", "xsave")                                                    \
  FEATURE("avx512f", "avx512f")                                                \
  FEATURE("avx512bw", "avx512bw")                                              \
  FEATURE("avx512cd", "avx512cd")                                              \
  FEATURE("avx512dq", "avx512dq")                                              \
  FEATURE("avx512vl", "avx512vl")                                              \
  FEATURE("avx512ifma", "avx512ifma")                                          \
  FEATURE("avx512vbmi", "avx512vbmi")                                          \
  FEATURE("avx512vbmi2", "avx512vbmi2")                                        \
  FEATURE("avx512vnni", "avx512vnni")                                          \
  FEATURE("avx512bitalg", "avx512bitalg")                                      \
  FEATURE("avx512vpopcntdq", "avx512vpopcntdq")                                \
  FEATURE("avx512bf16", "avx512bf16")                                          \
  FEATURE("avx512fp16", "avx512fp16")                                          \
  FEATURE("avxvnni", "avxvnni")                                                \
  FEATURE("aes", "aes")                                                        \
  FEATURE("pclmul", "pclmul")                                                  \
  FEATURE("vaes", "vaes")                                                      \
  FEATURE("vpclmulqdq", "vpclmulqdq")                                          \
  FEATURE("gfni", "gfni")                                                      \
  FEATURE("sha", "sha")                                                        \
  FEATURE("adx", "adx")                                                        \
  FEATURE("sse4a", "sse4a")                                                    \
  FEATURE("fma4", "fma4")                                                      \
  FEATURE("xop", "xop")

#ifdef __cplusplus
}
#endif

#endif /* ENERGY_RUNTIME_ARTIFACTABI_H */
