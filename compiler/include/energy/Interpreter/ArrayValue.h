//===- ArrayValue.h - The interpreter's value of an !energy.array -*- C++
//-*-===//
//
// The value type of the reference interpreter: a row-major array of doubles
// with a concrete shape (the runtime's tensors are energy::Tensor). Rank 0 is
// a scalar holding one element.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_INTERPRETER_ARRAYVALUE_H
#define ENERGY_INTERPRETER_ARRAYVALUE_H

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::energy {

/// A dense row-major array of doubles. Plain data: copying copies the
/// elements.
struct ArrayValue {
  std::vector<int64_t> shape;
  std::vector<double> data;

  ArrayValue() : data(1, 0.0) {}
  /// A tensor of `shape` filled with `fill`.
  explicit ArrayValue(std::vector<int64_t> shape, double fill = 0.0);
  ArrayValue(std::vector<int64_t> shape, std::vector<double> data)
      : shape(std::move(shape)), data(std::move(data)) {}

  static ArrayValue scalar(double value) {
    return ArrayValue(std::vector<int64_t>(), std::vector<double>(1, value));
  }

  /// The number of elements a tensor of `shape` holds; the largest int64_t
  /// when that overflows (callers check shapes from outside first, with
  /// checkAllocation).
  static int64_t elementCount(llvm::ArrayRef<int64_t> shape);

  size_t getRank() const { return shape.size(); }
  bool isScalar() const { return shape.empty(); }
  int64_t size() const { return static_cast<int64_t>(data.size()); }
  /// The length of the last axis (1 for a scalar).
  int64_t lastAxisLength() const { return shape.empty() ? 1 : shape.back(); }

  /// The sub-array at `indices` along the leading axes (all in range).
  ArrayValue slice(llvm::ArrayRef<int64_t> indices) const;
  /// Stores `value` at `indices` along the leading axes; its shape must be
  /// the remaining trailing axes.
  void setSlice(llvm::ArrayRef<int64_t> indices, const ArrayValue &value);

  /// The element at a full multi-index.
  double &at(llvm::ArrayRef<int64_t> indices);
  double at(llvm::ArrayRef<int64_t> indices) const;

  /// Prints a shape as `[2, 3]` for diagnostics.
  static std::string shapeString(llvm::ArrayRef<int64_t> shape);

private:
  /// The flat offset of the first element at `indices` (a prefix).
  int64_t offsetOf(llvm::ArrayRef<int64_t> indices) const;
};

} // namespace mlir::energy

#endif // ENERGY_INTERPRETER_ARRAYVALUE_H
