//===- SessionRun.cpp - A session's dynamics: steps and runs --------------===//
//
// Session::step and Session::run: the artifact's step kernel with its run
// begin and finish programs, the stopping rule after each step, the step
// count a run takes, and the check that the states stay finite.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/Session.h"

#include "ModelState.h"

#include "energy/Runtime/Manifest.h"

#include <cmath>
#include <cstring>
#include <limits>

using namespace energy;

/// Whether every element of `tensor` is finite: no element has an exponent
/// of all ones (a branch-free pass the compiler vectorises).
static bool allFinite(const Tensor &tensor) {
  auto check = [&](auto bits, auto exponent) {
    using Bits = decltype(bits);
    const auto *elements = reinterpret_cast<const std::byte *>(tensor.data());
    Bits nonFinite = 0;
    for (int64_t i = 0; i < tensor.elementCount(); ++i) {
      std::memcpy(&bits, elements + i * sizeof(Bits), sizeof(Bits));
      nonFinite |= static_cast<Bits>((bits & exponent) == exponent);
    }
    return nonFinite == 0;
  };
  if (tensor.dtype() == DType::F32)
    return check(uint32_t(0), uint32_t(0x7f800000));
  return check(uint64_t(0), uint64_t(0x7ff0000000000000));
}

Status Session::runProgram(const detail::Kernel &kernel, const char *what) {
  if (!kernel.function)
    return Status::success();
  if (Status status = call(kernel.function, kernel.symbol, nextStep, nullptr);
      !status)
    return status.withContext(what);
  return Status::success();
}

Status Session::stepKernel() {
  const detail::Kernel &kernel = owner.state->step;
  if (Status status = call(kernel.function, kernel.symbol, nextStep, nullptr);
      !status)
    return status.withContext("step " + std::to_string(nextStep));
  ++nextStep;
  return Status::success();
}

Status Session::step() {
  if (!owner.state->step.function)
    return Status::error("model " + owner.name() + " has no dynamics to run");
  CallScope scope(*this);
  if (Status status = prepare(); !status)
    return status;
  const detail::ModelState &state = *owner.state;
  if (Status status = runProgram(state.runBegin, "the start of the step");
      !status)
    return status;
  if (Status status = stepKernel(); !status)
    return status;
  return runProgram(state.runFinish, "the end of the step");
}

Status Session::checkStatesFinite(const std::string &where) {
  const Manifest &manifest = owner.manifest();
  for (size_t b = 0; b < manifest.buffers.size(); ++b) {
    const ManifestBuffer &buffer = manifest.buffers[b];
    if (!isForwardState(buffer))
      continue;
    if (!allFinite(readBuffer(b)))
      return Status::error(where + " produced a non-finite value in tensor '" +
                           buffer.name + "'");
  }
  return Status::success();
}

Expected<int64_t> energy::stepsToTake(std::optional<int64_t> requested,
                                      std::optional<int64_t> declared) {
  int64_t steps = requested ? *requested : declared.value_or(0);
  if (steps < 0)
    return Status::error("the step count is negative: " +
                         std::to_string(steps));
  return steps;
}

Expected<int64_t> Session::stepsToTake(std::optional<int64_t> requested) {
  const Manifest &manifest = owner.manifest();
  std::optional<int64_t> declared;
  if (!requested && manifest.steps) {
    Expected<int64_t> count =
        manifest.steps->evaluate([&](const std::string &name) {
          return std::optional<int64_t>(dimValues[*manifest.findDim(name)]);
        });
    if (!count)
      return count.status().withContext("the step count (" +
                                        manifest.steps->text() + ")");
    declared = *count;
  }
  return energy::stepsToTake(requested, declared);
}

Expected<RunResult> Session::run(const RunOptions &options) {
  if (!owner.hasDynamics())
    return Status::error("model " + owner.name() + " has no dynamics to run");
  CallScope scope(*this);
  if (Status status = prepare(); !status)
    return status;
  Expected<int64_t> stepsOrError = stepsToTake(options.steps);
  if (!stepsOrError)
    return stepsOrError.status();
  int64_t steps = *stepsOrError;

  RunResult result;
  // The steps of a change of variables leave the state to the run's
  // finish: where it is read after each step, each step finishes.
  const detail::ModelState &state = *owner.state;
  const bool finishEachStep = options.trace || options.onStep;
  if (Status status = runProgram(state.runBegin, "the start of the run");
      !status)
    return status;
  for (int64_t i = 0; i < steps; ++i) {
    int64_t number = nextStep;
    std::string where = "step " + std::to_string(number);
    if (i > 0 && finishEachStep)
      if (Status status = runProgram(state.runBegin, where.c_str()); !status)
        return status;
    if (Status status = stepKernel(); !status)
      return status;
    if (finishEachStep)
      if (Status status = runProgram(state.runFinish, where.c_str()); !status)
        return status;
    double energyAfter = std::numeric_limits<double>::quiet_NaN();
    if (options.trace) {
      Expected<double> evaluated = energy();
      if (!evaluated)
        return evaluated.status().withContext(where);
      energyAfter = *evaluated;
      result.trace.push_back(energyAfter);
    }
    // On a GPU, reading every state on the host each step would move it
    // there and back: its values are checked when the energy is not finite
    // and after the last step.
    if (!deviceMemory || (options.trace && !std::isfinite(energyAfter)))
      if (Status status = checkStatesFinite(where); !status)
        return status;
    if (options.trace && !std::isfinite(energyAfter))
      return Status::error(where + " produced a non-finite energy");
    ++result.steps;
    if (options.onStep)
      options.onStep(number, energyAfter);
    const detail::Kernel &until = owner.state->until;
    if (until.function) {
      double stop = 0;
      if (Status status = call(until.function, until.symbol, number, &stop);
          !status)
        return status.withContext(where);
      if (stop != 0.0)
        break;
    }
  }
  if (!finishEachStep)
    if (Status status = runProgram(state.runFinish, "the end of the run");
        !status)
      return status;
  if ((deviceMemory || state.runFinish.function) && result.steps > 0)
    if (Status status =
            checkStatesFinite("step " + std::to_string(nextStep - 1));
        !status)
      return status;
  if (!result.trace.empty()) {
    result.energy = result.trace.back();
    return result;
  }
  if (!options.finalEnergy) {
    result.energy = std::numeric_limits<double>::quiet_NaN();
    return result;
  }
  Expected<double> energyNow = energy();
  if (!energyNow)
    return energyNow.status();
  if (result.steps > 0 && !std::isfinite(*energyNow))
    return Status::error("step " + std::to_string(nextStep - 1) +
                         " produced a non-finite energy");
  result.energy = *energyNow;
  return result;
}
