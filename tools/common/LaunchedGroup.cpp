//===- LaunchedGroup.cpp - The MPI group a tool was launched in -----------===//
//
// Joining the launcher's group where this build has MPI, and the error that
// says how to get it where it has not.
//
//===----------------------------------------------------------------------===//

#include "LaunchedGroup.h"

#ifdef ENERGY_HAS_MPI
#include "energy/Runtime/MpiCommunicator.h"
#endif

#include <cstdio>

std::string
energy::tools::joinLaunchedGroup(int &argc, char **&argv, const char *tool,
                                 std::unique_ptr<Communicator> &group) {
  int count = launchedProcessCount();
  if (count <= 1)
    return "";
#ifdef ENERGY_HAS_MPI
  (void)tool;
  Expected<std::unique_ptr<Communicator>> joined =
      createMpiCommunicator(&argc, &argv);
  if (!joined)
    return joined.message();
  group = std::move(*joined);
  return "";
#else
  (void)argc;
  (void)argv;
  return "started as one of " + std::to_string(count) +
         " processes by an MPI launcher, but this " + tool +
         " was built without MPI (install libopenmpi-dev and rebuild: make "
         "deps build)";
#endif
}

void energy::tools::abortGroup(Communicator &group, const char *tool,
                               const std::string &message) {
  std::fprintf(stderr, "%s: rank %d of %d: error: %s\n", tool, group.rank(),
               group.size(), message.c_str());
  std::fflush(stderr);
  group.abort(1);
}
