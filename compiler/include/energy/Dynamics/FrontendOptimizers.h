//===- FrontendOptimizers.h - The registry as the front end sees it -*- C++
//-*-===//
//
// The front end checks optimizer names and options at their source
// location against an MLIR-free table; the tools build that table from the
// optimizer registry, so the registry (plugins included) is what decides.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_DYNAMICS_FRONTENDOPTIMIZERS_H
#define ENERGY_DYNAMICS_FRONTENDOPTIMIZERS_H

#include "energy/Dynamics/OptimizerRegistry.h"
#include "energy/Frontend/OptimizerTable.h"

namespace mlir::energy {

/// The front end's table of every optimizer of `registry`, plus the
/// closed-form `stationary` rule that energy-build-updates builds itself.
::energy::frontend::OptimizerTable
buildFrontendOptimizerTable(const OptimizerRegistry &registry);

/// The table of the global registry, built once: what the tools give the
/// front end.
const ::energy::frontend::OptimizerTable &getRegistryOptimizerTable();

} // namespace mlir::energy

#endif // ENERGY_DYNAMICS_FRONTENDOPTIMIZERS_H
