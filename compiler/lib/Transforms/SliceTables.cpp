//===- SliceTables.cpp - A let's slice as a table of its elements ---------===//
//
// Differentiation inlines a read of a let's slice (q[b, i] of a let over
// (b, i, k)) as Σ_k embed(q's body at k into [k]), which it differentiates
// op by op. Planned, that sum is the table of the body over k: later steps
// hoist it, batch its products and read it whole, where a sum of one-hot
// arrays is a loop that adds a vector per element.
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"
#include "Slices.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::energy;

/// The embed that `sum` adds up when it is Σ_k embed(e_k into [k]) over its
/// own indices in order, with no predicate and plain dims; null otherwise.
static EmbedOp embeddedSlice(ReduceOp sum) {
  if (sum.getKind() != ReduceKind::sum || sum.hasPredicate() ||
      !hasPlainDims(sum.getSizes()))
    return {};
  Block &body = sum.getBody().front();
  auto embed = sum.getBodyValue().getDefiningOp<EmbedOp>();
  if (!embed || embed->getBlock() != &body ||
      embed.getType() != sum.getType() || !embed.getMap().isIdentity() ||
      !llvm::equal(embed.getIndices(), body.getArguments()))
    return {};
  return embed;
}

void mlir::energy::tabulateSlices(ModelOp model) {
  SmallVector<ReduceOp> sums;
  model.walk([&](ReduceOp sum) {
    if (embeddedSlice(sum))
      sums.push_back(sum);
  });
  for (ReduceOp sum : sums) {
    EmbedOp embed = embeddedSlice(sum);
    OpBuilder builder(sum);
    auto table = TabulateOp::create(builder, sum.getLoc(), sum.getType(),
                                    sum.getSizes());
    table.getBody().takeBody(sum.getBody());
    Block &body = table.getBody().front();
    body.getTerminator()->setOperand(0, embed.getValue());
    if (embed->use_empty())
      embed->erase();
    sum.replaceAllUsesWith(table.getResult());
    sum->erase();
  }
}
