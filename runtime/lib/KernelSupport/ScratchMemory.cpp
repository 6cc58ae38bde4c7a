//===- ScratchMemory.cpp - Scratch blocks kept between kernel calls -------===//
//
// A call on small problems frees a few hundred KiB of scratch that malloc
// gives back to the system (trimming the heap), and the next call takes
// page faults to get it again; each thread keeps a few such blocks instead.
//
//===----------------------------------------------------------------------===//

#include "ScratchMemory.h"

#include <stdlib.h>

namespace energy::kernels {
namespace {
/// The blocks of 16 KiB to 4 MiB a thread keeps between calls.
struct ScratchCache {
  static constexpr int kSlots = 8;
  static constexpr size_t kSmallest = 16 << 10, kLargest = 4 << 20;
  void *blocks[kSlots] = {};
  size_t sizes[kSlots] = {};
  ~ScratchCache() {
    for (void *block : blocks)
      free(block);
  }
};
thread_local ScratchCache cache;

size_t rounded(size_t bytes) {
  size_t size = (bytes + 63) / 64 * 64;
  return size ? size : 64;
}
} // namespace

void *acquireScratch(size_t bytes) {
  const size_t size = rounded(bytes);
  if (size >= ScratchCache::kSmallest && size <= ScratchCache::kLargest) {
    // The smallest kept block that is large enough.
    int best = -1;
    for (int i = 0; i < ScratchCache::kSlots; ++i)
      if (cache.blocks[i] && cache.sizes[i] >= size &&
          (best < 0 || cache.sizes[i] < cache.sizes[best]))
        best = i;
    if (best >= 0) {
      void *block = cache.blocks[best];
      cache.blocks[best] = nullptr;
      return block;
    }
  }
  return aligned_alloc(64, size);
}

void releaseScratch(void *memory, size_t bytes) {
  const size_t size = rounded(bytes);
  if (!memory)
    return;
  if (size >= ScratchCache::kSmallest && size <= ScratchCache::kLargest) {
    // An empty slot, or the smallest kept block if smaller.
    int slot = -1;
    for (int i = 0; i < ScratchCache::kSlots; ++i) {
      if (!cache.blocks[i]) {
        slot = i;
        break;
      }
      if (cache.sizes[i] < size &&
          (slot < 0 || cache.sizes[i] < cache.sizes[slot]))
        slot = i;
    }
    if (slot >= 0) {
      free(cache.blocks[slot]);
      cache.blocks[slot] = memory;
      cache.sizes[slot] = size;
      return;
    }
  }
  free(memory);
}
} // namespace energy::kernels
