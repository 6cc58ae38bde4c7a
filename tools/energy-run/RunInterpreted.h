//===- RunInterpreted.h - energy-run --interp -------------------*- C++ -*-===//
//
// Evaluates a model's energy, gradients or loss gradients, runs its dynamics
// or times them (--bench) on the reference interpreter.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TOOLS_ENERGYRUN_RUNINTERPRETED_H
#define ENERGY_TOOLS_ENERGYRUN_RUNINTERPRETED_H

#include "RunSettings.h"

#include "energy/IR/EnergyOps.h"

namespace mlir::energy::tools {

/// Runs a model on the reference interpreter; returns the exit status.
int runInterpreted(ModelOp model, const RunInputs &inputs,
                   const RunSettings &settings);

} // namespace mlir::energy::tools

#endif // ENERGY_TOOLS_ENERGYRUN_RUNINTERPRETED_H
