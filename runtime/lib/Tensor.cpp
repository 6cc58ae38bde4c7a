//===- Tensor.cpp - A dense fp32 or fp64 tensor ---------------------------===//
//
// Element access encodes and decodes the little-endian byte image with
// shifts, so it is independent of the host's byte order. The bytes come
// from calloc, which returns null rather than aborting or throwing when it
// cannot allocate (C++ allocation calls the new handler, which in the LLVM
// tools aborts with "LLVM ERROR: out of memory"), and which leaves a large
// tensor's zero pages untouched until they are written.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/Tensor.h"

#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

#if defined(__linux__)
#include <sys/sysinfo.h>
#elif defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

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

/// What machineMemoryBytes() returns, asked of the system.
static uint64_t queryMachineMemory() {
  constexpr uint64_t unknown = std::numeric_limits<uint64_t>::max();
#if defined(__linux__)
  // RAM and swap: what Linux weighs a single allocation against before it
  // overcommits.
  struct sysinfo info;
  if (sysinfo(&info) != 0 || info.mem_unit == 0)
    return unknown;
  uint64_t units = uint64_t(info.totalram) + uint64_t(info.totalswap);
  uint64_t bytes;
  if (units == 0 ||
      __builtin_mul_overflow(units, uint64_t(info.mem_unit), &bytes))
    return unknown;
  return bytes;
#elif defined(__unix__) || defined(__APPLE__)
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
  uint64_t bytes;
  if (pages <= 0 || pageSize <= 0 ||
      __builtin_mul_overflow(uint64_t(pages), uint64_t(pageSize), &bytes))
    return unknown;
  return bytes;
#else
  return unknown;
#endif
}

uint64_t energy::machineMemoryBytes() {
  // Asked once: the interpreter checks every array it allocates.
  static const uint64_t bytes = queryMachineMemory();
  return bytes;
}

std::string energy::byteCountText(uint64_t bytes) {
  std::string text = std::to_string(bytes) + " bytes";
  static constexpr const char *units[] = {"kB", "MB", "GB", "TB", "PB", "EB"};
  if (bytes < 1000)
    return text;
  double value = static_cast<double>(bytes) / 1000;
  size_t unit = 0;
  while (value >= 999.95 && unit + 1 < std::size(units)) {
    value /= 1000;
    ++unit;
  }
  char scaled[32];
  std::snprintf(scaled, sizeof scaled, " (%.1f %s)", value, units[unit]);
  return text + scaled;
}

std::string energy::cannotAllocateText(DType dtype,
                                       const std::vector<int64_t> &shape,
                                       uint64_t bytes) {
  return "cannot allocate " + byteCountText(bytes) + " for " +
         std::string(dtypeName(dtype)) + " " + Tensor::shapeText(shape);
}

void Tensor::FreeBytes::operator()(std::byte *pointer) const {
  if (lender)
    return;
  if (release)
    release(pointer);
  else
    std::free(pointer);
}

Tensor::Tensor(DType dtype, std::vector<int64_t> shape, int64_t elements,
               std::unique_ptr<std::byte, FreeBytes> storage)
    : elementType(dtype), dimensions(std::move(shape)), count(elements),
      bytes(std::move(storage)),
      byteLength(static_cast<size_t>(elements) * dtypeSize(dtype)) {}

Tensor::Tensor(DType dtype, std::vector<int64_t> shape)
    : elementType(dtype), dimensions(std::move(shape)) {
  std::optional<int64_t> elements =
      checkedElementCount(dimensions, dtypeSize(dtype));
  assert(elements && "negative dimension or size overflow");
  count = elements.value_or(0);
  byteLength = static_cast<size_t>(count) * dtypeSize(dtype);
  bytes.reset(
      static_cast<std::byte *>(std::calloc(byteLength ? byteLength : 1, 1)));
  if (!bytes)
    throw std::bad_alloc();
}

Expected<uint64_t> energy::allocationBytes(DType dtype,
                                           const std::vector<int64_t> &shape) {
  std::string what = "cannot allocate " + std::string(dtypeName(dtype)) + " " +
                     Tensor::shapeText(shape);
  for (int64_t dimension : shape)
    if (dimension < 0)
      return Status::error(what + ": negative dimension " +
                           std::to_string(dimension));
  std::optional<int64_t> elements =
      checkedElementCount(shape, dtypeSize(dtype));
  if (!elements)
    return Status::error(what + ": its size in bytes overflows 64 bits");
  uint64_t bytes = static_cast<uint64_t>(*elements) * dtypeSize(dtype);
  uint64_t memory = machineMemoryBytes();
  if (bytes > memory)
    return Status::error(cannotAllocateText(dtype, shape, bytes) +
                         ": more than the memory this machine has, " +
                         byteCountText(memory));
  if constexpr (sizeof(size_t) < sizeof(uint64_t))
    if (bytes > std::numeric_limits<size_t>::max())
      return Status::error(cannotAllocateText(dtype, shape, bytes) +
                           ": more than this machine can address");
  return bytes;
}

Expected<Tensor> Tensor::allocate(DType dtype, std::vector<int64_t> shape) {
  Expected<uint64_t> bytes = allocationBytes(dtype, shape);
  if (!bytes)
    return bytes.status();
  std::unique_ptr<std::byte, FreeBytes> storage(static_cast<std::byte *>(
      std::calloc(*bytes ? static_cast<size_t>(*bytes) : 1, 1)));
  if (!storage)
    return Status::error(cannotAllocateText(dtype, shape, *bytes) +
                         ": out of memory");
  int64_t elements = static_cast<int64_t>(*bytes / dtypeSize(dtype));
  return Tensor(dtype, std::move(shape), elements, std::move(storage));
}

Expected<Tensor> Tensor::allocate(DType dtype, std::vector<int64_t> shape,
                                  const TensorMemory &memory) {
  Expected<uint64_t> bytes = allocationBytes(dtype, shape);
  if (!bytes)
    return bytes.status();
  size_t size = *bytes ? static_cast<size_t>(*bytes) : 1;
  std::unique_ptr<std::byte, FreeBytes> storage(
      static_cast<std::byte *>(memory.allocate(size)),
      FreeBytes{memory.release});
  if (!storage)
    return Status::error(cannotAllocateText(dtype, shape, *bytes) +
                         ": out of device memory");
  std::memset(storage.get(), 0, size);
  int64_t elements = static_cast<int64_t>(*bytes / dtypeSize(dtype));
  return Tensor(dtype, std::move(shape), elements, std::move(storage));
}

Expected<Tensor> Tensor::copyTo(const TensorMemory &memory) const {
  Expected<Tensor> copy = allocate(elementType, dimensions, memory);
  if (copy)
    std::memcpy(copy->data(), data(), byteLength);
  return copy;
}

Tensor Tensor::borrow(DType dtype, std::vector<int64_t> shape, void *data,
                      std::shared_ptr<void> lender) {
  assert(data && lender && "a borrowed tensor needs elements and a lender");
  std::optional<int64_t> elements =
      checkedElementCount(shape, dtypeSize(dtype));
  assert(elements && "a borrowed tensor's size fits in int64_t");
  return Tensor(
      dtype, std::move(shape), *elements,
      std::unique_ptr<std::byte, FreeBytes>(static_cast<std::byte *>(data),
                                            FreeBytes(std::move(lender))));
}

Tensor Tensor::view() const {
  assert(borrowed() && "only borrowed elements have views");
  return borrow(elementType, dimensions, bytes.get(),
                bytes.get_deleter().lender);
}

Tensor::Tensor(const Tensor &other)
    : elementType(other.elementType), dimensions(other.dimensions),
      count(other.count), byteLength(other.byteLength) {
  bytes.reset(
      static_cast<std::byte *>(std::malloc(byteLength ? byteLength : 1)));
  if (!bytes)
    throw std::bad_alloc();
  std::memcpy(bytes.get(), other.bytes.get(), byteLength);
}

Tensor &Tensor::operator=(const Tensor &other) {
  if (this != &other)
    *this = Tensor(other);
  return *this;
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
  uint64_t bits = loadLittleEndian(bytes.get() + index * size, size);
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
  storeLittleEndian(bytes.get() + index * size, size, bits);
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
         std::memcmp(data(), other.data(), byteLength) == 0;
}
