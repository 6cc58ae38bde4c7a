/*===- fake_artifact.c - A hand-written artifact for the runtime's tests --===*\
|*                                                                            *|
|* Implements the artifact ABI (ArtifactABI.h) for a quadratic bowl,          *|
|* E = 0.5 * sum_i (x_i - c_i)^2, so tests can compare with closed forms.     *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

/* The model: dims N (free), K (default 3), M = N * 2; consts lr (0.5) and
 * tol (1e-6); state x [N] (no initialiser), input c [N], params w [K]
 * (normal(0.5, 2)), u [K] (uniform(-1, 3)), e [K, K] (eye), optimizer state
 * x.previous [N] (a copy of x; the step stores x there before updating it),
 * the gradient grad.x = x - c, the output stacked [M] = (x, c). The step is
 * gradient descent, x -= lr * (x - c), which contracts x - c by exactly
 * (1 - lr); the run stops when the energy falls below tol.
 *
 * Variants, by macro: FAKE_F32 (f32 buffers), FAKE_THREADS (exports the
 * threads symbol), FAKE_FORMAT_VERSION=n, FAKE_MISSING_KERNEL (does not
 * define the output kernel the manifest names), FAKE_NOT_ARTIFACT (no
 * manifest symbol), FAKE_FAULTY (step 2 writes a NaN, the output kernel
 * fails to converge and the gradient kernel runs out of memory, saying so
 * through the log handler the runtime sets). */

#include "energy/Runtime/ArtifactABI.h"

#include <math.h>

#ifdef FAKE_F32
typedef float real;
#define FAKE_DTYPE "f32"
#else
typedef double real;
#define FAKE_DTYPE "f64"
#endif

#ifndef FAKE_FORMAT_VERSION
#define FAKE_FORMAT_VERSION 6
#endif

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

/* Buffer, dim and const positions, in manifest order. */
enum { X, C, W, U, E, X_PREVIOUS, GRAD_X, STACKED };
enum { DIM_N, DIM_K, DIM_M };
enum { CONST_LR, CONST_TOL };

#ifndef FAKE_NOT_ARTIFACT
/* clang-format off */
static const char manifest[] =
  "{\"format\": \"energy-artifact\","
  " \"format_version\": " STRINGIFY(FAKE_FORMAT_VERSION) ","
  " \"model\": \"quadratic\", \"dtype\": \"" FAKE_DTYPE "\", \"target\": \"test\","
  " \"source_name\": \"quadratic.energy\", \"source\": \"model quadratic { }\","
  " \"dims\": ["
  "   {\"name\": \"N\", \"default\": null, \"derived\": null},"
  "   {\"name\": \"K\", \"default\": 3, \"derived\": null},"
  "   {\"name\": \"M\", \"default\": null, \"derived\": [\"N\", 2, \"*\"]}],"
  " \"consts\": [{\"name\": \"lr\", \"value\": 0.5},"
  "              {\"name\": \"tol\", \"value\": 1e-6}],"
  " \"buffers\": ["
  "   {\"name\": \"x\", \"kind\": \"tensor\", \"role\": \"state\","
  "    \"shape\": [[\"N\"]], \"init\": null, \"optimizer_state\": null},"
  "   {\"name\": \"c\", \"kind\": \"tensor\", \"role\": \"input\","
  "    \"shape\": [[\"N\"]], \"init\": null, \"optimizer_state\": null},"
  "   {\"name\": \"w\", \"kind\": \"tensor\", \"role\": \"param\","
  "    \"shape\": [[\"K\"]], \"init\": {\"kind\": \"normal\", \"args\": [0.5, 2.0]},"
  "    \"optimizer_state\": null},"
  "   {\"name\": \"u\", \"kind\": \"tensor\", \"role\": \"param\","
  "    \"shape\": [[\"K\"]], \"init\": {\"kind\": \"uniform\", \"args\": [-1, 3]},"
  "    \"optimizer_state\": null},"
  "   {\"name\": \"e\", \"kind\": \"tensor\", \"role\": \"param\","
  "    \"shape\": [[\"K\"], [\"K\"]], \"init\": {\"kind\": \"eye\", \"args\": []},"
  "    \"optimizer_state\": null},"
  "   {\"name\": \"x.previous\", \"kind\": \"tensor\", \"role\": \"state\","
  "    \"shape\": [[\"N\"]], \"init\": {\"kind\": \"copy\", \"source\": \"x\"},"
  "    \"optimizer_state\": \"x\"},"
  "   {\"name\": \"grad.x\", \"kind\": \"gradient\", \"tensor\": \"x\","
  "    \"shape\": [[\"N\"]]},"
  "   {\"name\": \"stacked\", \"kind\": \"output\", \"shape\": [[\"M\"]]}],"
  " \"kernels\": {\"energy\": \"fake_energy\","
  "   \"gradients\": {\"x\": \"fake_grad_x\"},"
  "   \"outputs\": {\"stacked\": \"fake_stacked\"},"
  "   \"step\": \"fake_step\", \"until\": \"fake_until\"},"
  " \"dynamics\": {\"steps\": [\"N\", 10, \"*\"]}}";
/* clang-format on */

const char *energy_artifact_manifest(void) { return manifest; }
#endif

static double energyOf(void **buffers, const int64_t *dims) {
  const real *x = (const real *)buffers[X], *c = (const real *)buffers[C];
  double sum = 0;
  for (int64_t i = 0; i < dims[DIM_N]; ++i)
    sum += 0.5 * ((double)x[i] - c[i]) * ((double)x[i] - c[i]);
  return sum;
}

int32_t fake_energy(void **buffers, const int64_t *dims, const double *consts,
                    int64_t step, double *result) {
  *result = energyOf(buffers, dims);
  return ENERGY_KERNEL_OK;
}

#ifdef FAKE_FAULTY
static energy_artifact_log_fn logHandler;
void energy_support_set_log_handler(energy_artifact_log_fn handler) {
  logHandler = handler;
}
#endif

int32_t fake_grad_x(void **buffers, const int64_t *dims, const double *consts,
                    int64_t step, double *result) {
#ifdef FAKE_FAULTY
  if (logHandler) {
    logHandler(ENERGY_ARTIFACT_LOG_TRACE, "fake_grad_x: called");
    logHandler(ENERGY_ARTIFACT_LOG_NOTE, "fake_grad_x: no scratch space");
  }
  return ENERGY_KERNEL_OUT_OF_MEMORY;
#endif
  const real *x = (const real *)buffers[X], *c = (const real *)buffers[C];
  real *grad = (real *)buffers[GRAD_X];
  for (int64_t i = 0; i < dims[DIM_N]; ++i)
    grad[i] = x[i] - c[i];
  return ENERGY_KERNEL_OK;
}

#ifndef FAKE_MISSING_KERNEL
int32_t fake_stacked(void **buffers, const int64_t *dims, const double *consts,
                     int64_t step, double *result) {
#ifdef FAKE_FAULTY
  return ENERGY_KERNEL_NO_CONVERGENCE;
#endif
  const real *x = (const real *)buffers[X], *c = (const real *)buffers[C];
  real *out = (real *)buffers[STACKED];
  for (int64_t i = 0; i < dims[DIM_N]; ++i) {
    out[i] = x[i];
    out[dims[DIM_N] + i] = c[i];
  }
  return ENERGY_KERNEL_OK;
}
#endif

int32_t fake_step(void **buffers, const int64_t *dims, const double *consts,
                  int64_t step, double *result) {
  real *x = (real *)buffers[X], *previous = (real *)buffers[X_PREVIOUS];
  const real *c = (const real *)buffers[C];
  real lr = (real)consts[CONST_LR];
  for (int64_t i = 0; i < dims[DIM_N]; ++i) {
    previous[i] = x[i];
    x[i] = x[i] - lr * (x[i] - c[i]);
  }
#ifdef FAKE_FAULTY
  if (step == 2)
    x[0] = (real)NAN;
#endif
  return ENERGY_KERNEL_OK;
}

int32_t fake_until(void **buffers, const int64_t *dims, const double *consts,
                   int64_t step, double *result) {
  *result = energyOf(buffers, dims) < consts[CONST_TOL] ? 1.0 : 0.0;
  return ENERGY_KERNEL_OK;
}

#ifdef FAKE_THREADS
static int32_t threads = 1;
void energy_artifact_set_num_threads(int32_t count) { threads = count; }
/* Lets the tests see what the runtime set. */
int32_t fake_artifact_threads(void) { return threads; }
#endif
