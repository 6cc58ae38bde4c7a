//===- EnergyTypes.h - Types of the energy dialect --------------*- C++ -*-===//
//
// The array type of energy expressions: a real array whose shape is a list of
// symbolic dim names.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_IR_ENERGYTYPES_H
#define ENERGY_IR_ENERGYTYPES_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Types.h"

#define GET_TYPEDEF_CLASSES
#include "energy/IR/EnergyTypes.h.inc"

#endif // ENERGY_IR_ENERGYTYPES_H
