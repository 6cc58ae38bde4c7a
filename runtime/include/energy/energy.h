/*===- energy.h - The runtime's C API -----------------------------*- C -*-===*\
|*                                                                            *|
|* Loading compiled models and running them from C and from other             *|
|* languages' foreign-function interfaces: opaque models and sessions,        *|
|* tensors passed as plain arrays.                                            *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef ENERGY_ENERGY_H
#define ENERGY_ENERGY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every function that can fail returns 0 (or a non-null pointer) on
 * success and non-zero (or NULL) on failure; energy_last_error() then gives
 * the message. No function throws or prints. */

/* A compiled model, loaded from an artifact. */
typedef struct energy_model energy_model;
/* A set of values for a model's tensors. */
typedef struct energy_session energy_session;

/* Element types of the arrays passed in and out. (The last value only
 * makes every 31-bit value valid, so that a wrong one is reported, not
 * undefined, in C++.) */
typedef enum {
  ENERGY_F32 = 0,
  ENERGY_F64 = 1,
  ENERGY_DTYPE_MAX_ENUM = 0x7FFFFFFF
} energy_dtype;

/* The message of the latest failure on this thread ("" if none); valid
 * until the next call on this thread. */
const char *energy_last_error(void);

/* Loads the artifact (a shared library) at `path`; NULL on error. */
energy_model *energy_model_load(const char *path);
/* Frees a model; sessions of it stay usable. NULL is allowed. */
void energy_model_free(energy_model *model);
/* The model's element type (`model` must not be NULL). */
energy_dtype energy_model_dtype(const energy_model *model);
/* Where the model's kernels run: "cpu", or "cuda" for an artifact of energyc
 * --target cuda, whose sessions need a CUDA GPU (energy_session_create
 * fails with a message without one). Valid while the model lives. */
const char *energy_model_device(const energy_model *model);
/* Sets the number of threads of the model's kernels; returns non-zero
 * (with a message) if the artifact was built without threads. */
int energy_model_set_threads(energy_model *model, int threads);

/* A session of `model` with the `ndims` dims `dim_names[i] = dim_values[i]`
 * (the arrays may be NULL when ndims is 0) and, when `has_seed`, the seed of
 * random initial values; NULL on error. */
energy_session *energy_session_create(energy_model *model,
                                      const char *const *dim_names,
                                      const int64_t *dim_values, size_t ndims,
                                      uint64_t seed, int has_seed);
/* Frees a session. NULL is allowed. */
void energy_session_free(energy_session *session);

/* Binds tensor `name` to the `rank`-dimensional array of `shape` at `data`
 * (row-major elements of `dtype`, copied; converted if the model's type
 * differs). */
int energy_session_set(energy_session *session, const char *name,
                       energy_dtype dtype, const int64_t *shape, size_t rank,
                       const void *data);

/* Copies the value of tensor or output `name` into `data`, as `dtype`
 * elements; `capacity_elements` is the room at `data`. When `rank_inout` is
 * not NULL, it gives the room at `shape_out` (which may then be NULL only if
 * it is 0) and receives the rank, and `shape_out` receives the shape. With
 * `data` NULL and capacity 0, only the shape and rank are returned (to size
 * the array). Too little room for the elements or the shape is an error
 * that still returns the rank (and the shape if it fits). */
int energy_session_get(energy_session *session, const char *name,
                       energy_dtype dtype, void *data, size_t capacity_elements,
                       int64_t *shape_out, size_t *rank_inout);
/* The same for the gradient of the energy with respect to tensor `name`. */
int energy_session_gradient(energy_session *session, const char *name,
                            energy_dtype dtype, void *data,
                            size_t capacity_elements, int64_t *shape_out,
                            size_t *rank_inout);

/* The global energy of the current values. */
int energy_session_energy(energy_session *session, double *out);
/* One step of the dynamics. */
int energy_session_step(energy_session *session);
/* Runs `steps` steps (the model's count when negative) or until the
 * stopping rule fires; `steps_taken` and `final_energy` may be NULL. */
int energy_session_run(energy_session *session, int64_t steps,
                       int64_t *steps_taken, double *final_energy);

#ifdef __cplusplus
}
#endif

#endif /* ENERGY_ENERGY_H */
