//===- EnergyOps.h - Operations of the energy dialect -----------*- C++ -*-===//
//
// The ops of energy graphs: model declarations, expression ops of energy
// terms, index-domain reductions and dynamics.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_IR_ENERGYOPS_H
#define ENERGY_IR_ENERGYOPS_H

#include "energy/IR/EnergyAttrs.h"
#include "energy/IR/EnergyDialect.h"
#include "energy/IR/EnergyTypes.h"
#include "energy/Interfaces/DerivativeOpInterface.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/RegionKindInterface.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::energy {
class DynamicsOp;

/// The result type of an elementwise op on `lhs` and `rhs`: equal shapes, or
/// one of them a scalar. Emits an error at `location` when they do not fit.
LogicalResult inferBroadcastType(std::optional<Location> location, Type lhs,
                                 Type rhs, SmallVectorImpl<Type> &types);
} // namespace mlir::energy

#define GET_OP_CLASSES
#include "energy/IR/EnergyOps.h.inc"

#endif // ENERGY_IR_ENERGYOPS_H
