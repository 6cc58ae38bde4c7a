//===- InterpretedArrayOps.cpp - The interpreter's array ops -------------===//
//
// The reference interpreter's evaluation of the expression ops on arrays:
// element-wise ops by their ElementwiseOpInterface, products, reductions over
// elements and over index domains, reads, plugins' code.
//
//===----------------------------------------------------------------------===//

#include "InterpreterInternals.h"
#include "energy/IR/IndexArithmetic.h"
#include "energy/IR/PluginCode.h"
#include "energy/Interpreter/ArrayMath.h"
#include "energy/Plugin/FunctionTable.h"
#include "energy/Plugin/RuntimeCode.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::interpreter;
namespace plugin = ::energy::plugin;

namespace {
/// The `index`th function of `op`'s run-time code (see getPluginCode).
template <typename Function> Function pluginCode(Operation *op, size_t index) {
  return reinterpret_cast<Function>(getPluginCode(op)->addresses[index]);
}

/// The row function of a normalisation along the last axis, if `op` is one.
std::optional<array::RowFunction> rowFunctionOf(Operation *op) {
  using Result = std::optional<array::RowFunction>;
  return llvm::TypeSwitch<Operation *, Result>(op)
      .Case([](SoftmaxOp) { return array::softmaxRow; })
      .Case([](LogSoftmaxOp) { return array::logSoftmaxRow; })
      .Case([](RmsNormOp) { return array::rmsNormRow; })
      .Case([](LayerNormOp) { return array::layerNormRow; })
      .Default([](Operation *) { return std::nullopt; });
}

bool isSquareMatrix(const ArrayValue &t) {
  return t.getRank() == 2 && t.shape[0] == t.shape[1];
}

/// Reports a shape the op cannot take (only reachable with unverified IR).
LogicalResult shapeError(Operation *op, ArrayRef<const ArrayValue *> operands) {
  InFlightDiagnostic diag = op->emitOpError("cannot take operands of shape");
  for (const ArrayValue *operand : operands)
    diag << ' ' << ArrayValue::shapeString(operand->shape);
  return diag;
}
} // namespace

//===----------------------------------------------------------------------===//
// Array ops
//===----------------------------------------------------------------------===//

FailureOr<ArrayValue> Interpreter::evaluateArrayOp(Operation *op,
                                                   Frame &frame) {
  // Operands first: every array op here takes array operands only (a
  // reduction's temperature included), except to_real, indexed ops and
  // select (whose condition is an i1 and whose branches are taken lazily).
  SmallVector<ArrayValue> operands;
  if (!isa<ToRealOp, ReadOp, ExtractOp, EmbedOp, SelectOp>(op))
    for (Value operand : op->getOperands()) {
      FailureOr<ArrayValue> value = evaluateArray(operand, frame);
      if (failed(value))
        return failure();
      operands.push_back(std::move(*value));
    }

  if (auto elementwise = dyn_cast<ElementwiseOpInterface>(op)) {
    ScalarFunction function = elementwise.getScalarFunction();
    if (function.unary)
      return array::map(operands[0], function.unary);
    const ArrayValue &lhs = operands[0], &rhs = operands[1];
    if (lhs.shape != rhs.shape && !lhs.isScalar() && !rhs.isScalar())
      return shapeError(op, {&lhs, &rhs});
    return array::zip(lhs, rhs, function.binary);
  }
  if (std::optional<array::RowFunction> function = rowFunctionOf(op))
    return array::mapRows(operands[0], *function);

  using Result = FailureOr<ArrayValue>;
  return llvm::TypeSwitch<Operation *, Result>(op)
      .Case([&](ConstantOp constant) -> Result {
        return ArrayValue::scalar(constant.getValue().convertToDouble());
      })
      .Case([&](RoundingUnitOp) -> Result {
        return ArrayValue::scalar(roundingUnit);
      })
      .Case([&](ReadOp read) { return evaluateRead(read, frame); })
      .Case([&](ToRealOp toReal) -> Result {
        FailureOr<int64_t> index = evaluateInteger(toReal.getIndex(), frame);
        if (failed(index))
          return failure();
        return ArrayValue::scalar(static_cast<double>(*index));
      })
      .Case([&](EyeOp eye) -> Result {
        std::optional<int64_t> n = getDim(eye.getDim());
        if (!n)
          return unboundDim(op, eye.getDim());
        if (failed(checkAllocation(op, {*n, *n})))
          return failure();
        return array::diag(ArrayValue({*n}, 1.0));
      })
      .Case([&](MatmulOp) -> Result {
        const ArrayValue &lhs = operands[0], &rhs = operands[1];
        if (lhs.getRank() != 2 || (rhs.getRank() != 1 && rhs.getRank() != 2) ||
            lhs.shape[1] != rhs.shape[0])
          return shapeError(op, {&lhs, &rhs});
        if (failed(checkAllocation(
                op, {lhs.shape[0], rhs.getRank() == 2 ? rhs.shape[1] : 1})))
          return failure();
        return array::matmul(lhs, rhs);
      })
      .Case([&](BatchMatmulOp product) -> Result {
        return evaluateBatchMatmul(product, operands[0], operands[1]);
      })
      .Case([&](PrefixSumOp prefix) -> Result {
        return evaluatePrefixSum(prefix, operands[0]);
      })
      .Case([&](TransposeOp) -> Result {
        if (operands[0].getRank() < 2)
          return shapeError(op, {&operands[0]});
        return array::transpose(operands[0]);
      })
      .Case([&](DotOp) -> Result {
        const ArrayValue &lhs = operands[0], &rhs = operands[1];
        if (lhs.getRank() != 1 || lhs.shape != rhs.shape)
          return shapeError(op, {&lhs, &rhs});
        return ArrayValue::scalar(array::dot(lhs, rhs));
      })
      .Case([&](QuadOp) -> Result {
        const ArrayValue &vector = operands[0], &matrix = operands[1];
        if (vector.getRank() != 1 || !isSquareMatrix(matrix) ||
            matrix.shape[0] != vector.shape[0])
          return shapeError(op, {&vector, &matrix});
        return ArrayValue::scalar(array::quad(vector, matrix));
      })
      .Case([&](OuterOp) -> Result {
        const ArrayValue &lhs = operands[0], &rhs = operands[1];
        if (lhs.getRank() != 1 || rhs.getRank() != 1)
          return shapeError(op, {&lhs, &rhs});
        if (failed(checkAllocation(op, {lhs.size(), rhs.size()})))
          return failure();
        return array::outer(lhs, rhs);
      })
      .Case([&](ReduceElementsOp reduce) -> Result {
        const std::vector<double> &values = operands[0].data;
        double sum = 0, sumOfSquares = 0, largest = 0;
        for (double value : values) {
          sum += value;
          sumOfSquares += value * value;
          largest = std::max(largest, std::fabs(value));
        }
        switch (reduce.getKind()) {
        case ElementsKind::sum:
          return ArrayValue::scalar(sum);
        case ElementsKind::mean:
          return ArrayValue::scalar(sum / values.size());
        case ElementsKind::maxabs:
          return ArrayValue::scalar(largest);
        case ElementsKind::lse:
          return ArrayValue::scalar(array::logSumExp(values));
        case ElementsKind::sqnorm:
          return ArrayValue::scalar(sumOfSquares);
        case ElementsKind::norm:
          return ArrayValue::scalar(std::sqrt(sumOfSquares));
        }
        return op->emitOpError("has an unknown kind");
      })
      .Case([&](SumLastOp) -> Result {
        if (operands[0].isScalar())
          return shapeError(op, {&operands[0]});
        return array::sumLast(operands[0]);
      })
      .Case([&](BroadcastOp broadcast) -> Result {
        FailureOr<std::vector<int64_t>> shape =
            getShape(cast<ArrayType>(broadcast.getType()), op);
        if (failed(shape))
          return failure();
        const ArrayValue &operand = operands[0];
        if (operand.getRank() > shape->size() ||
            !std::equal(operand.shape.begin(), operand.shape.end(),
                        shape->begin()))
          return shapeError(op, {&operand});
        if (failed(checkAllocation(op, *shape)))
          return failure();
        return array::broadcast(operand, *shape);
      })
      .Case([&](DiagOp) -> Result {
        if (operands[0].getRank() != 1)
          return shapeError(op, {&operands[0]});
        if (failed(
                checkAllocation(op, {operands[0].size(), operands[0].size()})))
          return failure();
        return array::diag(operands[0]);
      })
      .Case([&](DiagPartOp) -> Result {
        if (!isSquareMatrix(operands[0]))
          return shapeError(op, {&operands[0]});
        return array::diagPart(operands[0]);
      })
      .Case([&](LogDetOp) -> Result {
        if (!isSquareMatrix(operands[0]))
          return shapeError(op, {&operands[0]});
        std::optional<double> logDet = array::logDetSymmetric(operands[0]);
        if (!logDet)
          return op->emitOpError(
              "takes the log-determinant of a matrix that is not symmetric "
              "positive definite");
        return ArrayValue::scalar(*logDet);
      })
      .Case([&](ApplyOp apply) -> Result {
        auto code = pluginCode<EnergyElementwiseCode>(op, apply.getOrder());
        ArrayValue result = operands[0];
        for (double &value : result.data)
          value = code(value);
        return result;
      })
      .Case([&](SimilarityOp) -> Result {
        return ArrayValue::scalar(pluginCode<EnergySimilarityCode>(op, 0)(
            operands[0].size(), operands[0].data.data(),
            operands[1].data.data()));
      })
      .Case([&](SimilarityGradientOp gradient) -> Result {
        ArrayValue lhs = operands[0], rhs = operands[1];
        pluginCode<EnergySimilarityGradientCode>(op, 1)(
            lhs.size(), operands[0].data.data(), operands[1].data.data(),
            lhs.data.data(), rhs.data.data());
        return gradient.getArgument() == 0 ? lhs : rhs;
      })
      .Case([&](AggregateOp) -> Result {
        return ArrayValue::scalar(pluginCode<EnergyAggregationCode>(op, 0)(
            operands[0].size(), operands[0].data.data()));
      })
      .Case([&](AggregateWeightsOp) -> Result {
        ArrayValue weights = operands[0];
        pluginCode<EnergyAggregationWeightsCode>(op, 1)(
            operands[0].size(), operands[0].data.data(), weights.data.data());
        return weights;
      })
      .Case([&](InverseOp) -> Result {
        if (!isSquareMatrix(operands[0]))
          return shapeError(op, {&operands[0]});
        std::optional<ArrayValue> inverse = array::inverse(operands[0]);
        if (!inverse)
          return op->emitOpError("inverts a singular matrix");
        return std::move(*inverse);
      })
      .Case([&](ExtractOp extract) -> Result {
        FailureOr<ArrayValue> source =
            evaluateArray(extract.getSource(), frame);
        if (failed(source))
          return failure();
        FailureOr<std::vector<int64_t>> indices =
            evaluateIndices(op, extract.getMap(), extract.getIndices(), frame);
        if (failed(indices) ||
            failed(checkInRange(
                op, *indices, source->shape,
                [](InFlightDiagnostic &diag, size_t) { diag << "extracts"; })))
          return failure();
        return source->slice(*indices);
      })
      .Case([&](EmbedOp embed) -> Result {
        FailureOr<ArrayValue> value = evaluateArray(embed.getValue(), frame);
        if (failed(value))
          return failure();
        FailureOr<std::vector<int64_t>> shape =
            getShape(cast<ArrayType>(embed.getType()), op);
        if (failed(shape))
          return failure();
        FailureOr<std::vector<int64_t>> indices =
            evaluateIndices(op, embed.getMap(), embed.getIndices(), frame);
        if (failed(indices) ||
            failed(checkInRange(
                op, *indices, *shape,
                [](InFlightDiagnostic &diag, size_t) { diag << "embeds"; })) ||
            failed(checkAllocation(op, *shape)))
          return failure();
        ArrayValue result(*shape);
        if (!std::equal(value->shape.begin(), value->shape.end(),
                        shape->begin() + indices->size(), shape->end()))
          return shapeError(op, {&*value});
        result.setSlice(*indices, *value);
        return result;
      })
      .Case([&](ReduceOp reduce) { return evaluateReduce(reduce, frame); })
      .Case([&](TabulateOp table) { return evaluateTabulate(table, frame); })
      .Case([&](OnceOp once) {
        // Nothing is kept: the value is its body's.
        Frame inner(&once.getBody(), &frame);
        return evaluateArray(once.getBodyValue(), inner);
      })
      .Case([&](SelectOp select) -> Result {
        FailureOr<int64_t> condition =
            evaluateInteger(select.getCondition(), frame);
        if (failed(condition))
          return failure();
        return evaluateArray(
            *condition ? select.getTrueValue() : select.getFalseValue(), frame);
      })
      .Default([&](Operation *) -> Result {
        return op->emitOpError("is not supported by the interpreter");
      });
}

FailureOr<std::vector<int64_t>>
Interpreter::evaluateIndices(Operation *op, AffineMap map, ValueRange operands,
                             Frame &frame) {
  SmallVector<int64_t> operandValues;
  for (Value index : operands) {
    FailureOr<int64_t> value = evaluateInteger(index, frame);
    if (failed(value))
      return failure();
    operandValues.push_back(*value);
  }
  ArrayRef<int64_t> dimValues =
      ArrayRef<int64_t>(operandValues).take_front(map.getNumDims());
  ArrayRef<int64_t> symbolValues =
      ArrayRef<int64_t>(operandValues).drop_front(map.getNumDims());
  std::vector<int64_t> indices;
  for (AffineExpr expr : map.getResults()) {
    std::optional<int64_t> index = evaluateAffineExpr(
        expr,
        [&](AffineExpr leaf) -> std::optional<int64_t> {
          if (auto dim = dyn_cast<AffineDimExpr>(leaf))
            return dimValues[dim.getPosition()];
          return symbolValues[cast<AffineSymbolExpr>(leaf).getPosition()];
        },
        /*exactDivision=*/false);
    if (!index)
      return op->emitOpError("has an index that is not an integer");
    indices.push_back(*index);
  }
  return indices;
}

Operation *Interpreter::sourceOf(ReadOp read) {
  auto [slot, inserted] = readSources.try_emplace(read, nullptr);
  if (inserted)
    slot->second =
        SymbolTable::lookupNearestSymbolFrom(read, read.getSourceAttr());
  return slot->second;
}

FailureOr<ArrayValue> Interpreter::evaluateRead(ReadOp read, Frame &frame) {
  FailureOr<std::vector<int64_t>> maybeIndices =
      evaluateIndices(read, read.getMap(), read.getIndices(), frame);
  if (failed(maybeIndices))
    return failure();
  std::vector<int64_t> indices = *maybeIndices;

  Operation *source = sourceOf(read);
  StringAttr name = read.getSourceAttr().getAttr();
  if (auto constant = dyn_cast_or_null<ConstOp>(source))
    return ArrayValue::scalar(consts.lookup(name.getValue()));

  ArrayType wholeType;
  if (auto tensor = dyn_cast_or_null<TensorOp>(source))
    wholeType = tensor.getArrayType();
  else if (auto let = dyn_cast_or_null<LetOp>(source))
    wholeType = let.getArrayType();
  else
    return read.emitOpError() << "reads " << read.getSourceAttr()
                              << ", which is not a tensor, let or const";
  FailureOr<std::vector<int64_t>> wholeShape = getShape(wholeType, read);
  if (failed(wholeShape))
    return failure();
  if (failed(checkInRange(read, indices, *wholeShape,
                          [&](InFlightDiagnostic &diag, size_t axis) {
                            diag << "reads " << read.getSourceAttr()
                                 << " (axis @"
                                 << wholeType.getShape()[axis].getValue()
                                 << ")";
                          })))
    return failure();

  if (auto tensor = dyn_cast<TensorOp>(source)) {
    FailureOr<const ArrayValue *> value = getTensor(tensor, read);
    if (failed(value))
      return failure();
    return (*value)->slice(indices);
  }

  // A let: its element at the read's domain indices; a read that fixes only
  // some of the domain indices stacks the elements over the others.
  auto let = cast<LetOp>(source);
  size_t domainRank = let.getDomain().size();
  if (indices.size() >= domainRank) {
    ArrayRef<int64_t> all(indices);
    FailureOr<ArrayValue> element =
        evaluateLetElement(let, all.take_front(domainRank), read);
    if (failed(element))
      return failure();
    return element->slice(all.drop_front(domainRank));
  }
  std::vector<int64_t> freeSizes(wholeShape->begin() + indices.size(),
                                 wholeShape->begin() + domainRank);
  std::vector<int64_t> resultShape(wholeShape->begin() + indices.size(),
                                   wholeShape->end());
  if (failed(checkAllocation(read, resultShape)))
    return failure();
  ArrayValue result(resultShape);
  if (failed(forEachPosition(freeSizes, [&](ArrayRef<int64_t> position) {
        std::vector<int64_t> full = indices;
        full.insert(full.end(), position.begin(), position.end());
        FailureOr<ArrayValue> element = evaluateLetElement(let, full, read);
        if (failed(element))
          return failure();
        result.setSlice(position, *element);
        return success();
      })))
    return failure();
  return result;
}

FailureOr<std::vector<int64_t>> Interpreter::evaluateDomain(ArrayAttr sizes,
                                                            Operation *user) {
  std::vector<int64_t> extents;
  for (Attribute size : sizes) {
    FailureOr<int64_t> extent = evaluateDimExpr(cast<DimExprAttr>(size), user);
    if (failed(extent))
      return failure();
    extents.push_back(std::max<int64_t>(*extent, 0));
  }
  return extents;
}

FailureOr<ArrayValue> Interpreter::evaluateReduce(ReduceOp reduce,
                                                  Frame &frame) {
  FailureOr<std::vector<int64_t>> domain =
      evaluateDomain(reduce.getSizes(), reduce);
  if (failed(domain))
    return failure();
  const std::vector<int64_t> &sizes = *domain;
  double temperature = 1.0;
  if (Value value = reduce.getTemperature()) {
    FailureOr<ArrayValue> t = evaluateArray(value, frame);
    if (failed(t))
      return failure();
    temperature = t->data.front();
  }
  FailureOr<std::vector<int64_t>> shape =
      getShape(cast<ArrayType>(reduce.getType()), reduce);
  if (failed(shape))
    return failure();
  Value admitted = yieldedValue(reduce.getPredicate());
  Value body = yieldedValue(reduce.getBody());
  if (!body || (reduce.hasPredicate() && !admitted))
    return reduce.emitOpError("has a region without a yielded value");

  Frame predicateFrame(&reduce.getPredicate(), &frame);
  Frame bodyFrame(&reduce.getBody(), &frame);
  std::vector<ArrayValue> values;
  if (failed(forEachPosition(sizes, [&](ArrayRef<int64_t> position) {
        if (admitted) {
          predicateFrame.moveTo(position);
          FailureOr<int64_t> isAdmitted =
              evaluateInteger(admitted, predicateFrame);
          if (failed(isAdmitted))
            return failure();
          if (!*isAdmitted)
            return success();
        }
        bodyFrame.moveTo(position);
        FailureOr<ArrayValue> value = evaluateArray(body, bodyFrame);
        if (failed(value))
          return failure();
        values.push_back(std::move(*value));
        return success();
      })))
    return failure();

  if (failed(checkAllocation(reduce, *shape)))
    return failure();
  ArrayValue result(*shape);
  if (values.empty())
    return result;
  for (int64_t element = 0; element < result.size(); ++element) {
    std::vector<double> column;
    for (const ArrayValue &value : values)
      column.push_back(value.data[element]);
    double &out = result.data[element];
    switch (reduce.getKind()) {
    case ReduceKind::sum:
    case ReduceKind::mean:
      out = 0;
      for (double value : column)
        out += value;
      if (reduce.getKind() == ReduceKind::mean)
        out /= column.size();
      break;
    case ReduceKind::max:
      out = *std::max_element(column.begin(), column.end());
      break;
    case ReduceKind::lse:
      for (double &value : column)
        value /= temperature;
      out = temperature * array::logSumExp(column);
      break;
    case ReduceKind::custom:
      out = pluginCode<EnergyAggregationCode>(reduce, 0)(column.size(),
                                                         column.data());
      break;
    }
  }
  return result;
}
