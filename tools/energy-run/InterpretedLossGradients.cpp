//===- InterpretedLossGradients.cpp - energy-run --interp loss-grad -------===//
//
// The interpreter under Session::backward's schedule.
//
//===----------------------------------------------------------------------===//

#include "InterpretedLossGradients.h"
#include "energy/Runtime/Session.h"

#include "InterpretedRun.h"

#include "energy/Interpreter/InterpretedBackprop.h"

using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::tools;

FailureOr<LossGradients>
tools::lossGradientsOf(ModelOp model, Interpreter &interpreter,
                       std::optional<int64_t> steps,
                       ::energy::BackpropStorage storage) {
  FailureOr<std::unique_ptr<InterpretedBackprop>> target =
      InterpretedBackprop::create(model, interpreter);
  if (failed(target))
    return failure();
  ::energy::BackpropSchedule schedule;
  std::optional<int64_t> declared;
  DynamicsOp dynamics = model.getDynamics();
  if (!steps && dynamics) {
    FailureOr<int64_t> count = dynamics.getSteps().evaluate(
        [&](StringRef name) { return interpreter.getDim(name); });
    if (failed(count))
      return dynamics.emitError("the step count cannot be evaluated");
    declared = *count;
  }
  ::energy::Expected<int64_t> stepCount =
      ::energy::stepsToTake(steps, declared);
  if (!stepCount)
    return dynamics ? dynamics.emitError(stepCount.message())
                    : model.emitError(stepCount.message());
  schedule.maxSteps = *stepCount;
  schedule.storage = storage;
  LossGradients gradients;
  schedule.afterForward = [&](int64_t taken) -> ::energy::Status {
    gradients.steps = taken;
    for (TermOp term : model.getBody().front().getOps<TermOp>()) {
      if (!term.getLoss())
        continue;
      FailureOr<double> value = interpreter.evaluateTerm(term);
      if (failed(value))
        return ::energy::Status::error("loss '" + term.getSymName().str() +
                                       "' failed in the interpreter");
      gradients.losses[term.getSymName().str()] = *value;
    }
    return ::energy::Status::success();
  };
  ::energy::Expected<int64_t> taken =
      ::energy::runForwardBackward(**target, schedule);
  if (!taken)
    return model.emitError() << taken.message();
  for (const std::string &name : (*target)->differentiable()) {
    FailureOr<ArrayValue> adjoint =
        interpreter.getTensorValue(name + ".adjoint");
    if (failed(adjoint))
      return failure();
    gradients.adjoints.emplace("adjoint." + name, toRuntime(*adjoint));
  }
  return gradients;
}
