//===- DerivativeOpInterface.cpp - Reverse-mode rules ---------------------===//
//
// Definitions generated from DerivativeOpInterface.td.
//
//===----------------------------------------------------------------------===//

#include "energy/Interfaces/DerivativeOpInterface.h"

using namespace mlir;
using namespace mlir::energy;

#include "energy/Interfaces/DerivativeOpInterface.cpp.inc"
