//===- ReduceCanonicalization.cpp - Reductions of invariant bodies --------===//
//
// A sum over an index domain whose body does not depend on the indices is
// the body's value times the domain's size: the count a mean divides by,
// left by differentiation as a loop that adds 1, becomes a product of dims.
// A sum or mean of zeros, under any predicate, is zero: differentiation
// leaves them where a body's derivative is 0 (a step, a maximum's ties).
//
//===----------------------------------------------------------------------===//

#include "energy/IR/EnergyOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::energy;

namespace {
struct SumOfInvariantBody : OpRewritePattern<ReduceOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ReduceOp sum,
                                PatternRewriter &rewriter) const override {
    if (sum.getKind() != ReduceKind::sum || sum.hasPredicate())
      return failure();
    Value value = sum.getBodyValue();
    if (sum.getBody().isAncestor(value.getParentRegion()))
      return failure();
    Location loc = sum.getLoc();
    Value count;
    for (Attribute size : sum.getSizes()) {
      Value extent = SizeOp::create(rewriter, loc, rewriter.getIndexType(),
                                    cast<DimExprAttr>(size));
      count =
          count
              ? arith::MulIOp::create(rewriter, loc, count, extent).getResult()
              : extent;
    }
    Value real = ToRealOp::create(rewriter, loc,
                                  ArrayType::getScalar(getContext()), count);
    rewriter.replaceOpWithNewOp<MulOp>(sum, sum.getType(), value, real);
    return success();
  }
};

struct SumOfZeros : OpRewritePattern<ReduceOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ReduceOp sum,
                                PatternRewriter &rewriter) const override {
    if (sum.getKind() != ReduceKind::sum && sum.getKind() != ReduceKind::mean)
      return failure();
    Value value = sum.getBodyValue();
    if (sum.getBody().isAncestor(value.getParentRegion()) ||
        !isConstantOf(value, 0.0) || value.getType() != sum.getType())
      return failure();
    rewriter.replaceOp(sum, value);
    return success();
  }
};
} // namespace

void ReduceOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                           MLIRContext *context) {
  patterns.add<SumOfZeros, SumOfInvariantBody>(context);
}
