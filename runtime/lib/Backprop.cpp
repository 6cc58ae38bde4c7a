//===- Backprop.cpp - A loss's gradient through the steps -----------------===//
//
// The checkpoint schedule of runForwardBackward.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/Backprop.h"

#include <algorithm>
#include <string>

using namespace energy;

BackpropTarget::~BackpropTarget() = default;

int64_t energy::checkpointInterval(int64_t steps, BackpropStorage storage) {
  if (storage == BackpropStorage::Full || steps <= 1)
    return 1;
  int64_t interval = 1;
  while (interval * interval < steps)
    ++interval;
  return interval;
}

Expected<int64_t> energy::runForwardBackward(BackpropTarget &target,
                                             const BackpropSchedule &schedule) {
  // At a fixed point the one snapshot is the start, restored at the end.
  const int64_t interval =
      target.implicit()
          ? schedule.maxSteps + 1
          : checkpointInterval(schedule.maxSteps, schedule.storage);
  // Slots [0, checkpoints) hold the checkpoints, the ones after them the
  // states inside the segment being reversed.
  const size_t checkpoints =
      static_cast<size_t>((schedule.maxSteps + interval - 1) / interval);
  auto inStep = [](int64_t step, Status status) {
    return status.withContext("step " + std::to_string(step));
  };

  int64_t taken = 0;
  if (Status begun = target.beginRun(); !begun)
    return begun;
  for (int64_t step = 0; step < schedule.maxSteps; ++step) {
    if (step % interval == 0)
      if (Status saved = target.save(step / interval); !saved)
        return saved;
    bool stop = false;
    if (Status ran = target.forwardStep(step, stop); !ran)
      return inStep(step, ran);
    taken = step + 1;
    if (stop)
      break;
  }
  if (Status finished = target.finishRun(); !finished)
    return finished;
  if (schedule.afterForward)
    if (Status status = schedule.afterForward(taken); !status)
      return status;
  if (Status seeded = target.seed(); !seeded)
    return seeded.withContext("the loss's gradient");

  const int64_t reversed = target.implicit() ? 0 : taken;
  for (int64_t segment = (reversed - 1) / interval;
       reversed > 0 && segment >= 0; --segment) {
    const int64_t start = segment * interval;
    const int64_t end = std::min(taken, start + interval);
    auto slotOf = [&](int64_t step) {
      return step == start ? static_cast<size_t>(segment)
                           : checkpoints + static_cast<size_t>(step - start);
    };
    Status restored = end - start == 1
                          ? target.restoreForBackward(slotOf(start))
                          : target.restore(slotOf(start));
    if (!restored)
      return restored;
    for (int64_t step = start; step + 1 < end; ++step) {
      if (step > start)
        if (Status saved = target.save(slotOf(step)); !saved)
          return saved;
      bool ignored = false;
      if (Status ran = target.forwardStep(step, ignored); !ran)
        return inStep(step, ran);
    }
    // The state is now that at the start of the segment's last step, and
    // each backward step leaves it at the start of its own step.
    for (int64_t step = end - 1; step >= start; --step) {
      if (step + 1 < end)
        if (Status restored = target.restoreForBackward(slotOf(step));
            !restored)
          return restored;
      if (Status back = target.backwardStep(step); !back)
        return inStep(step, back).withContext("backward");
    }
  }
  if (Status finished = target.finish(); !finished)
    return finished;
  if (target.implicit() && taken > 0)
    if (Status restored = target.restore(0); !restored)
      return restored;
  return taken;
}
