//===- RunPlot.cpp - What energy-run --plot records and draws -------------===//
//
// The energy of each term comes from the artifact's term kernels, the
// gradient norm from its gradient kernels, at the state after each step.
//
//===----------------------------------------------------------------------===//

#include "RunPlot.h"
#include "Charts.h"

#include <cmath>

using namespace energy;
namespace json = llvm::json;

RunPlot::RunPlot(Session &session, std::vector<std::string> stateTensors)
    : session(session), stateTensors(std::move(stateTensors)),
      terms(session.model().termNames()) {}

Status RunPlot::record(int64_t stepsDone, double energy) {
  steps.push_back(static_cast<double>(stepsDone));
  energies.push_back(energy);
  if (terms.size() > 1)
    for (const std::string &term : terms) {
      Expected<double> value = session.termEnergy(term);
      if (!value)
        return value.status();
      termEnergies[term].push_back(*value);
    }
  double squares = 0;
  for (const std::string &tensor : stateTensors) {
    Expected<Tensor> gradient = session.gradient(tensor);
    if (!gradient)
      return gradient.status();
    for (int64_t i = 0; i < gradient->elementCount(); ++i)
      squares += gradient->at(i) * gradient->at(i);
  }
  gradientNorms.push_back(std::sqrt(squares));
  return Status::success();
}

bool RunPlot::write(const std::string &path, const std::string &model,
                    std::string &error) const {
  charts::Panel energy{"Energy of " + model + " per step",
                       "step",
                       "energy",
                       /*logY=*/false,
                       /*integerX=*/true,
                       {{"total", steps, energies}}};
  for (const auto &[term, values] : termEnergies)
    energy.series.push_back({"term " + term, steps, values});
  std::vector<charts::Panel> panels = {std::move(energy)};
  if (!stateTensors.empty()) {
    // A log scale when the norm spans more than two decades.
    double low = INFINITY, high = 0;
    for (double norm : gradientNorms)
      if (norm > 0) {
        low = std::min(low, norm);
        high = std::max(high, norm);
      }
    bool logScale = high > 0 && high / low > 100;
    std::string tensors;
    for (const std::string &tensor : stateTensors)
      tensors += (tensors.empty() ? "" : ", ") + tensor;
    panels.push_back({"Gradient norm |dE/d(" + tensors + ")|",
                      "step",
                      "gradient norm",
                      logScale,
                      /*integerX=*/true,
                      {{"gradient norm", steps, gradientNorms}}});
  }
  return charts::writeLineCharts(panels, path, error);
}

json::Object RunPlot::toJson() const {
  auto array = [](const std::vector<double> &values) {
    json::Array result;
    for (double value : values)
      result.push_back(value);
    return result;
  };
  json::Object termsJson;
  for (const auto &[term, values] : termEnergies)
    termsJson[term] = array(values);
  return json::Object{{"steps", array(steps)},
                      {"energy", array(energies)},
                      {"terms", std::move(termsJson)},
                      {"grad_norm", array(gradientNorms)}};
}
