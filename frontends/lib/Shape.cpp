//===- Shape.cpp - Symbolic tensor shapes ---------------------------------===//
//
// Small helpers on symbolic shapes.
//
//===----------------------------------------------------------------------===//

#include "energy/Frontend/Shape.h"

using namespace energy::frontend;

Shape Shape::dropFront(size_t count) const {
  if (count >= dims.size())
    return Shape();
  return Shape(std::vector<std::string>(dims.begin() + count, dims.end()));
}

Shape Shape::prepend(llvm::ArrayRef<std::string> prefix) const {
  std::vector<std::string> result(prefix.begin(), prefix.end());
  result.insert(result.end(), dims.begin(), dims.end());
  return Shape(std::move(result));
}

std::string Shape::str() const {
  if (dims.empty())
    return "scalar";
  std::string result = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i)
      result += ", ";
    result += dims[i];
  }
  return result + "]";
}
