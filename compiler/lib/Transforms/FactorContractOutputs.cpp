//===- FactorContractOutputs.cpp - Linear maps out of contraction sums ----===//
//
// A contraction that sums both f(u) and f(u M), where u is a row of a table
// U read at some position, u M the same row of the product table U M, and f
// linear (a scalar factor), sums the second as (Σ w f(u)) M: one matrix
// product per output row after the contraction instead of the width of M
// more multiply-adds per pair. The backward step's second derivatives sum
// x, Wk x and s·x, s·Wk x and c, Wkᵀ c over the same weights.
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"
#include "Slices.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// An output of a contraction that another output of the same side
/// determines: result `output` is `product`'s matrix applied to result
/// `source` (result numbers of the op); `position` is its value's among the
/// side's.
struct Factored {
  unsigned position, output, source;
  BatchMatmulOp product;
};

/// The outputs of one side (values `values`, results `outputs`) that are a
/// matrix applied to another output of it; the sources are kept.
SmallVector<Factored> findFactored(ValueRange values, ResultRange outputs) {
  SmallVector<Factored> found;
  llvm::SmallDenseSet<unsigned> dropped, kept;
  for (auto [j, value] : llvm::enumerate(values)) {
    // f(u M): the factors may depend on u M, as long as f(u) reads the
    // same factors (then the sum over pairs of f(u M) is that of f(u)
    // times M).
    ExtractOp mapped = scaledRow(value, /*linear=*/false);
    auto product = mapped ? mapped.getSource().getDefiningOp<BatchMatmulOp>()
                          : BatchMatmulOp();
    if (!product || !isRowsTimesMatrix(product) || kept.contains(j))
      continue;
    for (auto [i, candidate] : llvm::enumerate(values)) {
      if (i == j || dropped.contains(i))
        continue;
      ExtractOp row = scaledRow(candidate, /*linear=*/true);
      // (CSE has not yet merged the reads of U.)
      if (!row || !computeSame(row.getSource(), product.getLhs(), {}) ||
          row.getMap() != mapped.getMap() ||
          !llvm::equal(row.getIndices(), mapped.getIndices()))
        continue;
      // f(u) and f(u M) with the same f.
      IRMapping substitution;
      substitution.map(row.getResult(), mapped.getResult());
      if (!computeSame(candidate, value, substitution))
        continue;
      // The output the product of the source's output must give.
      std::string reason;
      ArrayType type = BatchMatmulOp::inferType(
          cast<ArrayType>(outputs[i].getType()),
          cast<ArrayType>(product.getRhs().getType()), false,
          product.getTransposeRhs(), false, reason);
      if (type != outputs[j].getType())
        continue;
      found.push_back({static_cast<unsigned>(j), outputs[j].getResultNumber(),
                       outputs[i].getResultNumber(), product});
      dropped.insert(j);
      kept.insert(i);
      break;
    }
  }
  return found;
}

/// Drops the factored outputs of `op`, whose uses read the products of
/// their sources' outputs instead.
void factorOutputs(SoftmaxContractOp op) {
  SmallVector<Factored> rows =
      findFactored(op.getRowValues(), op.getRowOutputs());
  SmallVector<Factored> cols =
      findFactored(op.getColValues(), op.getColOutputs());
  if (rows.empty() && cols.empty())
    return;
  auto dropYielded = [](Region &region, ArrayRef<Factored> outputs) {
    auto yield = cast<YieldOp>(region.front().getTerminator());
    SmallVector<unsigned> positions;
    for (const Factored &f : outputs)
      positions.push_back(f.position);
    llvm::sort(positions, std::greater<unsigned>());
    for (unsigned position : positions)
      yield.getValuesMutable().erase(position);
  };
  dropYielded(op.getRowSums(), rows);
  dropYielded(op.getColSums(), cols);
  SmallVector<Factored> factored(rows);
  llvm::append_range(factored, cols);

  // The same op without the factored results.
  llvm::SmallDenseSet<unsigned> dropped;
  for (const Factored &f : factored)
    dropped.insert(f.output);
  OperationState state(op.getLoc(), op->getName());
  state.addOperands(op->getOperands());
  state.propertiesAttr = op->getPropertiesAsAttribute();
  for (Region &region : op->getRegions())
    state.addRegion()->takeBody(region);
  SmallVector<int> newNumber;
  for (OpResult result : op->getResults()) {
    bool isDropped = dropped.contains(result.getResultNumber());
    newNumber.push_back(isDropped ? -1 : int(state.types.size()));
    if (!isDropped)
      state.addTypes(result.getType());
  }
  OpBuilder builder(op);
  Operation *replacement = builder.create(state);
  for (OpResult result : op->getResults())
    if (int number = newNumber[result.getResultNumber()]; number >= 0)
      result.replaceAllUsesWith(replacement->getResult(number));
  for (Factored &f : factored) {
    Value output = op->getResult(f.output);
    Value product = BatchMatmulOp::create(
        builder, f.product.getLoc(), output.getType(),
        replacement->getResult(newNumber[f.source]), f.product.getRhs(),
        /*transpose_lhs=*/false, f.product.getTransposeRhs(),
        /*sum_batch=*/false);
    output.replaceAllUsesWith(product);
  }
  op.erase();
}

} // namespace

void mlir::energy::factorContractOutputs(ModelOp model) {
  SmallVector<SoftmaxContractOp> contracts;
  model.walk([&](SoftmaxContractOp op) { contracts.push_back(op); });
  for (SoftmaxContractOp op : contracts)
    factorOutputs(op);
}
