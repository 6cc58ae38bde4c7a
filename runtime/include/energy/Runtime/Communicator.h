//===- Communicator.h - A group of processes for parallel runs --*- C++ -*-===//
//
// What data-parallel training and sharded runs need of the processes they
// run in: their number, this one's rank, and collectives whose results do
// not depend on timing. One process is a group of one; MPI's (EnergyMpi,
// MpiCommunicator.h) is one implementation, and a GPU one (NCCL) can stand
// behind the same interface.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_RUNTIME_COMMUNICATOR_H
#define ENERGY_RUNTIME_COMMUNICATOR_H

#include "energy/Runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace energy {

class Communicator {
public:
  virtual ~Communicator();

  /// This process's rank, from 0, and the number of processes.
  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// Every rank's `values` (the same count on every rank), in rank order:
  /// rank 0's, then rank 1's, ... in every rank.
  virtual Status allGather(const std::vector<double> &values,
                           std::vector<double> &gathered) = 0;
  /// `bytes` bytes at `data` of rank `root`, into `data` on every rank. By
  /// default through allGather (an implementation may do better).
  virtual Status broadcast(void *data, size_t bytes, int root);
  /// Returns when every rank has called it. By default an allGather.
  virtual Status barrier();
  /// Part r of `values` (cut into size() consecutive parts of `counts`
  /// values, the same counts on every rank) goes to rank r: `received`
  /// holds, in rank order, every rank's part for this one (size() times
  /// counts[rank()] values). By default through allGather (every rank gets
  /// every part); an implementation may send each part only where it goes.
  virtual Status allToAll(const std::vector<double> &values,
                          const std::vector<size_t> &counts,
                          std::vector<double> &received);
  /// One step around the ring of ranks: `values` go to the next rank
  /// (rank() + 1, the last rank's to rank 0) and the previous rank's arrive
  /// in `received` (the same count on every rank). By default through
  /// allGather (every rank receives every rank's values); an implementation
  /// may send them only to the next rank.
  virtual Status shiftRing(const std::vector<double> &values,
                           std::vector<double> &received);
  /// Ends every process of the group with `code`, now: what a rank that
  /// cannot go on does, so that the others do not wait for it.
  [[noreturn]] virtual void abort(int code) = 0;

  /// The element-wise sum of `values` over the ranks, into `values` on
  /// every rank, added in rank order whatever the timing: every rank gets
  /// the same bits, and a rerun the same bits again.
  Status allReduceSum(std::vector<double> &values);
  /// This rank's part of the sum: the element-wise sum over the ranks of
  /// `values` (the same count on every rank), cut into size() contiguous
  /// parts (the first count % size() one longer), in rank order.
  Status reduceScatterSum(const std::vector<double> &values,
                          std::vector<double> &part);
  /// The same with the parts' sizes given (`counts`, one per rank, the same
  /// on every rank): each rank receives only its part from each other rank.
  Status reduceScatterSum(const std::vector<double> &values,
                          const std::vector<size_t> &counts,
                          std::vector<double> &part);
};

/// A group of one process: the collectives copy.
std::unique_ptr<Communicator> makeSingleProcessCommunicator();

/// How many processes the launcher that started this one started (Open
/// MPI's mpirun, MPICH's and Slurm's environments), 1 without one.
int launchedProcessCount();

/// The contiguous slice [begin, end) of `count` items that rank `rank` of
/// `size` takes: the first count % size ranks one item more.
void shardOf(int64_t count, int rank, int size, int64_t &begin, int64_t &end);

} // namespace energy

#endif // ENERGY_RUNTIME_COMMUNICATOR_H
