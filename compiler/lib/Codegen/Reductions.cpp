//===- Reductions.cpp - Index-domain reductions in kernels ----------------===//
//
// Sums, means, maxima and log-sum-exps over index domains, in the order of
// their domain; sums marked parallel run in fixed chunks of their first
// index, added in chunk order, so that results do not depend on the number
// of threads.
//
//===----------------------------------------------------------------------===//

#include "KernelLowering.h"
#include "energy/Codegen/ParallelLoops.h"

#include <limits>

using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::codegen;

namespace {
class ReductionLowering : public KernelLowering {
public:
  explicit ReductionLowering(KernelLowering &kernel) : KernelLowering(kernel) {}

  FailureOr<Lowered> emitReduce(ReduceOp reduce);
  /// A reduction in the order of its domain, on one thread.
  FailureOr<Lowered> emitReduceInOrder(ReduceOp reduce, FirstAxis first = {});
};
} // namespace

FailureOr<Lowered> ReductionLowering::emitReduce(ReduceOp reduce) {
  if (reduce.getKind() == ReduceKind::custom)
    return reduce.emitOpError(
        "of a plugin aggregation reaches code generation; energy-plan-kernels "
        "turns it into energy.aggregate of a table");
  if (frame.loopDepth > 0 || !reduce.getParallel())
    return emitReduceInOrder(reduce);
  // A sum outside every loop: fixed chunks of the first axis, summed on the
  // thread pool, then added in chunk order, so that the result does not
  // depend on the number of threads.
  // At least 64 positions a chunk, at most 256 chunks (for a CPU's
  // threads; a GPU's thousands get a chunk per position, up to 2^16), and
  // partial sums of at most 2^20 elements in all: memory that does not grow
  // with the domain.
  const int64_t kMinPositionsPerChunk = deviceLoops() ? 1 : 64,
                kMaxChunks = deviceLoops() ? int64_t(1) << 16 : 256;
  constexpr int64_t kMaxPartialElements = int64_t(1) << 20;
  auto type = cast<ArrayType>(reduce.getType());
  Value extent, chunks, size, partials, positionsPerChunk;
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(frame.entryAnchor);
    extent = arith::MaxSIOp::create(
        b, loc, dimExpr(cast<DimExprAttr>(reduce.getSizes()[0])), index(0));
    size = elementCount(type);
    Value byMemory = arith::MaxSIOp::create(
        b, loc,
        arith::DivSIOp::create(b, loc, index(kMaxPartialElements),
                               arith::MaxSIOp::create(b, loc, size, index(1))),
        index(1));
    chunks = arith::CeilDivSIOp::create(b, loc, extent,
                                        index(kMinPositionsPerChunk));
    chunks = arith::MinSIOp::create(b, loc, chunks, index(kMaxChunks));
    chunks = arith::MinSIOp::create(b, loc, chunks, byMemory);
    chunks = arith::MaxSIOp::create(b, loc, chunks, index(1));
    positionsPerChunk = arith::CeilDivSIOp::create(b, loc, extent, chunks);
    partials = allocateElements(arith::MulIOp::create(b, loc, chunks, size));
  }
  auto partialOf = [&](Value chunk) {
    return offsetPointer(partials, arith::MulIOp::create(b, loc, chunk, size));
  };
  auto loop = scf::ForOp::create(b, loc, index(0), chunks, index(1));
  markParallel(loop);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(loop.getBody()->getTerminator());
    Value start = arith::MinSIOp::create(
        b, loc,
        arith::MulIOp::create(b, loc, loop.getInductionVar(),
                              positionsPerChunk),
        extent);
    Value end = arith::MinSIOp::create(
        b, loc, arith::AddIOp::create(b, loc, start, positionsPerChunk),
        extent);
    FailureOr<Lowered> partial =
        emitReduceInOrder(reduce, FirstAxis::chunk(start, end));
    if (failed(partial))
      return failure();
    copyInto(*partial, type, partialOf(loop.getInductionVar()),
             /*accumulate=*/false);
  }
  if (type.isScalar()) {
    Value total = forRange(chunks, ValueRange{real(0.0)},
                           [&](Value chunk, ValueRange sum) {
                             return SmallVector<Value>{
                                 add(sum[0], load(partialOf(chunk), index(0)))};
                           })
                      .front();
    return Lowered{total, Value()};
  }
  Value total = allocate(type);
  sumChunks(partials, chunks, size, total);
  return Lowered{Value(), total};
}

FailureOr<Lowered> ReductionLowering::emitReduceInOrder(ReduceOp reduce,
                                                        FirstAxis axis) {
  auto type = cast<ArrayType>(reduce.getType());
  ReduceKind kind = reduce.getKind();
  Value negInf = real(-std::numeric_limits<double>::infinity());
  Value zero = real(0.0);
  Value temperature =
      reduce.getTemperature() ? get(reduce.getTemperature()).scalar : Value();
  bool scalar = type.isScalar();
  // Per element: the running value (sum, max, or the lse's running max) and,
  // for lse, the running sum of exp(v − max). Scalars are carried in
  // registers, arrays in scratch buffers.
  Value count = scalar ? index(1) : elementCount(type);
  Value first = scalar ? Value() : allocate(type);
  Value second = (scalar || kind != ReduceKind::lse) ? Value() : allocate(type);
  Value initial =
      (kind == ReduceKind::max || kind == ReduceKind::lse) ? negInf : zero;
  // The admitted positions, counted as an index: a float count would stop
  // growing at 2^24 in f32.
  SmallVector<Value> carried = {index(0)};
  if (scalar) {
    carried.push_back(initial);
    if (kind == ReduceKind::lse)
      carried.push_back(zero);
  } else {
    forElements(count, [&](Value i) {
      store(initial, first, i);
      if (second)
        store(zero, second, i);
    });
  }
  // Folds one value into (running, sum); returns the new pair.
  auto fold = [&](Value value, Value running,
                  Value sum) -> std::pair<Value, Value> {
    switch (kind) {
    case ReduceKind::sum:
    case ReduceKind::mean:
      return {add(running, value), Value()};
    case ReduceKind::max:
      return {maximum(running, value), Value()};
    case ReduceKind::lse: {
      if (temperature)
        value = div(value, temperature);
      Value largest = maximum(running, value);
      Value scale = select(cmp(arith::CmpFPredicate::OEQ, running, negInf),
                           zero, exp(sub(running, largest)));
      Value term = select(cmp(arith::CmpFPredicate::OEQ, value, negInf), zero,
                          exp(sub(value, largest)));
      return {largest, add(mul(sum, scale), term)};
    }
    case ReduceKind::custom:
      break;
    }
    return {Value(), Value()};
  };
  FailureOr<SmallVector<Value>> result = forDomain(
      reduce.getSizes(), reduce.getPredicate(), carried,
      [&](ValueRange indices,
          ValueRange state) -> FailureOr<SmallVector<Value>> {
        FailureOr<SmallVector<Value>> body =
            emitBlock(reduce.getBody().front(), indices);
        if (failed(body))
          return failure();
        SmallVector<Value> next = {
            arith::AddIOp::create(b, loc, state[0], index(1)).getResult()};
        if (scalar) {
          auto [running, sum] =
              fold(body->front(), state[1],
                   kind == ReduceKind::lse ? state[2] : Value());
          next.push_back(running);
          if (sum)
            next.push_back(sum);
          return next;
        }
        Value values = body->front();
        forRange(count, [&](Value i) {
          auto [running, sum] = fold(load(values, i), load(first, i),
                                     second ? load(second, i) : Value());
          store(running, first, i);
          if (sum)
            store(sum, second, i);
        });
        return next;
      },
      axis);
  if (failed(result))
    return failure();
  Value admitted = (*result)[0];
  Value empty = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                      admitted, index(0));
  // The finished value of one element; an empty domain gives 0.
  auto finish = [&](Value running, Value sum) {
    Value value = running;
    if (kind == ReduceKind::mean)
      value = div(running, arith::SIToFPOp::create(b, loc, context.elementType,
                                                   toI64(admitted)));
    if (kind == ReduceKind::lse) {
      value = add(running, log(sum));
      if (temperature)
        value = mul(value, temperature);
    }
    return select(empty, zero, value);
  };
  if (scalar)
    return Lowered{
        finish((*result)[1], kind == ReduceKind::lse ? (*result)[2] : Value()),
        Value()};
  forElements(count, [&](Value i) {
    store(finish(load(first, i), second ? load(second, i) : Value()), first, i);
  });
  return Lowered{Value(), first};
}

void codegen::populateReductionLowerings(KernelLoweringPatterns &patterns) {
  patterns.addArrayOps<ReductionLowering, ReduceOp>(
      &ReductionLowering::emitReduce);
}
