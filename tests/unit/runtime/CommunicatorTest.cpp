//===- CommunicatorTest.cpp - Shards and collectives in rank order --------===//
//
// Unit tests of energy::Communicator's shared parts: the shards of a batch,
// the group of one process, and reductions that add in rank order whatever
// the transport (a fake group whose allGather hands back fixed values). The
// MPI implementation is tested end to end by e2e-training-data-parallel.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/Communicator.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

using energy::Communicator;
using energy::Status;

namespace {
/// Rank `me` of a group whose members hold `held` (one vector per rank):
/// its allGather hands back `held`, whatever this rank passes; a second
/// allGather hands back `later` (what the ranks send next, when a test
/// knows it).
class FakeGroup final : public Communicator {
public:
  FakeGroup(int me, std::vector<std::vector<double>> held,
            std::vector<std::vector<double>> later = {})
      : me(me), held(std::move(held)), later(std::move(later)) {}
  int rank() const override { return me; }
  int size() const override { return static_cast<int>(held.size()); }
  Status allGather(const std::vector<double> &values,
                   std::vector<double> &gathered) override {
    const std::vector<std::vector<double>> &sent = calls++ ? later : held;
    REQUIRE(sent.size() == held.size());
    REQUIRE(values.size() == sent[me].size());
    gathered.clear();
    for (const std::vector<double> &part : sent)
      gathered.insert(gathered.end(), part.begin(), part.end());
    return Status::success();
  }
  [[noreturn]] void abort(int) override {
    FAIL("abort");
    throw 0;
  }

private:
  int me;
  std::vector<std::vector<double>> held, later;
  int calls = 0;
};
} // namespace

TEST_CASE("a batch's shards are contiguous, the first ones one longer") {
  auto shards = [](int64_t count, int size) {
    std::vector<std::pair<int64_t, int64_t>> result;
    for (int rank = 0; rank < size; ++rank) {
      int64_t begin = 0, end = 0;
      energy::shardOf(count, rank, size, begin, end);
      result.push_back({begin, end});
    }
    return result;
  };
  using Shards = std::vector<std::pair<int64_t, int64_t>>;
  CHECK(shards(6, 3) == Shards{{0, 2}, {2, 4}, {4, 6}});
  CHECK(shards(7, 3) == Shards{{0, 3}, {3, 5}, {5, 7}});
  CHECK(shards(2, 3) == Shards{{0, 1}, {1, 2}, {2, 2}});
  CHECK(shards(5, 1) == Shards{{0, 5}});
}

TEST_CASE("reductions add in rank order on every rank") {
  // 1e16 + 1 - 1e16 is 0 in rank order (1 is lost), 1 in any other: every
  // rank must get the rank order's 0.
  std::vector<std::vector<double>> held = {{1e16, 2}, {1, 3}, {-1e16, 4}};
  for (int rank = 0; rank < 3; ++rank) {
    // allReduceSum is a reduce-scatter (rank r sums part r in rank order),
    // then the parts (padded to the first's length) gathered: the ranks
    // send {0}, {9} and {} padded to {0}.
    FakeGroup group(rank, held, {{0.0}, {9.0}, {0.0}});
    std::vector<double> values = held[rank];
    REQUIRE(group.allReduceSum(values).ok());
    CHECK(values == std::vector<double>{0.0, 9.0});
    std::vector<double> part;
    FakeGroup scatter(rank, held);
    REQUIRE(scatter.reduceScatterSum(held[rank], part).ok());
    CHECK(part == (rank == 0   ? std::vector<double>{0.0}
                   : rank == 1 ? std::vector<double>{9.0}
                               : std::vector<double>{}));
  }
}

TEST_CASE("a reduce-scatter into given parts sends each its own") {
  // Parts of 1, 0 and 2 values: rank r gets part r summed in rank order.
  std::vector<std::vector<double>> held = {
      {1e16, 5, 6}, {1, 7, 8}, {-1e16, 9, 10}};
  std::vector<size_t> counts = {1, 0, 2};
  std::vector<std::vector<double>> expected = {{0.0}, {}, {21.0, 24.0}};
  for (int rank = 0; rank < 3; ++rank) {
    FakeGroup group(rank, held);
    std::vector<double> part;
    REQUIRE(group.reduceScatterSum(held[rank], counts, part).ok());
    CHECK(part == expected[rank]);
    FakeGroup again(rank, held);
    CHECK(again.reduceScatterSum(held[rank], {1, 1, 2}, part).message() ==
          "reduce-scatter of 3 values into 3 parts of 4 in all, in a group "
          "of 3");
  }
}

TEST_CASE("broadcast goes through allGather by default") {
  double sent = 2.5;
  std::vector<std::vector<double>> held = {{0.0}, {sent}, {0.0}};
  for (int rank = 0; rank < 3; ++rank) {
    FakeGroup group(rank, held);
    double value = rank == 1 ? sent : -1.0;
    REQUIRE(group.broadcast(&value, sizeof value, 1).ok());
    CHECK(value == sent);
    CHECK(group.broadcast(&value, sizeof value, 3).message() ==
          "broadcast from rank 3 in a group of 3");
  }
}

TEST_CASE("a ring step hands each rank the previous rank's values") {
  std::vector<std::vector<double>> held = {{1, 2}, {3, 4}, {5, 6}};
  std::vector<std::vector<double>> expected = {{5, 6}, {1, 2}, {3, 4}};
  for (int rank = 0; rank < 3; ++rank) {
    FakeGroup group(rank, held);
    std::vector<double> received;
    REQUIRE(group.shiftRing(held[rank], received));
    CHECK(received == expected[rank]);
  }
}

TEST_CASE("one process is a group of one") {
  std::unique_ptr<Communicator> alone = energy::makeSingleProcessCommunicator();
  CHECK(alone->rank() == 0);
  CHECK(alone->size() == 1);
  std::vector<double> values = {1.5, -2};
  REQUIRE(alone->allReduceSum(values).ok());
  CHECK(values == std::vector<double>{1.5, -2});
  CHECK(!alone->broadcast(values.data(), 16, 1).ok());
}
