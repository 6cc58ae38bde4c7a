//===- EnergyDialect.cpp - The energy dialect -----------------------------===//
//
// Registers the ops, types and attributes of the `energy` dialect.
//
//===----------------------------------------------------------------------===//

#include "energy/IR/EnergyDialect.h"
#include "energy/IR/EnergyOps.h"

using namespace mlir;
using namespace mlir::energy;

#include "energy/IR/EnergyDialect.cpp.inc"

void EnergyDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "energy/IR/EnergyOps.cpp.inc"
      >();
  registerTypes();
  registerAttributes();
}
