//===- PlanOps.cpp - The interpreter on kernel-plan ops -------------------===//
//
// Tables and softmax contractions, evaluated as their definitions read, so
// that planned IR can be checked against the IR it was planned from, and so
// that passes may emit tables (the M-step's statistics) that the
// interpreter still runs. A contraction evaluates its score at every
// admitted pair of a row, then its normaliser and weights, then both sides'
// sums, in row-major order.
//
//===----------------------------------------------------------------------===//

#include "InterpreterInternals.h"
#include "energy/Interpreter/ArrayMath.h"

#include <cmath>

using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::interpreter;

namespace {
ValueRange yieldedValues(Region &region) {
  return cast<YieldOp>(region.front().getTerminator()).getValues();
}
} // namespace

FailureOr<ArrayValue> Interpreter::evaluateTabulate(TabulateOp table,
                                                    Frame &frame) {
  FailureOr<std::vector<int64_t>> domain =
      evaluateDomain(table.getSizes(), table);
  FailureOr<std::vector<int64_t>> shape =
      getShape(cast<ArrayType>(table.getType()), table);
  if (failed(domain) || failed(shape) || failed(checkAllocation(table, *shape)))
    return failure();
  ArrayValue result(*shape);
  Value body = table.getBodyValue();
  Frame inner(&table.getBody(), &frame);
  if (failed(forEachPosition(*domain, [&](ArrayRef<int64_t> position) {
        inner.moveTo(position);
        FailureOr<ArrayValue> value = evaluateArray(body, inner);
        if (failed(value))
          return failure();
        result.setSlice(position, *value);
        return success();
      })))
    return failure();
  return result;
}

FailureOr<SmallVector<ArrayValue>>
Interpreter::evaluateSoftmaxContract(SoftmaxContractOp contract, Frame &frame) {
  FailureOr<std::vector<int64_t>> rows =
      evaluateDomain(contract.getRows(), contract);
  FailureOr<std::vector<int64_t>> columns = evaluateDomain(
      ArrayAttr::get(contract.getContext(), {contract.getCols()}), contract);
  if (failed(rows) || failed(columns))
    return failure();
  int64_t columnCount = columns->front();
  double temperature = 1.0;
  if (Value value = contract.getTemperature()) {
    FailureOr<ArrayValue> t = evaluateArray(value, frame);
    if (failed(t))
      return failure();
    temperature = t->data.front();
  }
  std::optional<ArrayValue> given;
  if (Value value = contract.getGivenLse()) {
    FailureOr<ArrayValue> t = evaluateArray(value, frame);
    if (failed(t))
      return failure();
    given = *t;
  }
  SmallVector<ArrayValue> results;
  for (Value result : contract.getResults()) {
    FailureOr<std::vector<int64_t>> shape =
        getShape(cast<ArrayType>(result.getType()), contract);
    if (failed(shape))
      return failure();
    results.emplace_back(*shape);
  }
  unsigned firstRow = contract.getLse() ? 1 : 0;
  unsigned firstColumn = firstRow + contract.getRowOutputs().size();
  // Pair sums (the last column values) at the pair bias's index
  // a·r + b·c + o of the last row index and the column.
  const unsigned pairSums = contract.getNumPairSums();
  const unsigned firstPairSum = contract.getColValues().size() - pairSums;
  int64_t pairIndex[3] = {0, 0, 0};
  if (pairSums) {
    std::string reason;
    FailureOr<BilinearContract> form = contract.matchBilinear(reason);
    if (failed(form) || !form->pairBias)
      return contract.emitOpError("sums column values at a pair bias's "
                                  "index, but ")
             << (failed(form) ? reason : "has no pair bias");
    const DimLinear *linears[3] = {&form->pairBiasRowCoefficient,
                                   &form->pairBiasColCoefficient,
                                   &form->pairBiasOffset};
    for (int k = 0; k < 3; ++k) {
      pairIndex[k] = linears[k]->constant;
      for (auto [size, factor] : linears[k]->sizeTerms) {
        FailureOr<int64_t> value = evaluateDimExpr(size, contract);
        if (failed(value))
          return failure();
        pairIndex[k] += factor * *value;
      }
    }
  }
  Value admitted = contract.hasPredicate()
                       ? yieldedValues(contract.getPredicate()).front()
                       : Value();
  Value score = contract.getScoreValue();

  Frame predicateFrame(&contract.getPredicate(), &frame);
  Frame scoreFrame(&contract.getScore(), &frame);
  Frame rowFrame(&contract.getRowSums(), &frame);
  Frame columnFrame(&contract.getColSums(), &frame);
  if (failed(forEachPosition(*rows, [&](ArrayRef<int64_t> row) {
        // Scores of the admitted columns, divided by the temperature.
        std::vector<int64_t> pair(row.begin(), row.end());
        pair.push_back(0);
        std::vector<int64_t> admittedColumns;
        std::vector<double> scaled;
        for (int64_t column = 0; column < columnCount; ++column) {
          pair.back() = column;
          if (admitted) {
            predicateFrame.moveTo(pair);
            FailureOr<int64_t> isAdmitted =
                evaluateInteger(admitted, predicateFrame);
            if (failed(isAdmitted))
              return failure();
            if (!*isAdmitted)
              continue;
          }
          scoreFrame.moveTo(pair);
          FailureOr<ArrayValue> value = evaluateArray(score, scoreFrame);
          if (failed(value))
            return failure();
          admittedColumns.push_back(column);
          scaled.push_back(value->data.front() / temperature);
        }
        double normaliser;
        if (given)
          normaliser = given->slice(row).data.front();
        else if (admittedColumns.empty())
          normaliser = 0;
        else
          normaliser = temperature * array::logSumExp(scaled);
        if (contract.getLse())
          results[0].setSlice(row, ArrayValue::scalar(normaliser));
        if (!given && admittedColumns.empty())
          return success();
        std::vector<ArrayValue> rowSums;
        for (Value value : contract.getRowValues()) {
          FailureOr<std::vector<int64_t>> shape =
              getShape(cast<ArrayType>(value.getType()), contract);
          if (failed(shape))
            return failure();
          rowSums.emplace_back(*shape);
        }
        for (auto [column, score] : llvm::zip(admittedColumns, scaled)) {
          double weight = std::exp(score - normaliser / temperature);
          pair.back() = column;
          rowFrame.moveTo(pair);
          for (auto [sum, value] :
               llvm::zip(rowSums, contract.getRowValues())) {
            FailureOr<ArrayValue> term = evaluateArray(value, rowFrame);
            if (failed(term))
              return failure();
            for (size_t i = 0; i < sum.data.size(); ++i)
              sum.data[i] += weight * term->data[term->isScalar() ? 0 : i];
          }
          // Column sums, at (batch rows, column); a contraction with column
          // values has a row index.
          if (contract.getColValues().empty())
            continue;
          std::vector<int64_t> at(row.begin(), row.end());
          at.back() = column;
          columnFrame.moveTo(pair);
          for (auto [j, value] : llvm::enumerate(contract.getColValues())) {
            FailureOr<ArrayValue> term = evaluateArray(value, columnFrame);
            if (failed(term))
              return failure();
            ArrayValue &out = results[firstColumn + j];
            if (j >= firstPairSum) {
              int64_t index = pairIndex[0] * row.back() +
                              pairIndex[1] * column + pairIndex[2];
              std::vector<int64_t> where(row.begin(), row.end() - 1);
              where.push_back(index);
              if (index < 0 || index >= out.shape.back())
                return LogicalResult(contract.emitOpError()
                                     << "sums a pair at index " << index
                                     << " of its pair bias, outside [0, "
                                     << out.shape.back() << ")");
              ArrayValue slot = out.slice(where);
              slot.data.front() += weight * term->data.front();
              out.setSlice(where, slot);
              continue;
            }
            ArrayValue slot = out.slice(at);
            for (size_t i = 0; i < slot.data.size(); ++i)
              slot.data[i] += weight * term->data[term->isScalar() ? 0 : i];
            out.setSlice(at, slot);
          }
        }
        for (auto [j, sum] : llvm::enumerate(rowSums))
          results[firstRow + j].setSlice(row, sum);
        return success();
      })))
    return failure();
  return results;
}

FailureOr<ArrayValue>
Interpreter::evaluateBatchMatmul(BatchMatmulOp product,
                                 const ArrayValue &lhsOperand,
                                 const ArrayValue &rhsOperand) {
  // Several row axes of lhs: their positions are the rows of one matrix,
  // and the result's rows take their shape back; with lhs transposed they
  // are the inner dim, over the same row axes of rhs. Several batch axes
  // are one batch of their positions, and the result's batch takes their
  // shape back.
  int64_t lhsRows = product.getLhsRows(), batchAxes = product.getBatchAxes();
  ArrayValue lhs = lhsOperand, rhs = rhsOperand;
  std::vector<int64_t> rowShape, batchShape;
  auto flatten = [&](ArrayValue &value, bool batched, int64_t rowAxes,
                     std::vector<int64_t> &rows) -> LogicalResult {
    int64_t leading = batched ? batchAxes : 0;
    if (static_cast<int64_t>(value.getRank()) != leading + rowAxes + 1)
      return product.emitOpError("cannot take an operand of shape ")
             << ArrayValue::shapeString(value.shape);
    auto end = value.shape.end() - 1;
    rows.assign(end - rowAxes, end);
    std::vector<int64_t> flat;
    if (batched) {
      batchShape.assign(value.shape.begin(), value.shape.begin() + leading);
      flat.push_back(ArrayValue::elementCount(batchShape));
    }
    flat.push_back(ArrayValue::elementCount(rows));
    flat.push_back(value.shape.back());
    value.shape = flat;
    return success();
  };
  std::vector<int64_t> rhsRowShape;
  if ((lhsRows > 1 || batchAxes > 1) &&
      (failed(flatten(lhs, product.hasLhsBatch(), lhsRows, rowShape)) ||
       failed(flatten(rhs, product.hasRhsBatch(), product.getRhsRows(),
                      rhsRowShape))))
    return failure();
  FailureOr<ArrayValue> result =
      evaluateBatchMatmulOfMatrices(product, lhs, rhs);
  if (failed(result) || (lhsRows == 1 && batchAxes == 1))
    return result;
  std::vector<int64_t> shape;
  if (result->getRank() == 3)
    shape = batchShape;
  if (product.getTransposeLhs() || lhsRows == 1)
    shape.push_back(result->shape[result->getRank() - 2]);
  else
    llvm::append_range(shape, rowShape);
  shape.push_back(result->shape.back());
  result->shape = shape;
  return result;
}

FailureOr<ArrayValue> Interpreter::evaluateBatchMatmulOfMatrices(
    BatchMatmulOp product, const ArrayValue &lhs, const ArrayValue &rhs) {
  auto batchOf = [](const ArrayValue &value) {
    return value.getRank() == 3 ? value.shape[0] : int64_t(-1);
  };
  // The matrix of an operand at one position of the batch, as the product
  // takes it.
  auto matrixAt = [](const ArrayValue &value, int64_t position,
                     bool transposed) {
    ArrayValue matrix = value.getRank() == 3 ? value.slice({position}) : value;
    return transposed ? array::transpose(matrix) : matrix;
  };
  auto rows = [](const ArrayValue &value, bool transposed) {
    return value.shape[value.getRank() - (transposed ? 1 : 2)];
  };
  auto columns = [](const ArrayValue &value, bool transposed) {
    return value.shape[value.getRank() - (transposed ? 2 : 1)];
  };
  bool transposeLhs = product.getTransposeLhs(),
       transposeRhs = product.getTransposeRhs();
  // Two matrices: a batch of one.
  int64_t batch = std::max({batchOf(lhs), batchOf(rhs), int64_t(1)});
  if (lhs.getRank() < 2 || lhs.getRank() > 3 || rhs.getRank() < 2 ||
      rhs.getRank() > 3 ||
      (batchOf(lhs) >= 0 && batchOf(rhs) >= 0 &&
       batchOf(lhs) != batchOf(rhs)) ||
      columns(lhs, transposeLhs) != rows(rhs, transposeRhs))
    return product.emitOpError("cannot take operands of shape ")
           << ArrayValue::shapeString(lhs.shape) << ' '
           << ArrayValue::shapeString(rhs.shape);
  std::vector<int64_t> shape = {rows(lhs, transposeLhs),
                                columns(rhs, transposeRhs)};
  bool batched = lhs.getRank() == 3 || rhs.getRank() == 3;
  if (!product.getSumBatch() && batched)
    shape.insert(shape.begin(), batch);
  if (failed(checkAllocation(product, shape)))
    return failure();
  ArrayValue result(shape);
  for (int64_t position = 0; position < batch; ++position) {
    ArrayValue slice = array::matmul(matrixAt(lhs, position, transposeLhs),
                                     matrixAt(rhs, position, transposeRhs));
    if (!product.getSumBatch() && batched)
      result.setSlice({position}, slice);
    else
      for (auto [total, value] : llvm::zip(result.data, slice.data))
        total += value;
  }
  return result;
}

FailureOr<ArrayValue>
Interpreter::evaluatePrefixSum(PrefixSumOp prefix, const ArrayValue &operand) {
  if (operand.isScalar())
    return prefix.emitOpError("needs an array with a leading axis, not a "
                              "scalar");
  // Along the leading axis, whole slices at a time: at position i (from the
  // end when reversed), the sum of those before it (and its own unless
  // exclusive).
  int64_t length = operand.shape[0];
  int64_t width = length ? operand.size() / length : 0;
  ArrayValue result(operand.shape);
  std::vector<double> running(width, 0.0);
  for (int64_t step = 0; step < length; ++step) {
    int64_t i = prefix.getReverse() ? length - 1 - step : step;
    for (int64_t k = 0; k < width; ++k) {
      double value = operand.data[i * width + k];
      if (!prefix.getExclusive())
        running[k] += value;
      result.data[i * width + k] = running[k];
      if (prefix.getExclusive())
        running[k] += value;
    }
  }
  return result;
}
