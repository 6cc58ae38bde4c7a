//===- Tensor.h - A dense fp32 or fp64 tensor -------------------*- C++ -*-===//
//
// The runtime's tensor: an element type (F32 or F64), a shape and the
// elements, contiguous and row-major. It is what safetensors files hold and
// what sessions take and give back.
//
// The elements are stored as their little-endian byte image, exactly as in a
// safetensors file, so reading and writing files is a plain copy on every
// host; on the little-endian hosts the project targets this is also the
// native layout, so kernels may use data() directly. Element access goes
// through doubles (an F32 element is rounded to nearest on `set`).
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_RUNTIME_TENSOR_H
#define ENERGY_RUNTIME_TENSOR_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace energy {

/// The element types of runtime tensors.
enum class DType { F32, F64 };

/// The size of one element in bytes (4 or 8).
size_t dtypeSize(DType dtype);
/// The safetensors name of the type: "F32" or "F64".
std::string_view dtypeName(DType dtype);
/// The type named `name` ("F32" or "F64"); nothing for any other name.
std::optional<DType> dtypeFromName(std::string_view name);

/// The number of elements of `shape`, or nothing when a dimension is negative
/// or the size in bytes (elements times `elementSize`) does not fit in
/// int64_t. The empty shape (a scalar) has one element.
std::optional<int64_t> checkedElementCount(const std::vector<int64_t> &shape,
                                           size_t elementSize);

/// A dense tensor with contiguous row-major elements.
class Tensor {
public:
  /// An F64 scalar holding 0.
  Tensor() : Tensor(DType::F64, {}) {}
  /// A tensor of zeros. Every dimension must be non-negative and the size
  /// must fit in int64_t (see checkedElementCount).
  Tensor(DType dtype, std::vector<int64_t> shape);

  DType dtype() const { return elementType; }
  const std::vector<int64_t> &shape() const { return dimensions; }
  int64_t rank() const { return static_cast<int64_t>(dimensions.size()); }
  /// The product of the dimensions (1 for a scalar, 0 if any dimension is 0).
  int64_t elementCount() const { return count; }
  /// The shape as text: "[2, 3]", "[]" for a scalar.
  std::string shapeString() const { return shapeText(dimensions); }
  /// Any shape as text, as shapeString() writes it.
  static std::string shapeText(const std::vector<int64_t> &shape);

  /// The element at row-major position `index` (0 <= index <
  /// elementCount()), widened to double.
  double at(int64_t index) const;
  /// Stores `value` at row-major position `index`, rounded to the dtype.
  void set(int64_t index, double value);
  /// The row-major position of the element at `indices` (one per dimension,
  /// each within its dimension).
  int64_t flatIndex(const std::vector<int64_t> &indices) const;

  /// A copy with elements of type `target` (F64 to F32 rounds to nearest).
  Tensor converted(DType target) const;

  /// The elements as little-endian bytes: elementCount() * dtypeSize(dtype()).
  std::byte *data() { return bytes.data(); }
  const std::byte *data() const { return bytes.data(); }
  size_t byteSize() const { return bytes.size(); }

  /// Same dtype, shape and bytes (so NaNs with equal bits are equal, and
  /// 0.0 differs from -0.0): the equality of an exact round trip.
  bool operator==(const Tensor &other) const;
  bool operator!=(const Tensor &other) const { return !(*this == other); }

private:
  DType elementType;
  std::vector<int64_t> dimensions;
  int64_t count;
  std::vector<std::byte> bytes;
};

} // namespace energy

#endif // ENERGY_RUNTIME_TENSOR_H
