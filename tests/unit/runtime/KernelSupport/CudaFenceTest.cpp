//===- CudaFenceTest.cpp - Launches that do not wait, and their fence -----===//
//
// energy_support_cuda_launch and energy_support_cuda_fence against a fake
// driver (fake_cuda_driver.c, through ENERGY_CUDA_DRIVER) that logs launches
// and waits: generated kernels follow each other without a wait and the
// fence waits once; a block freed while they may run is handed out again
// only after the wait; a failure is reported at the fence, naming the
// kernels. With ENERGY_CUDA_SYNC=1 (the test's second run) every launch waits.
//
//===----------------------------------------------------------------------===//

#include "energy/KernelSupport/KernelSupport.h"
#include "energy/Runtime/ArtifactABI.h"

#include <doctest/doctest.h>

#include <dlfcn.h>

#include <cstdlib>
#include <string>

namespace {

/// The fake driver's log since the last call, read through its own handle.
std::string takeEvents() {
  static void *handle = dlopen(std::getenv("ENERGY_CUDA_DRIVER"), RTLD_NOW);
  REQUIRE(handle != nullptr);
  auto take = reinterpret_cast<const char *(*)()>(
      dlsym(handle, "fake_cuda_take_events"));
  REQUIRE(static_cast<bool>(take));
  return take();
}

void failNextWait() {
  void *handle = dlopen(std::getenv("ENERGY_CUDA_DRIVER"), RTLD_NOW);
  auto fail =
      reinterpret_cast<void (*)()>(dlsym(handle, "fake_cuda_fail_next_wait"));
  REQUIRE(static_cast<bool>(fail));
  fail();
}

bool everyLaunchWaits() {
  const char *sync = std::getenv("ENERGY_CUDA_SYNC");
  return sync && std::string(sync) == "1";
}

/// One sm_90 image (the fake driver loads anything).
const char kImages[] = "sm_90\0fake ptx\0";

int32_t launch(const char *name) {
  static void *cache[8];
  static int used = 0;
  int64_t slot = 0;
  return energy_support_cuda_launch(kImages, name, &cache[used++ % 8], &slot, 1,
                                    100);
}

} // namespace

TEST_CASE("generated kernels follow each other; the fence waits once") {
  takeEvents();
  REQUIRE(launch("first") == ENERGY_KERNEL_OK);
  REQUIRE(launch("second") == ENERGY_KERNEL_OK);
  if (everyLaunchWaits()) {
    CHECK(takeEvents() == "launch:first wait launch:second wait ");
  } else {
    CHECK(takeEvents() == "launch:first launch:second ");
  }
  CHECK(energy_support_cuda_fence() == ENERGY_KERNEL_OK);
  CHECK(takeEvents() == std::string(everyLaunchWaits() ? "" : "wait "));
  // Nothing pending: no wait.
  CHECK(energy_support_cuda_fence() == ENERGY_KERNEL_OK);
  CHECK(takeEvents() == "");
}

TEST_CASE("a block freed while kernels may run is handed out after the wait") {
  REQUIRE(launch("writer") == ENERGY_KERNEL_OK);
  void *used = energy_support_cuda_alloc(4096);
  REQUIRE(used);
  energy_support_cuda_free(used);
  void *next = energy_support_cuda_alloc(4096);
  // The kernel may still write `used`: the host gets another block.
  CHECK((next == used) == everyLaunchWaits());
  REQUIRE(energy_support_cuda_fence() == ENERGY_KERNEL_OK);
  void *after = energy_support_cuda_alloc(4096);
  if (!everyLaunchWaits())
    CHECK(after == used);
  energy_support_cuda_free(next);
  energy_support_cuda_free(after);
  takeEvents();
}

TEST_CASE("a kernel that failed is reported at the wait, with the launches") {
  REQUIRE(launch("fine") == ENERGY_KERNEL_OK);
  if (everyLaunchWaits()) {
    failNextWait();
    CHECK(launch("broken") == ENERGY_KERNEL_DEVICE_ERROR);
    std::string error = energy_support_cuda_last_error();
    CHECK(error.find("kernel broken failed") != std::string::npos);
    CHECK(error.find("CUDA_ERROR_LAUNCH_FAILED") != std::string::npos);
    return;
  }
  REQUIRE(launch("broken") == ENERGY_KERNEL_OK);
  failNextWait();
  CHECK(energy_support_cuda_fence() == ENERGY_KERNEL_DEVICE_ERROR);
  std::string error = energy_support_cuda_last_error();
  INFO(error);
  CHECK(error.find("CUDA_ERROR_LAUNCH_FAILED") != std::string::npos);
  CHECK(error.find("one of 2 launched without waiting") != std::string::npos);
  CHECK(error.find("fine, broken") != std::string::npos);
  CHECK(error.find("ENERGY_CUDA_SYNC=1") != std::string::npos);
  // The failure was reported once; nothing is pending after it.
  CHECK(energy_support_cuda_fence() == ENERGY_KERNEL_OK);
}
