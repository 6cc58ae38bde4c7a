//===- EnergyDialect.h - The energy dialect ---------------------*- C++ -*-===//
//
// Declares the `energy` dialect, which represents energy graphs and the
// index-domain expressions of their energy terms.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_IR_ENERGYDIALECT_H
#define ENERGY_IR_ENERGYDIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Dialect.h"

#include "energy/IR/EnergyDialect.h.inc"

#endif // ENERGY_IR_ENERGYDIALECT_H
