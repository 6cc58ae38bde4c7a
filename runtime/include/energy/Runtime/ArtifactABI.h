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
#define ENERGY_ARTIFACT_FORMAT_VERSION 1

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
  ENERGY_KERNEL_OUT_OF_MEMORY = 2
};

/* Optional: an artifact built with threads exports this to set how many
 * threads its kernels use; results do not depend on the count. */
#define ENERGY_ARTIFACT_SET_THREADS_SYMBOL "energy_artifact_set_num_threads"
typedef void (*energy_set_threads_fn)(int32_t threads);

#ifdef __cplusplus
}
#endif

#endif /* ENERGY_RUNTIME_ARTIFACTABI_H */
