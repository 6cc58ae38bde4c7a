//===- RunInterpreted.cpp - energy-run --interp ---------------------------===//
//
// A model bound on an InterpretedRun, evaluated, run, or timed, and reported
// as a compiled run is.
//
//===----------------------------------------------------------------------===//

#include "RunInterpreted.h"

#include "InterpretedLossGradients.h"
#include "InterpretedRun.h"
#include "RunReport.h"

#include "energy/Interpreter/Interpreter.h"
#include "energy/Runtime/Manifest.h"
#include "energy/Runtime/Session.h"

#include "llvm/ADT/STLExtras.h"

using namespace llvm;
using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::tools;
using ::energy::tools::LossGradients;

namespace {
/// The gradients --eval grad evaluates on the interpreter: those of the
/// --wrt tensors, else of every state tensor but optimizer state.
SmallVector<GradientOp> wantedGradients(ModelOp model,
                                        const RunSettings &settings) {
  SmallVector<GradientOp> wanted;
  for (GradientOp gradient : model.getBody().front().getOps<GradientOp>()) {
    if (gradient.getOf() || gradient.isJoint())
      continue;
    auto tensor = model.lookupSymbol<TensorOp>(gradient.getTensorAttr());
    if (settings.wrt.empty()
            ? ::energy::isDefaultGradient(describeTensor(tensor))
            : llvm::is_contained(settings.wrt, gradient.getTensor()))
      wanted.push_back(gradient);
  }
  return wanted;
}

/// --bench on the reference interpreter. Its caches of lets and gradients
/// are dropped before each repetition; a run starts each time from a copy
/// of the bound values (and step counter `firstStep`).
bool benchInterpreted(ModelOp model, const InterpretedRun &initial,
                      int64_t firstStep, const RunSettings &settings) {
  if (settings.eval == EvalKind::Run) {
    InterpretedRun current = initial;
    if (!current.hasDynamics())
      return fail("--bench --eval run: model " + model.getSymName() +
                  " has no dynamics to run"),
             false;
    std::optional<Interpreter> state;
    int64_t steps = 0;
    auto reset = [&] {
      current = initial;
      FailureOr<Interpreter> created = current.interpreter();
      if (failed(created))
        return false;
      state.emplace(std::move(*created));
      return true;
    };
    auto evaluate = [&] {
      FailureOr<int64_t> taken = current.run(*state, firstStep, settings.steps,
                                             [](int64_t, double) {});
      if (failed(taken))
        return false;
      steps = *taken;
      return true;
    };
    return runBench(settings, reset, evaluate,
                    [&] { return benchedEvaluation(settings, steps); });
  }
  InterpretedRun bound = initial;
  FailureOr<Interpreter> interpreter = bound.interpreter();
  if (failed(interpreter))
    return false;
  SmallVector<GradientOp> gradients = wantedGradients(model, settings);
  auto reset = [&] {
    interpreter->invalidateCaches();
    return true;
  };
  auto evaluate = [&] {
    if (settings.eval == EvalKind::Energy)
      return succeeded(interpreter->evaluateEnergy());
    for (GradientOp gradient : gradients)
      if (failed(interpreter->evaluateGradient(gradient)))
        return false;
    return true;
  };
  return runBench(settings, reset, evaluate,
                  [&] { return benchedEvaluation(settings, std::nullopt); });
}
} // namespace

int tools::runInterpreted(ModelOp model, const RunInputs &inputs,
                          const RunSettings &settings) {
  std::map<std::string, ArrayValue> given;
  for (const auto &[name, value] : inputs.tensors)
    given[name] = fromRuntime(value);
  InterpretedRun run(model);
  if (failed(run.bind(inputs.dims, inputs.consts, given, inputs.seed)))
    return 1;

  if (settings.benchRepetitions > 0 && settings.eval == EvalKind::LossGrad)
    return fail("--bench --eval loss-grad times compiled models only");
  if (settings.benchRepetitions > 0)
    return benchInterpreted(model, run, inputs.step.value_or(0), settings) ? 0
                                                                           : 1;

  if (settings.eval == EvalKind::Energy) {
    FailureOr<double> energy = run.energy();
    if (failed(energy))
      return 1;
    printEnergy(settings, *energy);
    return 0;
  }

  if (settings.eval == EvalKind::Grad) {
    RuntimeTensors gradients;
    for (GradientOp gradient : wantedGradients(model, settings)) {
      FailureOr<::energy::Tensor> value = run.gradient(gradient);
      if (failed(value))
        return 1;
      gradients.emplace(("grad." + gradient.getTensor()).str(),
                        std::move(*value));
    }
    return reportGradients(settings, gradients) ? 0 : 1;
  }

  if (settings.eval == EvalKind::LossGrad) {
    FailureOr<Interpreter> interpreter = run.interpreter();
    if (failed(interpreter))
      return 1;
    FailureOr<LossGradients> result =
        lossGradientsOf(model, *interpreter, settings.stepsOption(),
                        settings.backwardStorage());
    return succeeded(result) && reportLossGradients(settings, *result) ? 0 : 1;
  }

  StepReporter reporter(settings);
  if (settings.trace && !settings.json) {
    FailureOr<double> energy = run.energy();
    if (failed(energy))
      return 1;
    reporter.printStart(*energy);
  }
  int64_t firstStep = inputs.step.value_or(0);
  run.setStepCount(firstStep);
  ::energy::RunOptions options;
  if (settings.steps >= 0)
    options.steps = settings.steps;
  options.onStep = [&](int64_t step, double energy) { reporter(step, energy); };
  FailureOr<::energy::RunResult> finished = run.run(options);
  if (failed(finished))
    return 1;
  if (!settings.outputFile.empty()) {
    FailureOr<RuntimeTensors> values = run.stateAndOutputs();
    if (failed(values))
      return 1;
    ::energy::Tensor step(::energy::DType::F64, {});
    step.set(0, static_cast<double>(run.stepCount()));
    values->emplace(kStepTensor, std::move(step));
    if (!writeOutputs(settings, *values))
      return 1;
  }
  std::optional<double> final = finished->energy;
  if (model.getOps<TermOp>().empty())
    final.reset();
  reporter.printSummary(finished->steps, final);
  return 0;
}
