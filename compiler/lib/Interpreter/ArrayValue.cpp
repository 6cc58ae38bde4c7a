//===- ArrayValue.cpp - Dense double-precision arrays for the interpreter -===//
//
// Indexing helpers of the interpreter's ArrayValue: flat offsets of (partial)
// multi-indices, slices along leading axes, shape printing.
//
//===----------------------------------------------------------------------===//

#include "energy/Interpreter/ArrayValue.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <limits>

using namespace mlir::energy;

ArrayValue::ArrayValue(std::vector<int64_t> shape, double fill)
    : shape(std::move(shape)) {
  data.assign(elementCount(this->shape), fill);
}

int64_t ArrayValue::elementCount(llvm::ArrayRef<int64_t> shape) {
  if (llvm::is_contained(shape, 0))
    return 0;
  int64_t count = 1;
  for (int64_t extent : shape)
    if (__builtin_mul_overflow(count, extent, &count))
      return std::numeric_limits<int64_t>::max();
  return count;
}

int64_t ArrayValue::offsetOf(llvm::ArrayRef<int64_t> indices) const {
  int64_t offset = 0;
  for (auto [axis, index] : llvm::enumerate(indices))
    offset = offset * shape[axis] + index;
  return offset * elementCount(llvm::ArrayRef<int64_t>(shape).drop_front(
                      indices.size()));
}

ArrayValue ArrayValue::slice(llvm::ArrayRef<int64_t> indices) const {
  std::vector<int64_t> rest(shape.begin() + indices.size(), shape.end());
  int64_t count = elementCount(rest);
  int64_t offset = offsetOf(indices);
  return ArrayValue(std::move(rest),
                    std::vector<double>(data.begin() + offset,
                                        data.begin() + offset + count));
}

void ArrayValue::setSlice(llvm::ArrayRef<int64_t> indices,
                          const ArrayValue &value) {
  std::copy(value.data.begin(), value.data.end(),
            data.begin() + offsetOf(indices));
}

double &ArrayValue::at(llvm::ArrayRef<int64_t> indices) {
  return data[offsetOf(indices)];
}

double ArrayValue::at(llvm::ArrayRef<int64_t> indices) const {
  return data[offsetOf(indices)];
}

std::string ArrayValue::shapeString(llvm::ArrayRef<int64_t> shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << '[';
  llvm::interleaveComma(shape, os);
  os << ']';
  return text;
}
