//===- RunCompiled.h - energy-run on a compiled model -----------*- C++ -*-===//
//
// Evaluates, runs or times a compiled model (an artifact, or a .energy model
// compiled in process) through the runtime library, and prints its manifest.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TOOLS_ENERGYRUN_RUNCOMPILED_H
#define ENERGY_TOOLS_ENERGYRUN_RUNCOMPILED_H

#include "RunSettings.h"

#include "energy/Runtime/Model.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/SourceMgr.h"

#include <optional>

namespace mlir::energy::tools {

/// The model of `sourceMgr`'s buffer `buffer` (by default its main one);
/// null after reporting errors. A source energy-run wrote (`generated`: the
/// rank's model of --shard) reports errors only.
OwningOpRef<ModuleOp> emitModel(MLIRContext &context,
                                llvm::SourceMgr &sourceMgr,
                                std::optional<unsigned> buffer = std::nullopt,
                                bool generated = false);

/// --print-manifest: the manifest of a compiled model, as it gives it.
int printManifestOf(const ::energy::Model &model);

/// Runs a compiled model through the runtime library; returns the exit
/// status.
int runCompiled(const ::energy::Model &model, const RunInputs &inputs,
                const RunSettings &settings);

} // namespace mlir::energy::tools

#endif // ENERGY_TOOLS_ENERGYRUN_RUNCOMPILED_H
