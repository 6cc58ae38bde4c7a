//===- IndexArithmetic.h - Affine index expressions as arith ops -*- C++ -*-===//
//
// Turns an affine expression over index values into `arith` index ops, for
// predicates and for substituting indices into copied bodies.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_IR_INDEXARITHMETIC_H
#define ENERGY_IR_INDEXARITHMETIC_H

#include "mlir/IR/AffineExpr.h"
#include "mlir/IR/Builders.h"

namespace mlir::energy {

/// Builds `arith` ops computing `expr`, whose dims are `dims` and whose
/// symbols are `symbols`, at the builder's insertion point.
Value materializeAffineExpr(OpBuilder &builder, Location loc, AffineExpr expr,
                            ValueRange dims, ValueRange symbols);

} // namespace mlir::energy

#endif // ENERGY_IR_INDEXARITHMETIC_H
