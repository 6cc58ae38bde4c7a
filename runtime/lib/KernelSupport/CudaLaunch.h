//===- CudaLaunch.h - Loading and launching GPU kernels ---------*- C++ -*-===//
//
// What CudaLaunch.cpp shares with the support library's own GPU kernels
// (CudaContract.cpp): loading a kernel from PTX images, launching it one
// thread per position, and device scratch memory, with the failures
// energy_support_cuda_last_error reports. Private to the kernel support
// library.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_KERNELSUPPORT_CUDALAUNCH_H
#define ENERGY_KERNELSUPPORT_CUDALAUNCH_H

#include "energy/KernelSupport/CudaDriverApi.h"
#include "energy/KernelSupport/KernelSupport.h"

#include <cstdint>
#include <string>

namespace energy::cuda {

/// Threads per block of a launch.
constexpr unsigned kBlockThreads = 256;

/// Records `message` as the last failure; returns ENERGY_KERNEL_DEVICE_ERROR.
int32_t fail(std::string message);

/// The support library's own kernels' PTX (nvcc's, for compute_80 and up,
/// or `arch`) as loadKernel's images: one image, or none when `ptx` is null
/// (a build without nvcc).
std::string supportImages(const char *ptx, const char *arch = "sm_80");

/// The compute capability of the GPU kernels run on (90 for sm_90) in
/// `arch`; 0 or ENERGY_KERNEL_DEVICE_ERROR.
int32_t deviceArchitecture(int &arch);

/// The kernel `name` of `images` (energy_support_cuda_launch's format) in
/// `kernel`, loading the module once and caching the kernel in `*function`;
/// 0 or ENERGY_KERNEL_DEVICE_ERROR.
int32_t loadKernel(const char *images, const char *name, void **function,
                   void *&kernel);

/// The stream the calling thread's kernels, products and copies go on
/// (energy_support_cuda_set_stream; null: the legacy default stream).
void *currentStream();

/// Queues `kernel` on the current stream, on positions [0, count),
/// `positionsPerBlock` to a block of `threads`, `layers` such rows of
/// blocks (blockIdx.y; at most kMaxLayers), with cuLaunchKernel's
/// `parameters`, and returns, the kernel recorded as pending work
/// (notePending); or, where launches wait (launchesWait), waits for it. 0
/// or ENERGY_KERNEL_DEVICE_ERROR. Each block has `sharedBytes` of dynamic
/// shared memory.
constexpr unsigned kMaxLayers = 65535;
int32_t launchKernel(void *kernel, const char *name, void **parameters,
                     int64_t count, unsigned threads = kBlockThreads,
                     unsigned positionsPerBlock = kBlockThreads,
                     unsigned layers = 1, unsigned sharedBytes = 0);

/// Device memory (cuMemAlloc) that a caller holds while its kernels run,
/// taken from the blocks earlier holders gave back: a kernel that needs
/// scratch on every call reuses one block, which grows to its largest
/// request. The block goes back when the holder is destroyed, which may be
/// before its kernels are done: only kernels use such blocks, and those of
/// the next holder on the same stream run after them; a holder on another
/// stream first waits for the stream the block was given back on.
class DeviceScratch {
public:
  DeviceScratch() = default;
  DeviceScratch(const DeviceScratch &) = delete;
  DeviceScratch &operator=(const DeviceScratch &) = delete;
  ~DeviceScratch() { release(); }

  /// At least `bytes` at address() (giving back what was held); 0, or
  /// ENERGY_KERNEL_DEVICE_ERROR with the reason, naming `purpose`.
  int32_t reserve(size_t bytes, const char *purpose);
  CUdeviceptr address() const { return block; }

private:
  void release();

  CUdeviceptr block = 0;
  size_t size = 0;
  /// The stream the holder's kernels go on: the current one at reserve.
  void *stream = nullptr;
};

/// `hostContract(args)`, a contraction's host path, after waiting for the
/// work queued before it (whose results the host reads); the contraction's
/// `deviceError` code when that work failed.
template <typename Args>
int32_t onHostAfterFence(int32_t (*hostContract)(const Args *),
                         const Args *args, int32_t deviceError) {
  if (energy_support_cuda_fence() != ENERGY_KERNEL_OK)
    return deviceError;
  return hostContract(args);
}

/// Whether every launch waits for its work: with ENERGY_CUDA_TRACE (each
/// kernel's time) or ENERGY_CUDA_SYNC (a failure named where it happens).
bool launchesWait();
/// Records work `name` queued on the stream without waiting, which
/// energy_support_cuda_fence waits for.
void notePending(std::string name);
/// Waits for the work queued on the current stream (with none set, for all
/// the GPU's work); then nothing of this thread is pending and the blocks
/// it freed meanwhile are handed out again. With ENERGY_CUDA_WAITS set,
/// reports the wait (ArtifactABI.h).
CUresult waitForGpu();
/// Whether ENERGY_CUDA_TRACE is set: then every launch and cuBLAS product
/// reports its name, size and milliseconds (device work and the wait) to
/// the log handler (SupportLog.h).
bool tracing();
void trace(const char *what, int64_t count, double milliseconds);

} // namespace energy::cuda

#endif // ENERGY_KERNELSUPPORT_CUDALAUNCH_H
