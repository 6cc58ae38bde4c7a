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
#include "energy/Frontend/Diagnostics.h"

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
emitEnergyDialect(mlir::MLIRContext &context, const ModelSpec &model,
                  const llvm::SourceMgr &sourceMgr);

/// The one path from source text to IR that every tool takes: parses and
/// checks buffer `bufferId` of `sourceMgr` against the registries (the
/// built-ins and the plugins loaded), loads the dialects emission needs
/// into `context` and emits the model. Front-end errors go to
/// `diagnostics`, emission errors to the context's diagnostic handler;
/// returns null after any error.
mlir::OwningOpRef<mlir::ModuleOp> emitSource(mlir::MLIRContext &context,
                                             const llvm::SourceMgr &sourceMgr,
                                             unsigned bufferId,
                                             DiagnosticEngine &diagnostics);

} // namespace frontend
} // namespace energy

#endif // ENERGY_FRONTEND_EMITENERGYDIALECT_H
