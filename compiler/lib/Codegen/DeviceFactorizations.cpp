//===- DeviceFactorizations.cpp - Factorisations as loops -----------------===//
//
// Cholesky's log determinant and Gauss-Jordan's inverse as scf loops over f64
// scratch, step for step the support library's (Factorizations.cpp), so
// that a GPU can run the loops around them. Nothing returns early: a failed
// pivot only makes the result NaN at the end.
//
//===----------------------------------------------------------------------===//

#include "DeviceFactorizations.h"

#include <limits>

using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::codegen;

namespace {
/// f64 arithmetic and memory, and counted loops, over a kernel's builder.
class F64Loops {
public:
  explicit F64Loops(KernelBuilder &kernel)
      : kernel(kernel), b(kernel.b), loc(kernel.loc) {}

  Value constant(double value) {
    return arith::ConstantOp::create(b, loc, b.getF64FloatAttr(value));
  }
  Value add(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubFOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return arith::DivFOp::create(b, loc, x, y); }
  Value magnitude(Value x) { return math::AbsFOp::create(b, loc, x); }
  Value greater(Value x, Value y) {
    return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, y);
  }
  Value either(Value x, Value y) { return arith::OrIOp::create(b, loc, x, y); }
  Value negate(Value condition) {
    Value one = arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1);
    return arith::XOrIOp::create(b, loc, condition, one);
  }
  Value indexAdd(Value x, Value y) {
    return arith::AddIOp::create(b, loc, x, y);
  }
  Value indexMul(Value x, Value y) {
    return arith::MulIOp::create(b, loc, x, y);
  }

  /// Element (row, column) of the `size`-wide f64 matrix at `base`.
  Value at(Value base, Value size, Value row, Value column) {
    return LLVM::GEPOp::create(
        b, loc, kernel.pointerType(), b.getF64Type(), base,
        ValueRange{kernel.toI64(indexAdd(indexMul(row, size), column))});
  }
  Value load(Value base, Value size, Value row, Value column) {
    return LLVM::LoadOp::create(b, loc, b.getF64Type(),
                                at(base, size, row, column));
  }
  void store(Value value, Value base, Value size, Value row, Value column) {
    LLVM::StoreOp::create(b, loc, value, at(base, size, row, column));
  }
  /// Element (row, column) of the element-type matrix at `base`, as f64.
  Value loadElement(Value base, Value size, Value row, Value column) {
    return kernel.toF64(
        kernel.load(base, indexAdd(indexMul(row, size), column)));
  }

  SmallVector<Value>
  loop(Value lower, Value upper, ValueRange carried,
       function_ref<SmallVector<Value>(Value, ValueRange)> body) {
    return kernel.forRange(lower, upper, carried, body);
  }
  void loop(Value lower, Value upper, function_ref<void(Value)> body) {
    kernel.forSteps(lower, upper, kernel.index(1), body);
  }
  /// Σ over k in [0, count) of term(k).
  Value sum(Value count, function_ref<Value(Value)> term) {
    return loop(kernel.index(0), count, {constant(0.0)},
                [&](Value k, ValueRange partial) {
                  return SmallVector<Value>{add(partial[0], term(k))};
                })[0];
  }
  /// NaN where `failed`, else `value`.
  Value nanIf(Value failed, Value value) {
    return arith::SelectOp::create(
        b, loc, failed, constant(std::numeric_limits<double>::quiet_NaN()),
        value);
  }
  /// The element type's value of an f64.
  Value toElement(Value value) {
    if (kernel.singlePrecision())
      return arith::TruncFOp::create(b, loc, kernel.context.elementType, value);
    return value;
  }

  KernelBuilder &kernel;
  OpBuilder &b;
  Location &loc;
};
} // namespace

Value codegen::emitLogDetLoops(KernelBuilder &kernel, ArrayType matrixType,
                               Value matrix) {
  F64Loops f(kernel);
  Value zero = kernel.index(0), one = kernel.index(1);
  Value size = kernel.shape(matrixType).back();
  Value factor = kernel.allocateElements(kernel.elementCount(matrixType),
                                         /*elementBytes=*/8);
  auto symmetric = [&](Value i, Value j) {
    return f.mul(f.constant(0.5), f.add(f.loadElement(matrix, size, i, j),
                                        f.loadElement(matrix, size, j, i)));
  };
  Value falseValue =
      arith::ConstantIntOp::create(f.b, f.loc, f.b.getI1Type(), 0);
  SmallVector<Value> results = f.loop(
      zero, size, {f.constant(0.0), falseValue},
      [&](Value j, ValueRange carried) {
        Value pivot = f.sub(symmetric(j, j), f.sum(j, [&](Value k) {
          Value entry = f.load(factor, size, j, k);
          return f.mul(entry, entry);
        }));
        Value failed =
            f.either(carried[1], f.negate(f.greater(pivot, f.constant(0.0))));
        Value diagonal = math::SqrtOp::create(f.b, f.loc, pivot);
        f.store(diagonal, factor, size, j, j);
        Value logDet =
            f.add(carried[0], f.mul(f.constant(2.0),
                                    math::LogOp::create(f.b, f.loc, diagonal)));
        f.loop(f.indexAdd(j, one), size, [&](Value i) {
          Value value = f.sub(symmetric(i, j), f.sum(j, [&](Value k) {
            return f.mul(f.load(factor, size, i, k),
                         f.load(factor, size, j, k));
          }));
          f.store(f.div(value, diagonal), factor, size, i, j);
        });
        return SmallVector<Value>{logDet, failed};
      });
  return f.toElement(f.nanIf(results[1], results[0]));
}

void codegen::emitInverseLoops(KernelBuilder &kernel, ArrayType matrixType,
                               Value matrix, Value inverse) {
  F64Loops f(kernel);
  Value zero = kernel.index(0), one = kernel.index(1);
  Value size = kernel.shape(matrixType).back();
  Value squares = kernel.elementCount(matrixType);
  Value work = kernel.allocateElements(squares, /*elementBytes=*/8);
  Value result = kernel.allocateElements(squares, /*elementBytes=*/8);
  // work = the matrix, result = I, scale = the largest magnitude.
  Value scale = f.loop(
      zero, size, {f.constant(0.0)}, [&](Value row, ValueRange rowCarried) {
        return f.loop(
            zero, size, {rowCarried[0]}, [&](Value column, ValueRange carried) {
              Value entry = f.loadElement(matrix, size, row, column);
              f.store(entry, work, size, row, column);
              Value isDiagonal = arith::CmpIOp::create(
                  f.b, f.loc, arith::CmpIPredicate::eq, row, column);
              f.store(arith::SelectOp::create(f.b, f.loc, isDiagonal,
                                              f.constant(1.0), f.constant(0.0)),
                      result, size, row, column);
              Value magnitude = f.magnitude(entry);
              return SmallVector<Value>{arith::SelectOp::create(
                  f.b, f.loc, f.greater(magnitude, carried[0]), magnitude,
                  carried[0])};
            });
      })[0];
  Value count =
      arith::SIToFPOp::create(f.b, f.loc, f.b.getF64Type(), kernel.toI64(size));
  Value tiny = f.mul(
      f.mul(count, f.constant(std::numeric_limits<double>::epsilon())), scale);
  auto swapRows = [&](Value table, Value first, Value second) {
    f.loop(zero, size, [&](Value k) {
      Value x = f.load(table, size, first, k);
      Value y = f.load(table, size, second, k);
      f.store(y, table, size, first, k);
      f.store(x, table, size, second, k);
    });
  };
  Value falseValue =
      arith::ConstantIntOp::create(f.b, f.loc, f.b.getI1Type(), 0);
  Value failed =
      f.loop(zero, size, {falseValue}, [&](Value column, ValueRange carried) {
        // The first row of the largest magnitude in the column, from it
        // down.
        Value pivotRow = f.loop(
            f.indexAdd(column, one), size, {column},
            [&](Value row, ValueRange best) {
              Value larger =
                  f.greater(f.magnitude(f.load(work, size, row, column)),
                            f.magnitude(f.load(work, size, best[0], column)));
              return SmallVector<Value>{
                  arith::SelectOp::create(f.b, f.loc, larger, row, best[0])};
            })[0];
        Value pivot = f.load(work, size, pivotRow, column);
        Value failedHere =
            f.either(carried[0], f.negate(f.greater(f.magnitude(pivot), tiny)));
        swapRows(work, column, pivotRow);
        swapRows(result, column, pivotRow);
        f.loop(zero, size, [&](Value k) {
          f.store(f.div(f.load(work, size, column, k), pivot), work, size,
                  column, k);
          f.store(f.div(f.load(result, size, column, k), pivot), result, size,
                  column, k);
        });
        f.loop(zero, size, [&](Value row) {
          Value other = arith::CmpIOp::create(
              f.b, f.loc, arith::CmpIPredicate::ne, row, column);
          auto eliminate = scf::IfOp::create(f.b, f.loc, other);
          OpBuilder::InsertionGuard guard(f.b);
          f.b.setInsertionPointToStart(eliminate.thenBlock());
          Value factor = f.load(work, size, row, column);
          f.loop(zero, size, [&](Value k) {
            f.store(f.sub(f.load(work, size, row, k),
                          f.mul(factor, f.load(work, size, column, k))),
                    work, size, row, k);
            f.store(f.sub(f.load(result, size, row, k),
                          f.mul(factor, f.load(result, size, column, k))),
                    result, size, row, k);
          });
        });
        return SmallVector<Value>{failedHere};
      })[0];
  f.loop(zero, size, [&](Value row) {
    f.loop(zero, size, [&](Value column) {
      Value value = f.nanIf(failed, f.load(result, size, row, column));
      kernel.store(f.toElement(value), inverse,
                   f.indexAdd(f.indexMul(row, size), column));
    });
  });
}
