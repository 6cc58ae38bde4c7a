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

/* Messages: notes on choices the runtime made (a kernel that fell back to
 * another engine, once per reason) and, with ENERGY_CUDA_TRACE set in the
 * environment, timings. The library prints nothing; they go to the handler
 * set here, for the whole process (NULL, the default, drops them). It may be
 * called from any thread; `message` is valid during the call. */
typedef enum {
  ENERGY_LOG_NOTE = 0,
  ENERGY_LOG_TRACE = 1,
  ENERGY_LOG_LEVEL_MAX_ENUM = 0x7FFFFFFF
} energy_log_level;
typedef void (*energy_log_fn)(energy_log_level level, const char *message,
                              void *user_data);
void energy_set_log_handler(energy_log_fn handler, void *user_data);

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

/* Sessions of CUDA artifacts (energy_model_device "cuda"): the session's
 * own buffer of tensor or output `name` (an output computed first), or with
 * energy_session_device_gradient the gradient of the energy with respect to
 * tensor `name` computed into the session's buffer, as `*data`, `*bytes`
 * long (row-major elements of the model's type, the shape
 * energy_session_get gives), in memory that the GPU and the host both
 * address (CUDA managed memory), on the GPU: an application's kernels read
 * or write it in place, without copies. Valid until the session is freed
 * or `name` is bound to an array of another shape; a gradient until the
 * next call that evaluates anything. An error for a session on the CPU. */
int energy_session_device_buffer(energy_session *session, const char *name,
                                 void **data, size_t *bytes);
int energy_session_device_gradient(energy_session *session, const char *name,
                                   void **data, size_t *bytes);
/* Sessions of CUDA artifacts: binds tensor `name` to the array of `shape`
 * at `data` in GPU memory of device 0 (device or managed memory, row-major
 * elements of `dtype`, which must be the model's type), copied into the
 * session's buffer by the driver on the device, on the session's stream
 * (energy_session_set_stream) after the work queued there, never read by
 * the host.
 * Once the session has evaluated anything the copy is done when this
 * returns; before that it is made at the first evaluation, so the memory
 * must stay valid until then. An error for a session on the CPU. */
int energy_session_set_device(energy_session *session, const char *name,
                              energy_dtype dtype, const int64_t *shape,
                              size_t rank, const void *data);
/* Sessions of CUDA artifacts: each evaluation's kernels, products and
 * copies go on `stream` (a CUstream or cudaStream_t; NULL: the legacy
 * default stream), after the work an application queued there, so that a
 * buffer it writes there is seen; the host waits for that work only where
 * it reads what the work may write, and each call returns when its own
 * work is done. An error for a session on the CPU. */
int energy_session_set_stream(energy_session *session, void *stream);

/* The global energy of the current values. */
int energy_session_energy(energy_session *session, double *out);
/* One step of the dynamics. */
int energy_session_step(energy_session *session);
/* Runs `steps` steps (the model's count when negative) or until the
 * stopping rule fires; `steps_taken` and `final_energy` may be NULL. */
int energy_session_run(energy_session *session, int64_t steps,
                       int64_t *steps_taken, double *final_energy);

/* For a model with a loss: runs `steps` steps (the model's count when
 * negative) from the current state, evaluates the losses, and runs the
 * backward pass (checkpoints every sqrt(steps) steps, or every step when
 * `store_all_steps`); `loss` (the sum of the losses) and `steps_taken` may
 * be NULL. The state is then back where the run started. */
int energy_session_backward(energy_session *session, int64_t steps,
                            int store_all_steps, double *loss,
                            int64_t *steps_taken);
/* After energy_session_backward: the derivative of the loss with respect to
 * tensor `name` (a param, or a state's value before the run), copied out as
 * energy_session_get does. */
int energy_session_adjoint(energy_session *session, const char *name,
                           energy_dtype dtype, void *data,
                           size_t capacity_elements, int64_t *shape_out,
                           size_t *rank_inout);
/* Sets every state tensor back to its value before any step. */
int energy_session_reset_states(energy_session *session);

/* Training (energy::Trainer): minibatches of the examples in a safetensors
 * file, the losses differentiated through each run, the params updated. */
typedef struct energy_trainer energy_trainer;
/* A group of processes for data-parallel training, given by the
 * application (with MPI: all_gather is MPI_Allgather of MPI_DOUBLEs on its
 * communicator). all_gather puts every rank's `count` doubles, in rank
 * order, into `gathered` (size * count of them) and returns 0, or non-zero
 * on failure. */
typedef struct energy_communicator {
  int rank, size;
  int (*all_gather)(void *context, const double *values, size_t count,
                    double *gathered);
  void *context;
} energy_communicator;
typedef struct energy_train_options {
  int64_t batch_size; /* 0: every example at once */
  int64_t epochs;
  /* "sgd", "momentum", "adam", "adamw", or a plugin's; NULL: adam */
  const char *optimizer;
  double learning_rate;
  double weight_decay;
  const char *schedule; /* "constant", "cosine", "step"; NULL: constant */
  uint64_t seed;
  int shuffle;
  /* Data-parallel training (NULL: this process alone): every rank creates
   * the trainer with the same data and options and takes a shard of every
   * batch; the shards' gradients are summed in rank order, so every rank
   * takes the same update (docs/training.md). Not owned; it must outlive
   * the trainer. */
  const energy_communicator *communicator;
} energy_train_options;
/* Fills `options` with the defaults (batch 0, 1 epoch, adam, 1e-3, no
 * weight decay, constant, seed 0, shuffled, no communicator). */
void energy_train_options_init(energy_train_options *options);
/* A trainer of `model` on the examples of `data_path` (and, if not NULL,
 * the validation examples of `validation_path`). NULL on error. */
energy_trainer *energy_trainer_create(energy_model *model,
                                      const char *data_path,
                                      const char *validation_path,
                                      const energy_train_options *options);
void energy_trainer_free(energy_trainer *trainer);
/* Runs the next epoch; `train_loss` (the mean of its updates' losses) and
 * `validation_loss` (NaN without validation data) may be NULL. Returns 1
 * with nothing done once every epoch has run. */
int energy_trainer_run_epoch(energy_trainer *trainer, double *train_loss,
                             double *validation_loss);
/* Copies a trained param out, as energy_session_get does. */
int energy_trainer_get_param(energy_trainer *trainer, const char *name,
                             energy_dtype dtype, void *data,
                             size_t capacity_elements, int64_t *shape_out,
                             size_t *rank_inout);
int energy_trainer_save_checkpoint(energy_trainer *trainer, const char *path);
int energy_trainer_load_checkpoint(energy_trainer *trainer, const char *path);
/* Loads the run-time library of a plugin (a bare file name is looked for in
 * the directories of ENERGY_PLUGIN_PATH first) and registers the parameter
 * optimisers it exports, which energy_train_options.optimizer may then
 * name; loading it again does nothing. Non-zero, with a message naming the
 * file, when it cannot be loaded or its optimisers cannot be registered. */
int energy_plugin_load(const char *path);

#ifdef __cplusplus
}
#endif

#endif /* ENERGY_ENERGY_H */
