//===- energy-run.cpp - Runs an energy model ------------------------------===//
//
// `energy-run MODEL(.energy|.so) [--dim N=V]... [--in FILE]... [--init
// random:SEED] [--steps K] [--eval energy|grad|run] [--dtype f32|f64]
// [--threads N] [--out FILE] [--trace] [--json] [--interp] [--bench K]
// [--print-manifest]`: binds the model's tensors, then evaluates its energy,
// its gradients, or runs its dynamics, or times that evaluation (--bench).
// A .so is a compiled artifact; a .energy file is compiled in process (JIT);
// --interp uses the reference interpreter instead.
//
//===----------------------------------------------------------------------===//

#include "AttentionPlot.h"
#include "InterpretedLossGradients.h"
#include "InterpretedRun.h"
#include "ModelCheck.h"
#include "RunPlot.h"

#include "energy/Codegen/Artifact.h"
#include "energy/Dynamics/OptimizerRegistry.h"
#include "energy/Frontend/EmitEnergyDialect.h"
#include "energy/Frontend/Frontend.h"
#include "energy/IR/EnergyDialect.h"
#include "energy/IR/EnergyOps.h"
#include "energy/Interpreter/Interpreter.h"
#include "energy/Plugin/OptimizerTable.h"
#include "energy/Runtime/CudaDriver.h"
#include "energy/Runtime/Initializer.h"
#include "energy/Runtime/Log.h"
#include "energy/Runtime/Model.h"
#include "energy/Runtime/ModelFile.h"
#include "energy/Runtime/Random.h"
#include "energy/Runtime/Safetensors.h"
#include "energy/Runtime/Session.h"

#include "energy/Transforms/InternalErrors.h"
#include "energy/Transforms/Pipelines.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/WithColor.h"

#include <chrono>
#include <cmath>

using namespace llvm;
using namespace mlir;
using namespace mlir::energy;
namespace fe = ::energy::frontend;
using ::energy::tools::LossGradients;
using ::energy::tools::lossGradientsJson;
using ::energy::tools::lossGradientsText;
using mlir::energy::tools::checkModel;
using mlir::energy::tools::fromRuntime;
using mlir::energy::tools::InterpretedRun;
using mlir::energy::tools::lossGradientsOf;
using mlir::energy::tools::ModelCheckOptions;
using mlir::energy::tools::plotAttention;
using mlir::energy::tools::toRuntime;
using mlir::energy::tools::yieldedValue;

namespace {
enum class EvalKind { Energy, Grad, LossGrad, Run };

cl::OptionCategory runOptions("energy-run options");
cl::opt<std::string> modelFile(cl::Positional,
                               cl::desc("<model.energy or artifact.so>"),
                               cl::Required, cl::cat(runOptions));
cl::opt<bool>
    useInterpreter("interp",
                   cl::desc("Evaluate with the reference interpreter"),
                   cl::cat(runOptions));
cl::opt<std::string>
    deviceOption("device",
                 cl::desc("Where kernels run: cpu or cuda (the first GPU; "
                          "the CUDA driver is loaded only then). Default: "
                          "what an artifact was compiled for; a .energy "
                          "model is compiled for it"),
                 cl::value_desc("cpu|cuda"), cl::init(""), cl::cat(runOptions));
cl::list<std::string> dimValues("dim", cl::desc("Bind a dim"),
                                cl::value_desc("NAME=VALUE"),
                                cl::cat(runOptions));
cl::list<std::string> constValues("const", cl::desc("Override a const"),
                                  cl::value_desc("NAME=VALUE"),
                                  cl::cat(runOptions));
cl::opt<std::string>
    initSpec("init",
             cl::desc("Initialise tensors that have no value from a documented "
                      "generator: normal, scaled by 1/sqrt(last dim)"),
             cl::value_desc("random:SEED"), cl::cat(runOptions));
cl::list<std::string>
    inputFiles("in",
               cl::desc("Bind the tensors of a safetensors file (dims are "
                        "inferred from their shapes)"),
               cl::value_desc("FILE.safetensors"), cl::cat(runOptions));
cl::opt<std::string> outputFile(
    "out",
    cl::desc("Write the results (state tensors, outputs, or grad.T) to a "
             "safetensors file"),
    cl::value_desc("FILE.safetensors"), cl::cat(runOptions));
cl::opt<int64_t> stepsOverride("steps", cl::desc("Number of steps to run"),
                               cl::init(-1), cl::cat(runOptions));
cl::opt<EvalKind> evalKind(
    "eval", cl::desc("What to evaluate"), cl::init(EvalKind::Run),
    cl::values(clEnumValN(EvalKind::Energy, "energy", "the global energy"),
               clEnumValN(EvalKind::Grad, "grad",
                          "dE/dT for each state tensor (or --wrt)"),
               clEnumValN(EvalKind::LossGrad, "loss-grad",
                          "run the dynamics, then the losses and their "
                          "gradient through the run (adjoint.T for each param "
                          "and state)"),
               clEnumValN(EvalKind::Run, "run", "run the dynamics (default)")),
    cl::cat(runOptions));
cl::opt<bool> storeAllSteps(
    "store-all-steps",
    cl::desc("With --eval loss-grad: keep the state of every step for the "
             "backward pass instead of checkpoints every sqrt(steps) steps "
             "(more memory, no recomputation)"),
    cl::cat(runOptions));
cl::list<std::string> wrt("wrt", cl::CommaSeparated,
                          cl::desc("Tensors to differentiate (--eval grad)"),
                          cl::value_desc("a,b"), cl::cat(runOptions));
cl::opt<std::string>
    dtypeOption("dtype",
                cl::desc("Element type: f32 (default), f64, or bf16 with "
                         "--device cuda (f32 tensors, bf16 products on "
                         "tensor cores); an artifact has the one energyc "
                         "--dtype gave it"),
                cl::value_desc("f32|f64|bf16"), cl::cat(runOptions));
/// --threads N: LLVM's libraries register an option named `threads`, so
/// main() takes ours out of the command line before parsing the rest.
int threadCount = 0;
cl::opt<std::string> plotFile(
    "plot",
    cl::desc("Draw the run (.svg or .png): the energy per step, in total and "
             "per term, and the norm of the gradient with respect to the "
             "state tensors; with --json, the plotted numbers are printed too"),
    cl::value_desc("FILE"), cl::cat(runOptions));
cl::list<std::string> plotAttentionArgs(
    "plot-attention", cl::multi_val(2),
    cl::desc("After the run, draw the softmax weights of an lse energy term "
             "as a heat map (.svg or .png): TERM:CHILD FILE, CHILD holding "
             "child indices at positions (attn:i=3, or attn: for every "
             "child); the weights come from the reference interpreter at the "
             "run's final values"),
    cl::value_desc("TERM:CHILD FILE"), cl::cat(runOptions));
cl::list<std::string> plugins(
    "plugin",
    cl::desc("Load a plugin before compiling a .energy model (repeatable; "
             "ENERGY_PLUGINS, colon-separated, loads more)"),
    cl::value_desc("path"), cl::cat(runOptions));
cl::opt<bool> trace("trace", cl::desc("Print the energy after every step"),
                    cl::cat(runOptions));
cl::opt<bool> jsonOutput("json", cl::desc("Print results as one JSON object"),
                         cl::cat(runOptions));
cl::opt<int64_t> benchRepetitions(
    "bench",
    cl::desc("Time the evaluation (--eval): one warm-up, then K repetitions "
             "(each run from the same initial state); print the median, min "
             "and max milliseconds of one (--json: only {\"median_ms\": M}); "
             "no results are printed or written"),
    cl::value_desc("K"), cl::init(0), cl::cat(runOptions));
cl::opt<bool> checkAgainstInterpreter(
    "check",
    cl::desc("Compile the model in double precision and compare it with the "
             "reference interpreter from the same values (energy, every "
             "gradient on 1 and 3 threads, a run, each loss and its "
             "gradient), and the interpreter's gradients with finite "
             "differences; exit 0 when all agree, 1 when anything differs or "
             "fails, 3 when the model's values are not finite at these dims"),
    cl::cat(runOptions));
cl::opt<unsigned> jitOptLevel(
    "opt-level",
    cl::desc("Optimisation level (0-3) of a model compiled in process "
             "(default 3; lower levels compile faster)"),
    cl::init(3), cl::cat(runOptions));
cl::opt<bool> printManifest(
    "print-manifest",
    cl::desc("Print the compiled model's manifest (JSON) and exit"),
    cl::cat(runOptions));

int fail(const Twine &message) {
  WithColor::error(errs(), "energy-run") << message << "\n";
  return 1;
}

/// Parses `NAME=VALUE` settings into (name, value) pairs.
template <typename Number>
FailureOr<std::vector<std::pair<std::string, Number>>>
parseSettings(ArrayRef<std::string> settings, StringRef option) {
  std::vector<std::pair<std::string, Number>> result;
  for (const std::string &setting : settings) {
    auto [name, text] = StringRef(setting).split('=');
    Number value;
    bool bad;
    if constexpr (std::is_same_v<Number, double>)
      bad = text.getAsDouble(value);
    else
      bad = text.getAsInteger(10, value) || value <= 0;
    if (name.empty() || bad) {
      (void)fail(
          "--" + option + " " + setting + ": expected NAME=VALUE with a " +
          (std::is_same_v<Number, double> ? "number" : "positive integer"));
      return failure();
    }
    result.emplace_back(name.str(), value);
  }
  return result;
}

using RuntimeTensors = std::map<std::string, ::energy::Tensor>;

/// The name under which --out files keep the step counter (`step` is a
/// keyword, so no tensor has it); --in restores it.
constexpr const char *kStepTensor = "step";

/// The tensors of the --in files.
FailureOr<RuntimeTensors> readInputs() {
  RuntimeTensors tensors;
  for (const std::string &path : inputFiles) {
    ::energy::Expected<::energy::SafetensorsContents> contents =
        ::energy::readSafetensors(path);
    if (!contents)
      return fail(contents.message()), failure();
    for (auto &[name, value] : contents->tensors)
      if (!tensors.emplace(name, value).second)
        return fail("--in: tensor '" + name + "' is given twice"), failure();
  }
  return tensors;
}

/// Writes `tensors` to the --out file (atomically).
bool writeOutputs(const RuntimeTensors &tensors) {
  ::energy::Status status = ::energy::writeSafetensors(outputFile, tensors);
  if (!status)
    return fail(status.message()), false;
  return true;
}

json::Array toJson(const ::energy::Tensor &tensor) {
  json::Array data;
  for (int64_t i = 0; i < tensor.elementCount(); ++i)
    data.push_back(tensor.at(i));
  return data;
}

void printEnergy(double energy) {
  if (jsonOutput)
    outs() << formatv("{0}", json::Value(json::Object{{"energy", energy}}))
           << "\n";
  else
    outs() << formatv("energy {0:e}\n", energy);
}

/// Prints gradients (text or JSON) and writes them with --out.
bool reportGradients(const RuntimeTensors &gradients) {
  json::Object result;
  for (const auto &[name, value] : gradients) {
    if (jsonOutput) {
      json::Array shape;
      for (int64_t size : value.shape())
        shape.push_back(size);
      result[name] =
          json::Object{{"shape", std::move(shape)}, {"data", toJson(value)}};
    } else {
      outs() << name << " " << value.shapeString() << "\n";
      // With --out the values go to the file only.
      if (outputFile.empty())
        for (int64_t i = 0; i < value.elementCount(); ++i)
          outs() << formatv("  {0:e}\n", value.at(i));
    }
  }
  if (jsonOutput)
    outs() << formatv("{0}", json::Value(std::move(result))) << "\n";
  return outputFile.empty() || writeOutputs(gradients);
}

/// --eval loss-grad: each loss, then the adjoints as --eval grad reports
/// gradients (energy-exec prints the same).
bool reportLossGradients(const LossGradients &result) {
  outs() << (jsonOutput ? lossGradientsJson(result) + "\n"
                        : lossGradientsText(result, outputFile.empty()));
  return outputFile.empty() || writeOutputs(result.adjoints);
}

::energy::BackpropStorage backwardStorage() {
  return storeAllSteps ? ::energy::BackpropStorage::Full
                       : ::energy::BackpropStorage::Checkpointed;
}

std::optional<int64_t> stepsOption() {
  return stepsOverride >= 0 ? std::optional<int64_t>(stepsOverride)
                            : std::nullopt;
}

/// Reports the energy after each step (NaN where it was not evaluated):
/// --trace lines, or a progress line on stderr at most once a second.
class StepReporter {
public:
  void operator()(int64_t step, double energy) {
    bool evaluated = !std::isnan(energy);
    if (evaluated)
      energies.push_back(energy);
    if (trace && !jsonOutput)
      outs() << formatv("step {0,4}  energy {1:e}\n", step, energy);
    auto now = std::chrono::steady_clock::now();
    if (!trace && now - lastProgress > std::chrono::seconds(1)) {
      if (evaluated)
        errs() << formatv("energy-run: step {0}, energy {1:e}\n", step, energy);
      else
        errs() << formatv("energy-run: step {0}\n", step);
      lastProgress = now;
    }
  }
  /// The energy after the last step; none before any.
  std::optional<double> lastEnergy() const {
    return energies.empty() ? std::nullopt
                            : std::optional<double>(energies.back());
  }
  void printStart(double energy) {
    if (trace && !jsonOutput)
      outs() << formatv("start       energy {0:e}\n", energy);
  }
  /// The final report; `final` is the energy after the run (the start's
  /// when no step was taken; none for a model without energy terms), `plot`
  /// what --plot drew.
  void printSummary(int64_t steps, std::optional<double> final,
                    std::optional<json::Object> plot = std::nullopt) {
    if (jsonOutput) {
      json::Array traceJson;
      for (double e : energies)
        traceJson.push_back(e);
      json::Object result{{"energy", final.value_or(0.0)},
                          {"steps", steps},
                          {"trace", std::move(traceJson)}};
      if (plot)
        result["plot"] = std::move(*plot);
      outs() << formatv("{0}", json::Value(std::move(result))) << "\n";
    } else {
      if (final)
        outs() << formatv("final energy {0:e} after {1} steps\n", *final,
                          steps);
      else
        outs() << formatv("ran {0} steps (the model has no energy)\n", steps);
    }
  }

private:
  std::vector<double> energies;
  std::chrono::steady_clock::time_point lastProgress =
      std::chrono::steady_clock::now();
};

/// What --bench times: "energy", "grad", or "run" with its step count.
std::string benchedEvaluation(std::optional<int64_t> steps) {
  switch (evalKind) {
  case EvalKind::Energy:
    return "energy";
  case EvalKind::Grad:
    return "grad";
  case EvalKind::LossGrad:
    return "loss-grad";
  case EvalKind::Run:
    break;
  }
  return "run" + (steps ? formatv(" ({0} steps)", *steps).str() : "");
}

/// --bench: calls `evaluate` once to warm up, then benchRepetitions times,
/// timing each call alone; `reset` runs untimed before every call (to
/// restore the initial state). Both report their own errors. Prints the
/// median wall time of one call (text: also the minimum and the maximum)
/// in milliseconds; with --json only {"median_ms": M}.
bool runBench(llvm::function_ref<bool()> reset,
              llvm::function_ref<bool()> evaluate,
              llvm::function_ref<std::string()> describe) {
  if (!reset() || !evaluate())
    return false;
  std::vector<double> milliseconds;
  for (int64_t repetition = 0; repetition < benchRepetitions; ++repetition) {
    if (!reset())
      return false;
    auto start = std::chrono::steady_clock::now();
    bool ok = evaluate();
    auto end = std::chrono::steady_clock::now();
    if (!ok)
      return false;
    milliseconds.push_back(
        std::chrono::duration<double, std::milli>(end - start).count());
  }
  std::sort(milliseconds.begin(), milliseconds.end());
  size_t middle = milliseconds.size() / 2;
  double median = milliseconds.size() % 2
                      ? milliseconds[middle]
                      : (milliseconds[middle - 1] + milliseconds[middle]) / 2;
  if (jsonOutput)
    outs() << formatv("{0}", json::Value(json::Object{{"median_ms", median}}))
           << "\n";
  else
    outs() << formatv("bench {0}: median {1:f6} ms, min {2:f6} ms, max {3:f6} "
                      "ms over {4} repetitions\n",
                      describe(), median, milliseconds.front(),
                      milliseconds.back(), milliseconds.size());
  return true;
}

/// Everything the command line binds.
struct RunInputs {
  std::vector<std::pair<std::string, int64_t>> dims;
  std::vector<std::pair<std::string, double>> consts;
  RuntimeTensors tensors;
  std::optional<uint64_t> seed;
  std::optional<int64_t> step;
};

/// The gradients --eval grad evaluates on the interpreter: those of the
/// --wrt tensors, else of every state tensor but optimizer state.
SmallVector<GradientOp> wantedGradients(ModelOp model) {
  SmallVector<GradientOp> wanted;
  for (GradientOp gradient : model.getBody().front().getOps<GradientOp>()) {
    if (gradient.getOf() || gradient.isJoint())
      continue;
    auto tensor = model.lookupSymbol<TensorOp>(gradient.getTensorAttr());
    if (wrt.empty() ? ::energy::isDefaultGradient(describeTensor(tensor))
                    : llvm::is_contained(wrt, gradient.getTensor()))
      wanted.push_back(gradient);
  }
  return wanted;
}

/// --bench on the reference interpreter. Its caches of lets and gradients
/// are dropped before each repetition; a run starts each time from a copy
/// of the bound values (and step counter `firstStep`).
bool benchInterpreted(ModelOp model, const InterpretedRun &initial,
                      int64_t firstStep) {
  if (evalKind == EvalKind::Run) {
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
      FailureOr<int64_t> taken =
          current.run(*state, firstStep, stepsOverride, [](int64_t, double) {});
      if (failed(taken))
        return false;
      steps = *taken;
      return true;
    };
    return runBench(reset, evaluate, [&] { return benchedEvaluation(steps); });
  }
  InterpretedRun bound = initial;
  FailureOr<Interpreter> interpreter = bound.interpreter();
  if (failed(interpreter))
    return false;
  SmallVector<GradientOp> gradients = wantedGradients(model);
  auto reset = [&] {
    interpreter->invalidateCaches();
    return true;
  };
  auto evaluate = [&] {
    if (evalKind == EvalKind::Energy)
      return succeeded(interpreter->evaluateEnergy());
    for (GradientOp gradient : gradients)
      if (failed(interpreter->evaluateGradient(gradient)))
        return false;
    return true;
  };
  return runBench(reset, evaluate,
                  [] { return benchedEvaluation(std::nullopt); });
}

/// Runs a model on the reference interpreter.
int runInterpreted(ModelOp model, const RunInputs &inputs) {
  std::map<std::string, ArrayValue> given;
  for (const auto &[name, value] : inputs.tensors)
    given[name] = fromRuntime(value);
  InterpretedRun run(model);
  if (failed(run.bind(inputs.dims, inputs.consts, given, inputs.seed)))
    return 1;

  if (benchRepetitions > 0 && evalKind == EvalKind::LossGrad)
    return fail("--bench --eval loss-grad times compiled models only");
  if (benchRepetitions > 0)
    return benchInterpreted(model, run, inputs.step.value_or(0)) ? 0 : 1;

  if (evalKind == EvalKind::Energy) {
    FailureOr<double> energy = run.energy();
    if (failed(energy))
      return 1;
    printEnergy(*energy);
    return 0;
  }

  if (evalKind == EvalKind::Grad) {
    RuntimeTensors gradients;
    for (GradientOp gradient : wantedGradients(model)) {
      FailureOr<::energy::Tensor> value = run.gradient(gradient);
      if (failed(value))
        return 1;
      gradients.emplace(("grad." + gradient.getTensor()).str(),
                        std::move(*value));
    }
    return reportGradients(gradients) ? 0 : 1;
  }

  if (evalKind == EvalKind::LossGrad) {
    FailureOr<Interpreter> interpreter = run.interpreter();
    if (failed(interpreter))
      return 1;
    FailureOr<LossGradients> result =
        lossGradientsOf(model, *interpreter, stepsOption(), backwardStorage());
    return succeeded(result) && reportLossGradients(*result) ? 0 : 1;
  }

  StepReporter reporter;
  if (trace && !jsonOutput) {
    FailureOr<double> energy = run.energy();
    if (failed(energy))
      return 1;
    reporter.printStart(*energy);
  }
  int64_t firstStep = inputs.step.value_or(0);
  run.setStepCount(firstStep);
  ::energy::RunOptions options;
  if (stepsOverride >= 0)
    options.steps = stepsOverride;
  options.onStep = [&](int64_t step, double energy) { reporter(step, energy); };
  FailureOr<::energy::RunResult> finished = run.run(options);
  if (failed(finished))
    return 1;
  if (!outputFile.empty()) {
    FailureOr<RuntimeTensors> values = run.stateAndOutputs();
    if (failed(values))
      return 1;
    ::energy::Tensor step(::energy::DType::F64, {});
    step.set(0, static_cast<double>(run.stepCount()));
    values->emplace(kStepTensor, std::move(step));
    if (!writeOutputs(*values))
      return 1;
  }
  std::optional<double> final = finished->energy;
  if (model.getOps<TermOp>().empty())
    final.reset();
  reporter.printSummary(finished->steps, final);
  return 0;
}

/// The tensors --eval grad differentiates on a compiled model: the --wrt
/// tensors, else every state tensor but optimizer state.
std::vector<std::string> wantedGradients(const ::energy::Model &model) {
  std::vector<std::string> names(wrt.begin(), wrt.end());
  if (names.empty())
    for (const ::energy::ManifestBuffer &buffer : model.manifest().buffers)
      if (::energy::isDefaultGradient(buffer))
        names.push_back(buffer.name);
  return names;
}

/// --bench through the runtime. Gradients are timed with copying them out
/// of the session; a run starts each time from the state tensors (optimizer
/// state included) and the step counter the session had before the first.
bool benchCompiled(::energy::Session &session) {
  const ::energy::Model &model = session.model();
  if (evalKind == EvalKind::Run) {
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
    if (stepsOverride >= 0)
      options.steps = stepsOverride;
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
    return runBench(reset, evaluate, [&] { return benchedEvaluation(steps); });
  }
  if (evalKind == EvalKind::LossGrad) {
    // One training step's work: the run, the losses and the backward pass
    // (which leaves the state where the run started).
    ::energy::BackwardOptions options;
    options.steps = stepsOption();
    options.storage = backwardStorage();
    auto evaluate = [&] {
      ::energy::Expected<::energy::BackwardResult> result =
          session.backward(options);
      if (!result)
        return fail(result.message()), false;
      return true;
    };
    return runBench([] { return true; }, evaluate,
                    [] { return benchedEvaluation(std::nullopt); });
  }
  std::vector<std::string> gradients = wantedGradients(model);
  auto evaluate = [&] {
    if (evalKind == EvalKind::Energy) {
      ::energy::Expected<double> energy = session.energy();
      if (!energy)
        return fail(energy.message()), false;
      return true;
    }
    for (const std::string &name : gradients) {
      ::energy::Expected<::energy::Tensor> value = session.gradient(name);
      if (!value)
        return fail(value.message()), false;
    }
    return true;
  };
  return runBench([] { return true; }, evaluate,
                  [] { return benchedEvaluation(std::nullopt); });
}

/// --print-manifest: the manifest of a compiled model, as it gives it.
int printManifestOf(const ::energy::Model &model) {
  outs() << model.manifestText() << "\n";
  return 0;
}

/// The model of `sourceMgr`'s main buffer; null after reporting errors.
OwningOpRef<ModuleOp> emitModel(MLIRContext &context, SourceMgr &sourceMgr) {
  fe::DiagnosticEngine diagnostics(sourceMgr);
  return fe::emitSource(context, sourceMgr, sourceMgr.getMainFileID(),
                        diagnostics);
}

/// Runs a compiled model through the runtime library.
int runCompiled(const ::energy::Model &model, const RunInputs &inputs) {
  std::string modelDtype =
      StringRef(std::string(::energy::dtypeName(model.dtype()))).lower();
  // bf16 artifacts keep f32 tensors.
  StringRef wanted =
      dtypeOption == "bf16" ? StringRef("f32") : StringRef(dtypeOption);
  if (!wanted.empty() && wanted != modelDtype)
    return fail(model.label() + " was compiled for " + modelDtype +
                "; recompile it with energyc --dtype " + dtypeOption);
  int threads = threadCount;
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

  if (benchRepetitions > 0)
    return benchCompiled(session) ? 0 : 1;

  if (evalKind == EvalKind::Energy) {
    ::energy::Expected<double> energy = session.energy();
    if (!energy)
      return fail(energy.message());
    printEnergy(*energy);
    return 0;
  }

  if (evalKind == EvalKind::Grad) {
    RuntimeTensors gradients;
    for (const std::string &name : wantedGradients(model)) {
      ::energy::Expected<::energy::Tensor> value = session.gradient(name);
      if (!value)
        return fail(value.message());
      gradients.emplace("grad." + name, std::move(*value));
    }
    return reportGradients(gradients) ? 0 : 1;
  }

  if (evalKind == EvalKind::LossGrad) {
    ::energy::Expected<LossGradients> result = ::energy::tools::lossGradientsOf(
        session, stepsOption(), backwardStorage());
    if (!result)
      return fail(result.message());
    return reportLossGradients(*result) ? 0 : 1;
  }

  StepReporter reporter;
  std::optional<::energy::RunPlot> plot;
  if (!plotFile.empty()) {
    if (!model.hasDynamics() || model.termNames().empty())
      return fail("--plot draws the energy of a run: model " + model.name() +
                  " has " +
                  (model.hasDynamics() ? "no energy" : "no dynamics"));
    plot.emplace(session, wantedGradients(model));
  }
  if ((trace && !jsonOutput) || plot) {
    ::energy::Expected<double> energy = session.energy();
    if (!energy)
      return fail(energy.message());
    reporter.printStart(*energy);
    if (plot)
      if (::energy::Status status = plot->record(0, *energy); !status)
        return fail(status.message());
  }
  ::energy::RunOptions runOptions;
  if (stepsOverride >= 0)
    runOptions.steps = stepsOverride;
  // The energy after every step only where it is printed or drawn.
  runOptions.trace = trace || jsonOutput || plot;
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
  }
  if (!plotStatus)
    return fail(plotStatus.message());
  if (!plotAttentionArgs.empty()) {
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
    if (failed(plotAttention(source, session, plotAttentionArgs[0],
                             plotAttentionArgs[1], inputs.consts, error)))
      return error.empty() ? 1 : fail(error);
  }
  std::optional<json::Object> plotted;
  if (plot) {
    std::string error;
    if (!plot->write(plotFile, model.name(), error))
      return fail(error);
    plotted = plot->toJson();
  }
  if (!outputFile.empty()) {
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
    if (!writeOutputs(*values))
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

} // namespace

/// Removes `--threads N` / `--threads=N` from `arguments` into threadCount.
bool takeThreadsOption(SmallVectorImpl<const char *> &arguments) {
  for (size_t i = 1; i < arguments.size(); ++i) {
    StringRef argument = arguments[i];
    if (!argument.consume_front("--threads") &&
        !argument.consume_front("-threads"))
      continue;
    size_t count = 1;
    if (argument.empty() && i + 1 < arguments.size()) {
      argument = arguments[i + 1];
      count = 2;
    } else if (!argument.consume_front("=")) {
      continue;
    }
    if (argument.getAsInteger(10, threadCount) || threadCount <= 0)
      return fail("--threads " + argument +
                  ": expected a positive number of threads"),
             false;
    arguments.erase(arguments.begin() + i, arguments.begin() + i + count);
    --i;
  }
  return true;
}

int main(int argc, char **argv) {
  ::energy::setLogHandler(::energy::printLogToStderr);
  InitLLVM init(argc, argv);
  SmallVector<const char *> arguments(argv, argv + argc);
  if (!takeThreadsOption(arguments))
    return 1;
  argc = arguments.size();
  argv = const_cast<char **>(arguments.data());
  cl::HideUnrelatedOptions(runOptions);
  cl::ParseCommandLineOptions(
      argc, argv,
      "energy-run: evaluates an energy model's energy and gradients, or runs "
      "its dynamics\n");
  if (llvm::Error error = mlir::energy::loadPlugins(
          std::vector<std::string>(plugins.begin(), plugins.end())))
    return fail(toString(std::move(error)));
  if (!deviceOption.empty() && deviceOption != "cpu" && deviceOption != "cuda")
    return fail("--device " + deviceOption + ": expected cpu or cuda");
  if (deviceOption == "cuda") {
    if (useInterpreter)
      return fail("--device cuda runs compiled kernels; the interpreter "
                  "runs on the CPU");
    // The driver is opened only now, so that energy-run starts anywhere.
    ::energy::Expected<::energy::CudaDevice> device =
        ::energy::openCudaDevice(0);
    if (!device)
      return fail("--device cuda: " + device.message());
  }
  RunInputs inputs;
  if (!initSpec.empty()) {
    uint64_t value;
    StringRef spec(initSpec);
    if (!spec.consume_front("random:") || spec.getAsInteger(10, value))
      return fail("--init " + initSpec + ": expected random:SEED");
    inputs.seed = value;
  }
  if (!dtypeOption.empty() && dtypeOption != "f32" && dtypeOption != "f64" &&
      dtypeOption != "bf16")
    return fail("--dtype " + dtypeOption + ": expected f32, f64 or bf16");
  if (dtypeOption == "bf16" && deviceOption != "cuda")
    return fail("--dtype bf16 needs --device cuda (bf16 products run on "
                "tensor cores)");
  if ((!plotFile.empty() || !plotAttentionArgs.empty()) &&
      (useInterpreter || evalKind != EvalKind::Run ||
       benchRepetitions.getNumOccurrences()))
    return fail(std::string(plotFile.empty() ? "--plot-attention" : "--plot") +
                " draws a compiled run: use it with --eval run, without "
                "--interp or --bench");
  if (benchRepetitions.getNumOccurrences()) {
    if (benchRepetitions < 1)
      return fail("--bench " + Twine(benchRepetitions) +
                  ": expected a positive number of repetitions");
    if (!outputFile.empty())
      return fail("--bench times the evaluation and writes no results; it "
                  "cannot be used with --out");
    if (trace)
      return fail("--bench prints only timings; it cannot be used with "
                  "--trace");
  }
  if (printManifest && useInterpreter && !StringRef(modelFile).ends_with(".so"))
    return fail("--print-manifest needs a compiled model; the interpreter "
                "has no manifest");
  auto dims = parseSettings<int64_t>(dimValues, "dim");
  auto consts = parseSettings<double>(constValues, "const");
  if (failed(dims) || failed(consts))
    return 1;
  inputs.dims = *dims;
  inputs.consts = *consts;
  FailureOr<RuntimeTensors> tensors = readInputs();
  if (failed(tensors))
    return 1;
  inputs.tensors = std::move(*tensors);
  if (auto it = inputs.tensors.find(kStepTensor); it != inputs.tensors.end()) {
    if (it->second.elementCount() != 1 || it->second.at(0) < 0)
      return fail("--in: 'step' must be a scalar step count");
    inputs.step = static_cast<int64_t>(it->second.at(0));
    inputs.tensors.erase(it);
  }

  // The source: the .energy file, or the one an artifact embeds. A file
  // that is neither is refused in one line, before it is loaded or parsed.
  ::energy::Expected<::energy::ModelFileKind> kind =
      ::energy::identifyModelFile(
          modelFile, ::energy::AcceptedModelFiles::SourceOrArtifact);
  if (!kind)
    return fail(kind.message());
  SourceMgr sourceMgr;
  bool isArtifact = *kind == ::energy::ModelFileKind::Artifact;
  std::optional<::energy::Model> artifact;
  if (isArtifact) {
    ::energy::Expected<::energy::Model> loaded =
        ::energy::Model::load(modelFile);
    if (!loaded)
      return fail(loaded.message());
    artifact = std::move(*loaded);
    if (printManifest)
      return printManifestOf(*artifact);
    std::string compiledFor = artifact->device();
    if (!useInterpreter && !deviceOption.empty() && deviceOption != compiledFor)
      return fail(modelFile + " is compiled for " + compiledFor +
                  ", not --device " + deviceOption +
                  " (compile it with energyc --target " + deviceOption + ")");
    if (!useInterpreter)
      return runCompiled(*artifact, inputs);
    sourceMgr.AddNewSourceBuffer(
        MemoryBuffer::getMemBufferCopy(artifact->source(),
                                       artifact->sourceName()),
        SMLoc());
  } else {
    ErrorOr<std::unique_ptr<MemoryBuffer>> file =
        MemoryBuffer::getFileOrSTDIN(modelFile);
    if (!file)
      return fail("cannot read " + modelFile + ": " +
                  file.getError().message());
    sourceMgr.AddNewSourceBuffer(std::move(*file), SMLoc());
  }

  MLIRContext context;
  context.loadDialect<EnergyDialect, arith::ArithDialect>();
  context.printOpOnDiagnostic(false);
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = emitModel(context, sourceMgr);
  if (!module)
    return 1;

  if (checkAgainstInterpreter) {
    if (useInterpreter || benchRepetitions > 0 || !outputFile.empty() ||
        !inputs.tensors.empty())
      return fail("--check takes no --interp, --bench, --out or --in: it "
                  "binds its own values (--init random:SEED)");
    ModelCheckOptions check;
    check.dims = inputs.dims;
    check.consts = inputs.consts;
    check.seed = inputs.seed.value_or(1);
    check.steps = stepsOption();
    check.optLevel = jitOptLevel;
    check.sourceName = modelFile;
    check.sourceText =
        sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID())->getBuffer().str();
    check.json = jsonOutput;
    return checkModel(*module, check);
  }

  if (!useInterpreter) {
    ArtifactOptions options;
    options.dtype = dtypeOption.empty() ? "f32" : dtypeOption.getValue();
    options.sourceName = modelFile;
    options.sourceText =
        sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID())->getBuffer();
    if (deviceOption == "cuda")
      options.target = withCudaDevice(options.target);
    FailureOr<OwningOpRef<ModuleOp>> lowered =
        compileToArtifactModule(*module, options);
    if (failed(lowered))
      return 1;
    std::string error;
    FailureOr<JitArtifact> compiled = failure();
    (void)guardCompilation("JIT compilation", module->getLoc(), [&] {
      compiled = compileInProcess(**lowered, error, jitOptLevel);
      return success(succeeded(compiled));
    });
    if (failed(compiled))
      return fail("compiling " + modelFile + ": " + error);
    ::energy::Expected<::energy::Model> jitModel = ::energy::Model::fromSymbols(
        modelFile, compiled->lookup, compiled->handle);
    if (!jitModel)
      return fail(jitModel.message());
    if (printManifest)
      return printManifestOf(*jitModel);
    return runCompiled(*jitModel, inputs);
  }

  PassManager passes(&context, ModuleOp::getOperationName());
  buildUpdatePipeline(passes.nest<ModelOp>(),
                      std::vector<std::string>(wrt.begin(), wrt.end()));
  reportCrashesByPass(passes);
  if (failed(guardCompilation("the pass pipeline", module->getLoc(),
                              [&] { return passes.run(*module); })))
    return 1;
  return runInterpreted(*module->getOps<ModelOp>().begin(), inputs);
}
