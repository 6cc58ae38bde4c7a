//===- TensorRole.h - The roles of a model's tensors ------------*- C++ -*-===//
//
// The one enumeration of what a tensor is to a model, shared by the front
// end (the AST), the dialect (whose `role` attribute converts to it) and
// the manifest. Header-only, with no dependency.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_RUNTIME_TENSORROLE_H
#define ENERGY_RUNTIME_TENSORROLE_H

#include <string_view>

namespace energy {

/// The roles of tensors: inputs and params are read, state is what the
/// dynamics update (optimizer state included).
enum class TensorRole { Input, Param, State };

/// "input", "param", "state": the spelling in specs, IR and manifests.
constexpr std::string_view tensorRoleName(TensorRole role) {
  switch (role) {
  case TensorRole::Input:
    return "input";
  case TensorRole::Param:
    return "param";
  case TensorRole::State:
    return "state";
  }
  return "?";
}

} // namespace energy

#endif // ENERGY_RUNTIME_TENSORROLE_H
