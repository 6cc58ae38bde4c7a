//===- RunCompiled.cpp - energy-run on a compiled model -------------------===//
//
// A session of a compiled model, bound, evaluated, run (with --plot and
// --plot-attention), or timed, through the runtime library.
//
//===----------------------------------------------------------------------===//

#include "RunCompiled.h"

#include "AttentionPlot.h"
#include "RunPlot.h"
#include "RunReport.h"

#include "energy/Frontend/EmitEnergyDialect.h"
#include "energy/Frontend/Frontend.h"
#include "energy/IR/EnergyDialect.h"
#include "energy/IR/EnergyOps.h"
#include "energy/Runtime/Manifest.h"
#include "energy/Runtime/Session.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

using namespace llvm;
using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::tools;
namespace fe = ::energy::frontend;
using ::energy::tools::LossGradients;

namespace {
/// --bench through the runtime. Gradients are timed with copying them out
/// of the session; a run starts each time from the state tensors (optimizer
/// state included) and the step counter the session had before the first.
bool benchCompiled(::energy::Session &session, const RunSettings &settings) {
  const ::energy::Model &model = session.model();
  if (settings.eval == EvalKind::Run) {
    if (!model.hasDynamics())
      return fail("--bench --eval run: model " + model.name() +
                  " has no dynamics to run"),
             false;
    // Prepares the session (binding, initial values), untimed.
    ::energy::Expected<RuntimeTensors> initial = session.stateTensors();
    if (!initial)
      return fail(initial.message()), false;
    int64_t firstStep = session.stepCount();
    ::energy::RunOptions options;
    if (settings.steps >= 0)
      options.steps = settings.steps;
    options.trace = false;
    // The dynamics alone, as the anchors time them.
    options.finalEnergy = false;
    int64_t steps = 0;
    auto reset = [&] {
      for (const auto &[name, value] : *initial)
        if (::energy::Status status = session.set(name, value); !status)
          return fail(status.message()), false;
      session.setStepCount(firstStep);
      return true;
    };
    auto evaluate = [&] {
      ::energy::Expected<::energy::RunResult> result = session.run(options);
      if (!result)
        return fail(result.message()), false;
      steps = result->steps;
      return true;
    };
    return runBench(settings, reset, evaluate,
                    [&] { return benchedEvaluation(settings, steps); });
  }
  if (settings.eval == EvalKind::LossGrad) {
    // One training step's work: the run, the losses and the backward pass
    // (which leaves the state where the run started).
    ::energy::BackwardOptions options;
    options.steps = settings.stepsOption();
    options.storage = settings.backwardStorage();
    auto evaluate = [&] {
      ::energy::Expected<::energy::BackwardResult> result =
          session.backward(options);
      if (!result)
        return fail(result.message()), false;
      return true;
    };
    return runBench(
        settings, [] { return true; }, evaluate,
        [&] { return benchedEvaluation(settings, std::nullopt); });
  }
  std::vector<std::string> gradients =
      ::energy::gradientsToReport(model.manifest(), settings.wrt);
  auto evaluate = [&] {
    if (settings.eval == EvalKind::Energy) {
      ::energy::Expected<double> energy = session.energy();
      if (!energy)
        return fail(energy.message()), false;
      return true;
    }
    ::energy::Expected<std::vector<::energy::Tensor>> values =
        session.gradients(gradients);
    if (!values)
      return fail(values.message()), false;
    return true;
  };
  return runBench(
      settings, [] { return true; }, evaluate,
      [&] { return benchedEvaluation(settings, std::nullopt); });
}
} // namespace

int tools::printManifestOf(const ::energy::Model &model) {
  outs() << model.manifestText() << "\n";
  return 0;
}

OwningOpRef<ModuleOp> tools::emitModel(MLIRContext &context,
                                       SourceMgr &sourceMgr,
                                       std::optional<unsigned> buffer,
                                       bool generated) {
  fe::DiagnosticEngine diagnostics(sourceMgr);
  diagnostics.ignoreWarnings(generated);
  return fe::emitSource(context, sourceMgr,
                        buffer.value_or(sourceMgr.getMainFileID()),
                        diagnostics);
}

int tools::runCompiled(const ::energy::Model &model, const RunInputs &inputs,
                       const RunSettings &settings) {
  std::string modelDtype =
      StringRef(std::string(::energy::dtypeName(model.dtype()))).lower();
  // bf16 artifacts keep f32 tensors.
  StringRef wanted =
      settings.dtype == "bf16" ? StringRef("f32") : StringRef(settings.dtype);
  if (!wanted.empty() && wanted != modelDtype)
    return fail(model.label() + " was compiled for " + modelDtype +
                "; recompile it with energyc --dtype " + settings.dtype);
  int threads = settings.threads;
  if (threads <= 0)
    if (const char *text = std::getenv("ENERGY_NUM_THREADS"))
      threads = std::atoi(text);
  if (threads > 0)
    model.setThreads(threads);

  ::energy::SessionOptions options;
  for (const auto &[name, value] : inputs.dims)
    options.dims[name] = value;
  for (const auto &[name, value] : inputs.consts)
    options.consts[name] = value;
  options.seed = inputs.seed;
  ::energy::Expected<::energy::Session> created = model.session(options);
  if (!created)
    return fail(created.message());
  ::energy::Session &session = *created;
  if (inputs.step)
    session.setStepCount(*inputs.step);
  for (const auto &[name, value] : inputs.tensors)
    if (::energy::Status status = session.set(name, value); !status)
      return fail(status.message());
  auto printNotes = [&] {
    for (const std::string &note : session.notes())
      WithColor::note(errs(), "energy-run") << note << "\n";
  };
  printNotes();

  if (settings.benchRepetitions > 0)
    return benchCompiled(session, settings) ? 0 : 1;

  if (settings.eval == EvalKind::Energy) {
    ::energy::Expected<double> energy = session.energy();
    if (!energy)
      return fail(energy.message());
    printEnergy(settings, *energy);
    return 0;
  }

  if (settings.eval == EvalKind::Grad) {
    std::vector<std::string> names =
        ::energy::gradientsToReport(model.manifest(), settings.wrt);
    ::energy::Expected<std::vector<::energy::Tensor>> values =
        session.gradients(names);
    if (!values)
      return fail(values.message());
    RuntimeTensors gradients;
    for (auto [name, value] : llvm::zip(names, *values))
      gradients.emplace("grad." + name, std::move(value));
    return reportGradients(settings, gradients) ? 0 : 1;
  }

  if (settings.eval == EvalKind::LossGrad) {
    ::energy::Expected<LossGradients> result = ::energy::tools::lossGradientsOf(
        session, settings.stepsOption(), settings.backwardStorage());
    if (!result)
      return fail(result.message());
    return reportLossGradients(settings, *result) ? 0 : 1;
  }

  StepReporter reporter(settings);
  std::optional<::energy::RunPlot> plot;
  if (!settings.plotFile.empty()) {
    if (!model.hasDynamics() || model.termNames().empty())
      return fail("--plot draws the energy of a run: model " + model.name() +
                  " has " +
                  (model.hasDynamics() ? "no energy" : "no dynamics"));
    plot.emplace(session,
                 ::energy::gradientsToReport(model.manifest(), settings.wrt));
  }
  if ((settings.trace && !settings.json) || plot) {
    ::energy::Expected<double> energy = session.energy();
    if (!energy)
      return fail(energy.message());
    reporter.printStart(*energy);
    if (plot)
      if (::energy::Status status = plot->record(0, *energy); !status)
        return fail(status.message());
  }
  ::energy::RunOptions runOptions;
  if (settings.steps >= 0)
    runOptions.steps = settings.steps;
  // The energy after every step only where it is printed or drawn.
  runOptions.trace = settings.trace || settings.json || plot;
  ::energy::Status plotStatus = ::energy::Status::success();
  int64_t stepsDone = 0;
  runOptions.onStep = [&](int64_t step, double energy) {
    reporter(step, energy);
    if (plot && plotStatus)
      plotStatus = plot->record(++stepsDone, energy);
  };
  // A model without dynamics runs no steps: its outputs are still written.
  ::energy::RunResult finished;
  if (model.hasDynamics()) {
    ::energy::Expected<::energy::RunResult> result = session.run(runOptions);
    if (!result)
      return fail(result.message());
    finished = std::move(*result);
  } else if (!model.termNames().empty()) {
    // Its energy at the values given, as the interpreter reports it.
    ::energy::Expected<double> energy = session.energy();
    if (!energy)
      return fail(energy.message());
    finished.energy = *energy;
  }
  if (!plotStatus)
    return fail(plotStatus.message());
  if (!settings.plotAttention.empty()) {
    SourceMgr sourceMgr;
    sourceMgr.AddNewSourceBuffer(
        MemoryBuffer::getMemBufferCopy(model.source(), model.sourceName()),
        SMLoc());
    MLIRContext context;
    context.loadDialect<EnergyDialect, arith::ArithDialect>();
    context.printOpOnDiagnostic(false);
    SourceMgrDiagnosticHandler handler(sourceMgr, &context);
    OwningOpRef<ModuleOp> module = emitModel(context, sourceMgr);
    if (!module)
      return 1;
    ModelOp source = *module->getOps<ModelOp>().begin();
    std::string error;
    if (failed(plotAttention(source, session, settings.plotAttention[0],
                             settings.plotAttention[1], inputs.consts, error)))
      return error.empty() ? 1 : fail(error);
  }
  std::optional<json::Object> plotted;
  if (plot) {
    std::string error;
    if (!plot->write(settings.plotFile, model.name(), error))
      return fail(error);
    plotted = plot->toJson();
  }
  if (!settings.outputFile.empty()) {
    ::energy::Expected<RuntimeTensors> values = session.stateTensors();
    if (!values)
      return fail(values.message());
    for (const std::string &name : session.outputNames()) {
      ::energy::Expected<::energy::Tensor> value = session.get(name);
      if (!value)
        return fail(value.message());
      values->emplace(name, std::move(*value));
    }
    ::energy::Tensor step(::energy::DType::F64, {});
    step.set(0, static_cast<double>(session.stepCount()));
    values->emplace(kStepTensor, std::move(step));
    if (!writeOutputs(settings, *values))
      return 1;
  }
  // Artifacts from before terms were listed report an energy regardless.
  bool noEnergy = model.termNames().empty() &&
                  model.manifestText().find("\"terms\"") != std::string::npos;
  reporter.printSummary(finished.steps,
                        noEnergy ? std::nullopt
                                 : std::optional<double>(finished.energy),
                        std::move(plotted));
  return 0;
}
