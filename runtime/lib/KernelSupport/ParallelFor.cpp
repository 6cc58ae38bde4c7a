//===- ParallelFor.cpp - The thread pool compiled kernels share out work on
//===//
//
// Runs the iterations of a kernel loop on a fixed set of threads. Kernels only
// hand it loops whose iterations write disjoint memory, so results do not
// depend on the number of threads or on which thread runs which iterations.
//
//===----------------------------------------------------------------------===//

#include "CudaLaunch.h"
#include "energy/KernelSupport/KernelSupport.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace {

/// Spins of a thread waiting for work or for the last chunk before it
/// sleeps: kernels hand out loops in quick succession (a backward step is
/// tens of them, each a fraction of a millisecond, with serial work between
/// them), and waking a sleeping thread costs more than many of them take:
/// about 1 ms, long enough that workers stay awake between a step's loops.
constexpr int kSpins = 40000;

inline void pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

/// Each thread of a loop (the caller and every worker) owns a contiguous
/// region of its chunks and claims them in order; one that has run out
/// takes the others' from their ends. So the same thread runs about the
/// same rows in loop after loop and finds them in its own caches, which
/// matters most on cores that share no cache.
/// The caller waits only for chunks that others claimed and have not
/// finished: a worker that has not started yet (its core busy with another
/// process) holds up nobody; it finds its region taken, or a newer job.
/// Both spin a little before they sleep.
class ThreadPool {
public:
  ~ThreadPool() { resize(1); }

  /// The number of threads a loop runs on, the caller included.
  int size() {
    std::lock_guard<std::mutex> lock(mutex);
    return static_cast<int>(workers.size()) + 1;
  }

  void resize(int threads) {
    std::unique_lock<std::mutex> lock(mutex);
    threads = std::clamp(threads, 1, kMaxThreads);
    if (static_cast<int>(workers.size()) == threads - 1)
      return;
    stopping = true;
    wake.notify_all();
    std::vector<std::thread> stopped = std::move(workers);
    workers.clear();
    lock.unlock();
    for (std::thread &worker : stopped)
      worker.join();
    lock.lock();
    stopping = false;
    regions = std::make_unique<std::atomic<uint64_t>[]>(threads);
    for (int i = 1; i < threads; ++i)
      workers.emplace_back(
          [this, i, seen = generation.load()] { work(i, seen); });
  }

  void run(energy_chunk_fn chunk, void *context, int64_t count) {
    std::unique_lock<std::mutex> lock(mutex);
    // A loop inside a loop, one thread, or the pool busy with another
    // caller's loop: run it here.
    if (workers.empty() || insideLoop || running) {
      lock.unlock();
      chunk(context, 0, count);
      return;
    }
    running = true;
    uint64_t jobGeneration = generation.load() + 1;
    Job &job = jobs[jobGeneration & 1];
    int64_t threads = static_cast<int64_t>(workers.size()) + 1;
    int64_t size =
        std::max<int64_t>(1, (count + 8 * threads - 1) / (8 * threads));
    job.chunk.store(chunk, std::memory_order_relaxed);
    job.context.store(context, std::memory_order_relaxed);
    job.count.store(count, std::memory_order_relaxed);
    job.chunkSize.store(size, std::memory_order_relaxed);
    job.chunks.store((count + size - 1) / size, std::memory_order_relaxed);
    job.threads.store(threads, std::memory_order_relaxed);
    job.done.store(0, std::memory_order_relaxed);
    for (int64_t region = 0; region < threads; ++region)
      regions[region].store(jobGeneration << kGenerationShift,
                            std::memory_order_release);
    generation.store(jobGeneration);
    if (sleepers > 0)
      wake.notify_all();
    lock.unlock();
    claimChunks(jobGeneration, /*self=*/0);
    auto finishedAll = [&] {
      return job.done.load() == job.chunks.load(std::memory_order_relaxed);
    };
    for (int spin = 0; spin < kSpins && !finishedAll(); ++spin)
      pause();
    // The mutex only when the chunks take long: a thread holding it that
    // loses its core (more threads than cores) would hold up every loop.
    if (!finishedAll()) {
      lock.lock();
      callerAsleep = true;
      finished.wait(lock, finishedAll);
      callerAsleep = false;
      lock.unlock();
    }
    running = false;
  }

private:
  /// A job's fields are atomics because a worker that woke late may read
  /// them while the caller writes the next job's; it uses what it read only
  /// if its region's cursor still names its job's generation after reading.
  struct Job {
    std::atomic<energy_chunk_fn> chunk{nullptr};
    std::atomic<void *> context{nullptr};
    std::atomic<int64_t> count{0}, chunkSize{1}, chunks{0}, threads{1}, done{0};
  };

  /// A region's cursor holds the generation of the current job above this
  /// many bits, and below them the number of the region's chunks claimed
  /// from its front (16 bits) and from its back (16 bits above those).
  static constexpr int kGenerationShift = 32;
  /// Eight chunks a thread, fewer than 2¹⁶ a region.
  static constexpr int kMaxThreads = 4096;

  /// Runs chunks of the job of `jobGeneration`, those of region `self`
  /// from its front, then the others' from their backs, until none are
  /// left or a newer job replaced it. Two jobs alternate in `jobs`, so the
  /// one a claim reads is rewritten only after the cursors moved past it.
  void claimChunks(uint64_t jobGeneration, int64_t self) {
    Job &job = jobs[jobGeneration & 1];
    insideLoop = true;
    int64_t threads = job.threads.load(std::memory_order_relaxed);
    for (int64_t k = 0; k < threads; ++k)
      if (!claimRegion(job, jobGeneration, (self + k) % threads, k == 0))
        break;
    insideLoop = false;
  }

  /// Claims and runs the chunks of one region; false once the job is over.
  bool claimRegion(Job &job, uint64_t jobGeneration, int64_t region,
                   bool fromFront) {
    std::atomic<uint64_t> &cursor = regions[region];
    uint64_t position = cursor.load(std::memory_order_acquire);
    for (;;) {
      if ((position >> kGenerationShift) != jobGeneration)
        return false;
      energy_chunk_fn chunk = job.chunk.load(std::memory_order_relaxed);
      void *context = job.context.load(std::memory_order_relaxed);
      int64_t count = job.count.load(std::memory_order_relaxed);
      int64_t size = job.chunkSize.load(std::memory_order_relaxed);
      int64_t chunks = job.chunks.load(std::memory_order_relaxed);
      int64_t threads = job.threads.load(std::memory_order_relaxed);
      int64_t first = region * chunks / threads;
      int64_t last = (region + 1) * chunks / threads;
      int64_t front = static_cast<int64_t>(position & 0xffff);
      int64_t back = static_cast<int64_t>((position >> 16) & 0xffff);
      if (first + front + back >= last)
        return true;
      int64_t index = fromFront ? first + front : last - 1 - back;
      if (!cursor.compare_exchange_weak(
              position, position + (fromFront ? 1 : uint64_t(1) << 16),
              std::memory_order_acq_rel, std::memory_order_acquire))
        continue;
      chunk(context, index * size, std::min(count, (index + 1) * size));
      // Sequentially consistent, as callerAsleep: either the caller sees
      // this chunk done before it sleeps, or this thread sees it asleep.
      if (job.done.fetch_add(1) + 1 == chunks && callerAsleep) {
        std::lock_guard<std::mutex> lock(mutex);
        finished.notify_all();
      }
      position = cursor.load(std::memory_order_acquire);
    }
  }

  void work(int64_t self, uint64_t seen) {
    for (;;) {
      for (int spin = 0; spin < kSpins && generation.load() == seen; ++spin)
        pause();
      if (generation.load() == seen) {
        std::unique_lock<std::mutex> lock(mutex);
        ++sleepers;
        wake.wait(lock, [&] { return stopping || generation.load() != seen; });
        --sleepers;
        if (stopping)
          return;
      }
      seen = generation.load();
      claimChunks(seen, self);
    }
  }

  std::mutex mutex;
  std::condition_variable wake, finished;
  std::vector<std::thread> workers;
  bool stopping = false;
  std::atomic<bool> running{false}, callerAsleep{false};
  int sleepers = 0;
  std::atomic<uint64_t> generation{0};
  /// One cursor per thread's region (resize allocates them).
  std::unique_ptr<std::atomic<uint64_t>[]> regions =
      std::make_unique<std::atomic<uint64_t>[]>(1);
  Job jobs[2];
  static thread_local bool insideLoop;
};

thread_local bool ThreadPool::insideLoop = false;

/// The pool starts with ENERGY_NUM_THREADS threads, or one per core. It is
/// destroyed, joining its threads, when the artifact is unloaded.
ThreadPool &pool() {
  static ThreadPool instance;
  static bool started = [] {
    int threads = 0;
    if (const char *text = std::getenv("ENERGY_NUM_THREADS"))
      threads = std::atoi(text);
    if (threads <= 0)
      threads = static_cast<int>(std::thread::hardware_concurrency());
    instance.resize(threads);
    return true;
  }();
  (void)started;
  return instance;
}

} // namespace

extern "C" {
void energy_support_parallel_for(energy_chunk_fn chunk, void *context,
                                 int64_t count) {
  if (count <= 0)
    return;
  if (!energy::cuda::tracing()) {
    pool().run(chunk, context, count);
    return;
  }
  // A CUDA artifact's loop that the GPU cannot run (a call in its body)
  // runs here; the trace shows it beside the GPU's work.
  auto start = std::chrono::steady_clock::now();
  pool().run(chunk, context, count);
  energy::cuda::trace("a loop on the host's threads", count,
                      std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - start)
                          .count());
}

void energy_support_set_num_threads(int32_t threads) { pool().resize(threads); }

int32_t energy_support_num_threads(void) { return pool().size(); }
}
