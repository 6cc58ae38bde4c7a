//===- Tensor.cpp - A dense fp32 or fp64 tensor ---------------------------===//
//
// Element access encodes and decodes the little-endian byte image with
// shifts, so it is independent of the host's byte order.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/Tensor.h"

#include <cassert>
#include <cstring>
#include <limits>

using namespace energy;

size_t energy::dtypeSize(DType dtype) { return dtype == DType::F32 ? 4 : 8; }

std::string_view energy::dtypeName(DType dtype) {
  return dtype == DType::F32 ? "F32" : "F64";
}

std::optional<DType> energy::dtypeFromName(std::string_view name) {
  if (name == "F32")
    return DType::F32;
  if (name == "F64")
    return DType::F64;
  return std::nullopt;
}

std::optional<int64_t>
energy::checkedElementCount(const std::vector<int64_t> &shape,
                            size_t elementSize) {
  assert(elementSize > 0 && "elements have a size");
  const int64_t maxBytes = std::numeric_limits<int64_t>::max();
  int64_t elements = 1;
  for (int64_t dimension : shape)
    if (dimension < 0)
      return std::nullopt;
  for (int64_t dimension : shape) {
    if (dimension == 0)
      return 0;
    if (elements > maxBytes / dimension)
      return std::nullopt;
    elements *= dimension;
  }
  if (elements > maxBytes / static_cast<int64_t>(elementSize))
    return std::nullopt;
  return elements;
}

Tensor::Tensor(DType dtype, std::vector<int64_t> shape)
    : elementType(dtype), dimensions(std::move(shape)) {
  std::optional<int64_t> elements =
      checkedElementCount(dimensions, dtypeSize(dtype));
  assert(elements && "negative dimension or size overflow");
  count = elements.value_or(0);
  bytes.resize(static_cast<size_t>(count) * dtypeSize(dtype));
}

std::string Tensor::shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0)
      text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

/// The little-endian unsigned integer of `size` bytes at `source`.
static uint64_t loadLittleEndian(const std::byte *source, size_t size) {
  uint64_t bits = 0;
  for (size_t i = 0; i < size; ++i)
    bits |= static_cast<uint64_t>(source[i]) << (8 * i);
  return bits;
}

/// Stores the low `size` bytes of `bits` at `target`, little-endian.
static void storeLittleEndian(std::byte *target, size_t size, uint64_t bits) {
  for (size_t i = 0; i < size; ++i)
    target[i] = static_cast<std::byte>(bits >> (8 * i));
}

double Tensor::at(int64_t index) const {
  assert(index >= 0 && index < count && "element index out of range");
  size_t size = dtypeSize(elementType);
  uint64_t bits = loadLittleEndian(&bytes[index * size], size);
  if (elementType == DType::F32) {
    uint32_t narrowBits = static_cast<uint32_t>(bits);
    float value;
    std::memcpy(&value, &narrowBits, sizeof value);
    return value;
  }
  double value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

void Tensor::set(int64_t index, double value) {
  assert(index >= 0 && index < count && "element index out of range");
  size_t size = dtypeSize(elementType);
  uint64_t bits;
  if (elementType == DType::F32) {
    float narrowValue = static_cast<float>(value);
    uint32_t narrowBits;
    std::memcpy(&narrowBits, &narrowValue, sizeof narrowBits);
    bits = narrowBits;
  } else {
    std::memcpy(&bits, &value, sizeof bits);
  }
  storeLittleEndian(&bytes[index * size], size, bits);
}

int64_t Tensor::flatIndex(const std::vector<int64_t> &indices) const {
  assert(indices.size() == dimensions.size() && "one index per dimension");
  int64_t index = 0;
  for (size_t i = 0; i < dimensions.size(); ++i) {
    assert(indices[i] >= 0 && indices[i] < dimensions[i] &&
           "index out of its dimension");
    index = index * dimensions[i] + indices[i];
  }
  return index;
}

Tensor Tensor::converted(DType target) const {
  if (target == elementType)
    return *this;
  Tensor result(target, dimensions);
  for (int64_t i = 0; i < count; ++i)
    result.set(i, at(i));
  return result;
}

bool Tensor::operator==(const Tensor &other) const {
  return elementType == other.elementType && dimensions == other.dimensions &&
         bytes == other.bytes;
}
