//===- energy-exec.cpp - Runs compiled artifacts, without the compiler ----===//
//
// energy-exec ARTIFACT.so [--device cpu|cuda] [--dim N=V]... [--const C=V]...
//   [--in FILE] [--init random:SEED] [--eval energy|grad|loss-grad|run|step]
//   [--wrt a,b] [--steps N] [--store-all-steps] [--out FILE] [--json]
//   [--bench K]
// evaluates a compiled model's energy, gradients or loss gradients through
// a run, or runs or steps its dynamics, with the options energy-run gives
// them; it links only the runtime, so it runs where neither MLIR nor LLVM
// is installed.
//
//===----------------------------------------------------------------------===//

#include "CommandLineValues.h"
#include "LossGradients.h"

#include "energy/Runtime/Log.h"
#include "energy/Runtime/Model.h"
#include "energy/Runtime/Safetensors.h"
#include "energy/Runtime/Session.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

using namespace energy;
using energy::tools::integerOf;
using energy::tools::LossGradients;
using energy::tools::lossGradientsJson;
using energy::tools::lossGradientsOf;
using energy::tools::lossGradientsText;
using energy::tools::numberOf;
using energy::tools::readSetting;

namespace {
using Tensors = std::map<std::string, Tensor>;

int fail(const std::string &message) {
  std::fprintf(stderr, "energy-exec: error: %s\n", message.c_str());
  return 1;
}

const char *kUsage =
    "usage: energy-exec ARTIFACT.so [--device cpu|cuda] [--dim NAME=VALUE]... "
    "[--const NAME=VALUE]... [--in FILE.safetensors]... [--init random:SEED] "
    "[--eval energy|grad|loss-grad|run|step] [--wrt a,b] [--steps N] "
    "[--store-all-steps] [--out FILE] [--json] [--bench K]\n";

struct Options {
  std::string artifact, device, eval = "run", out;
  std::map<std::string, int64_t> dims;
  std::map<std::string, double> consts;
  std::vector<std::string> inputs, wrt;
  std::optional<uint64_t> seed;
  std::optional<int64_t> steps;
  int64_t bench = 0;
  bool json = false, storeAllSteps = false;
};

/// Parses the command line; an error message, or "".
std::string parse(int argc, char **argv, Options &options) {
  for (int i = 1; i < argc; ++i) {
    std::string argument = argv[i];
    if (argument.rfind("--", 0) != 0) {
      if (!options.artifact.empty())
        return "more than one artifact: " + options.artifact + ", " + argument;
      options.artifact = argument;
      continue;
    }
    std::string name = argument.substr(2), value;
    bool flag = name == "json" || name == "help" || name == "store-all-steps";
    if (size_t equals = name.find('='); equals != std::string::npos) {
      value = name.substr(equals + 1);
      name = name.substr(0, equals);
    } else if (!flag) {
      if (i + 1 >= argc)
        return "--" + name + " needs a value";
      value = argv[++i];
    }
    auto setting = [&](auto parse, auto &into) {
      return readSetting(name, value, parse, into);
    };
    if (name == "help")
      return "help";
    if (name == "json")
      options.json = true;
    else if (name == "store-all-steps")
      options.storeAllSteps = true;
    else if (name == "device")
      options.device = value;
    else if (name == "dim") {
      if (std::string error = setting(integerOf, options.dims); !error.empty())
        return error;
    } else if (name == "const") {
      if (std::string error = setting(numberOf, options.consts); !error.empty())
        return error;
    } else if (name == "in")
      options.inputs.push_back(value);
    else if (name == "init") {
      std::optional<int64_t> seed = value.rfind("random:", 0) == 0
                                        ? integerOf(value.substr(7))
                                        : std::nullopt;
      if (!seed || *seed < 0)
        return "--init " + value + ": expected random:SEED";
      options.seed = static_cast<uint64_t>(*seed);
    } else if (name == "eval") {
      if (value != "energy" && value != "grad" && value != "loss-grad" &&
          value != "run" && value != "step")
        return "--eval " + value +
               ": expected energy, grad, loss-grad, run or step";
      options.eval = value;
    } else if (name == "wrt") {
      for (size_t start = 0; start <= value.size();) {
        size_t comma = std::min(value.find(',', start), value.size());
        options.wrt.push_back(value.substr(start, comma - start));
        start = comma + 1;
      }
    } else if (name == "steps") {
      options.steps = integerOf(value);
      if (!options.steps || *options.steps < 0)
        return "--steps " + value + ": expected a count";
    } else if (name == "out")
      options.out = value;
    else if (name == "bench") {
      std::optional<int64_t> count = integerOf(value);
      if (!count || *count < 1)
        return "--bench " + value + ": expected a positive count";
      options.bench = *count;
    } else
      return "unknown option --" + name;
  }
  if (options.artifact.empty())
    return "no artifact given";
  if (!options.device.empty() && options.device != "cpu" &&
      options.device != "cuda")
    return "--device " + options.device + ": expected cpu or cuda";
  return "";
}

/// How --eval loss-grad keeps the run for the backward pass.
BackpropStorage storageOf(const Options &options) {
  return options.storeAllSteps ? BackpropStorage::Full
                               : BackpropStorage::Checkpointed;
}

/// One evaluation (--eval; loss-grad only without `results`, as --bench
/// times it), its results in `results` when not null.
Status evaluate(Session &session, const Options &options, Tensors *results) {
  const Model &model = session.model();
  if (options.eval == "loss-grad") {
    // One training step's work: the run, the losses and the backward pass,
    // which leaves the state where the run started.
    BackwardOptions backward;
    backward.steps = options.steps;
    backward.storage = storageOf(options);
    return session.backward(backward).status();
  }
  if (options.eval == "energy") {
    Expected<double> energy = session.energy();
    if (!energy)
      return energy.status();
    if (results) {
      Tensor value(DType::F64, {});
      value.set(0, *energy);
      results->emplace("energy", std::move(value));
    }
    return Status::success();
  }
  if (options.eval == "grad") {
    for (const std::string &name :
         gradientsToReport(model.manifest(), options.wrt)) {
      // Without `results` (--bench) the gradient stays where it was
      // computed, as torch.autograd's stays on the GPU.
      if (!results) {
        if (Expected<const Tensor *> computed = session.computeGradient(name);
            !computed)
          return computed.status();
        continue;
      }
      Expected<Tensor> value = session.gradient(name);
      if (!value)
        return value.status();
      results->emplace("grad." + name, std::move(*value));
    }
    return Status::success();
  }
  if (options.eval == "step") {
    // The step kernel alone, --steps times (1 by default): no energy after
    // each step, no check of the values, no stopping rule.
    for (int64_t i = 0; i < options.steps.value_or(1); ++i)
      if (Status status = session.step(); !status)
        return status;
  } else if (model.hasDynamics()) {
    // The dynamics alone: the results are the states, and --bench times
    // the steps as energy-run and the anchors do, with no energy evaluated
    // after each step or after the run.
    RunOptions run;
    run.steps = options.steps;
    run.trace = false;
    run.finalEnergy = false;
    Expected<RunResult> result = session.run(run);
    if (!result)
      return result.status();
  }
  if (!results)
    return Status::success();
  Expected<Tensors> state = session.stateTensors();
  if (!state)
    return state.status();
  *results = std::move(*state);
  for (const std::string &name : session.outputNames()) {
    Expected<Tensor> value = session.get(name);
    if (!value)
      return value.status();
    results->emplace(name, std::move(*value));
  }
  Tensor step(DType::F64, {});
  step.set(0, static_cast<double>(session.stepCount()));
  results->emplace("step", std::move(step));
  return Status::success();
}

/// --bench: one warm-up, then K timed evaluations, each from the same
/// state; prints the median, min and max milliseconds of one. Only runs and
/// steps change the state, so only they set it again before each one (on
/// a GPU that moves it back to the device inside the next one).
int bench(Session &session, const Options &options) {
  Expected<Tensors> initial = session.stateTensors();
  if (!initial)
    return fail(initial.status().message());
  int64_t firstStep = session.stepCount();
  bool changesState = options.eval == "run" || options.eval == "step";
  std::vector<double> milliseconds;
  for (int64_t repetition = 0; repetition <= options.bench; ++repetition) {
    if (changesState)
      for (const auto &[name, value] : *initial)
        if (Status status = session.set(name, value); !status)
          return fail(status.message());
    session.setStepCount(firstStep);
    auto start = std::chrono::steady_clock::now();
    if (Status status = evaluate(session, options, nullptr); !status)
      return fail(status.message());
    std::chrono::duration<double, std::milli> took =
        std::chrono::steady_clock::now() - start;
    if (repetition > 0)
      milliseconds.push_back(took.count());
  }
  std::sort(milliseconds.begin(), milliseconds.end());
  size_t middle = milliseconds.size() / 2;
  double median = milliseconds.size() % 2
                      ? milliseconds[middle]
                      : (milliseconds[middle - 1] + milliseconds[middle]) / 2;
  if (options.json)
    std::printf("{\"median_ms\": %.6f}\n", median);
  else
    std::printf("bench %s: median %.6f ms, min %.6f ms, max %.6f ms\n",
                options.eval.c_str(), median, milliseconds.front(),
                milliseconds.back());
  return 0;
}
} // namespace

int main(int argc, char **argv) {
  energy::setLogHandler(energy::printLogToStderr);
  Options options;
  if (std::string error = parse(argc, argv, options); !error.empty()) {
    if (error == "help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    std::fputs(kUsage, stderr);
    return fail(error);
  }
  Expected<Model> model = Model::load(options.artifact);
  if (!model)
    return fail(model.status().message());
  std::string compiledFor = model->device();
  if (!options.device.empty() && options.device != compiledFor)
    return fail(options.artifact + " is compiled for " + compiledFor +
                ", not --device " + options.device +
                (options.device == "cuda"
                     ? " (compile it with energyc --target cuda)"
                     : " (compile it with energyc --target cpu)"));

  SessionOptions sessionOptions;
  sessionOptions.dims = options.dims;
  sessionOptions.consts = options.consts;
  sessionOptions.seed = options.seed;
  Expected<Session> session = model->session(sessionOptions);
  if (!session)
    return fail(session.status().message());
  for (const std::string &path : options.inputs) {
    Expected<SafetensorsContents> contents = readSafetensors(path);
    if (!contents)
      return fail(contents.status().message());
    for (auto &[name, value] : contents->tensors) {
      if (name == "step") {
        session->setStepCount(static_cast<int64_t>(value.at(0)));
        continue;
      }
      if (Status status = session->set(name, value); !status)
        return fail(status.message());
    }
  }
  if (options.bench > 0)
    return bench(*session, options);

  if (options.eval == "loss-grad") {
    Expected<LossGradients> gradients =
        lossGradientsOf(*session, options.steps, storageOf(options));
    if (!gradients)
      return fail(gradients.message());
    std::fputs(options.json
                   ? (lossGradientsJson(*gradients) + "\n").c_str()
                   : lossGradientsText(*gradients, options.out.empty()).c_str(),
               stdout);
    if (!options.out.empty())
      if (Status status = writeSafetensors(options.out, gradients->adjoints);
          !status)
        return fail(status.message());
    return 0;
  }

  Tensors results;
  if (Status status = evaluate(*session, options, &results); !status)
    return fail(status.message());
  if (!options.out.empty())
    if (Status status = writeSafetensors(options.out, results); !status)
      return fail(status.message());
  if (options.eval == "energy")
    std::printf(options.json ? "{\"energy\": %.17g}\n" : "energy %.17g\n",
                results.at("energy").at(0));
  else if (options.out.empty())
    for (const auto &[name, value] : results)
      std::printf("%s %s\n", name.c_str(), value.shapeString().c_str());
  return 0;
}
