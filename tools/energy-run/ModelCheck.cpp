//===- ModelCheck.cpp - energy-run --check: compiled against the oracle ---===//
//
// One model, compiled in double precision and run beside the reference
// interpreter from the same values: the energy, every tensor's gradient (on
// one thread and on three: the same bits), a run of the dynamics (states,
// optimizer state, outputs) and each loss with its gradient through the
// run; and the interpreter's gradients against finite differences of its
// own energy and losses, so that the derivation is checked too.
//
//===----------------------------------------------------------------------===//

#include "ModelCheck.h"

#include "InterpretedLossGradients.h"
#include "InterpretedRun.h"
#include "LossGradients.h"

#include "energy/Codegen/Artifact.h"
#include "energy/Codegen/CompileCache.h"
#include "energy/Runtime/Model.h"
#include "energy/Runtime/Session.h"
#include "energy/Transforms/InternalErrors.h"
#include "energy/Transforms/Pipelines.h"

#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <limits>
#include <random>

using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::tools;
using llvm::formatv;

namespace {

// Tolerances, relative to the largest magnitude of the reference value
// (floored at 1e-3, so values near zero compare absolutely):
// - compiled against interpreted, both in double precision: they differ
//   in the order of additions only, a few ulps times the number of terms
//   (≤ 10³ at the small dims a check runs), amplified by a few steps of
//   dynamics: 1e-9.
// - finite differences: the interpreter's energy at t ± h·v and t ± h·v/2
//   (|v|₂ = 1, h = 1e-4·max(1, |t|∞)), extrapolated (Richardson), differ
//   from g·v by h⁴·|∂⁵E/∂v⁵|/480 and a roundoff of about κ·ε·|E|/h ≲ 1e-10
//   for κ ≲ 10³: 1e-6 relative to max(1, |E|, |g·v|) catches an error of
//   1e-5 in a gradient while leaving orders of margin.
// - compiled in single precision against interpreted in double: f32's
//   roundoff (6e-8 relative) times the same ≤ 10⁴ terms and amplification:
//   1e-3, which still catches a dropped term or vector (an error of the
//   order of the values).
constexpr double kCompiledTolerance = 1e-9;
constexpr double kSingleTolerance = 1e-3;
constexpr double kDifferenceTolerance = 1e-6;

struct Comparison {
  std::string quantity;
  double error;
  double scale;
  bool ok;
};

/// The checks made so far and how the check ends.
class Report {
public:
  explicit Report(bool json) : json(json) {}

  /// Compares `compiled` with `reference` (same length) within
  /// `tolerance` relative to the reference's largest magnitude.
  void compare(StringRef quantity, ArrayRef<double> compiled,
               ArrayRef<double> reference, double tolerance,
               double floor = 1e-3) {
    if (compiled.size() != reference.size()) {
      differs(formatv("{0}: {1} values compiled, {2} interpreted", quantity,
                      compiled.size(), reference.size()));
      return;
    }
    double scale = floor, error = 0;
    for (auto [a, b] : llvm::zip(compiled, reference)) {
      scale = std::max(scale, std::abs(b));
      double difference = std::abs(a - b);
      error = std::isnan(difference) ? INFINITY : std::max(error, difference);
    }
    record(quantity, error, scale, error <= tolerance * scale);
  }

  void record(StringRef quantity, double error, double scale, bool ok) {
    checks.push_back({quantity.str(), error, scale, ok});
    if (!json)
      llvm::outs() << formatv("{0,-44} max|diff| {1:e3}  scale {2:e3}  {3}\n",
                              quantity, error, scale, ok ? "ok" : "MISMATCH");
    if (!ok && message.empty())
      message = formatv("{0} differs: {1:e3} against a scale of {2:e3}",
                        quantity, error, scale);
  }

  /// Something failed or differs; the first such message is the check's.
  void differs(const std::string &why) { stop(CheckDiffers, why); }
  /// The request does not fit the model (an error was printed).
  void invalid(const std::string &why) { stop(CheckInvalid, why); }
  /// The values are outside what the model can evaluate.
  void unusable(const std::string &why) { stop(CheckUnusable, why); }

  bool ok() const {
    return !stoppedWith &&
           llvm::all_of(checks, [](const Comparison &c) { return c.ok; });
  }
  bool stopped() const { return stoppedWith.has_value(); }

  int finish() {
    int status = stoppedWith ? *stoppedWith : ok() ? CheckAgrees : CheckDiffers;
    StringRef word = status == CheckAgrees     ? "agrees"
                     : status == CheckUnusable ? "unusable"
                     : status == CheckInvalid  ? "invalid"
                                               : "differs";
    if (json) {
      llvm::json::Array list;
      // JSON has no infinity or NaN: a figure that is not finite (a NaN on
      // one side) is null.
      auto number = [](double value) {
        return std::isfinite(value) ? llvm::json::Value(value)
                                    : llvm::json::Value(nullptr);
      };
      for (const Comparison &check : checks)
        list.push_back(llvm::json::Object{{"quantity", check.quantity},
                                          {"error", number(check.error)},
                                          {"scale", number(check.scale)},
                                          {"ok", check.ok}});
      llvm::json::Object result{{"status", word}, {"checks", std::move(list)}};
      if (!message.empty())
        result["message"] = message;
      llvm::outs() << formatv("{0}", llvm::json::Value(std::move(result)))
                   << "\n";
    } else {
      llvm::outs() << "check: " << word
                   << (message.empty() ? "" : ": " + message) << "\n";
    }
    return status;
  }

private:
  /// Ends the check with `status` (of the statuses met, an invalid request
  /// over a difference over unusable values), `why` its message unless an
  /// earlier one was given.
  void stop(ModelCheckStatus status, const std::string &why) {
    if (message.empty())
      message = why;
    auto rank = [](ModelCheckStatus of) {
      return of == CheckInvalid ? 2 : of == CheckDiffers ? 1 : 0;
    };
    if (!stoppedWith || rank(status) > rank(*stoppedWith))
      stoppedWith = status;
  }

  bool json;
  std::optional<ModelCheckStatus> stoppedWith;
  std::vector<Comparison> checks;
  std::string message;
};

std::vector<double> valuesOf(const ::energy::Tensor &tensor) {
  std::vector<double> values(tensor.elementCount());
  for (int64_t i = 0; i < tensor.elementCount(); ++i)
    values[i] = tensor.at(i);
  return values;
}

/// max |a − b| over max(max |b|, 1e-3), as Report::compare measures.
double relativeDifference(ArrayRef<double> a, ArrayRef<double> b,
                          double floor = 1e-3) {
  if (a.size() != b.size())
    return INFINITY;
  double scale = floor, error = 0;
  for (auto [x, y] : llvm::zip(a, b)) {
    scale = std::max(scale, std::abs(y));
    double difference = std::abs(x - y);
    error = std::isnan(difference) ? INFINITY : std::max(error, difference);
  }
  return error / scale;
}

bool allFinite(ArrayRef<double> values) {
  return llvm::all_of(values, [](double v) { return std::isfinite(v); });
}

double maxAbs(ArrayRef<double> values) {
  double largest = 0;
  for (double v : values)
    largest = std::max(largest, std::abs(v));
  return largest;
}

/// The gradient program of `tensor` alone (not joint, of every term).
GradientOp gradientOf(ModelOp model, StringRef tensor) {
  for (GradientOp gradient : model.getBody().front().getOps<GradientOp>())
    if (!gradient.isJoint() && !gradient.getOf() &&
        gradient.getTensor() == tensor)
      return gradient;
  return {};
}

/// Unit directions for finite differences, from `engine`.
std::vector<double> randomDirection(size_t size, std::mt19937_64 &engine) {
  std::normal_distribution<double> normal;
  std::vector<double> v(size);
  double norm = 0;
  for (double &entry : v) {
    entry = normal(engine);
    norm += entry * entry;
  }
  norm = std::sqrt(norm);
  for (double &entry : v)
    entry /= norm == 0 ? 1 : norm;
  return v;
}

/// The derivative of `f` at 0 along a line, by central differences at steps
/// h and h/2 combined (Richardson); nullopt when `f` fails.
std::optional<double>
lineDerivative(double h, llvm::function_ref<std::optional<double>(double)> f) {
  std::optional<double> a = f(h), b = f(-h), c = f(h / 2), d = f(-h / 2);
  if (!a || !b || !c || !d)
    return std::nullopt;
  double coarse = (*a - *b) / (2 * h), fine = (*c - *d) / h;
  return (4 * fine - coarse) / 3;
}

/// What a comparison with finite differences says where they cannot judge.
std::string notSmoothNote() {
  return " (not judged: no convergence down to a hundredth of the step, or "
         "a kink at the point)";
}

/// How finite differences judge a derivative `projected` along a line.
enum class LineVerdict { Failed, Agrees, Differs, NotSmooth };

/// Compares `projected` with the finite differences of `f` along the line,
/// within `tolerance` (absolute): at step h, then, where they differ, at
/// h/10 and h/100. The derivative differs when the estimates converge
/// (two in a row agree) away from it; where they do not converge (a kink,
/// or curvature on a scale below the steps: the normalisation of a zero
/// vector), or where the point itself is a kink (relu(0): the one-sided
/// differences disagree, and the central ones converge to their mean,
/// which no derivative need equal), finite differences cannot judge it.
/// `estimate` is the last one.
LineVerdict
judgeLineDerivative(double h, double projected, double tolerance,
                    llvm::function_ref<std::optional<double>(double)> f,
                    double &estimate) {
  std::optional<double> previous;
  for (int refinement = 0; refinement < 3; ++refinement, h /= 10) {
    std::optional<double> next = lineDerivative(h, f);
    if (!next)
      return LineVerdict::Failed;
    estimate = *next;
    if (std::abs(*next - projected) <= tolerance)
      return LineVerdict::Agrees;
    if (previous && std::abs(*next - *previous) <= tolerance) {
      std::optional<double> at = f(0), after = f(h), before = f(-h);
      if (!at || !after || !before)
        return LineVerdict::Failed;
      bool kinkHere =
          std::abs((*after - *at) / h - (*at - *before) / h) > tolerance;
      return kinkHere ? LineVerdict::NotSmooth : LineVerdict::Differs;
    }
    previous = next;
  }
  return LineVerdict::NotSmooth;
}

class ModelChecker {
public:
  ModelChecker(ModuleOp module, const ModelCheckOptions &options)
      : module(module), options(options), report(options.json) {}

  /// How far the compiled values may be from the interpreter's, relative
  /// to their scale, in the precision the model is compiled in.
  double compiledTolerance() const {
    return options.dtype == "f32" ? kSingleTolerance : kCompiledTolerance;
  }
  /// The least scale a compiled value is compared at: f32's roundoff is
  /// relative to the O(1) values the check binds, not to a result that
  /// cancels to near 0 (the sum of a layer norm).
  double scaleFloor() const { return options.dtype == "f32" ? 1.0 : 1e-3; }
  /// The comparison of a compiled quantity with the interpreter's.
  void compareCompiled(StringRef quantity, ArrayRef<double> compiled,
                       ArrayRef<double> reference) {
    report.compare(quantity, compiled, reference, compiledTolerance(),
                   scaleFloor());
  }
  /// Whether compiled values are within the tolerance of the interpreter's.
  bool agreesCompiled(ArrayRef<double> compiled,
                      ArrayRef<double> reference) const {
    return relativeDifference(compiled, reference, scaleFloor()) <=
           compiledTolerance();
  }
  /// Says the model is unusable here: `what` (the run, the loss gradient)
  /// moves by a relative `change` on the interpreter alone.
  void reportIllConditioned(StringRef what, double change) {
    report.unusable(llvm::formatv(
        "{0} is ill-conditioned at these values: changing the inputs by "
        "{1:e0} (relative) changes it by {2:e2} (relative) on the "
        "interpreter alone",
        what, inputRounding(), change));
  }
  /// The relative change of the inputs a run is conditioned against: about
  /// the rounding of that precision.
  double inputRounding() const { return options.dtype == "f32" ? 1e-7 : 1e-11; }

  int run() {
    if (failed(prepareReference()) || failed(prepareCompiled()))
      return report.finish();
    compiledModel->setThreads(1);
    checkEnergyAndGradients();
    if (!report.stopped())
      checkRun();
    if (!report.stopped())
      checkLosses();
    return report.finish();
  }

private:
  /// The interpreter's program: the step program and every tensor's
  /// gradient, unplanned.
  LogicalResult prepareReference() {
    reference = module.clone();
    referenceModel = *reference->getOps<ModelOp>().begin();
    std::vector<std::string> all;
    for (TensorOp tensor : referenceModel.getBody().front().getOps<TensorOp>())
      all.push_back(tensor.getSymName().str());
    PassManager passes(module.getContext(), ModuleOp::getOperationName());
    buildUpdatePipeline(passes.nest<ModelOp>(), all);
    reportCrashesByPass(passes);
    if (failed(guardCompilation("the pass pipeline", referenceModel.getLoc(),
                                [&] { return passes.run(*reference); }))) {
      report.differs("the interpreter's program could not be built");
      return failure();
    }
    initial.emplace(referenceModel);
    if (failed(initial->bind(options.dims, options.consts, {}, options.seed))) {
      report.invalid("the model's values could not be bound (the error "
                     "above)");
      return failure();
    }
    // Tolerances that follow the precision (CG's test for a flat direction)
    // decide as in the artifact.
    if (options.dtype == "f32")
      initial->getBindings().setRoundingUnit(
          std::numeric_limits<float>::epsilon());
    return success();
  }

  /// The artifact, compiled in process in options.dtype.
  LogicalResult prepareCompiled() {
    ArtifactOptions artifactOptions;
    artifactOptions.dtype = options.dtype;
    artifactOptions.sourceName = options.sourceName;
    artifactOptions.sourceText = options.sourceText;
    artifactOptions.optLevel = options.optLevel;
    artifactOptions.deviceLoops = options.deviceLoops;
    // A check compiles what it checks, and keeps nothing: a fuzzer's
    // thousands of models would fill the cache.
    std::string error;
    FailureOr<JitArtifact> compiled = compileModelInProcess(
        module, artifactOptions, error, CompileCacheUse::Bypass);
    if (failed(compiled)) {
      report.differs(error.empty() ? "the model did not compile"
                                   : "the kernels did not compile: " + error);
      return failure();
    }
    ::energy::Expected<::energy::Model> loaded = ::energy::Model::fromSymbols(
        options.sourceName, compiled->lookup, compiled->handle);
    if (!loaded) {
      report.differs(loaded.message());
      return failure();
    }
    compiledModel.emplace(std::move(*loaded));
    return success();
  }

  /// A session of the artifact from the same values as the interpreter's.
  std::optional<::energy::Session> newSession() {
    ::energy::SessionOptions sessionOptions;
    for (const auto &[name, value] : options.dims)
      sessionOptions.dims[name] = value;
    for (const auto &[name, value] : options.consts)
      sessionOptions.consts[name] = value;
    sessionOptions.seed = options.seed;
    ::energy::Expected<::energy::Session> session =
        compiledModel->session(sessionOptions);
    if (!session) {
      report.differs(session.message());
      return std::nullopt;
    }
    return std::move(*session);
  }

  /// The interpreter's energy at `bindings`.
  std::optional<double> interpretedEnergy(const Bindings &bindings) {
    FailureOr<Interpreter> interpreter =
        Interpreter::create(referenceModel, bindings);
    if (failed(interpreter))
      return std::nullopt;
    FailureOr<double> energy = interpreter->evaluateEnergy();
    if (failed(energy) || !std::isfinite(*energy))
      return std::nullopt;
    return *energy;
  }

  void checkEnergyAndGradients() {
    if (compiledModel->termNames().empty())
      return;
    FailureOr<double> referenceEnergy = initial->energy();
    if (failed(referenceEnergy) || !std::isfinite(*referenceEnergy))
      return report.unusable("the interpreter's energy is not finite");
    std::optional<::energy::Session> session = newSession();
    if (!session)
      return;
    ::energy::Expected<double> energy = session->energy();
    if (!energy)
      return report.differs("compiled energy: " + energy.message());
    compareCompiled("energy", {*energy}, {*referenceEnergy});

    std::map<std::string, std::vector<double>> oneThread;
    for (const std::string &name : compiledModel->gradientNames()) {
      GradientOp program = gradientOf(referenceModel, name);
      if (!program)
        continue;
      FailureOr<::energy::Tensor> expected = initial->gradient(program);
      if (failed(expected))
        return report.unusable("the interpreter's gradient of '" + name +
                               "' failed");
      ::energy::Expected<::energy::Tensor> gradient = session->gradient(name);
      if (!gradient)
        return report.differs("compiled gradient of '" + name +
                              "': " + gradient.message());
      oneThread[name] = valuesOf(*gradient);
      compareCompiled("gradient " + name, oneThread[name], valuesOf(*expected));
      checkFiniteDifferences(name, valuesOf(*expected), *referenceEnergy);
    }
    if (compiledModel->setThreads(3)) {
      bool same = true;
      std::string first;
      for (const auto &[name, values] : oneThread) {
        ::energy::Expected<::energy::Tensor> gradient = session->gradient(name);
        if (!gradient || valuesOf(*gradient) != values) {
          same = false;
          first = name;
          break;
        }
      }
      report.record("gradients on 1 and 3 threads" +
                        (same ? "" : " (" + first + ")"),
                    same ? 0 : INFINITY, 1, same);
      compiledModel->setThreads(1);
    }
  }

  /// g·v against the derivative of the interpreter's energy along v.
  void checkFiniteDifferences(const std::string &name,
                              const std::vector<double> &gradient,
                              double energy) {
    const Bindings &bound = initial->getBindings();
    auto point = bound.getTensors().find(name);
    if (point == bound.getTensors().end() || point->second.data.empty())
      return;
    std::mt19937_64 engine(options.seed * 7919 +
                           std::hash<std::string>()(name));
    double h = 1e-4 * std::max(1.0, maxAbs(point->second.data));
    double worst = 0, scale = 1;
    bool ok = true, smooth = true;
    for (int direction = 0; direction < 2; ++direction) {
      std::vector<double> v = randomDirection(gradient.size(), engine);
      double projected = 0;
      for (auto [g, d] : llvm::zip(gradient, v))
        projected += g * d;
      double size = std::max({1.0, std::abs(energy), std::abs(projected)});
      double derivative = 0;
      LineVerdict verdict = judgeLineDerivative(
          h, projected, kDifferenceTolerance * size,
          [&](double step) -> std::optional<double> {
            Bindings moved = bound;
            ArrayValue value = point->second;
            for (size_t i = 0; i < v.size(); ++i)
              value.data[i] += step * v[i];
            moved.setTensor(name, std::move(value));
            return interpretedEnergy(moved);
          },
          derivative);
      if (verdict == LineVerdict::Failed)
        return;
      if (verdict == LineVerdict::NotSmooth) {
        smooth = false;
        continue;
      }
      double error = std::abs(derivative - projected);
      if (error / size > worst / scale) {
        worst = error;
        scale = size;
      }
      ok &= verdict == LineVerdict::Agrees;
    }
    report.record("gradient " + name + " vs finite differences" +
                      (smooth ? "" : notSmoothNote()),
                  worst, scale, ok);
  }

  void checkRun() {
    if (!compiledModel->hasDynamics())
      return;
    std::optional<::energy::Session> session = newSession();
    if (!session)
      return;
    InterpretedRun interpreted = *initial;
    ::energy::RunOptions runOptions;
    runOptions.steps = options.steps;
    FailureOr<::energy::RunResult> expected = interpreted.run(runOptions);
    if (failed(expected) || !std::isfinite(expected->energy))
      return report.unusable("the interpreter's run failed or is not finite");
    FailureOr<std::map<std::string, ::energy::Tensor>> expectedValues =
        interpreted.stateAndOutputs();
    if (failed(expectedValues))
      return report.unusable("the interpreter's outputs failed");
    for (const auto &[name, value] : *expectedValues)
      if (!allFinite(valuesOf(value)))
        return report.unusable("'" + name + "' is not finite after the run");
    ::energy::Expected<::energy::RunResult> result = session->run(runOptions);
    if (!result)
      return report.differs("compiled run: " + result.message());
    report.record("steps taken",
                  std::abs(double(result->steps - expected->steps)), 1,
                  result->steps == expected->steps);
    ::energy::Expected<std::map<std::string, ::energy::Tensor>> states =
        session->stateTensors();
    if (!states)
      return report.differs(states.message());
    std::vector<std::pair<std::string, std::vector<double>>> compiledValues;
    bool agrees = true;
    for (const auto &[name, value] : *expectedValues) {
      std::optional<::energy::Tensor> compiled;
      if (auto state = states->find(name); state != states->end()) {
        compiled = state->second;
      } else if (auto tensor = SymbolTable::lookupNearestSymbolFrom<TensorOp>(
                     referenceModel,
                     StringAttr::get(referenceModel.getContext(), name));
                 tensor && (tensor.getAdjointOf() || tensor.getCotangentOf() ||
                            tensor.getSolverOf())) {
        // Scratch of the interpreter's backward program that the artifact's,
        // built for its own steps (a change of variables), does not have.
        continue;
      } else {
        ::energy::Expected<::energy::Tensor> output = session->get(name);
        if (!output)
          return report.differs("compiled output '" + name +
                                "': " + output.message());
        compiled = *output;
      }
      compiledValues.emplace_back(name, valuesOf(*compiled));
      agrees &= agreesCompiled(compiledValues.back().second, valuesOf(value));
    }
    if (!agrees) {
      if (std::optional<double> change = conditioningOfRun(*expectedValues))
        return reportIllConditioned("the run", *change);
    }
    for (const auto &[name, values] : compiledValues)
      compareCompiled("after the run: " + name, values,
                      valuesOf(expectedValues->at(name)));
  }

  /// The initial run with every bound value moved by a relative
  /// inputRounding().
  InterpretedRun perturbedRun() {
    InterpretedRun perturbed = *initial;
    std::mt19937_64 engine(options.seed + 977);
    std::uniform_real_distribution<double> uniform(-1.0, 1.0);
    std::map<std::string, ArrayValue> moved;
    for (const auto &entry : perturbed.getBindings().getTensors()) {
      ArrayValue value = entry.second;
      for (double &element : value.data)
        element *= 1 + inputRounding() * uniform(engine);
      moved[entry.getKey().str()] = std::move(value);
    }
    for (auto &[name, value] : moved)
      perturbed.getBindings().setTensor(name, std::move(value));
    return perturbed;
  }

  /// `worst`, a relative change of the interpreter's results under
  /// perturbedRun(), where it is more than a tenth of the tolerance of the
  /// comparison (a singular Newton system, a chaotic run): compiled code,
  /// which rounds every intermediate value too and not only the inputs,
  /// cannot be expected to agree with the interpreter either.
  std::optional<double> illConditioned(double worst) const {
    if (worst <= compiledTolerance() / 10)
      return std::nullopt;
    return worst;
  }

  /// How much the interpreter's run changes under perturbedRun(), where
  /// that makes it ill-conditioned.
  std::optional<double>
  conditioningOfRun(const std::map<std::string, ::energy::Tensor> &expected) {
    InterpretedRun perturbed = perturbedRun();
    ::energy::RunOptions runOptions;
    runOptions.steps = options.steps;
    if (failed(perturbed.run(runOptions)))
      return 1.0;
    FailureOr<std::map<std::string, ::energy::Tensor>> values =
        perturbed.stateAndOutputs();
    if (failed(values))
      return 1.0;
    double worst = 0;
    for (const auto &[name, value] : *values)
      if (auto reference = expected.find(name); reference != expected.end())
        worst = std::max(worst, relativeDifference(valuesOf(value),
                                                   valuesOf(reference->second),
                                                   scaleFloor()));
    return illConditioned(worst);
  }

  /// How much the interpreter's loss gradients change under perturbedRun(),
  /// where that makes them ill-conditioned (the adjoint of a Newton step
  /// solves with the Hessian the run's own steps solved with).
  std::optional<double>
  conditioningOfLossGradients(const LossGradients &expected) {
    InterpretedRun perturbed = perturbedRun();
    FailureOr<Interpreter> state = perturbed.interpreter();
    if (failed(state))
      return 1.0;
    FailureOr<LossGradients> moved =
        tools::lossGradientsOf(referenceModel, *state, options.steps,
                               ::energy::BackpropStorage::Checkpointed);
    if (failed(moved))
      return 1.0;
    double worst = 0;
    for (const auto &[name, value] : expected.adjoints) {
      auto found = moved->adjoints.find(name);
      if (found == moved->adjoints.end())
        return 1.0;
      worst =
          std::max(worst, relativeDifference(valuesOf(found->second),
                                             valuesOf(value), scaleFloor()));
    }
    return illConditioned(worst);
  }

  void checkLosses() {
    if (compiledModel->lossNames().empty())
      return;
    std::optional<::energy::Session> session = newSession();
    if (!session)
      return;
    InterpretedRun interpreted = *initial;
    FailureOr<Interpreter> state = interpreted.interpreter();
    if (failed(state))
      return report.unusable("the interpreter could not start");
    FailureOr<LossGradients> expected =
        tools::lossGradientsOf(referenceModel, *state, options.steps,
                               ::energy::BackpropStorage::Checkpointed);
    if (failed(expected))
      return report.unusable("the interpreter's loss gradient failed");
    for (const auto &[name, value] : expected->losses)
      if (!std::isfinite(value))
        return report.unusable("loss '" + name + "' is not finite");
    ::energy::Expected<LossGradients> gradients =
        ::energy::tools::lossGradientsOf(
            *session, options.steps, ::energy::BackpropStorage::Checkpointed);
    if (!gradients)
      return report.differs("compiled loss gradient: " + gradients.message());
    double total = 0;
    for (const auto &[name, value] : expected->losses) {
      total += value;
      auto compiled = gradients->losses.find(name);
      if (compiled == gradients->losses.end())
        return report.differs("the artifact has no loss '" + name + "'");
      compareCompiled("loss " + name, {compiled->second}, {value});
    }
    bool agrees = true;
    for (const auto &[name, value] : expected->adjoints) {
      auto compiled = gradients->adjoints.find(name);
      if (compiled == gradients->adjoints.end())
        return report.differs("the artifact has no '" + name + "'");
      agrees &= agreesCompiled(valuesOf(compiled->second), valuesOf(value));
    }
    if (!agrees) {
      if (std::optional<double> change = conditioningOfLossGradients(*expected))
        return reportIllConditioned("the loss gradient", *change);
    }
    for (const auto &[name, value] : expected->adjoints) {
      const ::energy::Tensor &compiled = gradients->adjoints.find(name)->second;
      compareCompiled(name, valuesOf(compiled), valuesOf(value));
      checkLossDifferences(StringRef(name).drop_front(strlen("adjoint.")),
                           valuesOf(value), total);
    }
  }

  /// The sum of the losses after a run from `bindings` (the interpreter).
  std::optional<double> interpretedLoss(InterpretedRun run) {
    ::energy::RunOptions runOptions;
    runOptions.steps = options.steps;
    if (failed(run.run(runOptions)))
      return std::nullopt;
    FailureOr<Interpreter> state = run.interpreter();
    if (failed(state))
      return std::nullopt;
    double total = 0;
    for (TermOp term : referenceModel.getBody().front().getOps<TermOp>()) {
      if (!term.getLoss())
        continue;
      FailureOr<double> value = state->evaluateTerm(term);
      if (failed(value) || !std::isfinite(*value))
        return std::nullopt;
      total += *value;
    }
    return total;
  }

  /// The adjoint of `name` (a param, input, or a state's initial value)
  /// against the derivative of the losses after the run along random
  /// directions. States initialised from `name` move with it. Skipped
  /// with a stopping rule, which makes the losses jump, and for `backward
  /// implicit`, exact only at a fixed point, which a few steps do not reach.
  void checkLossDifferences(StringRef name, const std::vector<double> &adjoint,
                            double loss) {
    if (DynamicsOp dynamics = referenceModel.getDynamics();
        dynamics &&
        (!dynamics.getUntil().empty() || dynamics.getImplicitIterations()))
      return;
    const Bindings &bound = initial->getBindings();
    auto point = bound.getTensors().find(name);
    if (point == bound.getTensors().end() || point->second.data.empty() ||
        point->second.data.size() != adjoint.size())
      return;
    SmallVector<StringRef> copies;
    for (TensorOp tensor : referenceModel.getBody().front().getOps<TensorOp>())
      if (tensor.getInit() == InitKind::copy && tensor.getInitSource() == name)
        copies.push_back(tensor.getSymName());
    std::mt19937_64 engine(options.seed * 104729 +
                           std::hash<std::string>()(name.str()));
    double h = 1e-4 * std::max(1.0, maxAbs(point->second.data));
    std::vector<double> v = randomDirection(adjoint.size(), engine);
    double projected = 0;
    for (auto [g, d] : llvm::zip(adjoint, v))
      projected += g * d;
    double size = std::max({1.0, std::abs(loss), std::abs(projected)});
    double derivative = 0;
    LineVerdict verdict = judgeLineDerivative(
        h, projected, kDifferenceTolerance * size,
        [&](double step) -> std::optional<double> {
          InterpretedRun moved = *initial;
          ArrayValue value = point->second;
          for (size_t i = 0; i < v.size(); ++i)
            value.data[i] += step * v[i];
          for (StringRef copy : copies)
            moved.getBindings().setTensor(copy, value);
          moved.getBindings().setTensor(name, std::move(value));
          return interpretedLoss(std::move(moved));
        },
        derivative);
    if (verdict == LineVerdict::Failed)
      return;
    std::string quantity = ("adjoint." + name + " vs finite differences").str();
    if (verdict == LineVerdict::NotSmooth)
      return report.record(quantity + notSmoothNote(), 0, size, true);
    report.record(quantity, std::abs(derivative - projected), size,
                  verdict == LineVerdict::Agrees);
  }

  ModuleOp module;
  const ModelCheckOptions &options;
  Report report;
  OwningOpRef<ModuleOp> reference;
  ModelOp referenceModel;
  std::optional<InterpretedRun> initial;
  std::optional<::energy::Model> compiledModel;
};

} // namespace

int mlir::energy::tools::checkModel(ModuleOp module,
                                    const ModelCheckOptions &options) {
  return ModelChecker(module, options).run();
}
