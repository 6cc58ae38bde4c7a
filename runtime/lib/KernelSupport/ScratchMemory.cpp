//===- ScratchMemory.cpp - Kernels' scratch arrays, reused between calls --===//
//
// energy_support_scratch_alloc/free: 64-byte aligned host memory whose
// freed blocks are kept (up to ENERGY_SCRATCH_CACHE_MIB) for the next call.
//
//===----------------------------------------------------------------------===//

#include "BlockCache.h"
#include "energy/KernelSupport/KernelSupport.h"

#include <cstdlib>

using energy::support::BlockCache;

namespace {
constexpr size_t kAlignment = 64;
constexpr size_t kDefaultCapacityMiB = 256;

/// ENERGY_SCRATCH_CACHE_MIB when it is a number, else the default.
size_t capacityBytes() {
  size_t mebibytes = kDefaultCapacityMiB;
  if (const char *text = std::getenv("ENERGY_SCRATCH_CACHE_MIB")) {
    char *end = nullptr;
    unsigned long long value = std::strtoull(text, &end, 10);
    if (end != text && *end == '\0' && value < (size_t(1) << 40))
      mebibytes = static_cast<size_t>(value);
  }
  return mebibytes << 20;
}

BlockCache &scratchBlocks() {
  static BlockCache *cache = new BlockCache(capacityBytes());
  return *cache;
}
} // namespace

namespace {
thread_local int64_t scratchFailures = 0;
} // namespace

void energy::support::countScratchFailure() { ++scratchFailures; }

extern "C" int64_t energy_support_scratch_failures(void) {
  return scratchFailures;
}

extern "C" void *energy_support_scratch_alloc(int64_t bytes) {
  size_t size = bytes > 0 ? (static_cast<size_t>(bytes) + kAlignment - 1) /
                                kAlignment * kAlignment
                          : kAlignment;
  BlockCache &cache = scratchBlocks();
  if (void *block = cache.take(size))
    return block;
  void *block = std::aligned_alloc(kAlignment, size);
  if (block)
    cache.handOut(block, size);
  else
    energy::support::countScratchFailure();
  return block;
}

extern "C" void energy_support_scratch_free(void *pointer) {
  if (pointer)
    std::free(scratchBlocks().giveBack(pointer));
}
