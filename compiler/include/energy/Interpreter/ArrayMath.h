//===- ArrayMath.h - Vector and matrix kernels of the interpreter ---------===//
//
// Straightforward double loops for the energy language's array functions:
// normalisations along the last axis, products, reductions over elements,
// log-determinant and inverse. Each kernel states its shape precondition;
// the interpreter checks it before the call.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_INTERPRETER_ARRAYMATH_H
#define ENERGY_INTERPRETER_ARRAYMATH_H

#include "energy/Interpreter/ArrayValue.h"
#include "energy/KernelSupport/ScalarMath.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <optional>

namespace mlir::energy {
/// The scalar functions live with the kernel support library (runtime/).
namespace scalar = ::energy::scalar;
} // namespace mlir::energy

namespace mlir::energy::array {

/// The ε of rmsnorm and layernorm.
constexpr double kNormEpsilon = 1e-5;

/// A function from one row (along the last axis) to a row of equal length.
using RowFunction = void (*)(llvm::ArrayRef<double> row,
                             llvm::MutableArrayRef<double> result);

void softmaxRow(llvm::ArrayRef<double> row, llvm::MutableArrayRef<double> out);
void logSoftmaxRow(llvm::ArrayRef<double> row,
                   llvm::MutableArrayRef<double> out);
/// x / √(mean(x²) + ε).
void rmsNormRow(llvm::ArrayRef<double> row, llvm::MutableArrayRef<double> out);
/// (x - mean(x)) / √(mean((x - mean(x))²) + ε).
void layerNormRow(llvm::ArrayRef<double> row,
                  llvm::MutableArrayRef<double> out);

/// `function` applied to every element.
ArrayValue map(const ArrayValue &operand,
               llvm::function_ref<double(double)> function);
/// `function` applied elementwise; a scalar operand is broadcast.
/// Precondition: equal shapes, or one operand is a scalar.
ArrayValue zip(const ArrayValue &lhs, const ArrayValue &rhs,
               llvm::function_ref<double(double, double)> function);
/// `function` applied to every row along the last axis (a scalar is one row
/// of length 1).
ArrayValue mapRows(const ArrayValue &operand, RowFunction function);

/// Log-sum-exp of `values`, shifted by their maximum; -∞ when empty.
double logSumExp(llvm::ArrayRef<double> values);

/// Precondition: [m, n] @ [n] or [m, n] @ [n, k].
ArrayValue matmul(const ArrayValue &lhs, const ArrayValue &rhs);
/// Swaps the last two axes. Precondition: rank ≥ 2.
ArrayValue transpose(const ArrayValue &operand);
/// Precondition: vectors of equal length.
double dot(const ArrayValue &lhs, const ArrayValue &rhs);
/// vᵀ M v. Precondition: v is [n], M is [n, n].
double quad(const ArrayValue &vector, const ArrayValue &matrix);
/// Precondition: two vectors.
ArrayValue outer(const ArrayValue &lhs, const ArrayValue &rhs);
/// Sum over the last axis. Precondition: rank ≥ 1.
ArrayValue sumLast(const ArrayValue &operand);
/// Repeats `operand` along new trailing axes up to `shape`.
/// Precondition: operand's shape is a prefix of `shape`.
ArrayValue broadcast(const ArrayValue &operand, llvm::ArrayRef<int64_t> shape);
/// Precondition: a vector.
ArrayValue diag(const ArrayValue &vector);
/// Precondition: a square matrix.
ArrayValue diagPart(const ArrayValue &matrix);
/// log det of the symmetric part ½(M + Mᵀ) by Cholesky; nullopt when that is
/// not positive definite. Precondition: a square matrix.
std::optional<double> logDetSymmetric(const ArrayValue &matrix);
/// Gauss-Jordan elimination with partial pivoting; nullopt when a pivot is
/// (numerically) zero. Precondition: a square matrix.
std::optional<ArrayValue> inverse(const ArrayValue &matrix);

} // namespace mlir::energy::array

#endif // ENERGY_INTERPRETER_ARRAYMATH_H
