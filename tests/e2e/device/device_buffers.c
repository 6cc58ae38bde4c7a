/*===- device_buffers.c - A CUDA session's buffers, used in place
----------===*\
|*                                                                            *|
|* The C API's device buffers and streams on a GPU: the gradient a CUDA       *|
|* session leaves on the device (energy_session_device_gradient) has the same *|
|* bits as the one energy_session_gradient copies out; a tensor written in    *|
|* place by an asynchronous copy on the application's stream                  *|
|* (energy_session_device_buffer, energy_session_set_stream) gives the        *|
|* gradient a second session computes from the same values bound from the     *|
|* host, and so does a third session bound from GPU memory                    *|
|* (energy_session_set_device). Without a GPU it says why and exits 77.       *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

/* Usage: device_buffers ARTIFACT (examples/self_attention.energy, energyc
 * --target cuda, f32) */

#include "energy/energy.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { N = 5, D = 4, COUNT = N * D };

/* The driver entry points this application uses on its own. */
typedef int (*StreamCreate)(void **, unsigned);
typedef int (*StreamDestroy)(void *);
typedef int (*CopyAsync)(uint64_t, const void *, size_t, void *);
typedef int (*Copy)(uint64_t, uint64_t, size_t);

static int fail(const char *what) {
  fprintf(stderr, "device_buffers: %s: %s\n", what, energy_last_error());
  return 1;
}

static energy_session *session(energy_model *model) {
  const char *names[] = {"N", "D"};
  const int64_t values[] = {N, D};
  return energy_session_create(model, names, values, 2, 7, 1);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: device_buffers ARTIFACT\n");
    return 2;
  }
  energy_model *model = energy_model_load(argv[1]);
  if (!model)
    return fail("load");
  if (strcmp(energy_model_device(model), "cuda") != 0) {
    fprintf(stderr, "device_buffers: %s is not a CUDA artifact\n", argv[1]);
    return 1;
  }
  energy_session *first = session(model);
  if (!first) {
    printf("skipped: no CUDA session here: %s\n", energy_last_error());
    return 77;
  }
  void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  StreamCreate streamCreate =
      driver ? (StreamCreate)dlsym(driver, "cuStreamCreate") : NULL;
  StreamDestroy streamDestroy =
      driver ? (StreamDestroy)dlsym(driver, "cuStreamDestroy_v2") : NULL;
  CopyAsync copyAsync =
      driver ? (CopyAsync)dlsym(driver, "cuMemcpyHtoDAsync_v2") : NULL;
  Copy copy = driver ? (Copy)dlsym(driver, "cuMemcpy") : NULL;
  if (!streamCreate || !streamDestroy || !copyAsync || !copy) {
    fprintf(stderr, "device_buffers: the driver lacks stream functions\n");
    return 1;
  }

  /* The gradient left on the device against the one copied out. */
  float copied[COUNT], inPlace[COUNT];
  if (energy_session_gradient(first, "x", ENERGY_F32, copied, COUNT, NULL,
                              NULL))
    return fail("gradient");
  void *data = NULL;
  size_t bytes = 0;
  if (energy_session_device_gradient(first, "x", &data, &bytes))
    return fail("device gradient");
  if (bytes != sizeof inPlace) {
    fprintf(stderr, "device_buffers: the gradient has %zu bytes, not %zu\n",
            bytes, sizeof inPlace);
    return 1;
  }
  if (copy((uint64_t)(uintptr_t)inPlace, (uint64_t)(uintptr_t)data, bytes))
    return fail("cuMemcpy of the gradient");
  if (memcmp(copied, inPlace, bytes) != 0) {
    fprintf(stderr, "device_buffers: the device gradient differs from the "
                    "copied one\n");
    return 1;
  }
  printf("the gradient on the device has the bits of the copied one\n");

  /* x doubled in place by a copy queued on the application's stream. */
  float x[COUNT], doubled[COUNT], fromStream[COUNT], fromHost[COUNT];
  if (energy_session_get(first, "x", ENERGY_F32, x, COUNT, NULL, NULL))
    return fail("get x");
  for (int i = 0; i < COUNT; ++i)
    doubled[i] = 2 * x[i];
  void *stream = NULL;
  if (streamCreate(&stream, 0))
    return fail("cuStreamCreate");
  if (energy_session_device_buffer(first, "x", &data, &bytes) ||
      bytes != sizeof doubled)
    return fail("device buffer of x");
  if (energy_session_set_stream(first, stream))
    return fail("set stream");
  if (copyAsync((uint64_t)(uintptr_t)data, doubled, bytes, stream))
    return fail("cuMemcpyHtoDAsync");
  if (energy_session_gradient(first, "x", ENERGY_F32, fromStream, COUNT, NULL,
                              NULL))
    return fail("gradient after the stream's copy");

  energy_session *second = session(model);
  const int64_t shape[] = {N, D};
  if (!second ||
      energy_session_set(second, "x", ENERGY_F32, shape, 2, doubled) ||
      energy_session_gradient(second, "x", ENERGY_F32, fromHost, COUNT, NULL,
                              NULL))
    return fail("second session");
  if (memcmp(fromStream, fromHost, sizeof fromHost) != 0) {
    fprintf(stderr, "device_buffers: the gradient after the in-place write "
                    "differs from the host-bound one\n");
    return 1;
  }
  if (memcmp(fromStream, copied, sizeof copied) == 0) {
    fprintf(stderr, "device_buffers: doubling x did not change the gradient\n");
    return 1;
  }
  printf("x written in place on the application's stream: the gradient of a "
         "session bound from the host, bit for bit\n");

  /* x bound from GPU memory (the first session's buffer, which now holds
   * the doubled x), before the first evaluation and after one. */
  float fromDevice[COUNT], again[COUNT];
  energy_session *third = session(model);
  if (energy_session_device_buffer(first, "x", &data, &bytes))
    return fail("device buffer of x");
  if (!third ||
      energy_session_set_device(third, "x", ENERGY_F32, shape, 2, data) ||
      energy_session_gradient(third, "x", ENERGY_F32, fromDevice, COUNT, NULL,
                              NULL))
    return fail("third session, x bound from the device");
  if (energy_session_set(third, "x", ENERGY_F32, shape, 2, x) ||
      energy_session_gradient(third, "x", ENERGY_F32, again, COUNT, NULL,
                              NULL) ||
      memcmp(again, copied, sizeof copied) != 0)
    return fail("third session, x bound from the host again");
  if (energy_session_set_device(third, "x", ENERGY_F32, shape, 2, data) ||
      energy_session_gradient(third, "x", ENERGY_F32, again, COUNT, NULL,
                              NULL))
    return fail("third session, x bound from the device again");
  if (memcmp(fromDevice, fromHost, sizeof fromHost) != 0 ||
      memcmp(again, fromHost, sizeof fromHost) != 0) {
    fprintf(stderr, "device_buffers: x bound from GPU memory gives another "
                    "gradient than x bound from the host\n");
    return 1;
  }
  printf("x bound from GPU memory (before and after the first evaluation): "
         "the gradient of a session bound from the host, bit for bit\n");
  energy_session_free(third);
  streamDestroy(stream);
  energy_session_free(second);
  energy_session_free(first);
  energy_model_free(model);
  return 0;
}
