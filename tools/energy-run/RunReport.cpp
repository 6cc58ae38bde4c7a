//===- RunReport.cpp - How energy-run reports its results -----------------===//
//
// Errors, safetensors files, energies and gradients as text or JSON, the
// energy step by step, and the --bench loop with its timings.
//
//===----------------------------------------------------------------------===//

#include "RunReport.h"

#include "LaunchedGroup.h"

#include "energy/Runtime/Safetensors.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>

using namespace llvm;
using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::tools;
using ::energy::tools::LossGradients;
using ::energy::tools::lossGradientsJson;
using ::energy::tools::lossGradientsText;

namespace {
json::Array toJson(const ::energy::Tensor &tensor) {
  json::Array data;
  for (int64_t i = 0; i < tensor.elementCount(); ++i)
    data.push_back(tensor.at(i));
  return data;
}
} // namespace

static ::energy::Communicator *failureGroup = nullptr;

void tools::setFailureGroup(::energy::Communicator *group) {
  failureGroup = group;
}

int tools::fail(const Twine &message) {
  if (failureGroup && failureGroup->size() > 1)
    ::energy::tools::abortGroup(*failureGroup, "energy-run", message.str());
  WithColor::error(errs(), "energy-run") << message << "\n";
  return 1;
}

FailureOr<RuntimeTensors> tools::readInputs(ArrayRef<std::string> paths) {
  RuntimeTensors tensors;
  for (const std::string &path : paths) {
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

bool tools::writeOutputs(const RunSettings &settings,
                         const RuntimeTensors &tensors) {
  ::energy::Status status =
      ::energy::writeSafetensors(settings.outputFile, tensors);
  if (!status)
    return fail(status.message()), false;
  return true;
}

void tools::printEnergy(const RunSettings &settings, double energy) {
  if (settings.json)
    outs() << formatv("{0}", json::Value(json::Object{{"energy", energy}}))
           << "\n";
  else
    outs() << formatv("energy {0:e}\n", energy);
}

bool tools::reportGradients(const RunSettings &settings,
                            const RuntimeTensors &gradients) {
  json::Object result;
  for (const auto &[name, value] : gradients) {
    if (settings.json) {
      json::Array shape;
      for (int64_t size : value.shape())
        shape.push_back(size);
      result[name] =
          json::Object{{"shape", std::move(shape)}, {"data", toJson(value)}};
    } else {
      outs() << name << " " << value.shapeString() << "\n";
      // With --out the values go to the file only.
      if (settings.outputFile.empty())
        for (int64_t i = 0; i < value.elementCount(); ++i)
          outs() << formatv("  {0:e}\n", value.at(i));
    }
  }
  if (settings.json)
    outs() << formatv("{0}", json::Value(std::move(result))) << "\n";
  return settings.outputFile.empty() || writeOutputs(settings, gradients);
}

bool tools::reportLossGradients(const RunSettings &settings,
                                const LossGradients &result) {
  outs() << (settings.json
                 ? lossGradientsJson(result) + "\n"
                 : lossGradientsText(result, settings.outputFile.empty()));
  return settings.outputFile.empty() || writeOutputs(settings, result.adjoints);
}

void StepReporter::operator()(int64_t step, double energy) {
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

void StepReporter::printStart(double energy) {
  if (trace && !jsonOutput)
    outs() << formatv("start       energy {0:e}\n", energy);
}

void StepReporter::printSummary(int64_t steps, std::optional<double> final,
                                std::optional<json::Object> plot) {
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
      outs() << formatv("final energy {0:e} after {1} steps\n", *final, steps);
    else
      outs() << formatv("ran {0} steps (the model has no energy)\n", steps);
  }
}

std::string tools::benchedEvaluation(const RunSettings &settings,
                                     std::optional<int64_t> steps) {
  switch (settings.eval) {
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

bool tools::runBench(const RunSettings &settings,
                     llvm::function_ref<bool()> reset,
                     llvm::function_ref<bool()> evaluate,
                     llvm::function_ref<std::string()> describe) {
  if (!reset() || !evaluate())
    return false;
  std::vector<double> milliseconds;
  for (int64_t repetition = 0; repetition < settings.benchRepetitions;
       ++repetition) {
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
  if (settings.json)
    outs() << formatv("{0}", json::Value(json::Object{{"median_ms", median}}))
           << "\n";
  else
    outs() << formatv("bench {0}: median {1:f6} ms, min {2:f6} ms, max {3:f6} "
                      "ms over {4} repetitions\n",
                      describe(), median, milliseconds.front(),
                      milliseconds.back(), milliseconds.size());
  return true;
}
