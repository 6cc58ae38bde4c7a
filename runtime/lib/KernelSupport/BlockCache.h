//===- BlockCache.h - Freed blocks kept for the next request ----*- C++ -*-===//
//
// Kernels allocate their scratch at every call and free it on return; a
// block kept here serves the next request of a similar size without the
// allocator (page faults for the host, a driver call for managed memory).
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_KERNELSUPPORT_BLOCKCACHE_H
#define ENERGY_KERNELSUPPORT_BLOCKCACHE_H

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>

namespace energy::support {

/// The blocks handed out (with their sizes) and the free ones kept for
/// reuse, at most `capacity` bytes of them. A request takes a free block
/// of at least its size and at most twice it. Thread-safe.
class BlockCache {
public:
  explicit BlockCache(size_t capacity) : capacity(capacity) {}

  /// A kept block for `size` bytes (now handed out), or null.
  void *take(size_t size) {
    std::lock_guard<std::mutex> guard(mutex);
    auto found = freeBlocks.lower_bound(size);
    if (found == freeBlocks.end() || found->first > 2 * size)
      return nullptr;
    void *block = found->second;
    freeBytes -= found->first;
    freeBlocks.erase(found);
    return block;
  }

  /// Records `block` of `size` bytes, newly allocated, as handed out.
  void handOut(void *block, size_t size) {
    std::lock_guard<std::mutex> guard(mutex);
    sizes[block] = size;
  }

  /// Takes back a block handed out. Returns null when it is kept, or the
  /// block itself when the caller must release it: it was not handed out
  /// here, or keeping it would pass the capacity.
  void *giveBack(void *block) {
    std::lock_guard<std::mutex> guard(mutex);
    auto size = sizes.find(block);
    if (size == sizes.end())
      return block;
    if (size->second > capacity - freeBytes) {
      sizes.erase(size);
      return block;
    }
    freeBytes += size->second;
    freeBlocks.emplace(size->second, block);
    return nullptr;
  }

  /// Bytes kept in free blocks.
  size_t keptBytes() const {
    std::lock_guard<std::mutex> guard(mutex);
    return freeBytes;
  }

private:
  const size_t capacity;
  mutable std::mutex mutex;
  std::multimap<size_t, void *> freeBlocks;
  size_t freeBytes = 0;
  std::unordered_map<void *, size_t> sizes;
};

/// Counts an allocation of a kernel's scratch (host or managed memory) that
/// returned null on this thread (energy_support_scratch_failures).
void countScratchFailure();

} // namespace energy::support

#endif // ENERGY_KERNELSUPPORT_BLOCKCACHE_H
