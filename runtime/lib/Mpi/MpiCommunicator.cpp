//===- MpiCommunicator.cpp - The group of processes MPI started -----------===//
//
// MPI_COMM_WORLD with MPI_ERRORS_RETURN: every collective's failure is an
// error naming the rank and MPI's message.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/MpiCommunicator.h"

#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <string>

using namespace energy;

namespace {
class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator(int rank, int size) : myRank(rank), count(size) {}
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized)
      MPI_Finalize();
  }

  int rank() const override { return myRank; }
  int size() const override { return count; }

  Status allGather(const std::vector<double> &values,
                   std::vector<double> &gathered) override {
    if (values.size() > INT_MAX)
      return error("MPI_Allgather", "more than INT_MAX values");
    gathered.assign(values.size() * count, 0.0);
    return check("MPI_Allgather",
                 MPI_Allgather(values.data(), static_cast<int>(values.size()),
                               MPI_DOUBLE, gathered.data(),
                               static_cast<int>(values.size()), MPI_DOUBLE,
                               MPI_COMM_WORLD));
  }

  Status allToAll(const std::vector<double> &values,
                  const std::vector<size_t> &counts,
                  std::vector<double> &received) override {
    std::vector<int> sendCounts(count), sendOffsets(count),
        receiveCounts(count), receiveOffsets(count);
    size_t offset = 0, mine = counts[myRank];
    for (int r = 0; r < count; ++r) {
      if (offset > INT_MAX || counts[r] > INT_MAX || mine * r > INT_MAX)
        return error("MPI_Alltoallv", "more than INT_MAX values");
      sendCounts[r] = static_cast<int>(counts[r]);
      sendOffsets[r] = static_cast<int>(offset);
      receiveCounts[r] = static_cast<int>(mine);
      receiveOffsets[r] = static_cast<int>(mine * r);
      offset += counts[r];
    }
    received.assign(mine * count, 0.0);
    return check("MPI_Alltoallv",
                 MPI_Alltoallv(values.data(), sendCounts.data(),
                               sendOffsets.data(), MPI_DOUBLE, received.data(),
                               receiveCounts.data(), receiveOffsets.data(),
                               MPI_DOUBLE, MPI_COMM_WORLD));
  }

  Status shiftRing(const std::vector<double> &values,
                   std::vector<double> &received) override {
    if (values.size() > INT_MAX)
      return error("MPI_Sendrecv", "more than INT_MAX values");
    int items = static_cast<int>(values.size());
    received.assign(values.size(), 0.0);
    return check("MPI_Sendrecv",
                 MPI_Sendrecv(values.data(), items, MPI_DOUBLE,
                              (myRank + 1) % count, 0, received.data(), items,
                              MPI_DOUBLE, (myRank + count - 1) % count, 0,
                              MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  }

  Status broadcast(void *data, size_t bytes, int root) override {
    if (bytes > INT_MAX)
      return error("MPI_Bcast", "more than INT_MAX bytes");
    return check("MPI_Bcast", MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE,
                                        root, MPI_COMM_WORLD));
  }

  Status barrier() override {
    return check("MPI_Barrier", MPI_Barrier(MPI_COMM_WORLD));
  }

  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

private:
  Status error(const char *call, const std::string &why) const {
    return Status::error(std::string(call) + " on rank " +
                         std::to_string(myRank) + " of " +
                         std::to_string(count) + ": " + why);
  }
  Status check(const char *call, int code) const {
    if (code == MPI_SUCCESS)
      return Status::success();
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    return error(call, std::string(text, length));
  }

  int myRank, count;
};
} // namespace

Expected<std::unique_ptr<Communicator>>
energy::createMpiCommunicator(int *argc, char ***argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized && MPI_Init(argc, argv) != MPI_SUCCESS)
    return Status::error("MPI_Init failed");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::unique_ptr<Communicator>(
      std::make_unique<MpiCommunicator>(rank, size));
}
