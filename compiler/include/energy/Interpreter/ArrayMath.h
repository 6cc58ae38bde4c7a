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

#include "energy/KernelSupport/ScalarMath.h"
#include "energy/Interpreter/Tensor.h"

#include "llvm/ADT/ArrayRef.h"

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
Tensor map(const Tensor &operand, scalar::UnaryFunction function);
/// `function` applied elementwise; a scalar operand is broadcast.
/// Precondition: equal shapes, or one operand is a scalar.
Tensor zip(const Tensor &lhs, const Tensor &rhs,
           scalar::BinaryFunction function);
/// `function` applied to every row along the last axis (a scalar is one row
/// of length 1).
Tensor mapRows(const Tensor &operand, RowFunction function);

/// Log-sum-exp of `values`, shifted by their maximum; -∞ when empty.
double logSumExp(llvm::ArrayRef<double> values);

/// Precondition: [m, n] @ [n] or [m, n] @ [n, k].
Tensor matmul(const Tensor &lhs, const Tensor &rhs);
/// Swaps the last two axes. Precondition: rank ≥ 2.
Tensor transpose(const Tensor &operand);
/// Precondition: vectors of equal length.
double dot(const Tensor &lhs, const Tensor &rhs);
/// vᵀ M v. Precondition: v is [n], M is [n, n].
double quad(const Tensor &vector, const Tensor &matrix);
/// Precondition: two vectors.
Tensor outer(const Tensor &lhs, const Tensor &rhs);
/// Sum over the last axis. Precondition: rank ≥ 1.
Tensor sumLast(const Tensor &operand);
/// Repeats `operand` along new trailing axes up to `shape`.
/// Precondition: operand's shape is a prefix of `shape`.
Tensor broadcast(const Tensor &operand, llvm::ArrayRef<int64_t> shape);
/// Precondition: a vector.
Tensor diag(const Tensor &vector);
/// Precondition: a square matrix.
Tensor diagPart(const Tensor &matrix);
/// log det of the symmetric part ½(M + Mᵀ) by Cholesky; nullopt when that is
/// not positive definite. Precondition: a square matrix.
std::optional<double> logDetSymmetric(const Tensor &matrix);
/// Gauss-Jordan elimination with partial pivoting; nullopt when a pivot is
/// (numerically) zero. Precondition: a square matrix.
std::optional<Tensor> inverse(const Tensor &matrix);

} // namespace mlir::energy::array

#endif // ENERGY_INTERPRETER_ARRAYMATH_H
