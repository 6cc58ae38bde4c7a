//===- EnergyAttrs.h - Attributes of the energy dialect ---------*- C++ -*-===//
//
// Enumerations of the dialect and the symbolic dim expression attribute,
// with the helpers that parse and print dim expressions inside op syntax.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_IR_ENERGYATTRS_H
#define ENERGY_IR_ENERGYATTRS_H

#include "mlir/IR/AffineExpr.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"

#include "energy/IR/EnergyEnums.h.inc"
#include "energy/Runtime/TensorRole.h"

#define GET_ATTRDEF_CLASSES
#include "energy/IR/EnergyAttrs.h.inc"

namespace mlir::energy {

/// The `role` attribute is the IR's spelling of the one enumeration of
/// roles, the runtime's TensorRole: the same cases in the same order.
static_assert(static_cast<int>(Role::input) ==
                  static_cast<int>(::energy::TensorRole::Input) &&
              static_cast<int>(Role::param) ==
                  static_cast<int>(::energy::TensorRole::Param) &&
              static_cast<int>(Role::state) ==
                  static_cast<int>(::energy::TensorRole::State));
inline ::energy::TensorRole toTensorRole(Role role) {
  return static_cast<::energy::TensorRole>(role);
}
inline Role toRole(::energy::TensorRole role) {
  return static_cast<Role>(role);
}

/// Parses a dim expression written as `@T - 1`, `@D / @H`, `12`.
ParseResult parseDimExpr(AsmParser &parser, DimExprAttr &result);

/// Prints a dim expression in the form parseDimExpr reads.
void printDimExpr(AsmPrinter &printer, DimExprAttr attr);

/// Prints `expr` as the language writes it (`t + 1`, `D / H`), its dims and
/// symbols named by `dimNames` and `symbolNames`.
void printAffineText(raw_ostream &os, AffineExpr expr,
                     ArrayRef<std::string> dimNames,
                     ArrayRef<std::string> symbolNames);

/// A dim expression as the language writes it: `T - 1`, `D / H`.
std::string dimExprText(DimExprAttr attr);

/// The `custom<DimExpr>` directive of declarative assembly formats.
inline void printDimExpr(AsmPrinter &printer, Operation *, DimExprAttr attr) {
  printDimExpr(printer, attr);
}

} // namespace mlir::energy

#endif // ENERGY_IR_ENERGYATTRS_H
