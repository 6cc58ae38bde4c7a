//===- IndexArithmetic.h - Affine index expressions ------------*- C++ -*-===//
//
// Turns an affine expression over index values into `arith` index ops, for
// predicates and for substituting indices into copied bodies, and composes
// the index maps of slices.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_IR_INDEXARITHMETIC_H
#define ENERGY_IR_INDEXARITHMETIC_H

#include "energy/Runtime/IndexArithmetic.h"

#include "mlir/IR/AffineExpr.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/Builders.h"

#include <optional>

namespace mlir::energy {

/// The index operation of an affine binary expression of kind `kind`; a
/// floordiv is the exact division `Div` where `exactDivision` (a dim
/// expression's `/`).
::energy::IndexOp indexOpOf(AffineExprKind kind, bool exactDivision);

/// The value of `expr` by IndexArithmetic.h's rule, its dims and symbols
/// valued by `leaf`: none where a leaf has none or an operation faults
/// (overflow, division by zero, with `exactDivision` a remainder).
std::optional<int64_t>
evaluateAffineExpr(AffineExpr expr,
                   function_ref<std::optional<int64_t>(AffineExpr)> leaf,
                   bool exactDivision);

/// Builds `arith` ops computing `expr`, whose dims are `dims` and whose
/// symbols are `symbols`, at the builder's insertion point.
Value materializeAffineExpr(OpBuilder &builder, Location loc, AffineExpr expr,
                            ValueRange dims, ValueRange symbols);

/// The index map of a slice at `leading`'s results and then `trailing`'s,
/// over `leading`'s dims and then `trailing`'s (operands concatenated the
/// same way): a slice of a slice, an embedded slice accumulated at a slot.
/// Null when either map has symbols.
AffineMap concatIndexMaps(AffineMap leading, AffineMap trailing);

} // namespace mlir::energy

#endif // ENERGY_IR_INDEXARITHMETIC_H
