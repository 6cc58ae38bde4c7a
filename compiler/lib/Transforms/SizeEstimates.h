//===- SizeEstimates.h - Sizes the planner assumes --------------*- C++ -*-===//
//
// Dims are bound at run time, but some planning choices (the order of a
// chain of matrix products) depend on their sizes. These estimates use a
// dim's default where the model declares one (`dim D = 64`, or energyc's
// --dim) and one nominal size for every other dim, so that without defaults
// a choice turns on the products' shapes alone.
// Private to compiler/lib/Transforms.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_LIB_TRANSFORMS_SIZEESTIMATES_H
#define ENERGY_LIB_TRANSFORMS_SIZEESTIMATES_H

#include "energy/IR/EnergyOps.h"

namespace mlir::energy {

/// The size assumed for a dim without a default.
constexpr double kNominalDimSize = 256;

/// The estimated size of the dim `name` of `model`: its default, a derived
/// dim's value from its operands' defaults, else kNominalDimSize.
double estimatedDimSize(ModelOp model, StringRef name);

/// The estimated size of the domain that `index`, an index argument of a
/// loop's, reduction's, table's, let's or contraction's body, runs over.
double estimatedIndexSize(ModelOp model, BlockArgument index);

/// The estimated number of elements of an array of `type` (1 for a scalar).
double estimatedElements(ModelOp model, Type type);

/// The estimated multiply-adds of a matrix product (`matmul` or
/// `batch_matmul`, in any of its forms) from its operands' and result's
/// estimated sizes; 0 for any other op.
double estimatedProductWork(ModelOp model, Operation *product);

} // namespace mlir::energy

#endif // ENERGY_LIB_TRANSFORMS_SIZEESTIMATES_H
