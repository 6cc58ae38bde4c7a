/*===- fake_cuda_driver.c - A CUDA driver that only keeps a log ----------===*\
|*                                                                            *|
|* Loaded through ENERGY_CUDA_DRIVER (and ENERGY_CUBLAS) by CudaFenceTest and *|
|* the Python stream test: one device, managed memory from malloc, kernels   *|
|* and cuBLAS products that do not run; it writes what it was asked          *|
|* (launches, products, copies, prefetches and waits, each with its stream)  *|
|* to a log the tests read, fails the next wait when told to, and fails      *|
|* launching the kernels whose names contain ENERGY_FAKE_CUDA_FAIL_LAUNCH.   *|
|* Its GPU is sm_90, or what ENERGY_FAKE_CUDA_CAPABILITY says.              *|
\*===----------------------------------------------------------------------===*/

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char events[1 << 16];
static int failNextWait;

static void note(const char *event) {
  size_t used = strlen(events);
  if (used + strlen(event) + 2 < sizeof events) {
    strcat(events, event);
    strcat(events, " ");
  }
}

/* EVENT, then "@" and the stream's address where it is not the legacy
 * default stream (NULL). */
static void noteOn(const char *event, void *stream) {
  char text[300];
  if (stream)
    snprintf(text, sizeof text, "%s@%p", event, stream);
  else
    snprintf(text, sizeof text, "%s", event);
  note(text);
}

/* The log so far ("launch:NAME wait sync@0x10 ..."), then cleared: "wait"
 * is cuCtxSynchronize, "sync" cuStreamSynchronize, "copy" cuMemcpyAsync
 * ("copy!" cuMemcpy), "prefetch" cuMemPrefetchAsync_v2, "gemm" a cuBLAS
 * product. */
const char *fake_cuda_take_events(void) {
  static char copy[sizeof events];
  strcpy(copy, events);
  events[0] = 0;
  return copy;
}

/* The next cuCtxSynchronize reports a kernel that failed. */
void fake_cuda_fail_next_wait(void) { failNextWait = 1; }

int cuInit(unsigned flags) { return flags ? 1 : 0; }
int cuDeviceGetCount(int *count) {
  *count = 1;
  return 0;
}
int cuDeviceGet(int *device, int ordinal) {
  *device = ordinal;
  return 0;
}
int cuDeviceGetName(char *name, int length, int device) {
  (void)device;
  strncpy(name, "fake", (size_t)length);
  return 0;
}
/* Compute capability 9.0, or what ENERGY_FAKE_CUDA_CAPABILITY says ("80"). */
int cuDeviceGetAttribute(int *value, int attribute, int device) {
  (void)device;
  const char *capability = getenv("ENERGY_FAKE_CUDA_CAPABILITY");
  int number = capability && *capability ? atoi(capability) : 90;
  *value = attribute == 75 ? number / 10 : attribute == 76 ? number % 10 : 0;
  return 0;
}
int cuDeviceTotalMem_v2(size_t *bytes, int device) {
  (void)device;
  *bytes = (size_t)1 << 30;
  return 0;
}
int cuGetErrorName(int result, const char **name) {
  *name = result == 719 ? "CUDA_ERROR_LAUNCH_FAILED" : "CUDA_ERROR_UNKNOWN";
  return 0;
}
int cuGetErrorString(int result, const char **text) {
  (void)result;
  *text = "the fake driver's failure";
  return 0;
}
int cuDevicePrimaryCtxRetain(void **context, int device) {
  (void)device;
  *context = &events;
  return 0;
}
int cuCtxSetCurrent(void *context) {
  (void)context;
  return 0;
}
int cuCtxSynchronize(void) {
  note("wait");
  if (failNextWait) {
    failNextWait = 0;
    return 719;
  }
  return 0;
}
int cuStreamSynchronize(void *stream) {
  noteOn("sync", stream);
  if (failNextWait) {
    failNextWait = 0;
    return 719;
  }
  return 0;
}
int cuMemAlloc_v2(uint64_t *pointer, size_t bytes) {
  *pointer = (uint64_t)(uintptr_t)calloc(1, bytes);
  return *pointer ? 0 : 2;
}
int cuMemAllocManaged(uint64_t *pointer, size_t bytes, unsigned flags) {
  (void)flags;
  return cuMemAlloc_v2(pointer, bytes);
}
int cuMemFree_v2(uint64_t pointer) {
  free((void *)(uintptr_t)pointer);
  return 0;
}
int cuMemcpy(uint64_t destination, uint64_t source, size_t bytes) {
  note("copy!");
  memmove((void *)(uintptr_t)destination, (const void *)(uintptr_t)source,
          bytes);
  return 0;
}
int cuMemcpyAsync(uint64_t destination, uint64_t source, size_t bytes,
                  void *stream) {
  noteOn("copy", stream);
  memmove((void *)(uintptr_t)destination, (const void *)(uintptr_t)source,
          bytes);
  return 0;
}
typedef struct {
  int type;
  int id;
} FakeMemLocation;
int cuMemPrefetchAsync_v2(uint64_t pointer, size_t bytes,
                          FakeMemLocation location, unsigned flags,
                          void *stream) {
  (void)pointer, (void)bytes, (void)flags;
  noteOn(location.type == 2 ? "prefetch:host" : "prefetch:device", stream);
  return 0;
}
int cuModuleLoadData(void **module, const void *image) {
  *module = (void *)(uintptr_t)image;
  return 0;
}
int cuModuleGetFunction(void **function, void *module, const char *name) {
  (void)module;
  *function = strdup(name);
  return 0;
}
int cuLaunchKernel(void *function, unsigned gridX, unsigned gridY,
                   unsigned gridZ, unsigned blockX, unsigned blockY,
                   unsigned blockZ, unsigned sharedBytes, void *stream,
                   void **parameters, void **extra) {
  (void)gridX, (void)gridY, (void)gridZ, (void)blockX, (void)blockY;
  (void)blockZ, (void)parameters, (void)extra;
  char event[256] = "launch:";
  strncat(event, (const char *)function, sizeof event - 32);
  if (sharedBytes)
    snprintf(event + strlen(event), 24, "+%uB", sharedBytes);
  noteOn(event, stream);
  const char *failing = getenv("ENERGY_FAKE_CUDA_FAIL_LAUNCH");
  if (failing && *failing && strstr((const char *)function, failing))
    return 719;
  return 0;
}

/* Logs "set:NAME:ATTRIBUTE=VALUE". */
int cuFuncSetAttribute(void *function, int attribute, int value) {
  char event[256];
  snprintf(event, sizeof event, "set:%s:%d=%d", (const char *)function,
           attribute, value);
  note(event);
  return 0;
}

/* cuBLAS, through ENERGY_CUBLAS: a handle whose products only log "gemm" on
 * the stream set last. */
static void *cublasStream;
int cublasCreate_v2(void **handle) {
  *handle = &cublasStream;
  return 0;
}
int cublasSetStream_v2(void *handle, void *stream) {
  (void)handle;
  cublasStream = stream;
  return 0;
}
static int gemm(void) {
  noteOn("gemm", cublasStream);
  return 0;
}
int cublasSgemm_v2(void) { return gemm(); }
int cublasDgemm_v2(void) { return gemm(); }
int cublasGemmEx(void) { return gemm(); }
