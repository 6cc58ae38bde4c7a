//===- ArrayOps.cpp - Elementwise ops and linear algebra in kernels -------===//
//
// Lowers the expression ops of energy IR on arrays: elementwise functions,
// matrix products (through the support library's GEMM when both operands
// are matrices), transposes, dot and quadratic forms, reductions over the
// elements of a value, row-wise normalisations, factorisations and the
// gradient calls of step programs.
//
//===----------------------------------------------------------------------===//

#include "KernelFunction.h"
#include "energy/KernelSupport/KernelSupport.h"
#include "energy/KernelSupport/MatrixProduct.h"

#include "llvm/ADT/TypeSwitch.h"

#include <limits>

using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::codegen;

namespace mlir::energy::codegen {
/// The kernel's builders as element-wise ops build their lanes with
/// (ElementwiseOpInterface.h).
class KernelLanes : public LaneBuilder {
public:
  explicit KernelLanes(KernelFunction &kernel) : kernel(kernel) {}
  OpBuilder &getBuilder() override { return kernel.b; }
  Location getLoc() override { return kernel.loc; }
  Value constant(double value, Value like) override {
    auto lanes = dyn_cast<VectorType>(like.getType());
    return kernel.splat(kernel.real(value), lanes ? lanes.getNumElements() : 1);
  }
  Value add(Value lhs, Value rhs) override { return kernel.add(lhs, rhs); }
  Value sub(Value lhs, Value rhs) override { return kernel.sub(lhs, rhs); }
  Value mul(Value lhs, Value rhs) override { return kernel.mul(lhs, rhs); }
  Value div(Value lhs, Value rhs) override { return kernel.div(lhs, rhs); }
  Value maximum(Value lhs, Value rhs) override {
    return kernel.maximum(lhs, rhs);
  }
  Value exp(Value x) override { return kernel.exp(x); }
  Value log(Value x) override { return kernel.log(x); }
  Value compare(arith::CmpFPredicate predicate, Value lhs, Value rhs) override {
    return kernel.cmp(predicate, lhs, rhs);
  }
  Value select(Value condition, Value whenTrue, Value whenFalse) override {
    return kernel.select(condition, whenTrue, whenFalse);
  }
  Value callSupport(StringRef name, Value x) override {
    OpBuilder &b = kernel.b;
    Location loc = kernel.loc;
    bool wide = kernel.context.elementType.getWidth() == 64;
    Value argument =
        wide ? x : arith::ExtFOp::create(b, loc, b.getF64Type(), x);
    auto function = kernel.context.target.lookupSymbol<func::FuncOp>(name);
    Value result = func::CallOp::create(b, loc, function, ValueRange{argument})
                       .getResult(0);
    return wide ? result
                : arith::TruncFOp::create(b, loc, kernel.context.elementType,
                                          result);
  }

private:
  KernelFunction &kernel;
};
} // namespace mlir::energy::codegen

Value KernelFunction::elementwise(Operation *op, ValueRange operands) {
  KernelLanes lanes(*this);
  return cast<ElementwiseOpInterface>(op).buildLanes(lanes, operands);
}

bool KernelFunction::isLaneWise(Operation *op) {
  auto elementwise = dyn_cast<ElementwiseOpInterface>(op);
  if (!elementwise || !elementwise.takesVectors())
    return false;
  auto type = cast<ArrayType>(op->getResult(0).getType());
  return llvm::all_of(op->getOperands(), [&](Value operand) {
    auto operandType = cast<ArrayType>(operand.getType());
    return operandType == type || operandType.isScalar();
  });
}

bool KernelFunction::isFusedIntoUser(Operation *op) {
  Value result = op->getResult(0);
  if (!isLaneWise(op) || cast<ArrayType>(result.getType()).isScalar() ||
      !result.hasOneUse())
    return false;
  Operation *user = *result.getUsers().begin();
  bool laneWiseUser =
      isLaneWise(user) && user->getResult(0).getType() == result.getType();
  bool dotOfLanes = isa<DotOp>(user) && user->getOperand(0).getType() ==
                                            user->getOperand(1).getType();
  auto reduce = dyn_cast<ReduceElementsOp>(user);
  bool sumOfLanes = reduce && reduce.getKind() != ElementsKind::maxabs &&
                    reduce.getKind() != ElementsKind::lse;
  if (user->getBlock() != op->getBlock() ||
      !(laneWiseUser || dotOfLanes || sumOfLanes || isa<AccumulateOp>(user)))
    return false;
  for (Operation *between = op->getNextNode(); between != user;
       between = between->getNextNode())
    if (between->getNumRegions() != 0 ||
        isa<AccumulateOp, StoreOp, GradOp>(between))
      return false;
  return true;
}

Value KernelFunction::laneValue(Value value, Value offset, int lanes) {
  if (fusedIntoUser.contains(value))
    return laneOp(value.getDefiningOp(), offset, lanes);
  return lanesAt(get(value), offset, lanes);
}

Value KernelFunction::laneOp(Operation *op, Value offset, int lanes) {
  SmallVector<Value, 2> operands;
  for (Value operand : op->getOperands())
    operands.push_back(laneValue(operand, offset, lanes));
  return elementwise(op, operands);
}

FailureOr<Lowered> KernelFunction::emitArrayOp(Operation *op) {
  auto type = cast<ArrayType>(op->getResult(0).getType());
  auto operandAt = [&](unsigned i) { return get(op->getOperand(i)); };
  auto operandType = [&](unsigned i) {
    return cast<ArrayType>(op->getOperand(i).getType());
  };
  using Result = FailureOr<Lowered>;
  // Element-wise functions and arithmetic, scalars included, on vectors of
  // lanes (their operands computed in the same loop where fused).
  if (isLaneWise(op))
    return buildLanes(type, [&](Value offset, int lanes) {
      return laneOp(op, offset, lanes);
    });
  // Element-wise ops without vector lanes (∫ silu calls the support
  // library) one element at a time.
  if (isa<ElementwiseOpInterface>(op)) {
    SmallVector<Lowered> operands;
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      operands.push_back(operandAt(i));
    return build(type, [&](Value position) {
      SmallVector<Value, 2> elements;
      for (const Lowered &operand : operands)
        elements.push_back(elementAt(operand, position));
      return elementwise(op, elements);
    });
  }
  return llvm::TypeSwitch<Operation *, Result>(op)
      .Case([&](ConstantOp constant) -> Result {
        return Lowered{real(constant.getValue().convertToDouble()), Value()};
      })
      .Case([&](ReadOp read) { return emitRead(read); })
      .Case([&](ToRealOp toReal) -> Result {
        Value value = toI64(integers.lookup(toReal.getIndex()));
        return Lowered{
            arith::SIToFPOp::create(b, loc, context.elementType, value),
            Value()};
      })
      .Case([&](EyeOp) -> Result {
        Value n = shape(type).back();
        return build(type, [&](Value position) {
          Value row = arith::DivUIOp::create(b, loc, position, n);
          Value column = arith::RemUIOp::create(b, loc, position, n);
          Value diagonal = arith::CmpIOp::create(
              b, loc, arith::CmpIPredicate::eq, row, column);
          return select(diagonal, real(1.0), real(0.0));
        });
      })
      .Case([&](MatmulOp matmul) { return emitMatmul(matmul); })
      .Case([&](BatchMatmulOp product) { return emitBatchMatmul(product); })
      .Case([&](TransposeOp) -> Result {
        Lowered operand = operandAt(0);
        SmallVector<Value> extents = shape(type);
        Value rows = extents[extents.size() - 2];
        Value columns = extents.back();
        Value block = arith::MulIOp::create(b, loc, rows, columns);
        Value data = allocate(type);
        // Tile by tile, so that the operand's rows a tile reads stay in
        // cache while the result's rows are written: the result's (i, j) of
        // matrix p is the operand's (j, i).
        Value tile = index(16);
        auto forTiles = [&](Value extent,
                            function_ref<void(Value, Value)> body) {
          auto loop = scf::ForOp::create(b, loc, index(0), extent, tile);
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(loop.getBody());
          Value start = loop.getInductionVar();
          body(start,
               arith::MinUIOp::create(
                   b, loc, arith::AddIOp::create(b, loc, start, tile), extent));
        };
        auto forSpan = [&](Value begin, Value end,
                           function_ref<void(Value)> body) {
          auto loop = scf::ForOp::create(b, loc, begin, end, index(1));
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(loop.getBody());
          body(loop.getInductionVar());
        };
        Value matrices =
            arith::DivUIOp::create(b, loc, elementCount(type), block);
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
      })
      .Case([&](DotOp dot) -> Result {
        Value count = elementCount(operandType(0));
        if (fusedIntoUser.contains(dot.getLhs()) ||
            fusedIntoUser.contains(dot.getRhs()))
          return Lowered{sumLanes(count,
                                  [&](Value offset, int lanes) {
                                    return mul(
                                        laneValue(dot.getLhs(), offset, lanes),
                                        laneValue(dot.getRhs(), offset, lanes));
                                  }),
                         Value()};
        Lowered lhs = operandAt(0), rhs = operandAt(1);
        if (lhs.data && rhs.data)
          return Lowered{dotProduct(lhs.data, rhs.data, count), Value()};
        Value sum = forRange(count, {real(0.0)}, [&](Value i, ValueRange acc) {
          return SmallVector<Value>{
              add(acc[0], mul(elementAt(lhs, i), elementAt(rhs, i)))};
        })[0];
        return Lowered{sum, Value()};
      })
      .Case([&](QuadOp) -> Result {
        // vᵀ M v = Σ_j (Σ_i v_i M_ij) v_j: for each block of lanes j, the
        // combination of rows of M carried in a register through the loop
        // over i (contiguous loads, vector FMAs), then its product with v.
        Lowered vector = operandAt(0), matrix = operandAt(1);
        Value n = shape(operandType(0))[0];
        Value sum = sumLanes(n, [&](Value j, int lanes) {
          Value combination = forRange(
              n, {splat(real(0.0), lanes)}, [&](Value i, ValueRange acc) {
                Value row = offsetPointer(matrix.data,
                                          arith::MulIOp::create(b, loc, i, n));
                Value term = mul(splat(load(vector.data, i), lanes),
                                 loadLanes(row, j, lanes));
                return SmallVector<Value>{add(acc[0], term)};
              })[0];
          return mul(combination, loadLanes(vector.data, j, lanes));
        });
        return Lowered{sum, Value()};
      })
      .Case([&](OuterOp) -> Result {
        // Row by row, so that the inner loop runs along contiguous memory
        // with no division per element.
        Lowered lhs = operandAt(0), rhs = operandAt(1);
        Value rows = elementCount(operandType(0));
        Value columns = elementCount(operandType(1));
        Value data = allocate(type);
        forRange(rows, [&](Value i) {
          Value factor = elementAt(lhs, i);
          Value row =
              offsetPointer(data, arith::MulIOp::create(b, loc, i, columns));
          forLanes(columns, [&](Value j, int lanes) {
            Value element = rhs.data ? loadLanes(rhs.data, j, lanes)
                                     : splat(rhs.scalar, lanes);
            storeLanes(mul(splat(factor, lanes), element), row, j, lanes);
          });
        });
        return Lowered{Value(), data};
      })
      .Case([&](ReduceElementsOp reduce) -> Result {
        Lowered operand = operandAt(0);
        Value count = elementCount(operandType(0));
        Value negInf = real(-std::numeric_limits<double>::infinity());
        ElementsKind kind = reduce.getKind();
        if (kind == ElementsKind::lse) {
          SmallVector<Value> state = forRange(
              count, {negInf, real(0.0)}, [&](Value i, ValueRange acc) {
                Value x = elementAt(operand, i);
                Value largest = maximum(acc[0], x);
                Value scale = exp(sub(acc[0], largest));
                scale = select(cmp(arith::CmpFPredicate::OEQ, acc[0], negInf),
                               real(0.0), scale);
                Value term = exp(sub(x, largest));
                term = select(cmp(arith::CmpFPredicate::OEQ, x, negInf),
                              real(0.0), term);
                return SmallVector<Value>{largest,
                                          add(mul(acc[1], scale), term)};
              });
          return Lowered{add(state[0], log(state[1])), Value()};
        }
        if (kind == ElementsKind::maxabs)
          return Lowered{
              forRange(count, {real(0.0)},
                       [&](Value i, ValueRange acc) {
                         Value x = elementAt(operand, i);
                         return SmallVector<Value>{
                             maximum(acc[0], math::AbsFOp::create(b, loc, x))};
                       })[0],
              Value()};
        bool squared =
            kind == ElementsKind::sqnorm || kind == ElementsKind::norm;
        Value total = sumLanes(count, [&](Value offset, int lanes) {
          Value x = laneValue(reduce.getOperand(), offset, lanes);
          return squared ? mul(x, x) : x;
        });
        if (kind == ElementsKind::mean)
          total = div(total, arith::SIToFPOp::create(
                                 b, loc, context.elementType, toI64(count)));
        if (kind == ElementsKind::norm)
          total = math::SqrtOp::create(b, loc, total);
        return Lowered{total, Value()};
      })
      .Case([&](PrefixSumOp prefix) -> Result {
        // A running slice along the leading axis, vectors across each slice:
        // result[i] = result[i - 1] + operand[i] (operand[i - 1] when
        // exclusive), from the end when reversed.
        Lowered operand = operandAt(0);
        Value length = shape(type).front();
        Value one = index(1);
        Value width =
            arith::DivUIOp::create(b, loc, elementCount(type),
                                   arith::MaxUIOp::create(b, loc, length, one));
        Value data = allocate(type);
        forRange(length, [&](Value step) {
          Value position =
              prefix.getReverse()
                  ? arith::SubIOp::create(
                        b, loc, arith::SubIOp::create(b, loc, length, one),
                        step)
                  : step;
          Value previous =
              prefix.getReverse()
                  ? arith::AddIOp::create(b, loc, position, one).getResult()
                  : arith::SubIOp::create(b, loc, position, one).getResult();
          Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                              step, index(0));
          Value at = arith::MulIOp::create(b, loc, position, width);
          // The row the sum continues from: the previous result (clamped
          // into range on the first step, where it is not read).
          Value before = arith::MulIOp::create(
              b, loc, select(first, position, previous), width);
          Value added = arith::MulIOp::create(
              b, loc,
              prefix.getExclusive() ? select(first, position, previous)
                                    : position,
              width);
          forLanes(width, [&](Value offset, int lanes) {
            Value zero = splat(real(0.0), lanes);
            Value carried = loadLanes(
                data, arith::AddIOp::create(b, loc, before, offset), lanes);
            Value term = lanesAt(
                operand, arith::AddIOp::create(b, loc, added, offset), lanes);
            Value sum = add(carried, term);
            Value value = prefix.getExclusive() ? select(first, zero, sum)
                                                : select(first, term, sum);
            storeLanes(value, data, arith::AddIOp::create(b, loc, at, offset),
                       lanes);
          });
        });
        return Lowered{Value(), data};
      })
      .Case([&](SumLastOp) -> Result {
        Lowered operand = operandAt(0);
        Value length = shape(operandType(0)).back();
        return build(type, [&](Value position) {
          Value start = arith::MulIOp::create(b, loc, position, length);
          return forRange(length, {real(0.0)}, [&](Value k, ValueRange acc) {
            return SmallVector<Value>{
                add(acc[0], load(operand.data,
                                 arith::AddIOp::create(b, loc, start, k)))};
          })[0];
        });
      })
      .Case([&](BroadcastOp) -> Result {
        Lowered operand = operandAt(0);
        Value repeats = index(1);
        SmallVector<Value> extents = shape(type);
        for (Value extent :
             ArrayRef<Value>(extents).drop_front(operandType(0).getRank()))
          repeats = arith::MulIOp::create(b, loc, repeats, extent);
        return build(type, [&](Value position) {
          return elementAt(operand,
                           arith::DivUIOp::create(b, loc, position, repeats));
        });
      })
      .Case([&](DiagOp) -> Result {
        Lowered operand = operandAt(0);
        Value n = shape(type).back();
        return build(type, [&](Value position) {
          Value row = arith::DivUIOp::create(b, loc, position, n);
          Value column = arith::RemUIOp::create(b, loc, position, n);
          Value diagonal = arith::CmpIOp::create(
              b, loc, arith::CmpIPredicate::eq, row, column);
          return select(diagonal, load(operand.data, row), real(0.0));
        });
      })
      .Case([&](DiagPartOp) -> Result {
        Lowered operand = operandAt(0);
        Value n = shape(type).back();
        return build(type, [&](Value i) {
          return load(operand.data,
                      arith::AddIOp::create(
                          b, loc, arith::MulIOp::create(b, loc, i, n), i));
        });
      })
      .Case<SoftmaxOp, LogSoftmaxOp, RmsNormOp, LayerNormOp>(
          [&](Operation *) { return emitRows(op, operandAt(0), type); })
      .Case<ApplyOp, SimilarityOp, SimilarityGradientOp, AggregateOp,
            AggregateWeightsOp>([&](Operation *) { return emitPluginOp(op); })
      .Case<LogDetOp, InverseOp>([&](Operation *) {
        return emitSupportCall(op, operandAt(0), operandType(0));
      })
      .Case([&](ExtractOp extract) -> Result {
        FailureOr<SmallVector<Value>> indices =
            indicesOf(op, extract.getMap(), extract.getIndices());
        if (failed(indices))
          return failure();
        return slice(get(extract.getSource()).data,
                     cast<ArrayType>(extract.getSource().getType()), type,
                     *indices);
      })
      .Case([&](EmbedOp embed) -> Result {
        FailureOr<SmallVector<Value>> indices =
            indicesOf(op, embed.getMap(), embed.getIndices());
        if (failed(indices))
          return failure();
        Value data = allocate(type);
        forRange(elementCount(type),
                 [&](Value position) { store(real(0.0), data, position); });
        Value offset = sliceOffset(*indices, shape(type));
        copyInto(get(embed.getValue()),
                 cast<ArrayType>(embed.getValue().getType()),
                 offsetPointer(data, offset), /*accumulate=*/false);
        return Lowered{Value(), data};
      })
      .Case([&](ReduceOp reduce) { return emitReduce(reduce); })
      .Case([&](TabulateOp table) { return emitTabulate(table); })
      .Case([&](SelectOp choice) -> Result {
        Value condition = integers.lookup(choice.getCondition());
        Lowered whenTrue = get(choice.getTrueValue());
        Lowered whenFalse = get(choice.getFalseValue());
        if (type.isScalar())
          return Lowered{select(condition, whenTrue.scalar, whenFalse.scalar),
                         Value()};
        return Lowered{Value(),
                       select(condition, whenTrue.data, whenFalse.data)};
      })
      .Default([&](Operation *) -> Result {
        return op->emitOpError("is not supported by the CPU code generator");
      });
}

FailureOr<Lowered> KernelFunction::emitRows(Operation *op, Lowered operand,
                                            ArrayType type) {
  Value length = shape(type).back();
  Value rows = arith::DivUIOp::create(b, loc, elementCount(type), length);
  Value data = allocate(type);
  Value negInf = real(-std::numeric_limits<double>::infinity());
  Value size =
      arith::SIToFPOp::create(b, loc, context.elementType, toI64(length));
  forRange(rows, [&](Value row) {
    Value start = arith::MulIOp::create(b, loc, row, length);
    auto at = [&](Value k) {
      return arith::AddIOp::create(b, loc, start, k).getResult();
    };
    auto sumOver = [&](function_ref<Value(Value)> term) {
      return forRange(length, {real(0.0)}, [&](Value k, ValueRange acc) {
        return SmallVector<Value>{add(acc[0], term(load(operand.data, at(k))))};
      })[0];
    };
    auto writeRow = [&](function_ref<Value(Value)> element) {
      forRange(length, [&](Value k) {
        store(element(load(operand.data, at(k))), data, at(k));
      });
    };
    if (isa<SoftmaxOp, LogSoftmaxOp>(op)) {
      Value largest = forRange(length, {negInf}, [&](Value k, ValueRange acc) {
        return SmallVector<Value>{maximum(acc[0], load(operand.data, at(k)))};
      })[0];
      if (isa<SoftmaxOp>(op)) {
        // exp(x − max) once per element, stored, then divided by its sum.
        Value sum = forRange(length, {real(0.0)}, [&](Value k, ValueRange acc) {
          Value weight = exp(sub(load(operand.data, at(k)), largest));
          store(weight, data, at(k));
          return SmallVector<Value>{add(acc[0], weight)};
        })[0];
        forRange(length, [&](Value k) {
          store(div(load(data, at(k)), sum), data, at(k));
        });
        return;
      }
      Value normaliser = add(
          largest, log(sumOver([&](Value x) { return exp(sub(x, largest)); })));
      writeRow([&](Value x) { return sub(x, normaliser); });
      return;
    }
    Value epsilon = real(1e-5);
    if (isa<RmsNormOp>(op)) {
      Value meanSquare = div(sumOver([&](Value x) { return mul(x, x); }), size);
      Value scale = div(real(1.0),
                        math::SqrtOp::create(b, loc, add(meanSquare, epsilon)));
      writeRow([&](Value x) { return mul(x, scale); });
      return;
    }
    Value centre = div(sumOver([&](Value x) { return x; }), size);
    Value variance = div(sumOver([&](Value x) {
                           Value d = sub(x, centre);
                           return mul(d, d);
                         }),
                         size);
    Value scale =
        div(real(1.0), math::SqrtOp::create(b, loc, add(variance, epsilon)));
    writeRow([&](Value x) { return mul(sub(x, centre), scale); });
  });
  return Lowered{Value(), data};
}

FailureOr<Lowered> KernelFunction::emitSupportCall(Operation *op,
                                                   Lowered operand,
                                                   ArrayType operandType) {
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

FailureOr<Lowered> KernelFunction::emitBatchMatmul(BatchMatmulOp product) {
  if (loopDepth > 0)
    return product.emitOpError(
        "is lowered to a support call once per statement, not in a loop");
  Value data = allocate(cast<ArrayType>(product.getType()));
  emitProducts(product, data, /*add=*/false);
  return Lowered{Value(), data};
}

AccumulateOp KernelFunction::addedInPlace(Operation *op) {
  auto accumulate = dyn_cast_or_null<AccumulateOp>(op->getNextNode());
  if (loopDepth > 0 || !accumulate || !op->hasOneUse() ||
      accumulate.getValue() != op->getResult(0) ||
      !accumulate.getIndices().empty())
    return AccumulateOp();
  auto matmul = dyn_cast<MatmulOp>(op);
  if (!isa<BatchMatmulOp>(op) &&
      !(matmul && cast<ArrayType>(matmul.getLhs().getType()).getRank() == 2 &&
        cast<ArrayType>(matmul.getRhs().getType()).getRank() == 2))
    return AccumulateOp();
  auto tensor =
      context.model.lookupSymbol<TensorOp>(accumulate.getTensorAttr());
  return tensor && tensor.getArrayType() == op->getResult(0).getType()
             ? accumulate
             : AccumulateOp();
}

void KernelFunction::emitProducts(Operation *op, Value into, bool add) {
  auto product = dyn_cast<BatchMatmulOp>(op);
  Value lhs = op->getOperand(0), rhs = op->getOperand(1);
  bool transposeLhs = product && product.getTransposeLhs();
  bool transposeRhs = product && product.getTransposeRhs();
  bool sum = product && product.getSumBatch();
  SmallVector<Value> lhsShape = shape(cast<ArrayType>(lhs.getType())),
                     rhsShape = shape(cast<ArrayType>(rhs.getType()));
  // An operand's matrix (its last two axes) and the elements between the
  // matrices of two positions of the batch (0 when it has no batch axis).
  auto matrixOf = [&](ArrayRef<Value> extents, bool transposed) {
    Value rows = extents[extents.size() - 2], columns = extents.back();
    return transposed ? std::pair(columns, rows) : std::pair(rows, columns);
  };
  auto strideOf = [&](ArrayRef<Value> extents) {
    return extents.size() == 3
               ? toI64(arith::MulIOp::create(b, loc, extents[1], extents[2]))
               : toI64(index(0));
  };
  // The rows of an lhs with several row axes are their positions (and, lhs
  // transposed, those of rhs's same row axes).
  int64_t lhsRows = product ? product.getLhsRows() : 1;
  bool lhsBatched = product ? product.hasLhsBatch() : lhsShape.size() == 3;
  auto flattenRows = [&](SmallVector<Value> &extents, bool batched) {
    Value rows = index(1);
    for (Value extent :
         ArrayRef<Value>(extents).take_back(lhsRows + 1).drop_back())
      rows = arith::MulIOp::create(b, loc, rows, extent);
    SmallVector<Value> flattened;
    if (batched)
      flattened.push_back(extents.front());
    flattened.push_back(rows);
    flattened.push_back(extents.back());
    extents = flattened;
  };
  if (lhsRows > 1) {
    flattenRows(lhsShape, lhsBatched);
    if (transposeLhs)
      flattenRows(rhsShape, product.hasRhsBatch());
  }
  auto [m, k] = matrixOf(lhsShape, transposeLhs);
  Value n = matrixOf(rhsShape, transposeRhs).second;
  Value batch = lhsBatched             ? lhsShape.front()
                : rhsShape.size() == 3 ? rhsShape.front()
                                       : index(1);
  int64_t flags = (transposeLhs ? ENERGY_PRODUCT_TRANSPOSE_A : 0) |
                  (transposeRhs ? ENERGY_PRODUCT_TRANSPOSE_B : 0) |
                  (sum ? ENERGY_PRODUCT_SUM_BATCH : 0) |
                  (add ? ENERGY_PRODUCT_ACCUMULATE : 0);
  callSupport(singlePrecision() ? ENERGY_SUPPORT_MATMUL_BATCH_F32
                                : ENERGY_SUPPORT_MATMUL_BATCH_F64,
              {toI64(batch), toI64(m), toI64(n), toI64(k), get(lhs).data,
               strideOf(lhsShape), get(rhs).data, strideOf(rhsShape), into,
               arith::ConstantIntOp::create(b, loc, flags, 64)});
}

FailureOr<Lowered> KernelFunction::emitMatmul(MatmulOp matmul) {
  auto type = cast<ArrayType>(matmul.getType());
  auto lhsType = cast<ArrayType>(matmul.getLhs().getType());
  auto rhsType = cast<ArrayType>(matmul.getRhs().getType());
  Lowered lhs = get(matmul.getLhs()), rhs = get(matmul.getRhs());
  SmallVector<Value> lhsShape = shape(lhsType);
  Value rows = lhsShape[0], inner = lhsShape[1];
  Value data = allocate(type);
  if (rhsType.getRank() == 1) {
    // Xᵀ v of a row-major X is Σ_k v[k] X[k, :]: rows of X scaled and
    // added, along X's rows, with no pass over its transpose.
    if (auto transpose = matmul.getLhs().getDefiningOp<TransposeOp>();
        transpose &&
        cast<ArrayType>(transpose.getOperand().getType()).getRank() == 2) {
      Value matrix = get(transpose.getOperand()).data;
      forRange(rows, [&](Value i) { store(real(0.0), data, i); });
      forRange(inner, [&](Value k) {
        Value row =
            offsetPointer(matrix, arith::MulIOp::create(b, loc, k, rows));
        addScaled(data, load(rhs.data, k), row, rows);
      });
      return Lowered{Value(), data};
    }
    forRange(rows, [&](Value i) {
      Value row =
          offsetPointer(lhs.data, arith::MulIOp::create(b, loc, i, inner));
      store(dotProduct(row, rhs.data, inner), data, i);
    });
    return Lowered{Value(), data};
  }
  Value columns = shape(rhsType)[1];
  // Once per statement, a tuned GEMM; per position of a loop, loops.
  if (loopDepth == 0) {
    callSupport(
        singlePrecision() ? ENERGY_SUPPORT_MATMUL_F32
                          : ENERGY_SUPPORT_MATMUL_F64,
        {toI64(rows), toI64(columns), toI64(inner), lhs.data, rhs.data, data});
    return Lowered{Value(), data};
  }
  // i, k, j order: the innermost loop runs along rows of rhs and of
  // the result, contiguously.
  forRange(elementCount(type),
           [&](Value position) { store(real(0.0), data, position); });
  forRange(rows, [&](Value i) {
    Value resultRow =
        offsetPointer(data, arith::MulIOp::create(b, loc, i, columns));
    forRange(inner, [&](Value k) {
      Value a = load(lhs.data,
                     arith::AddIOp::create(
                         b, loc, arith::MulIOp::create(b, loc, i, inner), k));
      Value rhsRow =
          offsetPointer(rhs.data, arith::MulIOp::create(b, loc, k, columns));
      addScaled(resultRow, a, rhsRow, columns);
    });
  });
  return Lowered{Value(), data};
}
