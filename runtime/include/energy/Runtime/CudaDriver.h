//===- CudaDriver.h - The CUDA driver, loaded when first needed -*- C++ -*-===//
//
// libcuda is opened with dlopen the first time a CUDA device is asked for,
// so that every binary starts on a machine without a driver; a machine
// without a driver or without a GPU gets an error saying which.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_RUNTIME_CUDADRIVER_H
#define ENERGY_RUNTIME_CUDADRIVER_H

#include "energy/Runtime/Status.h"
#include "energy/Runtime/Tensor.h"

#include <cstdint>
#include <string>

namespace energy {

/// A CUDA device as the driver describes it.
struct CudaDevice {
  int ordinal = 0;
  std::string name;
  /// Compute capability, 90 for sm_90.
  int computeCapability = 0;
  uint64_t memoryBytes = 0;
};

/// Opens the driver (libcuda.so.1, or the library ENERGY_CUDA_DRIVER names;
/// once, later calls reuse it), initialises it and
/// describes device `ordinal`. Errors: no driver library ("no CUDA driver:
/// libcuda.so.1: cannot open ..."), a driver that fails to initialise (its
/// error name and text), no such device (with the number there is).
Expected<CudaDevice> openCudaDevice(int ordinal = 0);

/// Memory that the host and device 0 both reach (cuMemAllocManaged): where
/// a session of a CUDA artifact keeps its buffers. Errors as openCudaDevice.
Expected<TensorMemory> cudaManagedMemory();

/// Moves managed memory (from cudaManagedMemory) to device 0 ahead of the
/// kernels, or to the host ahead of host reads (then waits for `stream`,
/// with none for the whole device), in bulk rather than page by page on
/// first touch, queued on `stream` (a CUstream; null: the legacy default
/// stream). A hint: where the driver cannot, the pages move when touched.
void prefetchManaged(const void *pointer, size_t bytes, bool toDevice,
                     void *stream = nullptr);

/// Copies `bytes` from host memory at `source` into managed memory at
/// `destination`, on the device (the pages move there first, and the copy
/// is the driver's, not page faults on the host).
void copyToDevice(void *destination, const void *source, size_t bytes);

/// Copies `bytes` from GPU memory at `source` (an application's, such as a
/// PyTorch tensor's on device 0) into managed memory at `destination`, with
/// the driver's copy on `stream` (a CUstream; null: the legacy default
/// stream) after the work queued there, and waits for that stream (with
/// none, for the device): the host never touches `source`. The driver's
/// error when it cannot.
Status copyFromDevice(void *destination, const void *source, size_t bytes,
                      void *stream = nullptr);

/// Copies `bytes` between two buffers of managed memory (from
/// cudaManagedMemory) with the driver's copy, queued on `stream` (a
/// CUstream; null: the legacy default stream) in order with the kernels
/// there, without waiting for it; the driver's error when it cannot.
Status copyWithinDevice(void *destination, const void *source, size_t bytes,
                        void *stream = nullptr);

/// Whether ENERGY_CUDA_TRACE is set: then sessions on the GPU report how
/// long moving their buffers and each kernel function took (Log.h), beside
/// the support library's launch times.
bool cudaTracing();
/// Whether ENERGY_CUDA_WAITS is set: then sessions on the GPU report the
/// start and end of each kernel they call, and the support library each
/// wait of the host for the GPU, without making launches wait.
bool cudaReportingWaits();
/// Waits until the GPU has done what was queued (tracing's times).
void synchronizeDevice();
/// Waits for the work queued on a CUDA stream (a CUstream; null: all the
/// device's work); the driver's error otherwise.
Status waitForStream(void *stream);

} // namespace energy

#endif // ENERGY_RUNTIME_CUDADRIVER_H
