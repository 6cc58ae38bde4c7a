//===- ModelState.h - What a Model shares with its sessions -----*- C++ -*-===//
//
// Internal to the runtime library: the manifest and resolved kernel
// pointers that every copy of a Model and every Session of it share, and
// the handle that keeps their code loaded.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_RUNTIME_LIB_MODELSTATE_H
#define ENERGY_RUNTIME_LIB_MODELSTATE_H

#include "energy/Runtime/ArtifactABI.h"
#include "energy/Runtime/Manifest.h"
#include "energy/Runtime/Model.h"
#include "energy/Runtime/Status.h"

#include <map>
#include <memory>
#include <string>

namespace energy::detail {

/// A kernel: its symbol (for messages) and its address.
struct Kernel {
  std::string symbol;
  energy_kernel_fn function = nullptr;
};

struct ModelState {
  /// Keeps the code loaded (declared first, so released last).
  std::shared_ptr<void> keepAlive;
  std::string label;
  Manifest manifest;
  /// The manifest as the artifact gives it (JSON).
  std::string manifestText;
  Kernel energy;
  /// By energy term name.
  std::map<std::string, Kernel> terms;
  /// By tensor name and by output name.
  std::map<std::string, Kernel> gradients;
  /// By the tensors whose gradients the kernel writes, in its order.
  std::map<std::vector<std::string>, Kernel> jointGradients;
  std::map<std::string, Kernel> outputs;
  /// Null function when the manifest names none.
  Kernel step;
  Kernel until;
  /// Null functions unless the dynamics run programs around a call's steps.
  Kernel runBegin, runFinish;
  /// By loss name; the backward program's parts (null functions without a
  /// loss).
  std::map<std::string, Kernel> losses;
  Kernel backwardSeed, backwardStep, backwardFinish;
  /// Null function unless the manifest names the backward step's
  /// cotangents.
  Kernel backwardCotangents;
  energy_set_threads_fn setThreads = nullptr;
  /// A CUDA artifact's description of its last device failure, and the
  /// stream its kernels go on (null functions for other artifacts).
  energy_device_error_fn deviceError = nullptr;
  energy_set_stream_fn setStream = nullptr;
};

/// Opens the run-time library of each plugin `manifest` names and fills the
/// artifact's slots (found with `lookup`) for its symbols; an error naming
/// the plugin when one cannot be had (PluginCode.cpp).
Status bindPluginCode(const Manifest &manifest,
                      const Model::SymbolLookup &lookup,
                      const std::string &label);

} // namespace energy::detail

#endif // ENERGY_RUNTIME_LIB_MODELSTATE_H
