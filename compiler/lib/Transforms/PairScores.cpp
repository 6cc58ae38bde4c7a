//===- PairScores.cpp - The scores of a stored table of pairs as GEMMs
//-----===//
//
// A table over pairs of positions that the plan stores whole (the weights
// σ(s_ij) of sigmoid attention that a batch of products then sums, one
// table per head and sequence) computes each pair's score as a dot product
// of two rows, 2·Y flops a pair at a vector unit's dot-product rate. The
// scores of every pair are one batch of products of the two tables of rows,
// B Aᵀ per head, computed ahead of the table at a GEMM's rate; the table
// then reads its score.
//
//===----------------------------------------------------------------------===//

#include "BatchedProducts.h"
#include "PlanKernels.h"
#include "Slices.h"

#include "energy/Transforms/Dependence.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// The indices of blocks inside `table` (its own included) that `value`
/// varies with.
llvm::SmallPtrSet<Value, 4> indicesOf(Value value, TabulateOp table) {
  llvm::SmallPtrSet<Value, 4> used;
  collectIndices(value, table, used);
  return used;
}

/// A score dot(a, b) in `inner`'s body, a (`row`) a row of the heads and
/// the inner index i, b (`columnRow`) a row of the heads and one outer
/// index j (`column`): the heads are the outer indices both vary with, in
/// the outer table's order.
struct PairScore {
  DotOp dot;
  SmallVector<Value> heads;
  Value column;
  Value row, columnRow;
};

std::optional<PairScore> pairScoreOf(DotOp dot, TabulateOp table,
                                     TabulateOp inner) {
  Block &outer = table.getBody().front();
  Value rowIndex = inner.getBody().front().getArgument(0);
  for (auto [row, columnRow] : {std::pair(dot.getLhs(), dot.getRhs()),
                                std::pair(dot.getRhs(), dot.getLhs())}) {
    if (cast<ArrayType>(row.getType()).getRank() != 1)
      return std::nullopt;
    llvm::SmallPtrSet<Value, 4> rowIndices = indicesOf(row, table);
    llvm::SmallPtrSet<Value, 4> columnIndices = indicesOf(columnRow, table);
    if (!rowIndices.contains(rowIndex) || columnIndices.contains(rowIndex))
      continue;
    PairScore score{dot, {}, Value(), row, columnRow};
    bool fits = true;
    for (BlockArgument index : outer.getArguments()) {
      bool ofRow = rowIndices.contains(index);
      bool ofColumn = columnIndices.contains(index);
      if (ofRow && ofColumn)
        score.heads.push_back(index);
      else if (ofColumn && !score.column)
        score.column = index;
      else if (ofRow || ofColumn)
        fits = false;
    }
    // Each side varies with the heads and its own index alone.
    if (fits && score.column && rowIndices.size() == score.heads.size() + 1 &&
        columnIndices.size() == score.heads.size() + 1)
      return score;
  }
  return std::nullopt;
}

} // namespace

bool mlir::energy::batchPairScores(TabulateOp table) {
  if (!isStatement(table) || !hasPlainDims(table.getSizes()))
    return false;
  Block &outer = table.getBody().front();
  auto inner = table.getBodyValue().getDefiningOp<TabulateOp>();
  if (!inner || inner->getBlock() != &outer || inner.getSizes().size() != 1 ||
      !hasPlainDims(inner.getSizes()))
    return false;
  Block &innerBody = inner.getBody().front();
  Value rowIndex = innerBody.getArgument(0);
  Attribute rowSize = inner.getSizes()[0];
  SmallVector<PairScore> scores;
  for (Operation &op : innerBody.without_terminator())
    if (auto dot = dyn_cast<DotOp>(op))
      if (std::optional<PairScore> score = pairScoreOf(dot, table, inner))
        scores.push_back(*score);
  MLIRContext *context = table.getContext();
  bool rewrote = false;
  for (PairScore &score : scores) {
    auto sizeOf = [&](Value index) {
      return table.getSizes()[cast<BlockArgument>(index).getArgNumber()];
    };
    SmallVector<Value> rowAxes(score.heads), columnAxes(score.heads);
    SmallVector<Attribute> rowSizes, columnSizes;
    for (Value head : score.heads) {
      rowSizes.push_back(sizeOf(head));
      columnSizes.push_back(sizeOf(head));
    }
    rowAxes.push_back(rowIndex);
    rowSizes.push_back(rowSize);
    columnAxes.push_back(score.column);
    columnSizes.push_back(sizeOf(score.column));
    Value rows =
        arrayOver(score.row, rowAxes, rowSizes, {&outer, &innerBody}, table);
    Value columns =
        arrayOver(score.columnRow, columnAxes, columnSizes, {&outer}, table);
    int64_t batchAxes = std::max<int64_t>(score.heads.size(), 1);
    std::string reason;
    ArrayType type = BatchMatmulOp::inferType(
        cast<ArrayType>(columns.getType()), cast<ArrayType>(rows.getType()),
        false, true, false, reason, 1, batchAxes);
    if (!type) {
      for (Value made : {columns, rows})
        if (Operation *def = made.getDefiningOp();
            def && isa<TabulateOp>(def) && def->use_empty())
          def->erase();
      continue;
    }
    OpBuilder before(table);
    Value products =
        BatchMatmulOp::create(before, score.dot.getLoc(), type, columns, rows,
                              false, true, false, 1, batchAxes);
    OpBuilder inside(score.dot);
    SmallVector<Value> at(score.heads);
    at.push_back(score.column);
    at.push_back(rowIndex);
    Value element =
        ExtractOp::create(inside, score.dot.getLoc(),
                          cast<ArrayType>(score.dot.getType()), products,
                          AffineMapAttr::get(AffineMap::getMultiDimIdentityMap(
                              at.size(), context)),
                          at);
    score.dot.getResult().replaceAllUsesWith(element);
    score.dot.erase();
    rewrote = true;
  }
  if (rewrote) {
    eraseDeadOps(innerBody);
    eraseDeadOps(outer);
  }
  return rewrote;
}
