//===- CudaDriver.cpp - The CUDA driver, loaded when first needed ---------===//
//
// dlopen of libcuda.so.1 (or ENERGY_CUDA_DRIVER) and the few entry points a
// device description needs, declared here with the driver API's C signatures (no CUDA headers
// at build time).
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/CudaDriver.h"

#include <cstdlib>
#include <dlfcn.h>
#include <mutex>

using namespace energy;

namespace {
using CUresult = int;
using CUdevice = int;
constexpr CUresult kSuccess = 0;
// cuDeviceGetAttribute attributes.
constexpr int kComputeCapabilityMajor = 75;
constexpr int kComputeCapabilityMinor = 76;

struct Driver {
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*deviceGetCount)(int *) = nullptr;
  CUresult (*deviceGet)(CUdevice *, int) = nullptr;
  CUresult (*deviceGetName)(char *, int, CUdevice) = nullptr;
  CUresult (*deviceGetAttribute)(int *, int, CUdevice) = nullptr;
  CUresult (*deviceTotalMem)(size_t *, CUdevice) = nullptr;
  CUresult (*getErrorName)(CUresult, const char **) = nullptr;
  CUresult (*getErrorString)(CUresult, const char **) = nullptr;
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

/// The driver, opened and initialised once; `error` says why not.
const Driver &driver() {
  static Driver loaded;
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
    if (!loaded.error.empty())
      return;
    if (CUresult result = loaded.init(0); result != kSuccess)
      loaded.error = "the CUDA driver does not initialise: " +
                     loaded.describe(result);
  });
  return loaded;
}
} // namespace

Expected<CudaDevice> energy::openCudaDevice(int ordinal) {
  const Driver &cuda = driver();
  if (!cuda.error.empty())
    return Status::error(cuda.error);
  int count = 0;
  if (CUresult result = cuda.deviceGetCount(&count); result != kSuccess)
    return Status::error("CUDA: cannot count devices: " +
                         cuda.describe(result));
  if (ordinal < 0 || ordinal >= count)
    return Status::error("CUDA device " + std::to_string(ordinal) +
                         " does not exist: the driver sees " +
                         std::to_string(count) + " device(s)");
  CUdevice device = 0;
  if (CUresult result = cuda.deviceGet(&device, ordinal); result != kSuccess)
    return Status::error("CUDA device " + std::to_string(ordinal) + ": " +
                         cuda.describe(result));
  CudaDevice out;
  out.ordinal = ordinal;
  char name[256] = {0};
  cuda.deviceGetName(name, sizeof(name) - 1, device);
  out.name = name;
  int major = 0, minor = 0;
  cuda.deviceGetAttribute(&major, kComputeCapabilityMajor, device);
  cuda.deviceGetAttribute(&minor, kComputeCapabilityMinor, device);
  out.computeCapability = major * 10 + minor;
  size_t bytes = 0;
  cuda.deviceTotalMem(&bytes, device);
  out.memoryBytes = bytes;
  return out;
}
