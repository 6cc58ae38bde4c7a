//===- DeviceFactorizations.h - Factorisations as loops ---------*- C++ -*-===//
//
// The log determinant and the inverse of a square matrix written as loops in
// the kernel, for loops that must not call the host (kDeviceLoopsAttr); the
// same arithmetic as the support library's (Factorizations.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_CODEGEN_DEVICEFACTORIZATIONS_H
#define ENERGY_CODEGEN_DEVICEFACTORIZATIONS_H

#include "KernelBuilder.h"

namespace mlir::energy::codegen {

/// log det of the symmetric part of the square matrix of `matrixType` at
/// `matrix` (row-major, the kernel's element type) by a Cholesky factor in
/// f64, as an element-type value; NaN when that part is not positive
/// definite.
Value emitLogDetLoops(KernelBuilder &kernel, ArrayType matrixType,
                      Value matrix);

/// The inverse of the square matrix of `matrixType` at `matrix` into
/// `inverse` (both row-major, the element type) by Gauss-Jordan elimination
/// with partial pivoting in f64; NaN everywhere when a pivot is below the
/// size · ε · the largest magnitude.
void emitInverseLoops(KernelBuilder &kernel, ArrayType matrixType, Value matrix,
                      Value inverse);

} // namespace mlir::energy::codegen

#endif // ENERGY_CODEGEN_DEVICEFACTORIZATIONS_H
