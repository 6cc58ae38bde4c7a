//===- Passes.h - Code generation passes ------------------------*- C++ -*-===//
//
// Declarations and registration of the passes that lower a kernel plan to
// the LLVM dialect (Passes.td).
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_CODEGEN_PASSES_H
#define ENERGY_CODEGEN_PASSES_H

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::energy {

/// The name of the module energy-emit-kernels nests in the model's module.
inline constexpr llvm::StringLiteral kArtifactModuleName = "energy_artifact";

#define GEN_PASS_DECL
#include "energy/Codegen/Passes.h.inc"
#define GEN_PASS_REGISTRATION
#include "energy/Codegen/Passes.h.inc"

} // namespace mlir::energy

#endif // ENERGY_CODEGEN_PASSES_H
