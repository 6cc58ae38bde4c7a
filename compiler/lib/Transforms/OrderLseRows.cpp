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
#include "energy/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Transforms/RegionUtils.h"

#include "llvm/ADT/SetVector.h"
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

/// The indices of the sum and its lse (block arguments) that `value` reads
/// tensors at, through the ops that compute it; positions as numbers
/// (to_real and index arithmetic: ALiBi's m[k] · (i − j)) do not count, so
/// that a term of the score that pairs the row with the column by position
/// alone is no value of the column side. Memoised in `known`.
const llvm::SmallPtrSet<Value, 4> &
readIndices(Value value, Block &sumBody, Block &lseBody,
            DenseMap<Value, llvm::SmallPtrSet<Value, 4>> &known) {
  if (auto found = known.find(value); found != known.end())
    return found->second;
  llvm::SmallPtrSet<Value, 4> indices;
  auto addIndexArguments = [&](Value index, auto &self) -> void {
    if (auto argument = dyn_cast<BlockArgument>(index)) {
      if (argument.getOwner() == &sumBody || argument.getOwner() == &lseBody)
        indices.insert(argument);
      return;
    }
    if (Operation *def = index.getDefiningOp())
      for (Value operand : def->getOperands())
        self(operand, self);
  };
  Operation *def = value.getDefiningOp();
  if (isa<BlockArgument>(value)) {
    addIndexArguments(value, addIndexArguments);
  } else if (def && !isa<ToRealOp>(def) &&
             !isa_and_nonnull<arith::ArithDialect>(def->getDialect())) {
    if (auto read = dyn_cast<ReadOp>(def)) {
      for (Value index : read.getIndices())
        addIndexArguments(index, addIndexArguments);
    } else {
      llvm::SetVector<Value> used(def->getOperands().begin(),
                                  def->getOperands().end());
      getUsedValuesDefinedAbove(def->getRegions(), used);
      for (Value operand : used)
        for (Value index : readIndices(operand, sumBody, lseBody, known))
          indices.insert(index);
    }
  }
  return known[value] = std::move(indices);
}

/// The order of `sum`'s indices (positions), or the identity when its
/// summand has no lse over another index: first the indices at which the
/// values of the lse's column side read tensors (those that read at the
/// column but not at every index of the sum), the ones that also index a
/// state, an input or a let ahead of those that index params only; then
/// the others, each group in the written order.
SmallVector<unsigned> lseRowOrder(ReduceOp sum, ModelOp model) {
  Block &body = sum.getBody().front();
  unsigned count = body.getNumArguments();
  SmallVector<unsigned> order = llvm::to_vector(llvm::seq(0u, count));
  ReduceOp lse = lseOf(sum);
  if (!lse)
    return order;
  Block &lseBody = lse.getBody().front();
  Value column = lseBody.getArgument(0);
  DenseMap<Value, llvm::SmallPtrSet<Value, 4>> known;
  auto positionsOf = [&](const llvm::SmallPtrSet<Value, 4> &indices) {
    llvm::SmallBitVector positions(count);
    for (unsigned i = 0; i < count; ++i)
      if (indices.contains(body.getArgument(i)))
        positions.set(i);
    return positions;
  };
  llvm::SmallBitVector columnSide(count), sequences(count);
  lseBody.walk([&](Operation *op) {
    for (Value result : op->getResults()) {
      const auto &indices = readIndices(result, body, lseBody, known);
      if (!indices.contains(column))
        continue;
      llvm::SmallBitVector positions = positionsOf(indices);
      if (!positions.all())
        columnSide |= positions;
    }
  });
  sum.getBody().walk([&](ReadOp read) {
    if (!isParam(model, read.getSourceAttr()))
      sequences |= positionsOf(readIndices(read, body, lseBody, known));
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
