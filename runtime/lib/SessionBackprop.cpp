//===- SessionBackprop.cpp - A loss's gradient through a session's run ----===//
//
// Session::backward: the artifact's step, loss and backward kernels under
// the checkpoint schedule of Backprop.h, and resetting the state between
// runs.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/Session.h"

#include "ModelState.h"

#include "energy/Runtime/CudaDriver.h"
#include "energy/Runtime/Manifest.h"

#include <cmath>
#include <cstring>

using namespace energy;

void Session::overwriteBuffer(size_t index, const Tensor &value) {
  if (deviceMemory) {
    // A failed wait leaves the GPU failed; the next call reports it.
    (void)waitForQueuedCopies();
    copyToDevice(buffers[index].data(), value.data(), value.byteSize());
    residentOnDevice[index] = false;
  } else
    std::memcpy(buffers[index].data(), value.data(), value.byteSize());
}

Status Session::resetStates() {
  if (Status status = prepare(); !status)
    return status;
  const Manifest &manifest = owner.manifest();
  for (const auto &[index, value] : initialStates) {
    const ManifestBuffer &buffer = manifest.buffers[index];
    if (buffer.init && buffer.init->kind == InitKind::Copy)
      overwriteBuffer(index,
                      readBuffer(*manifest.findBuffer(buffer.init->source)));
    else
      overwriteBuffer(index, value);
  }
  nextStep = 0;
  return Status::success();
}

BackwardHooks::~BackwardHooks() = default;
Status BackwardHooks::beforeForwardStep(int64_t) { return Status::success(); }
Status BackwardHooks::afterForwardStep(int64_t) { return Status::success(); }
Status BackwardHooks::restored() { return Status::success(); }
Status BackwardHooks::beforeLosses() { return Status::success(); }
Status BackwardHooks::afterLosses(BackwardResult &) {
  return Status::success();
}
Status BackwardHooks::afterSeed() { return Status::success(); }
Status BackwardHooks::beforeBackwardStep(int64_t) { return Status::success(); }
Status BackwardHooks::afterBackwardStep(int64_t) { return Status::success(); }
Status BackwardHooks::beforeFinish() { return Status::success(); }
Status BackwardHooks::afterFinish() { return Status::success(); }

namespace energy {
/// The schedule's target: a session's kernels and buffers, and the
/// caller's hooks between them.
class SessionBackpropTarget : public BackpropTarget {
public:
  SessionBackpropTarget(Session &session, BackwardHooks *given)
      : session(session), hooks(given ? *given : none), inPlace(!given) {
    const Manifest &manifest = session.owner.manifest();
    for (size_t i = 0; i < manifest.buffers.size(); ++i)
      if (isForwardState(manifest.buffers[i]) &&
          !manifest.buffers[i].runConstant)
        states.push_back(i);
  }
  Status forwardStep(int64_t step, bool &stop) override {
    const detail::ModelState &state = session.modelState();
    stop = false;
    last = step;
    if (Status status = hooks.beforeForwardStep(step); !status)
      return status;
    if (Status status =
            session.call(state.step.function, state.step.symbol, step, nullptr);
        !status)
      return status;
    if (Status status = hooks.afterForwardStep(step); !status)
      return status;
    if (!state.until.function)
      return Status::success();
    double done = 0;
    if (Status status =
            session.call(state.until.function, state.until.symbol, step, &done);
        !status)
      return status;
    stop = done != 0.0;
    return Status::success();
  }
  Status beginRun() override {
    return session.runProgram(session.modelState().runBegin,
                              "the start of the run");
  }
  Status finishRun() override {
    return session.runProgram(session.modelState().runFinish,
                              "the end of the run");
  }
  bool implicit() override {
    return session.owner.manifest().kernels.backward->implicit;
  }
  Status seed() override {
    const detail::Kernel &kernel = session.modelState().backwardSeed;
    if (Status status =
            session.call(kernel.function, kernel.symbol, last, nullptr);
        !status)
      return status;
    return hooks.afterSeed();
  }
  Status backwardStep(int64_t step) override {
    // What restoreForBackward let this step read in place, this step only.
    struct ReadHere {
      Session &session;
      ~ReadHere() { session.readElsewhere.clear(); }
    } readHere{session};
    const detail::ModelState &state = session.modelState();
    if (const detail::Kernel &cotangents = state.backwardCotangents;
        cotangents.function)
      if (Status status = session.call(cotangents.function, cotangents.symbol,
                                       step, nullptr);
          !status)
        return status;
    if (Status status = hooks.beforeBackwardStep(step); !status)
      return status;
    const detail::Kernel &kernel = state.backwardStep;
    if (Status status =
            session.call(kernel.function, kernel.symbol, step, nullptr);
        !status)
      return status;
    return hooks.afterBackwardStep(step);
  }
  Status finish() override {
    if (Status status = hooks.beforeFinish(); !status)
      return status;
    const detail::Kernel &kernel = session.modelState().backwardFinish;
    if (Status status =
            session.call(kernel.function, kernel.symbol, 0, nullptr);
        !status)
      return status;
    return hooks.afterFinish();
  }
  Status save(size_t slot) override {
    if (slots.size() <= slot)
      slots.resize(slot + 1);
    std::vector<Tensor> &saved = slots[slot];
    if (session.deviceMemory)
      return saveOnDevice(slot);
    saved.resize(states.size());
    for (size_t k = 0; k < states.size(); ++k) {
      const Tensor &value = session.readBuffer(states[k]);
      // The last call's snapshot memory, where it fits.
      if (saved[k].dtype() == value.dtype() &&
          saved[k].shape() == value.shape() && !saved[k].borrowed())
        std::memcpy(saved[k].data(), value.data(), value.byteSize());
      else
        saved[k] = value;
    }
    return Status::success();
  }
  /// On a GPU the snapshots stay there, copied by the driver in order with
  /// the kernels: no state passes through the host.
  Status saveOnDevice(size_t slot) {
    std::vector<Tensor> &saved = slots[slot];
    std::vector<bool> &ready = session.snapshotsOnDevice;
    if (ready.size() <= slot)
      ready.resize(slot + 1, false);
    bool fits = ready[slot] && saved.size() == states.size();
    for (size_t k = 0; fits && k < states.size(); ++k)
      fits = saved[k].shape() == session.buffers[states[k]].shape() &&
             saved[k].dtype() == session.buffers[states[k]].dtype();
    if (!fits) {
      ready[slot] = false;
      saved.clear();
      for (size_t k = 0; k < states.size(); ++k) {
        const Tensor &value = session.buffers[states[k]];
        Expected<Tensor> snapshot = Tensor::allocate(
            value.dtype(), value.shape(), *session.deviceMemory);
        if (!snapshot)
          return snapshot.status().withContext(
              "a snapshot of " +
              session.owner.manifest().buffers[states[k]].name);
        prefetchManaged(snapshot->data(), snapshot->byteSize(),
                        /*toDevice=*/true, session.stream);
        saved.push_back(std::move(*snapshot));
      }
      ready[slot] = true;
    }
    for (size_t k = 0; k < states.size(); ++k) {
      const Tensor &value = session.buffers[states[k]];
      if (Status status = copyWithinDevice(saved[k].data(), value.data(),
                                           value.byteSize(), session.stream);
          !status)
        return status.withContext(
            "saving " + session.owner.manifest().buffers[states[k]].name);
    }
    return copiesQueued();
  }
  /// After copies queued on the session's stream: the next kernel's host
  /// code waits for them where it must; hooks may read the buffers at once.
  Status copiesQueued() {
    session.queuedCopies = true;
    return inPlace ? Status::success() : session.waitForQueuedCopies();
  }
  Status restore(size_t slot) override {
    for (size_t k = 0; k < states.size(); ++k) {
      if (!session.deviceMemory) {
        session.overwriteBuffer(states[k], slots[slot][k]);
        continue;
      }
      Tensor &buffer = session.buffers[states[k]];
      if (Status status = copyWithinDevice(buffer.data(), slots[slot][k].data(),
                                           buffer.byteSize(), session.stream);
          !status)
        return status.withContext(
            "restoring " + session.owner.manifest().buffers[states[k]].name);
    }
    if (session.deviceMemory)
      if (Status status = copiesQueued(); !status)
        return status;
    return hooks.restored();
  }
  /// With no hooks to see the buffers: the backward step reads the
  /// snapshot where it is (the last one, slot 0, is copied back).
  Status restoreForBackward(size_t slot) override {
    if (!inPlace || slot == 0)
      return restore(slot);
    session.readElsewhere.clear();
    for (size_t k = 0; k < states.size(); ++k)
      session.readElsewhere.push_back({states[k], slots[slot][k].data()});
    return Status::success();
  }
  /// Each loss at the current values, after `taken` steps.
  Status evaluateLosses(int64_t taken, BackwardResult &result) {
    if (Status status = hooks.beforeLosses(); !status)
      return status;
    result.steps = taken;
    for (const auto &[name, kernel] : session.modelState().losses) {
      double value = 0;
      if (Status status =
              session.call(kernel.function, kernel.symbol, last, &value);
          !status)
        return status;
      result.losses[name] = value;
    }
    if (Status status = hooks.afterLosses(result); !status)
      return status;
    result.loss = 0;
    for (const auto &[name, value] : result.losses) {
      if (!std::isfinite(value))
        return Status::error("loss '" + name + "' is not finite (" +
                             std::to_string(value) + ") after " +
                             std::to_string(taken) + " steps");
      result.loss += value;
    }
    return Status::success();
  }

private:
  Session &session;
  BackwardHooks none;
  BackwardHooks &hooks;
  bool inPlace;
  int64_t last = 0;
  std::vector<size_t> states;
  std::vector<std::vector<Tensor>> &slots = session.snapshots;
};
} // namespace energy

Expected<int64_t> Session::lossRunSteps(const BackwardOptions &options) {
  const detail::ModelState &state = *owner.state;
  if (!state.backwardStep.function)
    return Status::error("model " + owner.name() +
                         " has no loss to differentiate (declare one with "
                         "`loss NAME = ...;`)");
  if (Status status = prepare(); !status)
    return status;
  Expected<int64_t> steps = stepsToTake(options.steps);
  if (!steps)
    return steps.status();
  if (*steps > 0 && !state.step.function)
    return Status::error("model " + owner.name() + " has no dynamics to run");
  return steps;
}

Expected<BackwardResult> Session::backward(const BackwardOptions &options) {
  CallScope scope(*this, /*backward=*/true);
  Expected<int64_t> steps = lossRunSteps(options);
  if (!steps)
    return steps.status();
  SessionBackpropTarget target(*this, options.hooks);
  BackwardResult result;
  BackpropSchedule schedule;
  schedule.maxSteps = *steps;
  schedule.storage = options.storage;
  schedule.afterForward = [&](int64_t taken) {
    return target.evaluateLosses(taken, result);
  };
  Expected<int64_t> taken = runForwardBackward(target, schedule);
  nextStep = 0;
  if (!taken)
    return taken.status();
  if (Status status = waitForQueuedCopies(); !status)
    return status.withContext("the backward pass");
  return result;
}

Status Session::backwardStepAtCotangents() {
  CallScope scope(*this, /*backward=*/true);
  const detail::ModelState &state = *owner.state;
  if (!state.backwardStep.function || !state.backwardCotangents.function)
    return Status::error(
        "model " + owner.name() +
        " has no backward step with its cotangents apart (a loss, and "
        "compiled for a sharded run with supplied gradients)");
  for (const ManifestBuffer &buffer : owner.manifest().buffers)
    if (buffer.deferredOf)
      return Status::error("model " + owner.name() + " defers a product of " +
                           *buffer.deferredOf +
                           " to its backward finish; a backward step alone "
                           "needs it compiled without (a ring's block model)");
  if (Status status = prepare(); !status)
    return status;
  return call(state.backwardStep.function, state.backwardStep.symbol, 0,
              nullptr);
}

Expected<BackwardResult>
Session::evaluateLosses(const BackwardOptions &options) {
  CallScope scope(*this);
  Expected<int64_t> steps = lossRunSteps(options);
  if (!steps)
    return steps.status();
  SessionBackpropTarget target(*this, options.hooks);
  int64_t taken = 0;
  if (Status begun = target.beginRun(); !begun)
    return begun;
  for (int64_t step = 0; step < *steps; ++step) {
    bool stop = false;
    if (Status ran = target.forwardStep(step, stop); !ran)
      return ran.withContext("step " + std::to_string(step));
    taken = step + 1;
    if (stop)
      break;
  }
  nextStep = taken;
  if (Status finished = target.finishRun(); !finished)
    return finished;
  BackwardResult result;
  if (Status status = target.evaluateLosses(taken, result); !status)
    return status;
  return result;
}

Expected<size_t> Session::adjointBuffer(const std::string &name) {
  const Manifest &manifest = owner.manifest();
  for (size_t i = 0; i < manifest.buffers.size(); ++i)
    if (manifest.buffers[i].adjointOf == name) {
      if (Status status = prepare(); !status)
        return status;
      return i;
    }
  std::string names;
  for (const std::string &tensor : owner.adjointNames())
    names += (names.empty() ? "" : ", ") + tensor;
  return Status::error(
      "model " + owner.name() + " has no adjoint of '" + name +
      "' (it has adjoints of: " + (names.empty() ? "none" : names) + ")");
}

Expected<const Tensor *> Session::adjoint(const std::string &name) {
  Expected<size_t> index = adjointBuffer(name);
  if (!index)
    return index.status();
  return &readBuffer(*index);
}

Expected<const Tensor *> Session::deviceAdjoint(const std::string &name) {
  if (!deviceMemory)
    return Status::error("deviceAdjoint('" + name + "'): model " +
                         owner.name() +
                         " runs on the CPU; its adjoints are host arrays "
                         "(adjoint)");
  Expected<size_t> index = adjointBuffer(name);
  if (!index)
    return index.status();
  const Tensor &buffer = buffers[*index];
  prefetchManaged(buffer.data(), buffer.byteSize(), /*toDevice=*/true, stream);
  residentOnDevice[*index] = false;
  return &buffer;
}
