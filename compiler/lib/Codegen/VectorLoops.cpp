//===- VectorLoops.cpp - Inner loops as explicit vectors ------------------===//
//
// The loops of kernels over contiguous elements (copies and accumulations,
// dot products, rows of matrix products and quadratic forms, a softmax
// contraction's weighted sums) run their trip count, a dim known only at
// run time, in vectors of 64 bytes and a scalar remainder. LLVM lowers the
// vectors to the widest registers the target CPU has (one AVX-512 register,
// or two AVX2 ones).
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"
#include "energy/Codegen/ParallelLoops.h"

#include <limits>

using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::codegen;

Value KernelBuilder::loadLanes(Value base, Value offset, int lanes) {
  if (lanes == 1)
    return load(base, offset);
  auto type = VectorType::get({lanes}, context.elementType);
  // Elements are aligned to their own size only.
  return LLVM::LoadOp::create(b, loc, type, offsetPointer(base, offset),
                              context.elementType.getWidth() / 8);
}

void KernelBuilder::storeLanes(Value value, Value base, Value offset,
                               int lanes) {
  if (lanes == 1)
    return store(value, base, offset);
  LLVM::StoreOp::create(b, loc, value, offsetPointer(base, offset),
                        context.elementType.getWidth() / 8);
}

Value KernelBuilder::splat(Value scalar, int lanes) {
  if (lanes == 1)
    return scalar;
  return vector::BroadcastOp::create(
      b, loc, VectorType::get({lanes}, context.elementType), scalar);
}

void KernelBuilder::forLanes(Value count, function_ref<void(Value, int)> body) {
  int lanes = vectorLanes();
  if (lanes == 1) {
    markElementwise(
        forSteps(index(0), count, index(1), [&](Value at) { body(at, 1); }));
    return;
  }
  Value full = arith::MulIOp::create(
      b, loc, arith::DivUIOp::create(b, loc, count, index(lanes)),
      index(lanes));
  // The remainder loop follows the vector loop directly (markElementwise).
  Value one = index(1);
  scf::ForOp vectors = forSteps(index(0), full, index(lanes),
                                [&](Value offset) { body(offset, lanes); });
  scf::ForOp tail =
      forSteps(full, count, one, [&](Value offset) { body(offset, 1); });
  markElementwise(vectors, tail);
}

Value KernelBuilder::foldLanes(Value count, Value identity,
                               function_ref<Value(Value, Value)> combine,
                               function_ref<Value(Value)> horizontal,
                               function_ref<Value(Value, int)> term) {
  int lanes = vectorLanes();
  Value full = index(0), total = identity;
  if (lanes == 1)
    return foldScalars(full, count, total, combine, term);
  full = arith::MulIOp::create(
      b, loc, arith::DivUIOp::create(b, loc, count, index(lanes)),
      index(lanes));
  auto vectors = scf::ForOp::create(b, loc, index(0), full, index(lanes),
                                    ValueRange{splat(identity, lanes)});
  dropImplicitYield(vectors);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(vectors.getBody());
    Value next = combine(vectors.getRegionIterArgs()[0],
                         term(vectors.getInductionVar(), lanes));
    scf::YieldOp::create(b, loc, next);
  }
  total = horizontal(vectors.getResult(0));
  return foldScalars(full, count, total, combine, term);
}

Value KernelBuilder::foldScalars(Value from, Value count, Value initial,
                                 function_ref<Value(Value, Value)> combine,
                                 function_ref<Value(Value, int)> term) {
  auto scalars =
      scf::ForOp::create(b, loc, from, count, index(1), ValueRange{initial});
  dropImplicitYield(scalars);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(scalars.getBody());
  Value next = combine(scalars.getRegionIterArgs()[0],
                       term(scalars.getInductionVar(), 1));
  scf::YieldOp::create(b, loc, next);
  return scalars.getResult(0);
}

Value KernelBuilder::sumLanes(Value count,
                              function_ref<Value(Value, int)> term) {
  return foldLanes(
      count, real(0.0), [&](Value x, Value y) { return add(x, y); },
      [&](Value lanes) {
        return vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD,
                                           lanes, Value(),
                                           fastMath().getValue())
            .getResult();
      },
      term);
}

Value KernelBuilder::maxLanes(Value count,
                              function_ref<Value(Value, int)> term) {
  // Halves until one lane is left: log2(lanes) vector steps, where LLVM
  // expands a horizontal maxnum into a scalar step per lane.
  auto halving = [&](Value lanes) {
    for (int width = vectorLanes() / 2; width >= 1; width /= 2) {
      Value low = vector::ExtractStridedSliceOp::create(b, loc, lanes, {0},
                                                        {width}, {1});
      Value high = vector::ExtractStridedSliceOp::create(b, loc, lanes, {width},
                                                         {width}, {1});
      lanes = largerOf(low, high);
    }
    return vector::ExtractOp::create(b, loc, lanes, ArrayRef<int64_t>{0})
        .getResult();
  };
  return foldLanes(
      count, real(-std::numeric_limits<double>::infinity()),
      [&](Value x, Value y) { return largerOf(x, y); }, halving, term);
}

void KernelBuilder::addScaled(Value y, Value a, Value x, Value count) {
  forLanes(count, [&](Value offset, int lanes) {
    Value sum = add(loadLanes(y, offset, lanes),
                    mul(splat(a, lanes), loadLanes(x, offset, lanes)));
    storeLanes(sum, y, offset, lanes);
  });
}

Value KernelBuilder::dotProduct(Value x, Value y, Value count) {
  return sumLanes(count, [&](Value offset, int lanes) {
    return mul(loadLanes(x, offset, lanes), loadLanes(y, offset, lanes));
  });
}
