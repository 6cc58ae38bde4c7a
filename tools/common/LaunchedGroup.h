//===- LaunchedGroup.h - The MPI group a tool was launched in ---*- C++ -*-===//
//
// What energy-train and energy-run do when mpirun starts several of them:
// join the group, and end every process when one cannot go on.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TOOLS_COMMON_LAUNCHEDGROUP_H
#define ENERGY_TOOLS_COMMON_LAUNCHEDGROUP_H

#include "energy/Runtime/Communicator.h"

#include <memory>
#include <string>

namespace energy::tools {

/// Joins the group this process was started in by an MPI launcher into
/// `group`, if it was started as one of several (`group` stays null when it
/// runs alone). Returns an error message (empty on success): the launcher's
/// failure, or that this build of `tool` has no MPI.
std::string joinLaunchedGroup(int &argc, char **&argv, const char *tool,
                              std::unique_ptr<Communicator> &group);

/// Prints "TOOL: rank R of S: error: MESSAGE" and ends every process of
/// `group`, so that none waits for this one.
[[noreturn]] void abortGroup(Communicator &group, const char *tool,
                             const std::string &message);

} // namespace energy::tools

#endif // ENERGY_TOOLS_COMMON_LAUNCHEDGROUP_H
