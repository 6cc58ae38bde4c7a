//===- Tensor.cpp - Dense double-precision arrays for the interpreter -----===//
//
// Indexing helpers of the interpreter's Tensor: flat offsets of (partial)
// multi-indices, slices along leading axes, shape printing.
//
//===----------------------------------------------------------------------===//

#include "energy/Interpreter/Tensor.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <limits>

using namespace mlir::energy;

Tensor::Tensor(std::vector<int64_t> shape, double fill)
    : shape(std::move(shape)) {
  data.assign(elementCount(this->shape), fill);
}

int64_t Tensor::elementCount(llvm::ArrayRef<int64_t> shape) {
  if (llvm::is_contained(shape, 0))
    return 0;
  int64_t count = 1;
  for (int64_t extent : shape)
    if (__builtin_mul_overflow(count, extent, &count))
      return std::numeric_limits<int64_t>::max();
  return count;
}

int64_t Tensor::offsetOf(llvm::ArrayRef<int64_t> indices) const {
  int64_t offset = 0;
  for (auto [axis, index] : llvm::enumerate(indices))
    offset = offset * shape[axis] + index;
  return offset * elementCount(llvm::ArrayRef<int64_t>(shape).drop_front(
                      indices.size()));
}

Tensor Tensor::slice(llvm::ArrayRef<int64_t> indices) const {
  std::vector<int64_t> rest(shape.begin() + indices.size(), shape.end());
  int64_t count = elementCount(rest);
  int64_t offset = offsetOf(indices);
  return Tensor(std::move(rest),
                std::vector<double>(data.begin() + offset,
                                    data.begin() + offset + count));
}

void Tensor::setSlice(llvm::ArrayRef<int64_t> indices, const Tensor &value) {
  std::copy(value.data.begin(), value.data.end(),
            data.begin() + offsetOf(indices));
}

double &Tensor::at(llvm::ArrayRef<int64_t> indices) {
  return data[offsetOf(indices)];
}

double Tensor::at(llvm::ArrayRef<int64_t> indices) const {
  return data[offsetOf(indices)];
}

std::string Tensor::shapeString(llvm::ArrayRef<int64_t> shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << '[';
  llvm::interleaveComma(shape, os);
  os << ']';
  return text;
}
