//===- RunPlot.h - What energy-run --plot records and draws ----*- C++ -*-===//
//
// While a compiled model runs, records after every step (and at the start)
// the total energy, each term's energy and the norm of the gradient with
// respect to the state tensors; then draws them (Charts.h) and reports them
// as JSON, the same numbers either way.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TOOLS_ENERGYRUN_RUNPLOT_H
#define ENERGY_TOOLS_ENERGYRUN_RUNPLOT_H

#include "energy/Runtime/Session.h"

#include "llvm/Support/JSON.h"

#include <map>
#include <string>
#include <vector>

namespace energy {

class RunPlot {
public:
  /// Records for `session`, whose gradients with respect to `stateTensors`
  /// make up the gradient norm.
  RunPlot(Session &session, std::vector<std::string> stateTensors);

  /// Records the values after `stepsDone` steps (0: the start); `energy` is
  /// the total energy there.
  Status record(int64_t stepsDone, double energy);

  /// Draws the energy (total and per term) and the gradient norm per step.
  bool write(const std::string &path, const std::string &model,
             std::string &error) const;

  /// The recorded numbers: steps, energy, terms, grad_norm.
  llvm::json::Object toJson() const;

private:
  Session &session;
  std::vector<std::string> stateTensors;
  std::vector<std::string> terms;
  std::vector<double> steps, energies, gradientNorms;
  std::map<std::string, std::vector<double>> termEnergies;
};

} // namespace energy

#endif // ENERGY_TOOLS_ENERGYRUN_RUNPLOT_H
