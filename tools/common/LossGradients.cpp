//===- LossGradients.cpp - The tools' --eval loss-grad --------------------===//
//
// Session::backward and the reports of its losses and adjoints, printed with
// the C library in the formats energy-run's LLVM printing had (%e in text,
// %.17g in JSON), so that both tools print the same bytes.
//
//===----------------------------------------------------------------------===//

#include "LossGradients.h"

#include <cstdio>

using namespace energy;
using namespace energy::tools;

namespace {

/// `value` printed with the printf format `format`.
std::string formatted(const char *format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, value);
  return buffer;
}

/// `text` as a JSON string (tensor and loss names need no escapes but
/// quotes and backslashes).
std::string quoted(const std::string &text) {
  std::string result = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      result += '\\';
    result += c;
  }
  return result + "\"";
}

} // namespace

Expected<LossGradients> tools::lossGradientsOf(Session &session,
                                               std::optional<int64_t> steps,
                                               BackpropStorage storage) {
  BackwardOptions options;
  options.steps = steps;
  options.storage = storage;
  Expected<BackwardResult> result = session.backward(options);
  if (!result)
    return result.status();
  LossGradients gradients;
  gradients.steps = result->steps;
  gradients.losses = result->losses;
  for (const std::string &name : session.model().adjointNames()) {
    Expected<const Tensor *> adjoint = session.adjoint(name);
    if (!adjoint)
      return adjoint.status();
    gradients.adjoints.emplace("adjoint." + name, **adjoint);
  }
  return gradients;
}

std::string tools::lossGradientsText(const LossGradients &gradients,
                                     bool withValues) {
  std::string text;
  for (const auto &[name, value] : gradients.losses)
    text += "loss " + name + " " + formatted("%e", value) + " after " +
            std::to_string(gradients.steps) + " steps\n";
  for (const auto &[name, value] : gradients.adjoints) {
    text += name + " " + value.shapeString() + "\n";
    if (withValues)
      for (int64_t i = 0; i < value.elementCount(); ++i)
        text += "  " + formatted("%e", value.at(i)) + "\n";
  }
  return text;
}

std::string tools::lossGradientsJson(const LossGradients &gradients) {
  // std::map keeps the keys sorted; "adjoint.*" < "losses" < "steps".
  std::string json = "{";
  for (const auto &[name, value] : gradients.adjoints) {
    json += quoted(name) + ":{\"data\":[";
    for (int64_t i = 0; i < value.elementCount(); ++i)
      json += (i ? "," : "") + formatted("%.17g", value.at(i));
    json += "],\"shape\":[";
    for (size_t axis = 0; axis < value.shape().size(); ++axis)
      json += (axis ? "," : "") + std::to_string(value.shape()[axis]);
    json += "]},";
  }
  json += "\"losses\":{";
  bool first = true;
  for (const auto &[name, value] : gradients.losses) {
    json += (first ? "" : ",") + quoted(name) + ":" + formatted("%.17g", value);
    first = false;
  }
  return json + "},\"steps\":" + std::to_string(gradients.steps) + "}";
}
