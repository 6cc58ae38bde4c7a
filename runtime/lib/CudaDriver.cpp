//===- CudaDriver.cpp - The CUDA driver, loaded when first needed ---------===//
//
// Device descriptions and the memory of CUDA sessions, over the driver API
// that CudaDriverApi.h opens with dlopen.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/CudaDriver.h"
#include "energy/KernelSupport/CudaDriverApi.h"
#include "energy/Runtime/ArtifactABI.h"

#include <cstdlib>
#include <cstring>
#include <string>

using namespace energy;
using namespace energy::cuda;

Expected<CudaDevice> energy::openCudaDevice(int ordinal) {
  const DriverApi &cuda = driverApi();
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

namespace {
void *allocateManaged(size_t bytes) {
  if (!makeContextCurrent().empty())
    return nullptr;
  CUdeviceptr pointer = 0;
  if (driverApi().memAllocManaged(&pointer, bytes ? bytes : 1,
                                  kMemAttachGlobal) != kSuccess)
    return nullptr;
  return reinterpret_cast<void *>(pointer);
}

void releaseManaged(void *pointer) {
  if (pointer && makeContextCurrent().empty())
    driverApi().memFree(reinterpret_cast<CUdeviceptr>(pointer));
}
} // namespace

void energy::prefetchManaged(const void *pointer, size_t bytes, bool toDevice,
                             void *stream) {
  const DriverApi &api = driverApi();
  if (!pointer || !bytes || !api.memPrefetchAsync ||
      !makeContextCurrent().empty())
    return;
  CUmemLocation location{toDevice ? kMemLocationDevice : kMemLocationHost, 0};
  if (api.memPrefetchAsync(reinterpret_cast<CUdeviceptr>(pointer), bytes,
                           location, 0, stream) == kSuccess &&
      !toDevice)
    (void)waitForStream(stream);
}

void energy::copyToDevice(void *destination, const void *source, size_t bytes) {
  const DriverApi &api = driverApi();
  prefetchManaged(destination, bytes, /*toDevice=*/true);
  if (!bytes || !api.memcpy || !makeContextCurrent().empty() ||
      api.memcpy(reinterpret_cast<CUdeviceptr>(destination),
                 reinterpret_cast<CUdeviceptr>(source), bytes) != kSuccess)
    std::memcpy(destination, source, bytes);
}

Status energy::copyWithinDevice(void *destination, const void *source,
                                size_t bytes, void *stream) {
  if (!bytes)
    return Status::success();
  if (std::string error = makeContextCurrent(); !error.empty())
    return Status::error(error);
  const DriverApi &api = driverApi();
  if (CUresult result =
          api.memcpyAsync(reinterpret_cast<CUdeviceptr>(destination),
                          reinterpret_cast<CUdeviceptr>(source), bytes, stream);
      result != kSuccess)
    return Status::error("CUDA: cannot copy " + std::to_string(bytes) +
                         " bytes on the device: " + api.describe(result));
  return Status::success();
}

Status energy::copyFromDevice(void *destination, const void *source,
                              size_t bytes, void *stream) {
  prefetchManaged(destination, bytes, /*toDevice=*/true, stream);
  if (Status status = copyWithinDevice(destination, source, bytes, stream);
      !status)
    return status;
  // A copy between device addresses returns before it is done; the
  // source's owner may reuse its memory once this returns.
  if (bytes)
    if (Status status = waitForStream(stream); !status)
      return status.withContext("copying on the device");
  return Status::success();
}

bool energy::cudaTracing() {
  static const bool tracing =
      energy_cuda_trace_requested(std::getenv("ENERGY_CUDA_TRACE"));
  return tracing;
}

bool energy::cudaReportingWaits() {
  static const bool reporting =
      energy_cuda_trace_requested(std::getenv("ENERGY_CUDA_WAITS"));
  return reporting;
}

void energy::synchronizeDevice() {
  if (makeContextCurrent().empty())
    driverApi().ctxSynchronize();
}

Status energy::waitForStream(void *stream) {
  if (std::string error = makeContextCurrent(); !error.empty())
    return Status::error(error);
  const DriverApi &api = driverApi();
  if (CUresult result =
          stream ? api.streamSynchronize(stream) : api.ctxSynchronize();
      result != kSuccess)
    return Status::error(std::string("CUDA: waiting for ") +
                         (stream ? "the application's stream" : "the device") +
                         ": " + api.describe(result));
  return Status::success();
}

Expected<TensorMemory> energy::cudaManagedMemory() {
  if (std::string error = makeContextCurrent(); !error.empty())
    return Status::error(error);
  return TensorMemory{allocateManaged, releaseManaged};
}
