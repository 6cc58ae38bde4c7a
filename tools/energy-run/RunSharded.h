//===- RunSharded.h - energy-run --shard: a rank of a sharded run -*- C++
//-*-===//
//
// Evaluates the energy, gradients or a loss's gradient of a model, or runs
// it, whose rows of one dim are spread over the processes of an MPI group
// (or one process).
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TOOLS_ENERGYRUN_RUNSHARDED_H
#define ENERGY_TOOLS_ENERGYRUN_RUNSHARDED_H

#include "RunSettings.h"

#include "energy/Frontend/Shard.h"
#include "energy/Runtime/Communicator.h"
#include "energy/Runtime/Model.h"
#include "energy/Runtime/ShardedSession.h"

namespace mlir::energy::tools {

/// How the runtime binds the rank's model the front end wrote.
::energy::ShardLayout
shardLayoutOf(const ::energy::frontend::ShardedModel &sharded);

/// Runs rank `group.rank()` of `rankModel` (energyc --shard's model, bound
/// as `layout` says; with a ring, `blockModel` its block model) on its rows
/// of `inputs`; rank 0 reports. Returns the exit status.
int runSharded(const ::energy::Model &rankModel,
               const ::energy::ShardLayout &layout, const RunInputs &inputs,
               const RunSettings &settings, ::energy::Communicator &group,
               const ::energy::Model *blockModel = nullptr);

} // namespace mlir::energy::tools

#endif // ENERGY_TOOLS_ENERGYRUN_RUNSHARDED_H
