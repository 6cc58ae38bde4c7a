//===- ParallelForTest.cpp - The kernels' thread pool ---------------------===//
//
// Every iteration runs exactly once on any number of threads, also in loops
// back to back on more threads than cores (workers that start late meet a
// newer loop), and a loop started inside a loop runs on the thread that
// started it.
//
//===----------------------------------------------------------------------===//

#include "energy/KernelSupport/KernelSupport.h"

#include <doctest/doctest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace {
struct Counts {
  std::vector<std::atomic<int>> runs;
  explicit Counts(int64_t count) : runs(count) {}
};

void countIterations(void *context, int64_t begin, int64_t end) {
  auto *counts = static_cast<Counts *>(context);
  for (int64_t i = begin; i < end; ++i)
    counts->runs[i].fetch_add(1);
}

struct Nested {
  std::atomic<int> mismatches{0};
  std::atomic<int64_t> inner{0};
};

void innerIterations(void *context, int64_t begin, int64_t end) {
  static_cast<Nested *>(context)->inner += end - begin;
}

void outerIterations(void *context, int64_t begin, int64_t end) {
  auto *nested = static_cast<Nested *>(context);
  for (int64_t i = begin; i < end; ++i) {
    std::thread::id outer = std::this_thread::get_id();
    struct Inline {
      std::thread::id expected;
      std::atomic<int> *mismatches;
      Nested *nested;
    } check{outer, &nested->mismatches, nested};
    energy_support_parallel_for(
        [](void *context, int64_t begin, int64_t end) {
          auto *check = static_cast<Inline *>(context);
          if (std::this_thread::get_id() != check->expected)
            ++*check->mismatches;
          innerIterations(check->nested, begin, end);
        },
        &check, 10);
  }
}
} // namespace

TEST_CASE("every iteration runs exactly once on any number of threads") {
  for (int threads : {1, 2, 5}) {
    energy_support_set_num_threads(threads);
    CHECK(energy_support_num_threads() == threads);
    for (int64_t count : {0, 1, 7, 64, 1000, 100003}) {
      Counts counts(count);
      energy_support_parallel_for(countIterations, &counts, count);
      int64_t wrong = 0;
      for (const std::atomic<int> &runs : counts.runs)
        wrong += runs.load() != 1;
      INFO("threads " << threads << ", count " << count);
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("loops back to back: each iteration once, done when the call "
          "returns") {
  // More threads than this machine's cores: some workers wake after their
  // loop is over, while the caller has moved on to the next.
  energy_support_set_num_threads(8);
  int64_t wrongLoops = 0;
  for (int loop = 0; loop < 3000; ++loop) {
    int64_t count = 1 + (loop * 37) % 200;
    Counts counts(count);
    energy_support_parallel_for(countIterations, &counts, count);
    int64_t wrong = 0;
    for (const std::atomic<int> &runs : counts.runs)
      wrong += runs.load() != 1;
    wrongLoops += wrong != 0;
  }
  CHECK(wrongLoops == 0);
  energy_support_set_num_threads(2);
}

TEST_CASE("a loop inside a loop runs on the calling thread") {
  energy_support_set_num_threads(4);
  Nested nested;
  energy_support_parallel_for(outerIterations, &nested, 100);
  CHECK(nested.mismatches.load() == 0);
  CHECK(nested.inner.load() == 100 * 10);
}

TEST_CASE("a thread count below one means one") {
  energy_support_set_num_threads(0);
  CHECK(energy_support_num_threads() == 1);
}
