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
// Tensor::allocate is how a size that comes from outside (a dim, a file)
// becomes a tensor: it checks the size against this machine's memory and
// allocates without aborting, so that a size too large is an error naming
// the shape and the bytes rather than a crash.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_RUNTIME_TENSOR_H
#define ENERGY_RUNTIME_TENSOR_H

#include "energy/Runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
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

/// The bytes of memory this machine has (RAM and swap): what no tensor, and
/// no session's buffers together, may exceed. The largest uint64_t when the
/// system does not say.
uint64_t machineMemoryBytes();
/// A number of bytes for a message: "12 bytes", "64000000000000 bytes
/// (64.0 TB)" (decimal units, from 1000 bytes on).
std::string byteCountText(uint64_t bytes);
/// What an allocation that failed asked for, for messages that go on to
/// say why: "cannot allocate 64000000000000 bytes (64.0 TB) for F32
/// [1000000000000, 16]".
std::string cannotAllocateText(DType dtype, const std::vector<int64_t> &shape,
                               uint64_t bytes);
/// The bytes of a tensor of `dtype` and `shape`, or the error that
/// Tensor::allocate gives before it allocates anything: a negative
/// dimension, a size in bytes beyond int64_t, more bytes than
/// machineMemoryBytes().
Expected<uint64_t> allocationBytes(DType dtype,
                                   const std::vector<int64_t> &shape);

/// Where a tensor's bytes live: host memory (malloc) unless a device's
/// runtime gives memory that both the host and the device reach.
struct TensorMemory {
  /// Null when `bytes` cannot be had.
  void *(*allocate)(size_t bytes);
  void (*release)(void *pointer);
};

/// A dense tensor with contiguous row-major elements.
class Tensor {
public:
  /// An F64 scalar holding 0.
  Tensor() : Tensor(DType::F64, {}) {}
  /// A tensor of zeros. Every dimension must be non-negative and the size
  /// must fit in int64_t (see checkedElementCount). For sizes that come
  /// from outside, use allocate(): here, as in any container, memory that
  /// cannot be had throws std::bad_alloc.
  Tensor(DType dtype, std::vector<int64_t> shape);
  /// A tensor of zeros, or an error that names the dtype, the shape and the
  /// bytes: a negative dimension, a size in bytes beyond int64_t, more bytes
  /// than machineMemoryBytes(), or an allocation that fails ("cannot
  /// allocate 64000000000000 bytes (64.0 TB) for F32 [1000000000000, 16]:
  /// more than the memory this machine has, 26401685504 bytes (26.4 GB)").
  static Expected<Tensor> allocate(DType dtype, std::vector<int64_t> shape);
  /// The same in `memory`.
  static Expected<Tensor> allocate(DType dtype, std::vector<int64_t> shape,
                                   const TensorMemory &memory);
  /// A copy of this tensor in `memory` (copies made with the copy
  /// constructor are in host memory).
  Expected<Tensor> copyTo(const TensorMemory &memory) const;
  /// A tensor over `data` (not null), row-major elements of `dtype` and
  /// `shape` that the caller owns: nothing is copied or freed, and `lender`
  /// is held until this tensor and every view of it are gone. Copies made
  /// with the copy constructor own their elements.
  static Tensor borrow(DType dtype, std::vector<int64_t> shape, void *data,
                       std::shared_ptr<void> lender);
  /// Whether the elements are borrowed (borrow(), view()).
  bool borrowed() const { return bytes.get_deleter().lender != nullptr; }
  /// Another tensor over the same borrowed elements (borrowed() only).
  Tensor view() const;

  Tensor(const Tensor &other);
  Tensor &operator=(const Tensor &other);
  /// A tensor moved from may only be assigned to or destroyed.
  Tensor(Tensor &&other) noexcept = default;
  Tensor &operator=(Tensor &&other) noexcept = default;

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
  std::byte *data() { return bytes.get(); }
  const std::byte *data() const { return bytes.get(); }
  size_t byteSize() const { return byteLength; }

  /// Same dtype, shape and bytes (so NaNs with equal bits are equal, and
  /// 0.0 differs from -0.0): the equality of an exact round trip.
  bool operator==(const Tensor &other) const;
  bool operator!=(const Tensor &other) const { return !(*this == other); }

private:
  /// Frees what calloc and malloc (or a TensorMemory) gave; borrowed
  /// elements are not freed, only their lender let go.
  struct FreeBytes {
    FreeBytes() noexcept : release(nullptr) {}
    explicit FreeBytes(void (*release)(void *)) noexcept : release(release) {}
    explicit FreeBytes(std::shared_ptr<void> lender) noexcept
        : release(nullptr), lender(std::move(lender)) {}
    void (*release)(void *);
    std::shared_ptr<void> lender;
    void operator()(std::byte *pointer) const;
  };
  /// A tensor of `dtype`, `shape` and `elements` (checked) that owns
  /// `storage`, its zeroed bytes.
  Tensor(DType dtype, std::vector<int64_t> shape, int64_t elements,
         std::unique_ptr<std::byte, FreeBytes> storage);

  DType elementType;
  std::vector<int64_t> dimensions;
  int64_t count;
  /// The elements, byteLength bytes; never null (an empty tensor has one
  /// byte allocated, so that data() is a valid pointer).
  std::unique_ptr<std::byte, FreeBytes> bytes;
  size_t byteLength;
};

} // namespace energy

#endif // ENERGY_RUNTIME_TENSOR_H
