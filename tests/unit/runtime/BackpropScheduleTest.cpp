//===- BackpropScheduleTest.cpp - The order runForwardBackward calls in ---===//
//
// Unit tests of the checkpoint schedule against a target that records its
// calls: every backward step runs at the state its forward step started
// from, a snapshot restored for a backward step in place is used by that
// step only, and the run ends at its initial state (snapshot 0).
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/Backprop.h"

#include <doctest/doctest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

using namespace energy;

namespace {

/// A target whose state is the step count it has run, and which records
/// each call; restoreForBackward marks the slot as read in place.
class RecordingTarget : public BackpropTarget {
public:
  int64_t state = 0;
  std::map<size_t, int64_t> slots;
  std::vector<std::string> calls;
  /// The state the next backward step reads (a slot's, read in place).
  std::optional<int64_t> readInPlace;

  Status forwardStep(int64_t step, bool &stop) override {
    CHECK(state == step);
    ++state;
    stop = false;
    calls.push_back("forward " + std::to_string(step));
    return Status::success();
  }
  Status seed() override { return Status::success(); }
  Status backwardStep(int64_t step) override {
    // The state this step reads is the one its forward step started from.
    CHECK(readInPlace.value_or(state) == step);
    readInPlace.reset();
    calls.push_back("backward " + std::to_string(step));
    return Status::success();
  }
  Status finish() override { return Status::success(); }
  Status save(size_t slot) override {
    slots[slot] = state;
    return Status::success();
  }
  Status restore(size_t slot) override {
    REQUIRE(slots.count(slot));
    state = slots[slot];
    calls.push_back("restore " + std::to_string(slot));
    return Status::success();
  }
  Status restoreForBackward(size_t slot) override {
    REQUIRE(slots.count(slot));
    if (slot == 0)
      return restore(slot);
    readInPlace = slots[slot];
    calls.push_back("in place " + std::to_string(slot));
    return Status::success();
  }
};

} // namespace

TEST_CASE("each snapshot read in place is read by the backward step right "
          "after it, and the run ends at its start") {
  for (BackpropStorage storage :
       {BackpropStorage::Full, BackpropStorage::Checkpointed}) {
    for (int64_t steps : {1, 2, 5, 9, 10}) {
      CAPTURE(steps);
      CAPTURE(storage == BackpropStorage::Full);
      RecordingTarget target;
      BackpropSchedule schedule;
      schedule.maxSteps = steps;
      schedule.storage = storage;
      Expected<int64_t> taken = runForwardBackward(target, schedule);
      REQUIRE(taken);
      CHECK(*taken == steps);
      CHECK(target.state == 0);
      CHECK(!target.readInPlace);
      int64_t backwardSteps = 0;
      for (size_t i = 0; i < target.calls.size(); ++i) {
        if (target.calls[i].rfind("backward ", 0) == 0)
          ++backwardSteps;
        if (target.calls[i].rfind("in place ", 0) == 0) {
          REQUIRE(i + 1 < target.calls.size());
          CHECK(target.calls[i + 1].rfind("backward ", 0) == 0);
        }
      }
      CHECK(backwardSteps == steps);
      CHECK(target.calls.back() == "backward 0");
    }
  }
}
