//===- ElementwiseOpInterface.cpp - What an element-wise op computes ------===//
//
// Definitions generated from ElementwiseOpInterface.td.
//
//===----------------------------------------------------------------------===//

#include "energy/Interfaces/ElementwiseOpInterface.h"

using namespace mlir;
using namespace mlir::energy;

LaneBuilder::~LaneBuilder() = default;

#include "energy/Interfaces/ElementwiseOpInterface.cpp.inc"
