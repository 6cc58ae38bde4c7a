//===- PluginCode.h - The run-time code a plugin op calls -------*- C++ -*-===//
//
// One accessor from an op of a plugin's function or aggregation to its
// run-time code, for the manifest, the interpreter and the kernels. Apart
// from EnergyOps.h, whose includers need not see the plugin API.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_IR_PLUGINCODE_H
#define ENERGY_IR_PLUGINCODE_H

#include "energy/IR/EnergyOps.h"
#include "energy/Plugin/FunctionTable.h"

namespace mlir::energy {

/// The run-time code `op` calls: that of the plugin function of an
/// `energy.apply`, `similarity` or `similarity_gradient`, or of the plugin
/// aggregation of an `energy.aggregate`, `aggregate_weights` or `custom`
/// reduction (the verifiers checked that the tables have it); null for any
/// other op.
const ::energy::plugin::RuntimeCode *getPluginCode(Operation *op);

} // namespace mlir::energy

#endif // ENERGY_IR_PLUGINCODE_H
