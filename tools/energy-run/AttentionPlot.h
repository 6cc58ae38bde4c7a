//===- AttentionPlot.h - energy-run --plot-attention -----------*- C++ -*-===//
//
// Draws the softmax weights of one lse term at a session's current values as
// a heat map: rows are the children asked for, columns the parents. The
// weights come from the reference interpreter, evaluating an output
// AttentionWeights adds to the model's source.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TOOLS_ENERGYRUN_ATTENTIONPLOT_H
#define ENERGY_TOOLS_ENERGYRUN_ATTENTIONPLOT_H

#include "energy/IR/EnergyOps.h"
#include "energy/Runtime/Session.h"

#include <string>
#include <utility>
#include <vector>

namespace mlir::energy::tools {

/// Draws, into `path` (.svg or .png), the weights that `spec` (`TERM` or
/// `TERM:i=3,k=0`, children held at positions; the others become rows)
/// asks for, of `model` (emitted from the source of `session`'s model) at
/// the session's values; `consts` are the run's --const overrides. Errors
/// about the model are emitted on it; others go to `error`.
LogicalResult plotAttention(ModelOp model, ::energy::Session &session,
                            StringRef spec, const std::string &path,
                            ArrayRef<std::pair<std::string, double>> consts,
                            std::string &error);

} // namespace mlir::energy::tools

#endif // ENERGY_TOOLS_ENERGYRUN_ATTENTIONPLOT_H
