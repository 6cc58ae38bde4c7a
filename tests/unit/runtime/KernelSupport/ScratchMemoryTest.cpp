//===- ScratchMemoryTest.cpp - Kernels' scratch and the block cache -------===//
//
// energy_support_scratch_alloc/free: alignment, reuse of a freed block for a
// request of up to twice its size and not beyond, blocks of other threads
// never shared while held; BlockCache's capacity.
//
//===----------------------------------------------------------------------===//

#include "KernelSupport/BlockCache.h"
#include "energy/KernelSupport/KernelSupport.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

using energy::support::BlockCache;

TEST_CASE("scratch blocks are aligned and reused for similar sizes") {
  // Sizes no other test of this process frees blocks of (the cache is the
  // process's): 3 MB rounds to 3000000 + 64 - 3000000 % 64; a request of
  // 2 MB may take that block, 1 MB may not (it is more than twice as big).
  void *first = energy_support_scratch_alloc(3000000);
  REQUIRE(first != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(first) % 64 == 0);
  std::memset(first, 1, 3000000);
  energy_support_scratch_free(first);
  void *smaller = energy_support_scratch_alloc(1000000);
  CHECK(smaller != first);
  void *similar = energy_support_scratch_alloc(2000000);
  CHECK(similar == first);
  energy_support_scratch_free(similar);
  energy_support_scratch_free(smaller);
  void *empty = energy_support_scratch_alloc(0);
  CHECK(empty != nullptr);
  energy_support_scratch_free(empty);
  energy_support_scratch_free(nullptr);
}

TEST_CASE("blocks held at once are distinct, from any number of threads") {
  constexpr int kThreads = 4, kRounds = 200, kHeld = 5;
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([t, &failures] {
      for (int round = 0; round < kRounds; ++round) {
        unsigned char *held[kHeld];
        for (int k = 0; k < kHeld; ++k) {
          int64_t bytes = 256 * (1 + (round + k) % 7);
          held[k] =
              static_cast<unsigned char *>(energy_support_scratch_alloc(bytes));
          std::memset(held[k], t * kHeld + k, 256);
        }
        for (int k = 0; k < kHeld; ++k)
          for (int i = 0; i < 256; ++i)
            failures[t] += held[k][i] != t * kHeld + k;
        for (int k = 0; k < kHeld; ++k)
          energy_support_scratch_free(held[k]);
      }
    });
  for (std::thread &thread : threads)
    thread.join();
  for (int t = 0; t < kThreads; ++t)
    CHECK(failures[t] == 0);
}

TEST_CASE("the block cache keeps at most its capacity") {
  BlockCache cache(3000);
  int blocks[4];
  for (int &block : blocks)
    cache.handOut(&block, 1000);
  for (int &block : blocks)
    CHECK(cache.giveBack(&block) == (&block == &blocks[3] ? &block : nullptr));
  CHECK(cache.keptBytes() == 3000);
  // A block not handed out goes back to its owner.
  int stranger;
  CHECK(cache.giveBack(&stranger) == &stranger);
  CHECK(cache.take(2001) == nullptr);
  CHECK(cache.take(400) == nullptr);
  void *taken = cache.take(500);
  CHECK((taken == &blocks[0] || taken == &blocks[1] || taken == &blocks[2]));
  CHECK(cache.keptBytes() == 2000);
  CHECK(cache.giveBack(taken) == nullptr);
  CHECK(cache.keptBytes() == 3000);
}
