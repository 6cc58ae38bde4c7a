//===- OrderLseRows.cpp - The energy-order-lse-rows pass ------------------===//
//
// The indices of a sum whose summand is an lse over another index, in one
// order whatever order the model wrote them in: the batch axes the lse's
// column side reads (a sequence's, then a head's), then the row's own.
// That is the order in which the planning steps form one contraction per
// term and its column pass (tests/lit/Transforms/order-lse-rows.mlir).
//
//===----------------------------------------------------------------------===//

#include "energy/IR/EnergyOps.h"
#include "energy/Transforms/Dependence.h"
#include "energy/Transforms/Passes.h"

#include "llvm/ADT/SmallBitVector.h"

namespace mlir::energy {
#define GEN_PASS_DEF_ENERGYORDERLSEROWS
#include "energy/Transforms/Passes.h.inc"
} // namespace mlir::energy

using namespace mlir;
using namespace mlir::energy;

namespace {

/// The one lse over a single index in the body of `sum`, not inside another
/// loop there; null when there is none or more than one.
ReduceOp lseOf(ReduceOp sum) {
  ReduceOp found;
  unsigned count = 0;
  sum.getBody().walk([&](ReduceOp nested) {
    if (nested->getParentOp() != sum.getOperation())
      return;
    if (nested.getKind() == ReduceKind::lse && nested.getSizes().size() == 1) {
      found = nested;
      ++count;
    }
  });
  return count == 1 ? found : ReduceOp();
}

/// Whether `symbol` names a param (whose reads do not make an index a
/// sequence's batch axis).
bool isParam(ModelOp model, FlatSymbolRefAttr symbol) {
  auto tensor = model.lookupSymbol<TensorOp>(symbol);
  return tensor && tensor.getRole() == Role::param;
}

/// The order of `sum`'s indices (positions), or the identity when its
/// summand has no lse over another index: first the indices that values of
/// the lse's column side read without reading every index of the sum, the
/// ones that also index a state, an input or a let ahead of those that
/// index params only; then the others, each group in the written order.
SmallVector<unsigned> lseRowOrder(ReduceOp sum, ModelOp model) {
  Block &body = sum.getBody().front();
  unsigned count = body.getNumArguments();
  SmallVector<unsigned> order = llvm::to_vector(llvm::seq(0u, count));
  ReduceOp lse = lseOf(sum);
  if (!lse)
    return order;
  Value column = lse.getBody().front().getArgument(0);
  IndexDependence dependence(sum);
  auto positionsOf = [&](Value value) {
    llvm::SmallBitVector positions(count);
    const IndexDependence::IndexSet &indices = dependence.of(value);
    for (unsigned i = 0; i < count; ++i)
      if (indices.contains(body.getArgument(i)))
        positions.set(i);
    return positions;
  };
  llvm::SmallBitVector columnSide(count), sequences(count);
  lse.getBody().walk([&](Operation *op) {
    for (Value result : op->getResults()) {
      if (!dependence.of(result).contains(column))
        continue;
      llvm::SmallBitVector positions = positionsOf(result);
      if (!positions.all())
        columnSide |= positions;
    }
  });
  sum.getBody().walk([&](ReadOp read) {
    if (!isParam(model, read.getSourceAttr()))
      for (Value index : read.getIndices())
        sequences |= positionsOf(index);
  });
  if (columnSide.none() || columnSide.all())
    return order;
  order.clear();
  for (unsigned i = 0; i < count; ++i)
    if (columnSide.test(i) && sequences.test(i))
      order.push_back(i);
  for (unsigned i = 0; i < count; ++i)
    if (columnSide.test(i) && !sequences.test(i))
      order.push_back(i);
  for (unsigned i = 0; i < count; ++i)
    if (!columnSide.test(i))
      order.push_back(i);
  return order;
}

/// `sum` over its indices in `order` (positions of the old ones).
void permuteIndices(ReduceOp sum, ArrayRef<unsigned> order) {
  Block &body = sum.getBody().front();
  SmallVector<BlockArgument> old(body.getArguments());
  SmallVector<Attribute> sizes;
  for (unsigned position : order) {
    BlockArgument argument =
        body.addArgument(old[position].getType(), old[position].getLoc());
    old[position].replaceAllUsesWith(argument);
    sizes.push_back(sum.getSizes()[position]);
  }
  body.eraseArguments(0, old.size());
  sum.setSizesAttr(ArrayAttr::get(sum.getContext(), sizes));
}

struct OrderLseRowsPass
    : public mlir::energy::impl::EnergyOrderLseRowsBase<OrderLseRowsPass> {
  void runOnOperation() override {
    ModelOp model = getOperation();
    SmallVector<ReduceOp> sums;
    model.walk([&](ReduceOp sum) {
      if ((sum.getKind() == ReduceKind::sum ||
           sum.getKind() == ReduceKind::mean) &&
          sum.getSizes().size() >= 2 && !sum.hasPredicate() &&
          !sum.getTemperature() && !sum.getAggregation())
        sums.push_back(sum);
    });
    for (ReduceOp sum : sums) {
      SmallVector<unsigned> order = lseRowOrder(sum, model);
      if (!llvm::equal(order, llvm::seq(0u, unsigned(order.size()))))
        permuteIndices(sum, order);
    }
  }
};

} // namespace
