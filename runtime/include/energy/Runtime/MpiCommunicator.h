//===- MpiCommunicator.h - The group of processes MPI started ---*- C++ -*-===//
//
// The Communicator of a job started by mpirun (or Slurm's srun), over the
// MPI library the build found (library EnergyMpi; Debian's Open MPI).
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_RUNTIME_MPICOMMUNICATOR_H
#define ENERGY_RUNTIME_MPICOMMUNICATOR_H

#include "energy/Runtime/Communicator.h"

namespace energy {

/// Initialises MPI (finalised when the communicator goes) and returns
/// MPI_COMM_WORLD as a Communicator whose collectives report failures as
/// errors naming the rank instead of aborting.
Expected<std::unique_ptr<Communicator>> createMpiCommunicator(int *argc,
                                                              char ***argv);

} // namespace energy

#endif // ENERGY_RUNTIME_MPICOMMUNICATOR_H
