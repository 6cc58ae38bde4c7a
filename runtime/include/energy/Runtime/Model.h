//===- Model.h - A loaded artifact: manifest and kernels --------*- C++ -*-===//
//
// An energy::Model is a compiled model ready to run: its manifest, checked,
// and every kernel the manifest names, resolved to a function pointer. It
// comes from a shared library on disk (load) or from code compiled in the
// process (fromSymbols). Sessions (Session.h) hold the values and run it.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_RUNTIME_MODEL_H
#define ENERGY_RUNTIME_MODEL_H

#include "energy/Runtime/Manifest.h"
#include "energy/Runtime/Status.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace energy {

class Session;
struct SessionOptions;
namespace detail {
struct Kernel;
struct ModelState;
} // namespace detail

/// A compiled model. Copies share the loaded code, which stays loaded as
/// long as a Model or a Session of it exists.
class Model {
public:
  /// Loads the artifact at `path` (a shared library). Errors name the file:
  /// it does not exist, is not a shared library (with the loader's
  /// message), is not an energy artifact (no manifest symbol), has a
  /// manifest this runtime does not read, was compiled for a CPU this one
  /// is not (the features it lacks: see CpuFeatures.h), or lacks a kernel
  /// the manifest names.
  static Expected<Model> load(const std::string &path);

  /// Finds a symbol's address by name; null when there is no such symbol.
  using SymbolLookup = std::function<void *(const std::string &symbol)>;
  /// A model whose code is already in the process (compiled just in time):
  /// the manifest and kernels are found through `lookup`, and `keepAlive`
  /// (which may be null) is kept until the last Model or Session using the
  /// code is gone. Checks as load does; errors start with `label`.
  static Expected<Model> fromSymbols(std::string label, SymbolLookup lookup,
                                     std::shared_ptr<void> keepAlive);

  /// The path it was loaded from, or the label given to fromSymbols.
  const std::string &label() const;
  const Manifest &manifest() const;
  /// The manifest's JSON text, as the artifact gives it.
  const std::string &manifestText() const;
  /// The model's name in the source.
  const std::string &name() const { return manifest().model; }
  /// The element type of all its tensors.
  DType dtype() const { return manifest().dtype; }
  /// Where its kernels run: "cpu", or "cuda" for an artifact of energyc
  /// --target cuda (its sessions need a CUDA GPU).
  std::string device() const {
    const auto &target = manifest().target;
    return target && target->device == "cuda" ? "cuda" : "cpu";
  }
  /// The .energy text it was compiled from, and that file's name.
  const std::string &source() const { return manifest().source; }
  const std::string &sourceName() const { return manifest().sourceName; }
  /// Whether it has dynamics (a step kernel) to run.
  bool hasDynamics() const { return manifest().kernels.step.has_value(); }

  /// Its tensors (inputs, params and state, optimizer state included), its
  /// outputs, and the tensors it has gradient kernels for, in manifest
  /// order.
  std::vector<std::string> tensorNames() const;
  std::vector<std::string> outputNames() const;
  std::vector<std::string> gradientNames() const;
  /// The energy terms whose energies Session::termEnergy gives (sorted).
  std::vector<std::string> termNames() const;
  /// Its losses, and the tensors whose derivatives a backward run gives
  /// (every param and state of a model with a loss, not the states a call
  /// keeps for itself, such as a change of variables' images), in manifest
  /// order.
  std::vector<std::string> lossNames() const;
  std::vector<std::string> adjointNames() const;

  /// Whether the kernels were built with threads.
  bool hasThreads() const;
  /// Sets the number of threads the kernels use (results do not depend on
  /// it); false, doing nothing, when the kernels have no threads.
  bool setThreads(int threads) const;

  /// A session: a set of values for the model's tensors (include
  /// Session.h). Errors: an unknown dim or const, a derived dim given a
  /// value, a negative dim.
  Expected<Session> session() const;
  Expected<Session> session(const SessionOptions &options) const;

private:
  explicit Model(std::shared_ptr<const detail::ModelState> state)
      : state(std::move(state)) {}

  std::shared_ptr<const detail::ModelState> state;
  friend class Session;
};

} // namespace energy

#endif // ENERGY_RUNTIME_MODEL_H
