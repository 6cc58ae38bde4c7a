//===- GatherGradients.cpp - Sums instead of repeated accumulations -------===//
//
// Rewrites accumulations that add into one slot at every position of a loop
// into one accumulation of a sum, and takes loop-invariant linear factors
// out of that sum.
//
//===----------------------------------------------------------------------===//

#include "energy/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::energy {
#define GEN_PASS_DEF_ENERGYGATHERGRADIENTS
#include "energy/Transforms/Passes.h.inc"
} // namespace mlir::energy

using namespace mlir;
using namespace mlir::energy;

namespace {
/// Whether `value` is defined outside `loop`.
bool isOutside(Value value, Operation *loop) {
  return !loop->isAncestor(value.getParentRegion()->getParentOp());
}

/// Σ_p M v_p = M Σ_p v_p and Σ_p c v_p = c Σ_p v_p for M, c invariant in
/// `sum`: rewrites the body's yield and returns the value to use for the
/// whole sum (after `sum`).
Value pullOutLinearFactor(ReduceOp sum, OpBuilder &builder) {
  Block &body = sum.getBody().front();
  auto yield = cast<YieldOp>(body.getTerminator());
  Value summand = yield.getValues()[0];
  Operation *op = summand.getDefiningOp();
  Value factor, inner;
  bool matrix = false;
  if (auto matmul = dyn_cast_or_null<MatmulOp>(op);
      matmul && isOutside(matmul.getLhs(), sum) &&
      cast<ArrayType>(matmul.getRhs().getType()).getRank() == 1) {
    factor = matmul.getLhs();
    inner = matmul.getRhs();
    matrix = true;
  } else if (auto mul = dyn_cast_or_null<MulOp>(op);
             mul && isOutside(mul.getLhs(), sum) &&
             cast<ArrayType>(mul.getLhs().getType()).isScalar() &&
             mul.getRhs().getType() == mul.getType()) {
    factor = mul.getLhs();
    inner = mul.getRhs();
  } else if (mul && isOutside(mul.getRhs(), sum) &&
             cast<ArrayType>(mul.getRhs().getType()).isScalar() &&
             mul.getLhs().getType() == mul.getType()) {
    factor = mul.getRhs();
    inner = mul.getLhs();
  }
  if (!factor)
    return sum.getResult();
  // The sum now sums `inner`; the factor applies to the result.
  yield->setOperands(inner);
  sum.getResult().setType(inner.getType());
  if (op->use_empty())
    op->erase();
  Value total = sum.getResult();
  Value outer =
      matrix
          ? MatmulOp::create(builder, sum.getLoc(), factor, total).getResult()
          : MulOp::create(builder, sum.getLoc(), factor, total).getResult();
  return outer;
}

struct GatherGradientsPass
    : public energy::impl::EnergyGatherGradientsBase<GatherGradientsPass> {
  void runOnOperation() override {
    SmallVector<ForeachOp> loops;
    getOperation().walk([&](ForeachOp loop) { loops.push_back(loop); });
    for (ForeachOp loop : loops)
      gather(loop);
  }

  void gather(ForeachOp loop) {
    Block &body = loop.getBody().front();
    SmallVector<AccumulateOp> invariant;
    for (AccumulateOp accumulate : body.getOps<AccumulateOp>())
      if (llvm::all_of(accumulate.getIndices(),
                       [&](Value index) { return isOutside(index, loop); }))
        invariant.push_back(accumulate);
    for (AccumulateOp accumulate : invariant) {
      // sum = Σ over the loop's domain of the accumulated value.
      OpBuilder builder(loop);
      Value value = accumulate.getValue();
      auto sum = ReduceOp::create(builder, loop.getLoc(), value.getType(),
                                  ReduceKind::sum, loop.getSizes(), Value());
      IRMapping mapping;
      loop.getPredicate().cloneInto(&sum.getPredicate(), mapping);
      Block &sumBody = sum.getBody().emplaceBlock();
      for (BlockArgument argument : body.getArguments())
        mapping.map(argument,
                    sumBody.addArgument(argument.getType(), argument.getLoc()));
      // The ops of the loop body that the value needs, in order.
      llvm::SetVector<Operation *> slice;
      std::function<void(Value)> collect = [&](Value v) {
        Operation *def = v.getDefiningOp();
        if (!def || def->getBlock() != &body || slice.contains(def))
          return;
        for (Value operand : def->getOperands())
          collect(operand);
        def->walk([&](Operation *nested) {
          for (Value operand : nested->getOperands())
            collect(operand);
        });
        slice.insert(def);
      };
      collect(value);
      OpBuilder inner = OpBuilder::atBlockEnd(&sumBody);
      for (Operation &op : body)
        if (slice.contains(&op))
          inner.clone(op, mapping);
      YieldOp::create(inner, loop.getLoc(), mapping.lookupOrDefault(value));
      moveLoopInvariantCode(cast<LoopLikeOpInterface>(sum.getOperation()));
      builder.setInsertionPointAfter(sum);
      Value total = pullOutLinearFactor(sum, builder);
      AccumulateOp::create(builder, accumulate.getLoc(), total,
                           accumulate.getTensorAttr(), accumulate.getMapAttr(),
                           accumulate.getIndices());
      accumulate.erase();
    }
    // A loop left without effects computes nothing.
    if (!invariant.empty() && body.getOps<AccumulateOp>().empty() &&
        body.getOps<ForeachOp>().empty())
      loop.erase();
  }
};
} // namespace
