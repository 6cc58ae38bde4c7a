//===- CudaFenceTest.cpp - Launches that do not wait, and their fence -----===//
//
// energy_support_cuda_launch and energy_support_cuda_fence against a fake
// driver (fake_cuda_driver.c, through ENERGY_CUDA_DRIVER) that logs launches
// and waits: generated kernels follow each other without a wait and the
// fence waits once; a block freed while they may run is handed out again
// only after the wait; a failure is reported at the fence, naming the
// kernels; a softmax and a quadratic contraction's kernels queue the same
// way, and their host paths wait first; work goes on the stream set
// (energy_support_cuda_set_stream), whose queued work the fence waits for;
// the bf16 contraction runs the tensor-core kernels chosen.
// With ENERGY_CUDA_SYNC=1 (the test's second run) every launch waits.
//
//===----------------------------------------------------------------------===//

#include "energy/KernelSupport/KernelSupport.h"
#include "energy/KernelSupport/QuadraticContract.h"
#include "energy/KernelSupport/SoftmaxContract.h"
#include "energy/Runtime/ArtifactABI.h"

#include <doctest/doctest.h>

#include <dlfcn.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

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
  // One cached kernel per name, as generated code keeps one per kernel.
  static std::map<std::string, void *> cache;
  int64_t slot = 0;
  return energy_support_cuda_launch(kImages, name, &cache[name], &slot, 1, 100);
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

TEST_CASE("a softmax contraction queues its kernels; its host path waits") {
  // Two rows and columns of depth 2, one row output of width 1 and the lse.
  float rows[4] = {1, 0, 0, 1}, cols[4] = {1, 1, 0, 1}, values[2] = {2, 3};
  float output[2] = {}, lse[2] = {};
  const void *tables[] = {values};
  void *outputs[] = {output};
  int64_t widths[] = {1};
  energy_softmax_contract_args args{};
  args.rows = args.cols = args.depth = 2;
  args.row_features = rows;
  args.col_features = cols;
  args.scale = args.temperature = 1;
  args.lse = lse;
  args.num_row_outputs = 1;
  args.col_values = tables;
  args.row_output_widths = widths;
  args.row_outputs = outputs;
  args.batch = 1;
  takeEvents();
  REQUIRE(launch("before") == ENERGY_KERNEL_OK);
  REQUIRE(energy_support_cuda_softmax_contract_f32(&args) ==
          ENERGY_CONTRACT_OK);
  std::string events = takeEvents();
  INFO(events);
  CHECK(events.find("launch:energy_contract_rows_f32") != std::string::npos);
  CHECK((events.find("wait") != std::string::npos) == everyLaunchWaits());
  CHECK(energy_support_cuda_fence() == ENERGY_KERNEL_OK);
  takeEvents();

  // A pair term the kernels do not take: the host computes it, after
  // waiting for the kernel before it.
  int64_t pairDepths[] = {1};
  float pairRows[2] = {1, 1}, pairCols[2] = {1, 1};
  const void *pairRowTables[] = {pairRows}, *pairColTables[] = {pairCols};
  args.num_pair_terms = 1;
  args.pair_depths = pairDepths;
  args.pair_row_features = pairRowTables;
  args.pair_col_features = pairColTables;
  REQUIRE(launch("before") == ENERGY_KERNEL_OK);
  REQUIRE(energy_support_cuda_softmax_contract_f32(&args) ==
          ENERGY_CONTRACT_OK);
  CHECK(takeEvents() == "launch:before wait ");
  // The host's result: row 0 scores x·y + p·q = 1 + 1 and 0 + 1.
  double s0 = std::exp(1.0 + 1), s1 = std::exp(0.0 + 1);
  CHECK(output[0] == doctest::Approx((2 * s0 + 3 * s1) / (s0 + s1)));
}

TEST_CASE("the bf16 contraction runs the tensor-core kernels chosen") {
  // One problem of 40 rows and 50 columns of depth 20, a row output of
  // width 24: bound 32.
  std::vector<float> rows(40 * 20, 0.5f), cols(50 * 20, 0.25f),
      values(50 * 24, 1.f), output(40 * 24);
  const void *tables[] = {values.data()};
  void *outputs[] = {output.data()};
  int64_t widths[] = {24};
  energy_softmax_contract_args args{};
  args.rows = 40;
  args.cols = 50;
  args.depth = 20;
  args.row_features = rows.data();
  args.col_features = cols.data();
  args.scale = args.temperature = 1;
  args.num_row_outputs = 1;
  args.col_values = tables;
  args.row_output_widths = widths;
  args.row_outputs = outputs;
  args.batch = 1;
  auto contract = [&] {
    takeEvents();
    REQUIRE(energy_support_cuda_softmax_contract_bf16(&args) ==
            ENERGY_CONTRACT_OK);
    REQUIRE(energy_support_cuda_fence() == ENERGY_KERNEL_OK);
    return takeEvents();
  };

  // By default mma.sync's, without dynamic shared memory.
  std::string events = contract();
  INFO(events);
  CHECK(events.find("launch:energy_contract_rows_bf16_pack ") !=
        std::string::npos);
  CHECK(events.find("launch:energy_contract_rows_bf16_32_32 ") !=
        std::string::npos);

  CHECK(energy_support_cuda_tensor_core_kernels("tensor") ==
        ENERGY_KERNEL_DEVICE_ERROR);
  CHECK(std::string(energy_support_cuda_last_error()).find("unknown") !=
        std::string::npos);
  setenv("ENERGY_FAKE_CUDA_CAPABILITY", "80", 1);
  CHECK(energy_support_cuda_tensor_core_kernels("wgmma") ==
        ENERGY_KERNEL_DEVICE_ERROR);
  CHECK(std::string(energy_support_cuda_last_error()).find("sm_80") !=
        std::string::npos);
  unsetenv("ENERGY_FAKE_CUDA_CAPABILITY");
  CHECK(contract().find("energy_contract_rows_bf16_32_32") !=
        std::string::npos);

  // wgmma's on this (fake) sm_90: its packing kernel, then the pass with
  // its dynamic shared memory set once (attribute 8, the largest it may
  // have) and given at launch: bound 32's outer features 32 × 128 bf16
  // (8192 bytes), two stages of inner features and values (2 × (32 + 32) ×
  // 64 bf16, 16384 bytes) and two stages' 64 normalisers (512 bytes).
  REQUIRE(energy_support_cuda_tensor_core_kernels("wgmma") == ENERGY_KERNEL_OK);
  events = contract();
  CHECK(events.find("launch:energy_contract_rows_wgmma_pack ") !=
        std::string::npos);
  CHECK(events.find("set:energy_contract_rows_wgmma_32_32:8=25088 ") !=
        std::string::npos);
  CHECK(events.find("launch:energy_contract_rows_wgmma_32_32+25088B ") !=
        std::string::npos);
  CHECK(contract().find("set:") == std::string::npos);
  // The pipelined ones: a third stage, (32 + 32) × 64 bf16 and 64
  // normalisers (8448 bytes) more.
  REQUIRE(energy_support_cuda_tensor_core_kernels("wgmma-pipelined") ==
          ENERGY_KERNEL_OK);
  events = contract();
  CHECK(events.find("launch:energy_contract_rows_wgmmap_pack ") !=
        std::string::npos);
  CHECK(events.find("launch:energy_contract_rows_wgmmap_32_32+33536B ") !=
        std::string::npos);
  REQUIRE(energy_support_cuda_tensor_core_kernels("auto") == ENERGY_KERNEL_OK);
  CHECK(contract().find("launch:energy_contract_rows_bf16_32_32 ") !=
        std::string::npos);
}

TEST_CASE("a quadratic contraction queues its kernels; its host path waits") {
  // Two points and two components of depth 1: the lse and the weights' sums.
  float points[2] = {0, 1}, means[2] = {0, 1}, precisions[2] = {1, 1};
  float lse[2] = {}, weights[2] = {};
  int64_t kinds[] = {ENERGY_MOMENT_WEIGHT};
  void *outputs[] = {weights};
  energy_quadratic_contract_args args{};
  args.rows = args.cols = 2;
  args.depth = 1;
  args.points = points;
  args.means = means;
  args.precisions = precisions;
  args.scale = -0.5;
  args.lse = lse;
  args.num_col_outputs = 1;
  args.col_output_kinds = kinds;
  args.col_outputs = outputs;
  takeEvents();
  REQUIRE(launch("before") == ENERGY_KERNEL_OK);
  REQUIRE(energy_support_cuda_quadratic_contract_f32(&args) ==
          ENERGY_CONTRACT_OK);
  std::string events = takeEvents();
  INFO(events);
  CHECK(events.find("launch:energy_quadratic_prepare_f32") !=
        std::string::npos);
  CHECK(events.find("launch:energy_quadratic_finish_f32") != std::string::npos);
  CHECK((events.find("wait") != std::string::npos) == everyLaunchWaits());
  CHECK(energy_support_cuda_fence() == ENERGY_KERNEL_OK);
  takeEvents();

  // Depth 65, past the kernels' 64: the host computes it, after waiting for
  // the kernel before it. Points, means and precisions all 0: all scores 0,
  // each point's weights 1/2, so L = log 2 and each component's sum 1.
  constexpr int64_t kDepth = 65;
  std::vector<float> zeros(2 * kDepth, 0.0f),
      zeroPrecisions(2 * kDepth * kDepth, 0.0f);
  args.depth = kDepth;
  args.points = zeros.data();
  args.means = zeros.data();
  args.precisions = zeroPrecisions.data();
  REQUIRE(launch("before") == ENERGY_KERNEL_OK);
  REQUIRE(energy_support_cuda_quadratic_contract_f32(&args) ==
          ENERGY_CONTRACT_OK);
  CHECK(takeEvents() == "launch:before wait ");
  for (int r = 0; r < 2; ++r) {
    CHECK(lse[r] == doctest::Approx(std::log(2.0)));
    CHECK(weights[r] == doctest::Approx(1.0));
  }
}

TEST_CASE("work goes on the stream set; the fence waits for that stream") {
  void *stream = reinterpret_cast<void *>(0x5000);
  takeEvents();
  energy_support_cuda_set_stream(stream, /*queued=*/0);
  REQUIRE(launch("first") == ENERGY_KERNEL_OK);
  CHECK(energy_support_cuda_fence() == ENERGY_KERNEL_OK);
  // (With every launch waiting, the wait comes at the launch instead.)
  CHECK(takeEvents() == "launch:first@0x5000 sync@0x5000 ");
  // Work the caller queued there before: the next fence waits for it,
  // though nothing was launched since.
  energy_support_cuda_set_stream(stream, /*queued=*/1);
  CHECK(energy_support_cuda_fence() == ENERGY_KERNEL_OK);
  CHECK(takeEvents() == "sync@0x5000 ");
  CHECK(energy_support_cuda_fence() == ENERGY_KERNEL_OK);
  CHECK(takeEvents() == "");
  // Pending work on one stream is waited for there before another is set.
  REQUIRE(launch("second") == ENERGY_KERNEL_OK);
  energy_support_cuda_set_stream(reinterpret_cast<void *>(0x6000), 0);
  CHECK(takeEvents() == "launch:second@0x5000 sync@0x5000 ");
  energy_support_cuda_set_stream(nullptr, 0);
  REQUIRE(launch("third") == ENERGY_KERNEL_OK);
  CHECK(energy_support_cuda_fence() == ENERGY_KERNEL_OK);
  CHECK(takeEvents() == "launch:third wait ");
}
