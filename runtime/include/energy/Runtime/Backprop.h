//===- Backprop.h - A loss's gradient through the steps ---------*- C++ -*-===//
//
// The schedule of a run followed by its backward pass: checkpoints every
// √steps steps (or every step), each segment recomputed from its checkpoint
// and reversed step by step; or, differentiating at the fixed point, no
// steps reversed at all. Shared by compiled sessions and the interpreter.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_RUNTIME_BACKPROP_H
#define ENERGY_RUNTIME_BACKPROP_H

#include "energy/Runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <functional>

namespace energy {

/// What the schedule asks of whoever runs a model's programs (a session of
/// an artifact, or the interpreter). Snapshots hold the forward state:
/// every state tensor but adjoints and cotangents.
class BackpropTarget {
public:
  virtual ~BackpropTarget();
  /// Runs step `step` of the dynamics; sets `stop` when the stopping rule
  /// holds after it.
  virtual Status forwardStep(int64_t step, bool &stop) = 0;
  /// What the dynamics run before the first step and after the last (a
  /// change of the state's variables); the backward program's `seed`
  /// reverses the latter and its `finish` the former.
  virtual Status beginRun() { return Status::success(); }
  virtual Status finishRun() { return Status::success(); }
  /// The backward program's parts (`seed`, one `step`, `finish`).
  virtual Status seed() = 0;
  virtual Status backwardStep(int64_t step) = 0;
  virtual Status finish() = 0;
  /// Copies the forward state into snapshot `slot` (slots count from 0 and
  /// are reused), or back from it.
  virtual Status save(size_t slot) = 0;
  virtual Status restore(size_t slot) = 0;
  /// Restores snapshot `slot` for the backward step that follows at once:
  /// a target may let that step read the snapshot where it is instead of
  /// copying it back (the slot is then not restored again). Snapshot 0 is
  /// restored for the last backward step, which leaves the state as the
  /// run started.
  virtual Status restoreForBackward(size_t slot) { return restore(slot); }
  /// Whether the backward program differentiates at the fixed point the run
  /// ends at (`backward implicit`): then the run keeps one snapshot (its
  /// start), and `finish` follows `seed` at the final state with no
  /// backward steps between them.
  virtual bool implicit() { return false; }
};

/// How the states the backward pass needs are kept.
enum class BackpropStorage {
  /// A snapshot every ⌈√steps⌉ steps, each segment recomputed once: memory
  /// grows with √steps, time by one more forward run.
  Checkpointed,
  /// A snapshot of every step: memory grows with steps, nothing recomputed.
  Full,
};

struct BackpropSchedule {
  /// Steps at most (fewer when the stopping rule fires).
  int64_t maxSteps = 0;
  BackpropStorage storage = BackpropStorage::Checkpointed;
  /// When set, called after the forward run with the steps taken, before
  /// the seed: where the caller evaluates the loss at the final values.
  std::function<Status(int64_t steps)> afterForward;
};

/// The interval between checkpoints for a run of `steps` steps.
int64_t checkpointInterval(int64_t steps, BackpropStorage storage);

/// Runs the dynamics forward from the target's current state, then the
/// backward program: on success the adjoint tensors hold the gradient of
/// the loss and the forward state is back where the run started. Returns
/// the steps taken.
Expected<int64_t> runForwardBackward(BackpropTarget &target,
                                     const BackpropSchedule &schedule);

} // namespace energy

#endif // ENERGY_RUNTIME_BACKPROP_H
