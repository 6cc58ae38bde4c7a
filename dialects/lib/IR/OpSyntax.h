//===- OpSyntax.h - Syntax and checks shared by energy ops ------*- C++ -*-===//
//
// The pieces of custom assembly and verification that several ops of the
// dialect share: index domains, bodies over them, and dim references.
// Private to dialects/lib/IR.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_LIB_IR_OPSYNTAX_H
#define ENERGY_LIB_IR_OPSYNTAX_H

#include "energy/IR/EnergyOps.h"

#include "mlir/IR/OpImplementation.h"

namespace mlir::energy::syntax {

/// Parses a real number written as a float or an integer literal.
ParseResult parseNumber(AsmParser &parser, double &value);

/// Parses an index domain `(%i : @N, %t : @T - 1)` (or in square brackets),
/// giving each index the type `index`.
ParseResult parseIndexDomain(OpAsmParser &parser,
                             AsmParser::Delimiter delimiter,
                             SmallVectorImpl<OpAsmParser::Argument> &indices,
                             ArrayAttr &sizes);
/// Prints the arguments of `block` with their sizes between `open` and
/// `close`.
void printIndexDomain(OpAsmPrinter &printer, Block &block, ArrayAttr sizes,
                      StringRef open, StringRef close);
/// Checks that a body has one block whose arguments are `indexCount` indices.
LogicalResult verifyIndexArguments(Operation *op, Region &region,
                                   unsigned indexCount, StringRef what);
/// Checks that a body has one block whose arguments are `indexCount` indices
/// and whose terminator yields values of the `expected` types.
LogicalResult verifyBody(Operation *op, Region &region, unsigned indexCount,
                         TypeRange expected, StringRef what);
/// Checks that every dim named by `size` (or by each of `sizes`) is a dim
/// of the model.
LogicalResult verifyDimNames(Operation *user, SymbolTableCollection &tables,
                             DimExprAttr size);
LogicalResult verifyDimNames(Operation *user, SymbolTableCollection &tables,
                             ArrayAttr sizes);
/// Parses a region of one block without arguments, `{ ops }`; an empty
/// `{}` is one empty block (printRegion prints an empty block so).
ParseResult parseBlock(OpAsmParser &parser, Region &region);
/// Prints a region parseBlock reads.
void printBlock(OpAsmPrinter &printer, Operation *op, Region &region);
/// Names the index arguments of `region` after the source's index names,
/// which the front end records as NameLocs on the arguments.
void nameIndices(Region &region, OpAsmSetValueNameFn setName);

} // namespace mlir::energy::syntax

#endif // ENERGY_LIB_IR_OPSYNTAX_H
