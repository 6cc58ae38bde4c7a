//===- Communicator.cpp - Collectives in rank order -----------------------===//
//
// The reductions every implementation shares, built on allGather so that
// the order of additions is the ranks' whatever the transport does; and
// the group of one process.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/Communicator.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace energy;

Communicator::~Communicator() = default;

void energy::shardOf(int64_t count, int rank, int size, int64_t &begin,
                     int64_t &end) {
  int64_t base = count / size, extra = count % size;
  begin = rank * base + std::min<int64_t>(rank, extra);
  end = begin + base + (rank < extra ? 1 : 0);
}

/// Parts of `count` values as shardOf cuts them among `size` ranks.
static std::vector<size_t> shardCounts(size_t count, int size) {
  std::vector<size_t> counts(size);
  for (int rank = 0; rank < size; ++rank) {
    int64_t begin = 0, end = 0;
    shardOf(static_cast<int64_t>(count), rank, size, begin, end);
    counts[rank] = static_cast<size_t>(end - begin);
  }
  return counts;
}

Status Communicator::allReduceSum(std::vector<double> &values) {
  // Each rank sums its part in rank order, then the parts are gathered:
  // every rank gets the same bits whatever the timing.
  std::vector<double> part;
  if (Status status = reduceScatterSum(values, part); !status)
    return status;
  std::vector<size_t> counts = shardCounts(values.size(), size());
  std::vector<double> padded(counts.front(), 0.0);
  std::copy(part.begin(), part.end(), padded.begin());
  std::vector<double> gathered;
  if (Status status = allGather(padded, gathered); !status)
    return status;
  size_t at = 0;
  for (int r = 0; r < size(); ++r)
    for (size_t i = 0; i < counts[r]; ++i)
      values[at++] = gathered[r * counts.front() + i];
  return Status::success();
}

Status Communicator::allToAll(const std::vector<double> &values,
                              const std::vector<size_t> &counts,
                              std::vector<double> &received) {
  std::vector<double> gathered;
  if (Status status = allGather(values, gathered); !status)
    return status;
  size_t offset = 0;
  for (int r = 0; r < rank(); ++r)
    offset += counts[r];
  size_t mine = counts[rank()];
  received.resize(mine * size());
  for (int r = 0; r < size(); ++r)
    std::copy(gathered.begin() + r * values.size() + offset,
              gathered.begin() + r * values.size() + offset + mine,
              received.begin() + r * mine);
  return Status::success();
}

Status Communicator::shiftRing(const std::vector<double> &values,
                               std::vector<double> &received) {
  std::vector<double> gathered;
  if (Status status = allGather(values, gathered); !status)
    return status;
  size_t previous = (rank() + size() - 1) % size();
  received.assign(gathered.begin() + previous * values.size(),
                  gathered.begin() + (previous + 1) * values.size());
  return Status::success();
}

Status Communicator::reduceScatterSum(const std::vector<double> &values,
                                      const std::vector<size_t> &counts,
                                      std::vector<double> &part) {
  size_t total = 0;
  for (size_t count : counts)
    total += count;
  if (counts.size() != static_cast<size_t>(size()) || total != values.size())
    return Status::error("reduce-scatter of " + std::to_string(values.size()) +
                         " values into " + std::to_string(counts.size()) +
                         " parts of " + std::to_string(total) +
                         " in all, in "
                         "a group of " +
                         std::to_string(size()));
  std::vector<double> received;
  if (Status status = allToAll(values, counts, received); !status)
    return status;
  size_t mine = counts[rank()];
  part.assign(received.begin(), received.begin() + mine);
  for (int r = 1; r < size(); ++r)
    for (size_t i = 0; i < mine; ++i)
      part[i] += received[r * mine + i];
  return Status::success();
}

Status Communicator::broadcast(void *data, size_t bytes, int root) {
  if (root < 0 || root >= size())
    return Status::error("broadcast from rank " + std::to_string(root) +
                         " in a group of " + std::to_string(size()));
  std::vector<double> values((bytes + sizeof(double) - 1) / sizeof(double));
  if (rank() == root)
    std::memcpy(values.data(), data, bytes);
  std::vector<double> gathered;
  if (Status status = allGather(values, gathered); !status)
    return status;
  std::memcpy(data, gathered.data() + root * values.size(), bytes);
  return Status::success();
}

Status Communicator::barrier() {
  std::vector<double> gathered;
  return allGather({0.0}, gathered);
}

Status Communicator::reduceScatterSum(const std::vector<double> &values,
                                      std::vector<double> &part) {
  return reduceScatterSum(values, shardCounts(values.size(), size()), part);
}

namespace {
class SingleProcess final : public Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status allGather(const std::vector<double> &values,
                   std::vector<double> &gathered) override {
    gathered = values;
    return Status::success();
  }
  [[noreturn]] void abort(int code) override { std::exit(code); }
};
} // namespace

std::unique_ptr<Communicator> energy::makeSingleProcessCommunicator() {
  return std::make_unique<SingleProcess>();
}

int energy::launchedProcessCount() {
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"})
    if (const char *value = std::getenv(name)) {
      int count = std::atoi(value);
      if (count > 0)
        return count;
    }
  return 1;
}
