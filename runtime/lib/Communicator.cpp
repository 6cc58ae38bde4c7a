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

Status Communicator::allReduceSum(std::vector<double> &values) {
  std::vector<double> gathered;
  if (Status status = allGather(values, gathered); !status)
    return status;
  size_t count = values.size();
  for (size_t i = 0; i < count; ++i) {
    double sum = gathered[i];
    for (int r = 1; r < size(); ++r)
      sum += gathered[r * count + i];
    values[i] = sum;
  }
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
  std::vector<double> sum = values;
  if (Status status = allReduceSum(sum); !status)
    return status;
  int64_t begin = 0, end = 0;
  shardOf(static_cast<int64_t>(sum.size()), rank(), size(), begin, end);
  part.assign(sum.begin() + begin, sum.begin() + end);
  return Status::success();
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
