//===- ArrayMath.cpp - Vector and matrix kernels of the interpreter -------===//
//
// Plain loops over row-major doubles. Clarity first: these kernels are the
// oracle against which compiled kernels are checked.
//
//===----------------------------------------------------------------------===//

#include "energy/Interpreter/ArrayMath.h"
#include "energy/KernelSupport/KernelSupport.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mlir::energy;
using llvm::ArrayRef;
using llvm::MutableArrayRef;

static double mean(ArrayRef<double> values) {
  double sum = 0;
  for (double value : values)
    sum += value;
  return sum / values.size();
}

double array::logSumExp(ArrayRef<double> values) {
  double largest = -std::numeric_limits<double>::infinity();
  for (double value : values)
    largest = std::max(largest, value);
  if (std::isinf(largest))
    return largest;
  double sum = 0;
  for (double value : values)
    sum += std::exp(value - largest);
  return largest + std::log(sum);
}

void array::softmaxRow(ArrayRef<double> row, MutableArrayRef<double> out) {
  double normaliser = logSumExp(row);
  for (size_t i = 0; i < row.size(); ++i)
    out[i] = std::exp(row[i] - normaliser);
}

void array::logSoftmaxRow(ArrayRef<double> row, MutableArrayRef<double> out) {
  double normaliser = logSumExp(row);
  for (size_t i = 0; i < row.size(); ++i)
    out[i] = row[i] - normaliser;
}

void array::rmsNormRow(ArrayRef<double> row, MutableArrayRef<double> out) {
  double meanSquare = 0;
  for (double value : row)
    meanSquare += value * value;
  meanSquare /= row.size();
  double scale = 1.0 / std::sqrt(meanSquare + kNormEpsilon);
  for (size_t i = 0; i < row.size(); ++i)
    out[i] = row[i] * scale;
}

void array::layerNormRow(ArrayRef<double> row, MutableArrayRef<double> out) {
  double centre = mean(row);
  double variance = 0;
  for (double value : row)
    variance += (value - centre) * (value - centre);
  variance /= row.size();
  double scale = 1.0 / std::sqrt(variance + kNormEpsilon);
  for (size_t i = 0; i < row.size(); ++i)
    out[i] = (row[i] - centre) * scale;
}

ArrayValue array::map(const ArrayValue &operand,
                      llvm::function_ref<double(double)> function) {
  ArrayValue result = operand;
  for (double &value : result.data)
    value = function(value);
  return result;
}

ArrayValue array::zip(const ArrayValue &lhs, const ArrayValue &rhs,
                      llvm::function_ref<double(double, double)> function) {
  ArrayValue result(lhs.isScalar() ? rhs.shape : lhs.shape);
  for (int64_t i = 0; i < result.size(); ++i)
    result.data[i] = function(lhs.data[lhs.isScalar() ? 0 : i],
                              rhs.data[rhs.isScalar() ? 0 : i]);
  return result;
}

ArrayValue array::mapRows(const ArrayValue &operand, RowFunction function) {
  ArrayValue result = operand;
  int64_t length = operand.lastAxisLength();
  for (int64_t start = 0; start < operand.size(); start += length)
    function(ArrayRef<double>(operand.data).slice(start, length),
             MutableArrayRef<double>(result.data).slice(start, length));
  return result;
}

ArrayValue array::matmul(const ArrayValue &lhs, const ArrayValue &rhs) {
  int64_t rows = lhs.shape[0], inner = lhs.shape[1];
  int64_t columns = rhs.getRank() == 1 ? 1 : rhs.shape[1];
  std::vector<int64_t> shape = {rows};
  if (rhs.getRank() == 2)
    shape.push_back(columns);
  ArrayValue result(shape);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < columns; ++j) {
      double sum = 0;
      for (int64_t k = 0; k < inner; ++k)
        sum += lhs.data[i * inner + k] * rhs.data[k * columns + j];
      result.data[i * columns + j] = sum;
    }
  return result;
}

ArrayValue array::transpose(const ArrayValue &operand) {
  std::vector<int64_t> shape = operand.shape;
  size_t rank = shape.size();
  int64_t rows = shape[rank - 2], columns = shape[rank - 1];
  std::swap(shape[rank - 2], shape[rank - 1]);
  ArrayValue result(shape);
  int64_t block = rows * columns;
  for (int64_t start = 0; start < operand.size(); start += block)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < columns; ++j)
        result.data[start + j * rows + i] =
            operand.data[start + i * columns + j];
  return result;
}

double array::dot(const ArrayValue &lhs, const ArrayValue &rhs) {
  double sum = 0;
  for (int64_t i = 0; i < lhs.size(); ++i)
    sum += lhs.data[i] * rhs.data[i];
  return sum;
}

double array::quad(const ArrayValue &vector, const ArrayValue &matrix) {
  return dot(vector, matmul(matrix, vector));
}

ArrayValue array::outer(const ArrayValue &lhs, const ArrayValue &rhs) {
  ArrayValue result({lhs.size(), rhs.size()});
  for (int64_t i = 0; i < lhs.size(); ++i)
    for (int64_t j = 0; j < rhs.size(); ++j)
      result.data[i * rhs.size() + j] = lhs.data[i] * rhs.data[j];
  return result;
}

ArrayValue array::sumLast(const ArrayValue &operand) {
  std::vector<int64_t> shape(operand.shape.begin(), operand.shape.end() - 1);
  ArrayValue result(shape);
  int64_t length = operand.lastAxisLength();
  for (int64_t i = 0; i < operand.size(); ++i)
    result.data[i / length] += operand.data[i];
  return result;
}

ArrayValue array::broadcast(const ArrayValue &operand,
                            ArrayRef<int64_t> shape) {
  ArrayValue result(std::vector<int64_t>(shape.begin(), shape.end()));
  int64_t repeats =
      ArrayValue::elementCount(shape.drop_front(operand.getRank()));
  for (int64_t i = 0; i < result.size(); ++i)
    result.data[i] = operand.data[i / repeats];
  return result;
}

ArrayValue array::diag(const ArrayValue &vector) {
  int64_t n = vector.size();
  ArrayValue result({n, n});
  for (int64_t i = 0; i < n; ++i)
    result.data[i * n + i] = vector.data[i];
  return result;
}

ArrayValue array::diagPart(const ArrayValue &matrix) {
  int64_t n = matrix.shape[0];
  ArrayValue result({n});
  for (int64_t i = 0; i < n; ++i)
    result.data[i] = matrix.data[i * n + i];
  return result;
}

std::optional<double> array::logDetSymmetric(const ArrayValue &matrix) {
  double result =
      energy_support_logdet_f64(matrix.shape[0], matrix.data.data());
  if (std::isnan(result))
    return std::nullopt;
  return result;
}

std::optional<ArrayValue> array::inverse(const ArrayValue &matrix) {
  int64_t n = matrix.shape[0];
  ArrayValue result({n, n});
  if (energy_support_inverse_f64(n, matrix.data.data(), result.data.data()))
    return std::nullopt;
  return result;
}
