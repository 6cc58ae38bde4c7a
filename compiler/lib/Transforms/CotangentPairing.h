//===- CotangentPairing.h - ⟨C, a comprehension⟩ as a scalar ----*- C++ -*-===//
//
// The scalar Σ_idx ⟨C[idx], body(idx)⟩ of a let or an output and a tensor C
// of its whole shape: the term whose gradient pulls C back through the
// comprehension (energy-build-backward's lets, energy-caller-cotangents'
// outputs). Private to compiler/lib/Transforms.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_LIB_TRANSFORMS_COTANGENTPAIRING_H
#define ENERGY_LIB_TRANSFORMS_COTANGENTPAIRING_H

#include "energy/IR/EnergyOps.h"

#include "mlir/IR/Builders.h"

namespace mlir::energy {

/// Builds Σ over `comprehension`'s domain of the element-wise sum of
/// C[idx] ⊙ body(idx) at `builder`'s point, C = `cotangent` (a tensor of
/// the comprehension's whole shape), its body cloned; returns the scalar.
/// A comprehension without indices pairs its one value, with no sum.
template <typename Comprehension>
Value buildCotangentPairing(OpBuilder &builder, Comprehension comprehension,
                            FlatSymbolRefAttr cotangent);

} // namespace mlir::energy

#endif // ENERGY_LIB_TRANSFORMS_COTANGENTPAIRING_H
