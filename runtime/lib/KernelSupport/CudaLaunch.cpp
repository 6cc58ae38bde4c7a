//===- CudaLaunch.cpp - What CUDA artifacts call on the host -------------===//
//
// Managed memory from a cache of freed blocks, device scratch for the
// support library's kernels, and kernel launches from the PTX images an
// artifact embeds, over the driver API (CudaDriverApi.h).
//
//===----------------------------------------------------------------------===//

#include "CudaLaunch.h"
#include "BlockCache.h"
#include "SupportLog.h"
#include "energy/KernelSupport/KernelSupport.h"
#include "energy/Runtime/ArtifactABI.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <optional>
#include <vector>

using namespace energy::cuda;
using energy::support::BlockCache;

namespace {

std::mutex &lock() {
  static std::mutex mutex;
  return mutex;
}

std::string &lastError() {
  static std::string text;
  return text;
}

} // namespace

int32_t energy::cuda::fail(std::string message) {
  std::lock_guard<std::mutex> guard(lock());
  lastError() = std::move(message);
  return ENERGY_KERNEL_DEVICE_ERROR;
}

namespace {
/// Managed blocks kernels freed, kept for reuse: the driver's allocations
/// are slow, so none goes back to it.
BlockCache &blocks() {
  static BlockCache *cache = new BlockCache(SIZE_MAX);
  return *cache;
}

/// A block a DeviceScratch holder gave back, and the stream its kernels
/// were queued on.
struct SpareDeviceBlock {
  CUdeviceptr block;
  void *stream;
};

/// Device blocks that DeviceScratch holders gave back, by size.
std::multimap<size_t, SpareDeviceBlock> &spareDeviceBlocks() {
  static auto *spare = new std::multimap<size_t, SpareDeviceBlock>();
  return *spare;
}

void *&streamOfThisThread() {
  thread_local void *stream = nullptr;
  return stream;
}

/// The work (kernels, cuBLAS products) this thread queued without waiting,
/// since it last waited for the GPU (energy_support_cuda_fence), and the
/// managed blocks it freed since: pending work may still use them, so they
/// are handed out again only after the wait.
struct PendingWork {
  std::vector<std::string> kernels;
  std::vector<void *> freed;
};

PendingWork &pendingWork() {
  thread_local PendingWork work;
  return work;
}

/// The architecture number of "sm_90" (90), or -1.
int archNumber(const char *arch) {
  if (std::strncmp(arch, "sm_", 3) != 0)
    return -1;
  return std::atoi(arch + 3);
}
} // namespace

extern "C" void *energy_support_cuda_alloc(int64_t bytes) {
  size_t size =
      bytes > 0 ? (static_cast<size_t>(bytes) + 255) & ~size_t(255) : 256;
  if (void *block = blocks().take(size))
    return block;
  if (std::string error = makeContextCurrent(); !error.empty()) {
    fail(error);
    energy::support::countScratchFailure();
    return nullptr;
  }
  CUdeviceptr pointer = 0;
  if (CUresult result =
          driverApi().memAllocManaged(&pointer, size, kMemAttachGlobal);
      result != kSuccess) {
    fail("cannot allocate " + std::to_string(size) +
         " bytes of managed memory: " + driverApi().describe(result));
    energy::support::countScratchFailure();
    return nullptr;
  }
  blocks().handOut(reinterpret_cast<void *>(pointer), size);
  return reinterpret_cast<void *>(pointer);
}

extern "C" void energy_support_cuda_free(void *pointer) {
  // Every block handed out is kept; one not from here is left alone.
  if (!pointer)
    return;
  PendingWork &pending = pendingWork();
  if (pending.kernels.empty())
    blocks().giveBack(pointer);
  else
    pending.freed.push_back(pointer);
}

bool energy::cuda::launchesWait() {
  static const bool wait = [] {
    const char *sync = std::getenv("ENERGY_CUDA_SYNC");
    return tracing() || (sync && *sync && std::strcmp(sync, "0") != 0);
  }();
  return wait;
}

void energy::cuda::notePending(std::string name) {
  pendingWork().kernels.push_back(std::move(name));
}

void *energy::cuda::currentStream() { return streamOfThisThread(); }

CUresult energy::cuda::waitForGpu() {
  const DriverApi &api = driverApi();
  void *stream = currentStream();
  static const bool reportWaits =
      energy_cuda_trace_requested(std::getenv("ENERGY_CUDA_WAITS"));
  if (reportWaits) {
    const std::vector<std::string> &queued = pendingWork().kernels;
    std::string text = "energy-cuda: the host waits for the GPU";
    if (!queued.empty())
      text += " (" + std::to_string(queued.size()) +
              " queued, the last: " + queued.back() + ")";
    energy::support::report(ENERGY_ARTIFACT_LOG_TRACE, text.c_str());
  }
  CUresult result =
      stream ? api.streamSynchronize(stream) : api.ctxSynchronize();
  PendingWork &pending = pendingWork();
  pending.kernels.clear();
  for (void *block : pending.freed)
    blocks().giveBack(block);
  pending.freed.clear();
  return result;
}

extern "C" void energy_support_cuda_set_stream(void *stream, int32_t queued) {
  PendingWork &pending = pendingWork();
  // What is pending on the stream used so far is waited for there.
  if (stream != currentStream() && !pending.kernels.empty())
    energy_support_cuda_fence();
  streamOfThisThread() = stream;
  if (queued)
    notePending("the work queued before the call");
}

extern "C" int32_t energy_support_cuda_fence(void) {
  PendingWork &pending = pendingWork();
  if (pending.kernels.empty())
    return ENERGY_KERNEL_OK;
  const DriverApi &api = driverApi();
  std::string launched;
  size_t shown = std::min<size_t>(pending.kernels.size(), 8);
  for (size_t i = pending.kernels.size() - shown; i < pending.kernels.size();
       ++i)
    launched += (launched.empty() ? "" : ", ") + pending.kernels[i];
  size_t count = pending.kernels.size();
  CUresult result = waitForGpu();
  if (result != kSuccess)
    return fail("a GPU kernel failed: " + api.describe(result) + " (one of " +
                std::to_string(count) +
                " launched without waiting; the last: " + launched +
                "; ENERGY_CUDA_SYNC=1 waits at every launch and names the "
                "kernel that fails)");
  return ENERGY_KERNEL_OK;
}

int32_t energy::cuda::DeviceScratch::reserve(size_t bytes,
                                             const char *purpose) {
  release();
  if (std::string error = makeContextCurrent(); !error.empty())
    return fail(error);
  stream = currentStream();
  const DriverApi &api = driverApi();
  CUdeviceptr tooSmall = 0;
  std::optional<SpareDeviceBlock> reused;
  {
    std::lock_guard<std::mutex> guard(lock());
    std::multimap<size_t, SpareDeviceBlock> &spare = spareDeviceBlocks();
    if (auto found = spare.lower_bound(bytes); found != spare.end()) {
      size = found->first;
      reused = found->second;
      spare.erase(found);
    } else if (!spare.empty()) {
      // None is large enough: the largest makes way for a larger one.
      tooSmall = std::prev(spare.end())->second.block;
      spare.erase(std::prev(spare.end()));
    }
  }
  if (reused) {
    block = reused->block;
    // Kernels queued on another stream may still use the block.
    if (reused->stream != stream)
      if (CUresult result = api.streamSynchronize(reused->stream);
          result != kSuccess)
        return fail(std::string("waiting for the stream that last used ") +
                    purpose + ": " + api.describe(result));
    return ENERGY_KERNEL_OK;
  }
  if (tooSmall)
    api.memFree(tooSmall);
  // Whole 2 MiB pages, the driver's granularity for large blocks.
  constexpr size_t kPage = size_t(2) << 20;
  size_t rounded = (std::max<size_t>(bytes, 1) + kPage - 1) / kPage * kPage;
  if (CUresult result = api.memAlloc(&block, rounded); result != kSuccess) {
    block = 0;
    return fail("cannot allocate " + std::to_string(rounded) +
                " bytes of device memory for " + purpose + ": " +
                api.describe(result));
  }
  size = rounded;
  return ENERGY_KERNEL_OK;
}

void energy::cuda::DeviceScratch::release() {
  if (!block)
    return;
  std::lock_guard<std::mutex> guard(lock());
  spareDeviceBlocks().emplace(size, SpareDeviceBlock{block, stream});
  block = 0;
  size = 0;
}

std::string energy::cuda::supportImages(const char *ptx, const char *arch) {
  return ptx ? std::string(arch) + '\0' + ptx + '\0' + '\0' : "";
}

int32_t energy::cuda::deviceArchitecture(int &arch) {
  if (std::string error = makeContextCurrent(); !error.empty())
    return fail(error);
  int major = 0, minor = 0;
  const DriverApi &api = driverApi();
  if (CUresult result =
          api.deviceGetAttribute(&major, kComputeCapabilityMajor, 0);
      result != kSuccess)
    return fail("cannot read the GPU's compute capability: " +
                api.describe(result));
  api.deviceGetAttribute(&minor, kComputeCapabilityMinor, 0);
  arch = major * 10 + minor;
  return ENERGY_KERNEL_OK;
}

int32_t energy::cuda::loadKernel(const char *images, const char *name,
                                 void **function, void *&kernel) {
  if (std::string error = makeContextCurrent(); !error.empty())
    return fail(error);
  const DriverApi &api = driverApi();
  std::lock_guard<std::mutex> guard(lock());
  kernel = *function;
  if (kernel)
    return ENERGY_KERNEL_OK;
  // The module of these images, loaded once.
  static std::map<const char *, CUmodule> modules;
  CUmodule &module = modules[images];
  if (!module) {
    int major = 0, minor = 0;
    api.deviceGetAttribute(&major, kComputeCapabilityMajor, 0);
    api.deviceGetAttribute(&minor, kComputeCapabilityMinor, 0);
    int device = major * 10 + minor;
    const char *best = nullptr;
    int bestArch = -1;
    std::string carried;
    for (const char *arch = images; *arch;) {
      const char *code = arch + std::strlen(arch) + 1;
      int number = archNumber(arch);
      carried += (carried.empty() ? "" : ", ") + std::string(arch);
      if (number >= 0 && number <= device && number > bestArch) {
        best = code;
        bestArch = number;
      }
      arch = code + std::strlen(code) + 1;
    }
    if (!best) {
      lastError() = "the GPU (sm_" + std::to_string(device) +
                    ") is older than every architecture the code is for (" +
                    carried + ")";
      return ENERGY_KERNEL_DEVICE_ERROR;
    }
    if (CUresult result = api.moduleLoadData(&module, best);
        result != kSuccess) {
      module = nullptr;
      lastError() = "cannot load the kernels' PTX (sm_" +
                    std::to_string(bestArch) + "): " + api.describe(result);
      return ENERGY_KERNEL_DEVICE_ERROR;
    }
  }
  if (CUresult result = api.moduleGetFunction(&kernel, module, name);
      result != kSuccess) {
    lastError() = std::string("no kernel ") + name +
                  " in the PTX: " + api.describe(result);
    return ENERGY_KERNEL_DEVICE_ERROR;
  }
  *function = kernel;
  return ENERGY_KERNEL_OK;
}

bool energy::cuda::tracing() {
  static const bool enabled =
      energy_cuda_trace_requested(std::getenv("ENERGY_CUDA_TRACE"));
  return enabled;
}

void energy::cuda::trace(const char *what, int64_t count, double milliseconds) {
  char text[512];
  std::snprintf(text, sizeof text, "energy-cuda: %s: %lld positions, %.3f ms",
                what, static_cast<long long>(count), milliseconds);
  energy::support::report(ENERGY_ARTIFACT_LOG_TRACE, text);
}

int32_t energy::cuda::launchKernel(void *kernel, const char *name,
                                   void **parameters, int64_t count,
                                   unsigned threads, unsigned positionsPerBlock,
                                   unsigned layers, unsigned sharedBytes) {
  if (count <= 0)
    return ENERGY_KERNEL_OK;
  auto start = std::chrono::steady_clock::now();
  const DriverApi &api = driverApi();
  uint64_t blocksNeeded =
      (static_cast<uint64_t>(count) + positionsPerBlock - 1) /
      positionsPerBlock;
  if (blocksNeeded > 0x7fffffffu)
    return fail(std::string("kernel ") + name + ": " + std::to_string(count) +
                " positions are more than one launch can cover");
  if (CUresult result = api.launchKernel(
          kernel, static_cast<unsigned>(blocksNeeded), layers, 1, threads, 1, 1,
          sharedBytes, currentStream(), parameters, nullptr);
      result != kSuccess)
    return fail(std::string("cannot launch kernel ") + name + ": " +
                api.describe(result));
  if (!launchesWait()) {
    notePending(name);
    return ENERGY_KERNEL_OK;
  }
  if (CUresult result = waitForGpu(); result != kSuccess)
    return fail(std::string("kernel ") + name +
                " failed: " + api.describe(result));
  if (tracing())
    trace(name, count,
          std::chrono::duration<double, std::milli>(
              std::chrono::steady_clock::now() - start)
              .count());
  return ENERGY_KERNEL_OK;
}

extern "C" int32_t energy_support_cuda_launch(const char *images,
                                              const char *name, void **function,
                                              const int64_t *slots,
                                              int32_t slot_count,
                                              int64_t count) {
  if (count <= 0)
    return ENERGY_KERNEL_OK;
  void *kernel = nullptr;
  if (int32_t code = loadKernel(images, name, function, kernel))
    return code;
  std::vector<void *> parameters;
  for (int32_t i = 0; i < slot_count; ++i)
    parameters.push_back(const_cast<int64_t *>(slots + i));
  parameters.push_back(&count);
  // Generated kernels follow each other on the stream; the code waits for
  // them (energy_support_cuda_fence) where the host next reads what they
  // write (energy-cuda-host-fences).
  return launchKernel(kernel, name, parameters.data(), count);
}

extern "C" const char *energy_support_cuda_last_error(void) {
  // A copy per thread, so that a failure on another thread cannot change
  // the text while the caller reads it.
  thread_local std::string copy;
  std::lock_guard<std::mutex> guard(lock());
  copy = lastError();
  return copy.c_str();
}
