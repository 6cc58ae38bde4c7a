//===- Passes.h - Passes over the energy dialect ----------------*- C++ -*-===//
//
// Declarations and registration of the passes that analyse and transform
// energy graphs.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TRANSFORMS_PASSES_H
#define ENERGY_TRANSFORMS_PASSES_H

#include "energy/IR/EnergyOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::energy {

#define GEN_PASS_DECL
#include "energy/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "energy/Transforms/Passes.h.inc"

} // namespace mlir::energy

#endif // ENERGY_TRANSFORMS_PASSES_H
