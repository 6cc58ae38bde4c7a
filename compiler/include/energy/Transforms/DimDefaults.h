//===- DimDefaults.h - Sizes a model is planned at ------------*- C++ -*-===//
//
// A dim's default binds it when a run does not and is the size at which the
// kernel planner weighs the choices that depend on sizes; the compiling
// tools set the defaults from the sizes a user names (`--dim`, `**dims`).
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TRANSFORMS_DIMDEFAULTS_H
#define ENERGY_TRANSFORMS_DIMDEFAULTS_H

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <string>
#include <utility>

namespace mlir::energy {

/// How setDimDefaults treats a size it cannot set.
enum class UnsetDims {
  /// An error naming the setting.
  Refused,
  /// Left to the run that binds the sizes, which reports it.
  Skipped,
};

/// Sets the default of each named dim of `module`'s model to its size. A
/// dim the model lacks, a derived dim, or a size that is not positive is an
/// error at the dim (or the module) naming `option` ("--dim NAME=VALUE"),
/// or skipped.
LogicalResult setDimDefaults(ModuleOp module,
                             ArrayRef<std::pair<std::string, int64_t>> sizes,
                             UnsetDims unset = UnsetDims::Refused,
                             StringRef option = "--dim");

} // namespace mlir::energy

#endif // ENERGY_TRANSFORMS_DIMDEFAULTS_H
