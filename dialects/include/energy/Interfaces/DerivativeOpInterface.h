//===- DerivativeOpInterface.h - Reverse-mode rules -------------*- C++ -*-===//
//
// The interface through which differentiable ops state their reverse-mode
// derivative rules (see DerivativeOpInterface.td for the contract).
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_INTERFACES_DERIVATIVEOPINTERFACE_H
#define ENERGY_INTERFACES_DERIVATIVEOPINTERFACE_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"

#include "energy/Interfaces/DerivativeOpInterface.h.inc"

#endif // ENERGY_INTERFACES_DERIVATIVEOPINTERFACE_H
