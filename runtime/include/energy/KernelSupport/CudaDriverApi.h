//===- CudaDriverApi.h - The CUDA driver API through dlopen -----*- C++ -*-===//
//
// The driver entry points the runtime and CUDA artifacts use, bound from
// libcuda.so.1 (or ENERGY_CUDA_DRIVER) the first time a device is needed, so
// that every binary starts on a machine without a driver. Header-only: the
// runtime and the kernel support library each hold one instance.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_KERNELSUPPORT_CUDADRIVERAPI_H
#define ENERGY_KERNELSUPPORT_CUDADRIVERAPI_H

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <dlfcn.h>
#include <mutex>
#include <string>
#include <type_traits>

namespace energy::cuda {

// The driver API's C types, without its headers at build time.
using CUresult = int;
using CUdevice = int;
using CUcontext = void *;
using CUmodule = void *;
using CUfunction = void *;
using CUdeviceptr = uint64_t;
constexpr CUresult kSuccess = 0;
// cuDeviceGetAttribute attributes.
constexpr int kComputeCapabilityMajor = 75;
constexpr int kComputeCapabilityMinor = 76;
constexpr int kConcurrentManagedAccess = 89;
// cuFuncSetAttribute: the dynamic shared memory a kernel may be launched with.
constexpr int kFuncMaxDynamicSharedBytes = 8;
// cuMemAllocManaged: memory any stream and the host may reach.
constexpr unsigned kMemAttachGlobal = 1;
// CUmemLocation (cuMemPrefetchAsync_v2): a device ordinal, or the host.
struct CUmemLocation {
  int type;
  int id;
};
constexpr int kMemLocationDevice = 1, kMemLocationHost = 2;

struct DriverApi {
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*deviceGetCount)(int *) = nullptr;
  CUresult (*deviceGet)(CUdevice *, int) = nullptr;
  CUresult (*deviceGetName)(char *, int, CUdevice) = nullptr;
  CUresult (*deviceGetAttribute)(int *, int, CUdevice) = nullptr;
  CUresult (*deviceTotalMem)(size_t *, CUdevice) = nullptr;
  CUresult (*getErrorName)(CUresult, const char **) = nullptr;
  CUresult (*getErrorString)(CUresult, const char **) = nullptr;
  CUresult (*primaryCtxRetain)(CUcontext *, CUdevice) = nullptr;
  CUresult (*ctxSetCurrent)(CUcontext) = nullptr;
  CUresult (*ctxSynchronize)() = nullptr;
  CUresult (*memAlloc)(CUdeviceptr *, size_t) = nullptr;
  CUresult (*memAllocManaged)(CUdeviceptr *, size_t, unsigned) = nullptr;
  CUresult (*memFree)(CUdeviceptr) = nullptr;
  // cuMemcpy: between any two addresses of the unified address space.
  CUresult (*memcpy)(CUdeviceptr, CUdeviceptr, size_t) = nullptr;
  // cuMemcpyAsync: the same, queued on a stream (a CUstream).
  CUresult (*memcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, void *) = nullptr;
  CUresult (*moduleLoadData)(CUmodule *, const void *) = nullptr;
  CUresult (*moduleGetFunction)(CUfunction *, CUmodule, const char *) = nullptr;
  CUresult (*launchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                           unsigned, unsigned, unsigned, void *, void **,
                           void **) = nullptr;
  /// Optional (null where the driver lacks it): a hint, never needed.
  CUresult (*memPrefetchAsync)(CUdeviceptr, size_t, CUmemLocation, unsigned,
                               void *) = nullptr;
  /// Optional: sets a kernel's attribute (a CUfunction_attribute).
  CUresult (*funcSetAttribute)(CUfunction, int, int) = nullptr;
  /// Waits for the work queued on a stream (a CUstream; null: the legacy
  /// default stream).
  CUresult (*streamSynchronize)(void *) = nullptr;
  /// Why the driver cannot be used; empty when it can.
  std::string error;

  /// "CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)".
  std::string describe(CUresult result) const {
    const char *name = nullptr, *text = nullptr;
    if (getErrorName)
      getErrorName(result, &name);
    if (getErrorString)
      getErrorString(result, &text);
    // The toolkit's stub libcuda answers every call with this code.
    constexpr CUresult kStubLibrary = 34;
    if (!name && result == kStubLibrary)
      return "CUDA_ERROR_STUB_LIBRARY (the CUDA toolkit's stub library, "
             "not a driver)";
    std::string message = name ? name : "error " + std::to_string(result);
    if (text)
      message += std::string(" (") + text + ")";
    return message;
  }
};

/// The driver, opened and initialised once per instance of this header's
/// user; `error` says why it cannot be used.
inline const DriverApi &driverApi() {
  static DriverApi loaded;
  static std::once_flag once;
  std::call_once(once, [] {
    const char *path = std::getenv("ENERGY_CUDA_DRIVER");
    void *handle = dlopen(path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char *reason = dlerror();
      loaded.error = std::string("no CUDA driver: ") +
                     (reason ? reason : "libcuda.so.1 cannot be loaded");
      return;
    }
    auto bind = [&](auto &function, const char *name) {
      function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(
          dlsym(handle, name));
      if (!function && loaded.error.empty())
        loaded.error = std::string("the CUDA driver lacks ") + name;
    };
    bind(loaded.init, "cuInit");
    bind(loaded.deviceGetCount, "cuDeviceGetCount");
    bind(loaded.deviceGet, "cuDeviceGet");
    bind(loaded.deviceGetName, "cuDeviceGetName");
    bind(loaded.deviceGetAttribute, "cuDeviceGetAttribute");
    bind(loaded.deviceTotalMem, "cuDeviceTotalMem_v2");
    bind(loaded.getErrorName, "cuGetErrorName");
    bind(loaded.getErrorString, "cuGetErrorString");
    bind(loaded.primaryCtxRetain, "cuDevicePrimaryCtxRetain");
    bind(loaded.ctxSetCurrent, "cuCtxSetCurrent");
    bind(loaded.ctxSynchronize, "cuCtxSynchronize");
    bind(loaded.memAlloc, "cuMemAlloc_v2");
    bind(loaded.memAllocManaged, "cuMemAllocManaged");
    bind(loaded.memFree, "cuMemFree_v2");
    bind(loaded.memcpy, "cuMemcpy");
    bind(loaded.memcpyAsync, "cuMemcpyAsync");
    bind(loaded.moduleLoadData, "cuModuleLoadData");
    bind(loaded.moduleGetFunction, "cuModuleGetFunction");
    bind(loaded.launchKernel, "cuLaunchKernel");
    bind(loaded.streamSynchronize, "cuStreamSynchronize");
    loaded.memPrefetchAsync =
        reinterpret_cast<decltype(loaded.memPrefetchAsync)>(
            dlsym(handle, "cuMemPrefetchAsync_v2"));
    loaded.funcSetAttribute =
        reinterpret_cast<decltype(loaded.funcSetAttribute)>(
            dlsym(handle, "cuFuncSetAttribute"));
    if (!loaded.error.empty())
      return;
    if (CUresult result = loaded.init(0); result != kSuccess)
      loaded.error =
          "the CUDA driver does not initialise: " + loaded.describe(result);
  });
  return loaded;
}

/// Device 0's primary context, made current on the calling thread (retained
/// once, on first use); an empty string, or why not.
inline std::string makeContextCurrent() {
  const DriverApi &api = driverApi();
  if (!api.error.empty())
    return api.error;
  static CUcontext context = nullptr;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [&] {
    int count = 0;
    if (CUresult result = api.deviceGetCount(&count); result != kSuccess) {
      failure = "CUDA: cannot count devices: " + api.describe(result);
      return;
    }
    if (count == 0) {
      failure = "CUDA: the driver sees no device";
      return;
    }
    CUdevice device = 0;
    if (CUresult result = api.deviceGet(&device, 0); result != kSuccess) {
      failure = "CUDA device 0: " + api.describe(result);
      return;
    }
    if (CUresult result = api.primaryCtxRetain(&context, device);
        result != kSuccess)
      failure = "CUDA device 0: no context: " + api.describe(result);
  });
  if (!failure.empty())
    return failure;
  if (CUresult result = api.ctxSetCurrent(context); result != kSuccess)
    return "CUDA: cannot make the context current: " + api.describe(result);
  return std::string();
}

} // namespace energy::cuda

#endif // ENERGY_KERNELSUPPORT_CUDADRIVERAPI_H
