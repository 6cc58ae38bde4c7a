//===- EmitEnergyDialect.h - From the checked AST to the dialect -*- C++
//-*-===//
//
// Emission of a checked `.energy` AST as an `energy.model` op. This is the
// one part of the front end that depends on MLIR; it lives in its own
// library (EnergyFrontendEmit) so the parser and checker stay MLIR-free.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_FRONTEND_EMITENERGYDIALECT_H
#define ENERGY_FRONTEND_EMITENERGYDIALECT_H

#include "energy/Frontend/AST.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/SourceMgr.h"

namespace energy {
namespace frontend {

/// Emits `model`, which the checker accepted, as an `energy.model` inside a
/// new module. Every op gets the FileLineColLoc of the source it comes from.
/// Returns null after reporting an error through the context's diagnostic
/// handler when a construct cannot be emitted.
mlir::OwningOpRef<mlir::ModuleOp>
emitEnergyDialect(mlir::MLIRContext &context, const Model &model,
                  const llvm::SourceMgr &sourceMgr);

} // namespace frontend
} // namespace energy

#endif // ENERGY_FRONTEND_EMITENERGYDIALECT_H
