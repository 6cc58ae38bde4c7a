//===- ArrayOps.cpp - Array ops in kernels --------------------------------===//
//
// Lowers the expression ops of energy IR on arrays that are neither
// element-wise (FusedLanes.cpp) nor matrix products (MatrixProducts.cpp):
// constants, transposes, dot and quadratic forms, outer products,
// reductions over the elements of a value, prefix sums, broadcasts and
// diagonals, row-wise normalisations, factorisations, slices and selects.
//
//===----------------------------------------------------------------------===//

#include "DeviceFactorizations.h"
#include "KernelLowering.h"
#include "energy/Codegen/ParallelLoops.h"
#include "energy/KernelSupport/KernelSupport.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"

#include <limits>

using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::codegen;

namespace {
/// The fewest elements of a chunk of reduce_elements on a GPU, and the most
/// chunks, whose partial results one thread combines.
constexpr int64_t kMinElementsPerChunk = 32, kMaxChunks = 4096;

class ArrayOpLowering : public KernelLowering {
public:
  explicit ArrayOpLowering(KernelLowering &kernel) : KernelLowering(kernel) {}

  FailureOr<Lowered> emitConstant(ConstantOp constant);
  FailureOr<Lowered> emitRoundingUnit(RoundingUnitOp);
  FailureOr<Lowered> emitToReal(ToRealOp toReal);
  FailureOr<Lowered> emitEye(EyeOp eye);
  FailureOr<Lowered> emitTranspose(TransposeOp transpose);
  FailureOr<Lowered> emitDot(DotOp dot);
  FailureOr<Lowered> emitQuad(QuadOp quad);
  FailureOr<Lowered> emitOuter(OuterOp outer);
  FailureOr<Lowered> emitReduceElements(ReduceElementsOp reduce);
  /// On a GPU, outside loops: partial results of chunks in a kernel, then
  /// combined.
  FailureOr<Lowered> emitReduceElementsInChunks(ReduceElementsOp reduce);
  FailureOr<Lowered> emitPrefixSum(PrefixSumOp prefix);
  FailureOr<Lowered> emitSumLast(SumLastOp sumLast);
  FailureOr<Lowered> emitBroadcast(BroadcastOp broadcast);
  FailureOr<Lowered> emitDiag(DiagOp diag);
  FailureOr<Lowered> emitDiagPart(DiagPartOp diagPart);
  FailureOr<Lowered> emitExtract(ExtractOp extract);
  FailureOr<Lowered> emitEmbed(EmbedOp embed);
  FailureOr<Lowered> emitSelect(SelectOp choice);
  /// softmax, log_softmax, rmsnorm and layernorm, row by row.
  FailureOr<Lowered> emitRows(Operation *op);
  /// log_det and inverse, by the support library (as loops with
  /// deviceLoops()).
  FailureOr<Lowered> emitSupportCall(Operation *op);

private:
  /// reduce_elements of each kind as a fold: the running values of nothing,
  /// with one element folded in, of two parts combined, and the result.
  SmallVector<Value> elementsIdentity(ElementsKind kind);
  SmallVector<Value> foldElement(ElementsKind kind, ValueRange running,
                                 Value x);
  SmallVector<Value> combineElements(ElementsKind kind, ValueRange running,
                                     ValueRange other);
  Value finishElements(ElementsKind kind, ValueRange running, Value count);
  /// Square matrices of `type` (the last two axes) holding
  /// `onDiagonal(row)` on their diagonal and 0 elsewhere.
  Lowered diagonalMatrix(ArrayType type, function_ref<Value(Value)> onDiagonal);
  Lowered operandAt(Operation *op, unsigned position) {
    return get(op->getOperand(position));
  }
  static ArrayType operandType(Operation *op, unsigned position) {
    return cast<ArrayType>(op->getOperand(position).getType());
  }
};
} // namespace

Lowered ArrayOpLowering::diagonalMatrix(ArrayType type,
                                        function_ref<Value(Value)> onDiagonal) {
  Value n = shape(type).back();
  return build(type, [&](Value position) {
    Value row = arith::DivUIOp::create(b, loc, position, n);
    Value column = arith::RemUIOp::create(b, loc, position, n);
    Value diagonal =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, row, column);
    Value value = onDiagonal(row);
    return select(diagonal, value, real(0.0));
  });
}

FailureOr<Lowered> ArrayOpLowering::emitConstant(ConstantOp constant) {
  return Lowered{real(constant.getValue().convertToDouble()), Value()};
}

FailureOr<Lowered> ArrayOpLowering::emitRoundingUnit(RoundingUnitOp) {
  return Lowered{real(singlePrecision()
                          ? std::numeric_limits<float>::epsilon()
                          : std::numeric_limits<double>::epsilon()),
                 Value()};
}

FailureOr<Lowered> ArrayOpLowering::emitToReal(ToRealOp toReal) {
  Value value = toI64(state.integers.lookup(toReal.getIndex()));
  return Lowered{arith::SIToFPOp::create(b, loc, context.elementType, value),
                 Value()};
}

FailureOr<Lowered> ArrayOpLowering::emitEye(EyeOp eye) {
  return diagonalMatrix(cast<ArrayType>(eye.getType()),
                        [&](Value) { return real(1.0); });
}

FailureOr<Lowered> ArrayOpLowering::emitTranspose(TransposeOp transpose) {
  auto type = cast<ArrayType>(transpose.getType());
  Lowered operand = operandAt(transpose, 0);
  SmallVector<Value> extents = shape(type);
  Value rows = extents[extents.size() - 2];
  Value columns = extents.back();
  Value block = arith::MulIOp::create(b, loc, rows, columns);
  // On a GPU, a kernel with a thread per element of the result: (p, i, j)
  // reads the operand's (p, j, i).
  if (deviceLoops())
    return build(type, [&](Value position) {
      Value matrix = arith::DivUIOp::create(b, loc, position, block);
      Value within = arith::RemUIOp::create(b, loc, position, block);
      Value i = arith::DivUIOp::create(b, loc, within, columns);
      Value j = arith::RemUIOp::create(b, loc, within, columns);
      Value source = arith::AddIOp::create(
          b, loc, arith::MulIOp::create(b, loc, matrix, block),
          arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, j, rows),
                                i));
      return load(operand.data, source);
    });
  Value data = allocate(type);
  Value matrices = arith::DivUIOp::create(b, loc, elementCount(type), block);
  // Outside loops (a whole matrix, each call), the support library's
  // transpose: blocks of the vector width transposed in registers.
  unsigned width = context.elementType.getWidth();
  if (frame.loopDepth == 0 && (width == 32 || width == 64)) {
    func::CallOp::create(b, loc,
                         context.target.lookupSymbol<func::FuncOp>(
                             width == 32 ? ENERGY_SUPPORT_TRANSPOSE_F32
                                         : ENERGY_SUPPORT_TRANSPOSE_F64),
                         ValueRange{toI64(matrices), toI64(rows),
                                    toI64(columns), operand.data, data});
    return Lowered{Value(), data};
  }
  // Tile by tile, so that the operand's rows a tile reads stay in
  // cache while the result's rows are written: the result's (i, j) of
  // matrix p is the operand's (j, i).
  Value tile = index(16);
  auto forTiles = [&](Value extent, function_ref<void(Value, Value)> body) {
    auto loop = scf::ForOp::create(b, loc, index(0), extent, tile);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value start = loop.getInductionVar();
    body(start,
         arith::MinUIOp::create(
             b, loc, arith::AddIOp::create(b, loc, start, tile), extent));
  };
  auto forSpan = [&](Value begin, Value end, function_ref<void(Value)> body) {
    auto loop = scf::ForOp::create(b, loc, begin, end, index(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    body(loop.getInductionVar());
  };
  forRange(matrices, [&](Value p) {
    Value base = arith::MulIOp::create(b, loc, p, block);
    forTiles(rows, [&](Value rowBegin, Value rowEnd) {
      forTiles(columns, [&](Value columnBegin, Value columnEnd) {
        forSpan(rowBegin, rowEnd, [&](Value i) {
          Value to = arith::AddIOp::create(
              b, loc, base, arith::MulIOp::create(b, loc, i, columns));
          Value from = arith::AddIOp::create(b, loc, base, i);
          forSpan(columnBegin, columnEnd, [&](Value j) {
            Value source = arith::AddIOp::create(
                b, loc, from, arith::MulIOp::create(b, loc, j, rows));
            store(load(operand.data, source), data,
                  arith::AddIOp::create(b, loc, to, j));
          });
        });
      });
    });
  });
  return Lowered{Value(), data};
}

FailureOr<Lowered> ArrayOpLowering::emitDot(DotOp dot) {
  Value count = elementCount(operandType(dot, 0));
  if (state.fusedIntoUser.contains(dot.getLhs()) ||
      state.fusedIntoUser.contains(dot.getRhs()))
    return Lowered{sumLanes(count,
                            [&](Value offset, int lanes) {
                              Value lhs =
                                  laneValue(dot.getLhs(), offset, lanes);
                              return mul(lhs, dot.getRhs() == dot.getLhs()
                                                  ? lhs
                                                  : laneValue(dot.getRhs(),
                                                              offset, lanes));
                            }),
                   Value()};
  Lowered lhs = operandAt(dot, 0), rhs = operandAt(dot, 1);
  if (lhs.data && rhs.data)
    return Lowered{dotProduct(lhs.data, rhs.data, count), Value()};
  Value sum = forRange(count, {real(0.0)}, [&](Value i, ValueRange acc) {
    return SmallVector<Value>{
        add(acc[0], mul(elementAt(lhs, i), elementAt(rhs, i)))};
  })[0];
  return Lowered{sum, Value()};
}

FailureOr<Lowered> ArrayOpLowering::emitQuad(QuadOp quad) {
  // vᵀ M v = Σ_j (Σ_i v_i M_ij) v_j: for each block of lanes j, the
  // combination of rows of M carried in a register through the loop
  // over i (contiguous loads, vector FMAs), then its product with v.
  Lowered vector = operandAt(quad, 0), matrix = operandAt(quad, 1);
  Value n = shape(operandType(quad, 0))[0];
  Value sum = sumLanes(n, [&](Value j, int lanes) {
    Value combination =
        forRange(n, {splat(real(0.0), lanes)}, [&](Value i, ValueRange acc) {
          Value row =
              offsetPointer(matrix.data, arith::MulIOp::create(b, loc, i, n));
          Value term =
              mul(splat(load(vector.data, i), lanes), loadLanes(row, j, lanes));
          return SmallVector<Value>{add(acc[0], term)};
        })[0];
    return mul(combination, loadLanes(vector.data, j, lanes));
  });
  return Lowered{sum, Value()};
}

FailureOr<Lowered> ArrayOpLowering::emitOuter(OuterOp outer) {
  auto type = cast<ArrayType>(outer.getType());
  // Row by row, so that the inner loop runs along contiguous memory
  // with no division per element.
  Lowered lhs = operandAt(outer, 0), rhs = operandAt(outer, 1);
  Value rows = elementCount(operandType(outer, 0));
  Value columns = elementCount(operandType(outer, 1));
  Value data = allocate(type);
  forRange(rows, [&](Value i) {
    Value factor = elementAt(lhs, i);
    Value row = offsetPointer(data, arith::MulIOp::create(b, loc, i, columns));
    forLanes(columns, [&](Value j, int lanes) {
      Value element =
          rhs.data ? loadLanes(rhs.data, j, lanes) : splat(rhs.scalar, lanes);
      storeLanes(mul(splat(factor, lanes), element), row, j, lanes);
    });
  });
  return Lowered{Value(), data};
}

FailureOr<Lowered>
ArrayOpLowering::emitReduceElements(ReduceElementsOp reduce) {
  Value count = elementCount(operandType(reduce, 0));
  ElementsKind kind = reduce.getKind();
  std::optional<int64_t> knownCount = getConstantIntValue(count);
  if (deviceLoops() && !insideLoop() &&
      (!knownCount || *knownCount > kMinElementsPerChunk))
    return emitReduceElementsInChunks(reduce);
  if (kind == ElementsKind::lse || kind == ElementsKind::maxabs) {
    SmallVector<Value> running =
        forRange(count, elementsIdentity(kind), [&](Value i, ValueRange acc) {
          return foldElement(kind, acc, laneValue(reduce.getOperand(), i, 1));
        });
    return Lowered{finishElements(kind, running, count), Value()};
  }
  bool squared = kind == ElementsKind::sqnorm || kind == ElementsKind::norm;
  Value total = sumLanes(count, [&](Value offset, int lanes) {
    Value x = laneValue(reduce.getOperand(), offset, lanes);
    return squared ? mul(x, x) : x;
  });
  return Lowered{finishElements(kind, {total}, count), Value()};
}

FailureOr<Lowered>
ArrayOpLowering::emitReduceElementsInChunks(ReduceElementsOp reduce) {
  // Chunk c takes elements c, c + chunks, ...: neighbouring threads read
  // neighbouring elements.
  ElementsKind kind = reduce.getKind();
  unsigned width = elementsIdentity(kind).size();
  Value count = elementCount(operandType(reduce, 0));
  Value chunks, partials;
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(frame.entryAnchor);
    chunks =
        arith::CeilDivSIOp::create(b, loc, count, index(kMinElementsPerChunk));
    chunks = arith::MinSIOp::create(b, loc, chunks, index(kMaxChunks));
    chunks = arith::MaxSIOp::create(b, loc, chunks, index(1));
    partials =
        allocateElements(arith::MulIOp::create(b, loc, chunks, index(width)));
  }
  auto partialAt = [&](Value chunk, unsigned part) {
    return arith::AddIOp::create(
        b, loc, chunk, arith::MulIOp::create(b, loc, chunks, index(part)));
  };
  forElements(chunks, [&](Value chunk) {
    Value positions = arith::CeilDivSIOp::create(
        b, loc,
        arith::MaxSIOp::create(
            b, loc, arith::SubIOp::create(b, loc, count, chunk), index(0)),
        chunks);
    SmallVector<Value> running = forRange(
        positions, elementsIdentity(kind), [&](Value step, ValueRange acc) {
          Value position = arith::AddIOp::create(
              b, loc, chunk, arith::MulIOp::create(b, loc, step, chunks));
          return foldElement(kind, acc,
                             laneValue(reduce.getOperand(), position, 1));
        });
    for (auto [part, value] : llvm::enumerate(running))
      store(value, partials, partialAt(chunk, part));
  });
  SmallVector<Value> running = forRange(
      chunks, elementsIdentity(kind), [&](Value chunk, ValueRange acc) {
        SmallVector<Value> partial;
        for (unsigned part = 0; part < width; ++part)
          partial.push_back(load(partials, partialAt(chunk, part)));
        return combineElements(kind, acc, partial);
      });
  return Lowered{finishElements(kind, running, count), Value()};
}

SmallVector<Value> ArrayOpLowering::elementsIdentity(ElementsKind kind) {
  if (kind == ElementsKind::lse)
    return {real(-std::numeric_limits<double>::infinity()), real(0.0)};
  return {real(0.0)};
}

SmallVector<Value> ArrayOpLowering::foldElement(ElementsKind kind,
                                                ValueRange running, Value x) {
  switch (kind) {
  case ElementsKind::lse:
    return combineElements(kind, running, {x, real(1.0)});
  case ElementsKind::maxabs:
    return {maximum(running[0], math::AbsFOp::create(b, loc, x))};
  case ElementsKind::sqnorm:
  case ElementsKind::norm:
    return {add(running[0], mul(x, x))};
  case ElementsKind::sum:
  case ElementsKind::mean:
    return {add(running[0], x)};
  }
  llvm_unreachable("every kind of reduce_elements is handled");
}

SmallVector<Value> ArrayOpLowering::combineElements(ElementsKind kind,
                                                    ValueRange running,
                                                    ValueRange other) {
  if (kind == ElementsKind::maxabs)
    return {maximum(running[0], other[0])};
  if (kind != ElementsKind::lse)
    return {add(running[0], other[0])};
  // (largest, sum of exp(x − largest)) of two parts; a part holding only
  // −∞ (or nothing) adds 0.
  Value negInf = real(-std::numeric_limits<double>::infinity());
  Value largest = maximum(running[0], other[0]);
  auto rescaled = [&](Value partLargest, Value partSum) {
    return select(cmp(arith::CmpFPredicate::OEQ, partLargest, negInf),
                  real(0.0), mul(partSum, exp(sub(partLargest, largest))));
  };
  return {largest,
          add(rescaled(running[0], running[1]), rescaled(other[0], other[1]))};
}

Value ArrayOpLowering::finishElements(ElementsKind kind, ValueRange running,
                                      Value count) {
  switch (kind) {
  case ElementsKind::lse:
    return add(running[0], log(running[1]));
  case ElementsKind::mean:
    return div(running[0], arith::SIToFPOp::create(b, loc, context.elementType,
                                                   toI64(count)));
  case ElementsKind::norm:
    return math::SqrtOp::create(b, loc, running[0]);
  default:
    return running[0];
  }
}

FailureOr<Lowered> ArrayOpLowering::emitPrefixSum(PrefixSumOp prefix) {
  auto type = cast<ArrayType>(prefix.getType());
  // A running slice along the leading axis, vectors across each slice:
  // result[i] = result[i - 1] + operand[i] (operand[i - 1] when
  // exclusive), from the end when reversed.
  Lowered operand = operandAt(prefix, 0);
  Value length = shape(type).front();
  Value one = index(1);
  Value width = arith::DivUIOp::create(
      b, loc, elementCount(type), arith::MaxUIOp::create(b, loc, length, one));
  Value data = allocate(type);
  forRange(length, [&](Value step) {
    Value position =
        prefix.getReverse()
            ? arith::SubIOp::create(
                  b, loc, arith::SubIOp::create(b, loc, length, one), step)
            : step;
    Value previous =
        prefix.getReverse()
            ? arith::AddIOp::create(b, loc, position, one).getResult()
            : arith::SubIOp::create(b, loc, position, one).getResult();
    Value first =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, step, index(0));
    Value at = arith::MulIOp::create(b, loc, position, width);
    // The row the sum continues from: the previous result (clamped
    // into range on the first step, where it is not read).
    Value before =
        arith::MulIOp::create(b, loc, select(first, position, previous), width);
    Value added = arith::MulIOp::create(
        b, loc,
        prefix.getExclusive() ? select(first, position, previous) : position,
        width);
    forLanes(width, [&](Value offset, int lanes) {
      Value zero = splat(real(0.0), lanes);
      Value carried =
          loadLanes(data, arith::AddIOp::create(b, loc, before, offset), lanes);
      Value term =
          lanesAt(operand, arith::AddIOp::create(b, loc, added, offset), lanes);
      Value sum = add(carried, term);
      Value value = prefix.getExclusive() ? select(first, zero, sum)
                                          : select(first, term, sum);
      storeLanes(value, data, arith::AddIOp::create(b, loc, at, offset), lanes);
    });
  });
  return Lowered{Value(), data};
}

FailureOr<Lowered> ArrayOpLowering::emitSumLast(SumLastOp sumLast) {
  auto type = cast<ArrayType>(sumLast.getType());
  Lowered operand = operandAt(sumLast, 0);
  Value length = shape(operandType(sumLast, 0)).back();
  return build(type, [&](Value position) {
    Value start = arith::MulIOp::create(b, loc, position, length);
    return forRange(length, {real(0.0)}, [&](Value k, ValueRange acc) {
      return SmallVector<Value>{add(
          acc[0], load(operand.data, arith::AddIOp::create(b, loc, start, k)))};
    })[0];
  });
}

FailureOr<Lowered> ArrayOpLowering::emitBroadcast(BroadcastOp broadcast) {
  auto type = cast<ArrayType>(broadcast.getType());
  Lowered operand = operandAt(broadcast, 0);
  Value repeats = index(1);
  SmallVector<Value> extents = shape(type);
  for (Value extent :
       ArrayRef<Value>(extents).drop_front(operandType(broadcast, 0).getRank()))
    repeats = arith::MulIOp::create(b, loc, repeats, extent);
  return build(type, [&](Value position) {
    return elementAt(operand,
                     arith::DivUIOp::create(b, loc, position, repeats));
  });
}

FailureOr<Lowered> ArrayOpLowering::emitDiag(DiagOp diag) {
  Lowered operand = operandAt(diag, 0);
  return diagonalMatrix(cast<ArrayType>(diag.getType()),
                        [&](Value row) { return load(operand.data, row); });
}

FailureOr<Lowered> ArrayOpLowering::emitDiagPart(DiagPartOp diagPart) {
  auto type = cast<ArrayType>(diagPart.getType());
  Lowered operand = operandAt(diagPart, 0);
  Value n = shape(type).back();
  return build(type, [&](Value i) {
    return load(
        operand.data,
        arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, i, n), i));
  });
}

FailureOr<Lowered> ArrayOpLowering::emitExtract(ExtractOp extract) {
  auto type = cast<ArrayType>(extract.getType());
  FailureOr<SmallVector<Value>> indices =
      indicesOf(extract, extract.getMap(), extract.getIndices());
  if (failed(indices))
    return failure();
  return slice(get(extract.getSource()).data,
               cast<ArrayType>(extract.getSource().getType()), type, *indices);
}

FailureOr<Lowered> ArrayOpLowering::emitEmbed(EmbedOp embed) {
  auto type = cast<ArrayType>(embed.getType());
  FailureOr<SmallVector<Value>> indices =
      indicesOf(embed, embed.getMap(), embed.getIndices());
  if (failed(indices))
    return failure();
  Value data = allocate(type);
  forElements(elementCount(type),
              [&](Value position) { store(real(0.0), data, position); });
  Value offset = sliceOffset(*indices, shape(type));
  copyInto(get(embed.getValue()), cast<ArrayType>(embed.getValue().getType()),
           offsetPointer(data, offset), /*accumulate=*/false);
  return Lowered{Value(), data};
}

FailureOr<Lowered> ArrayOpLowering::emitSelect(SelectOp choice) {
  auto type = cast<ArrayType>(choice.getType());
  Value condition = state.integers.lookup(choice.getCondition());
  Lowered whenTrue = get(choice.getTrueValue());
  Lowered whenFalse = get(choice.getFalseValue());
  if (type.isScalar())
    return Lowered{select(condition, whenTrue.scalar, whenFalse.scalar),
                   Value()};
  // On a GPU, a kernel with a thread per element chooses each element: the
  // condition is often computed there (a convergence test), and the host
  // would have to wait for it to choose a pointer.
  if (deviceLoops() && !matchPattern(condition, m_Constant()))
    return build(type, [&](Value position) {
      return select(condition, load(whenTrue.data, position),
                    load(whenFalse.data, position));
    });
  return Lowered{Value(), select(condition, whenTrue.data, whenFalse.data)};
}

FailureOr<Lowered> ArrayOpLowering::emitRows(Operation *op) {
  Lowered operand = get(op->getOperand(0));
  auto type = cast<ArrayType>(op->getResult(0).getType());
  Value length = shape(type).back();
  Value rows = arith::DivUIOp::create(b, loc, elementCount(type), length);
  Value data = allocate(type);
  Value size =
      arith::SIToFPOp::create(b, loc, context.elementType, toI64(length));
  auto lowerRow = [&](Value row) {
    Value start = arith::MulIOp::create(b, loc, row, length);
    Value input = offsetPointer(operand.data, start);
    Value output = offsetPointer(data, start);
    // Every pass over the row runs in vectors (foldLanes, forLanes): its
    // elements are contiguous and a row is often a few vectors long.
    auto sumOver = [&](function_ref<Value(Value, int)> term) {
      return sumLanes(length, [&](Value k, int lanes) {
        return term(loadLanes(input, k, lanes), lanes);
      });
    };
    auto writeRow = [&](function_ref<Value(Value, int)> element) {
      forLanes(length, [&](Value k, int lanes) {
        storeLanes(element(loadLanes(input, k, lanes), lanes), output, k,
                   lanes);
      });
    };
    if (isa<SoftmaxOp, LogSoftmaxOp>(op)) {
      // A NaN element that maxLanes passes over makes its exp and the sum NaN.
      Value largest = maxLanes(length, [&](Value k, int lanes) {
        return loadLanes(input, k, lanes);
      });
      auto shifted = [&](Value x, int lanes) {
        return exp(sub(x, splat(largest, lanes)));
      };
      if (isa<SoftmaxOp>(op)) {
        // exp(x − max) once per element, stored, then scaled by 1 / its sum.
        Value sum = sumLanes(length, [&](Value k, int lanes) {
          Value weight = shifted(loadLanes(input, k, lanes), lanes);
          storeLanes(weight, output, k, lanes);
          return weight;
        });
        Value reciprocal = div(real(1.0), sum);
        forLanes(length, [&](Value k, int lanes) {
          storeLanes(mul(loadLanes(output, k, lanes), splat(reciprocal, lanes)),
                     output, k, lanes);
        });
        return;
      }
      Value normaliser = add(largest, log(sumOver(shifted)));
      writeRow(
          [&](Value x, int lanes) { return sub(x, splat(normaliser, lanes)); });
      return;
    }
    Value epsilon = real(1e-5);
    if (isa<RmsNormOp>(op)) {
      Value meanSquare =
          div(sumOver([&](Value x, int) { return mul(x, x); }), size);
      Value scale = div(real(1.0),
                        math::SqrtOp::create(b, loc, add(meanSquare, epsilon)));
      writeRow([&](Value x, int lanes) { return mul(x, splat(scale, lanes)); });
      return;
    }
    Value centre = div(sumOver([&](Value x, int) { return x; }), size);
    Value variance = div(sumOver([&](Value x, int lanes) {
                           Value d = sub(x, splat(centre, lanes));
                           return mul(d, d);
                         }),
                         size);
    Value scale =
        div(real(1.0), math::SqrtOp::create(b, loc, add(variance, epsilon)));
    writeRow([&](Value x, int lanes) {
      return mul(sub(x, splat(centre, lanes)), splat(scale, lanes));
    });
  };
  // Rows are independent: on a GPU, a kernel with a thread per row.
  auto rowLoop = scf::ForOp::create(b, loc, index(0), rows, index(1));
  markElementwise(rowLoop);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(rowLoop.getBody());
  lowerRow(rowLoop.getInductionVar());
  return Lowered{Value(), data};
}

FailureOr<Lowered> ArrayOpLowering::emitSupportCall(Operation *op) {
  Lowered operand = get(op->getOperand(0));
  auto operandType = cast<ArrayType>(op->getOperand(0).getType());
  if (deviceLoops()) {
    if (isa<LogDetOp>(op))
      return Lowered{emitLogDetLoops(*this, operandType, operand.data),
                     Value()};
    Value data = allocate(operandType);
    emitInverseLoops(*this, operandType, operand.data, data);
    return Lowered{Value(), data};
  }
  bool single = context.elementType.getWidth() != 64;
  Value n = toI64(shape(operandType).back());
  if (isa<LogDetOp>(op)) {
    auto function = context.target.lookupSymbol<func::FuncOp>(
        single ? ENERGY_SUPPORT_LOGDET_F32 : ENERGY_SUPPORT_LOGDET_F64);
    Value value =
        func::CallOp::create(b, loc, function, ValueRange{n, operand.data})
            .getResult(0);
    if (single)
      value = arith::TruncFOp::create(b, loc, context.elementType, value);
    return Lowered{value, Value()};
  }
  auto function = context.target.lookupSymbol<func::FuncOp>(
      single ? ENERGY_SUPPORT_INVERSE_F32 : ENERGY_SUPPORT_INVERSE_F64);
  Value data = allocate(operandType);
  func::CallOp::create(b, loc, function, ValueRange{n, operand.data, data});
  return Lowered{Value(), data};
}

void codegen::populateArrayOpLowerings(KernelLoweringPatterns &patterns) {
  using Family = ArrayOpLowering;
  patterns.addArrayOps<Family, ConstantOp>(&Family::emitConstant);
  patterns.addArrayOps<Family, RoundingUnitOp>(&Family::emitRoundingUnit);
  patterns.addArrayOps<Family, ToRealOp>(&Family::emitToReal);
  patterns.addArrayOps<Family, EyeOp>(&Family::emitEye);
  patterns.addArrayOps<Family, TransposeOp>(&Family::emitTranspose);
  patterns.addArrayOps<Family, DotOp>(&Family::emitDot);
  patterns.addArrayOps<Family, QuadOp>(&Family::emitQuad);
  patterns.addArrayOps<Family, OuterOp>(&Family::emitOuter);
  patterns.addArrayOps<Family, ReduceElementsOp>(&Family::emitReduceElements);
  patterns.addArrayOps<Family, PrefixSumOp>(&Family::emitPrefixSum);
  patterns.addArrayOps<Family, SumLastOp>(&Family::emitSumLast);
  patterns.addArrayOps<Family, BroadcastOp>(&Family::emitBroadcast);
  patterns.addArrayOps<Family, DiagOp>(&Family::emitDiag);
  patterns.addArrayOps<Family, DiagPartOp>(&Family::emitDiagPart);
  patterns.addArrayOps<Family, ExtractOp>(&Family::emitExtract);
  patterns.addArrayOps<Family, EmbedOp>(&Family::emitEmbed);
  patterns.addArrayOps<Family, SelectOp>(&Family::emitSelect);
  patterns.addArrayOps<Family, SoftmaxOp, LogSoftmaxOp, RmsNormOp, LayerNormOp>(
      &Family::emitRows);
  patterns.addArrayOps<Family, LogDetOp, InverseOp>(&Family::emitSupportCall);
}
