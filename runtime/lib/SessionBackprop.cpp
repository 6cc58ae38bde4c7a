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

#include <cmath>
#include <cstring>

using namespace energy;

Expected<int64_t> Session::defaultStepCount() {
  const Manifest &manifest = owner.manifest();
  if (!manifest.steps)
    return int64_t{0};
  Expected<int64_t> count =
      manifest.steps->evaluate([&](const std::string &name) {
        return std::optional<int64_t>(dimValues[*manifest.findDim(name)]);
      });
  if (!count)
    return count.status().withContext("the step count (" +
                                      manifest.steps->text() + ")");
  return count;
}

void Session::overwriteBuffer(size_t index, const Tensor &value) {
  if (deviceMemory)
    copyToDevice(buffers[index].data(), value.data(), value.byteSize());
  else
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

Expected<BackwardResult> Session::backward(const BackwardOptions &options) {
  const detail::ModelState &state = *owner.state;
  if (!state.backwardStep.function)
    return Status::error("model " + owner.name() +
                         " has no loss to differentiate (declare one with "
                         "`loss NAME = ...;`)");
  if (Status status = prepare(); !status)
    return status;
  int64_t steps = 0;
  if (options.steps) {
    steps = *options.steps;
  } else {
    Expected<int64_t> count = defaultStepCount();
    if (!count)
      return count.status();
    steps = *count;
  }
  if (steps < 0)
    return Status::error("the step count is negative: " +
                         std::to_string(steps));
  if (steps > 0 && !state.step.function)
    return Status::error("model " + owner.name() + " has no dynamics to run");

  // The schedule's target: this session's kernels and buffers.
  class Target : public BackpropTarget {
  public:
    explicit Target(Session &session) : session(session) {
      const Manifest &manifest = session.owner.manifest();
      for (size_t i = 0; i < manifest.buffers.size(); ++i)
        if (isForwardState(manifest.buffers[i]))
          states.push_back(i);
    }
    Status forwardStep(int64_t step, bool &stop) override {
      const detail::ModelState &state = *session.owner.state;
      stop = false;
      last = step;
      if (Status status = session.call(state.step.function, state.step.symbol,
                                       step, nullptr);
          !status)
        return status;
      if (!state.until.function)
        return Status::success();
      double done = 0;
      if (Status status = session.call(state.until.function, state.until.symbol,
                                       step, &done);
          !status)
        return status;
      stop = done != 0.0;
      return Status::success();
    }
    Status seed() override {
      const detail::Kernel &kernel = session.owner.state->backwardSeed;
      return session.call(kernel.function, kernel.symbol, last, nullptr);
    }
    Status backwardStep(int64_t step) override {
      const detail::Kernel &kernel = session.owner.state->backwardStep;
      return session.call(kernel.function, kernel.symbol, step, nullptr);
    }
    Status finish() override {
      const detail::Kernel &kernel = session.owner.state->backwardFinish;
      return session.call(kernel.function, kernel.symbol, 0, nullptr);
    }
    Status save(size_t slot) override {
      if (slots.size() <= slot)
        slots.resize(slot + 1);
      slots[slot].clear();
      for (size_t index : states)
        slots[slot].push_back(session.readBuffer(index));
      return Status::success();
    }
    Status restore(size_t slot) override {
      for (size_t k = 0; k < states.size(); ++k)
        session.overwriteBuffer(states[k], slots[slot][k]);
      return Status::success();
    }
    Status evaluateLosses(BackwardResult &result) {
      for (const auto &[name, kernel] : session.owner.state->losses) {
        double value = 0;
        if (Status status =
                session.call(kernel.function, kernel.symbol, last, &value);
            !status)
          return status;
        if (!std::isfinite(value))
          return Status::error("loss '" + name + "' is not finite (" +
                               std::to_string(value) + ") after " +
                               std::to_string(last + 1) + " steps");
        result.losses[name] = value;
        result.loss += value;
      }
      return Status::success();
    }

    int64_t last = 0;

  private:
    Session &session;
    std::vector<size_t> states;
    std::vector<std::vector<Tensor>> slots;
  };

  Target target(*this);
  BackwardResult result;
  BackpropSchedule schedule;
  schedule.maxSteps = steps;
  schedule.storage = options.storage;
  schedule.afterForward = [&](int64_t taken) {
    result.steps = taken;
    return target.evaluateLosses(result);
  };
  Expected<int64_t> taken = runForwardBackward(target, schedule);
  nextStep = 0;
  if (!taken)
    return taken.status();
  return result;
}

Expected<const Tensor *> Session::adjoint(const std::string &name) {
  const Manifest &manifest = owner.manifest();
  for (size_t i = 0; i < manifest.buffers.size(); ++i)
    if (manifest.buffers[i].adjointOf == name) {
      if (Status status = prepare(); !status)
        return status;
      return &readBuffer(i);
    }
  std::string names;
  for (const std::string &tensor : owner.adjointNames())
    names += (names.empty() ? "" : ", ") + tensor;
  return Status::error(
      "model " + owner.name() + " has no adjoint of '" + name +
      "' (it has adjoints of: " + (names.empty() ? "none" : names) + ")");
}
