//===- Shape.h - Symbolic tensor shapes -------------------------*- C++ -*-===//
//
// Shapes are checked symbolically: each axis is a dim symbol, written as its
// source spelling ("N", "Dh") or, for an affine domain size, its canonical
// printed form ("T - 1"). Two axes match when their symbols are equal. An
// empty shape is a scalar.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_FRONTEND_SHAPE_H
#define ENERGY_FRONTEND_SHAPE_H

#include "llvm/ADT/ArrayRef.h"

#include <string>
#include <vector>

namespace energy {
namespace frontend {

/// A symbolic shape: one dim symbol per axis, outermost first.
struct Shape {
  std::vector<std::string> dims;

  Shape() = default;
  explicit Shape(std::vector<std::string> dims) : dims(std::move(dims)) {}

  bool isScalar() const { return dims.empty(); }
  size_t getRank() const { return dims.size(); }
  const std::string &back() const { return dims.back(); }

  /// The shape without its first `count` axes.
  Shape dropFront(size_t count) const;
  /// `prefix` followed by this shape's axes.
  Shape prepend(llvm::ArrayRef<std::string> prefix) const;

  bool operator==(const Shape &other) const { return dims == other.dims; }
  bool operator!=(const Shape &other) const { return dims != other.dims; }

  /// "[N, D]", or "scalar" for rank 0.
  std::string str() const;
};

} // namespace frontend
} // namespace energy

#endif // ENERGY_FRONTEND_SHAPE_H
