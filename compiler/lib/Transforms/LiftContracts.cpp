//===- LiftContracts.cpp - Contractions over the loops around them --------===//
//
// A contraction computed inside a loop, once per position of the loop's
// indices (the heads' contraction inside a loop over tokens), is one
// contraction ahead of the loop whose rows are the indices it uses and
// then its own: the loop reads its results at its position. What the
// regions then need per pair but depends on fewer indices is tabulated by
// energy-plan-contract-tables.
//
//===----------------------------------------------------------------------===//

#include "ContractBuilder.h"
#include "PlanKernels.h"
#include "Slices.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Sequence.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// The loop a contraction is directly in, with its domain and body, when
/// it is one the contraction can be lifted over.
struct EnclosingLoop {
  Operation *op = nullptr;
  ArrayAttr sizes;
  Block *body = nullptr;
};

EnclosingLoop enclosingLoop(SoftmaxContractOp contract) {
  Operation *parent = contract->getParentOp();
  EnclosingLoop loop;
  if (auto foreach = dyn_cast<ForeachOp>(parent);
      foreach && !foreach.hasPredicate()) {
    loop.sizes = foreach.getSizes();
    loop.body = &foreach.getBody().front();
  } else if (auto reduce = dyn_cast<ReduceOp>(parent);
             reduce && !reduce.hasPredicate()) {
    loop.sizes = reduce.getSizes();
    loop.body = &reduce.getBody().front();
  } else if (auto table = dyn_cast<TabulateOp>(parent)) {
    loop.sizes = table.getSizes();
    loop.body = &table.getBody().front();
  }
  if (!loop.body || !hasPlainDims(loop.sizes) ||
      loop.body != contract->getBlock())
    return {};
  loop.op = parent;
  return loop;
}

/// The order of the lifted contraction's rows, as positions among the
/// loop's indices (first) and the contraction's rows: the rows that values
/// of the column side use without using every row (the column table's
/// batch axes) lead, so that the column side is a table over them. With
/// column sums, which sum over the last row, the order stays.
SmallVector<unsigned> rowOrder(SoftmaxContractOp contract, Operation *loop,
                               ArrayRef<Value> loopIndices) {
  unsigned added = loopIndices.size();
  unsigned own = contract.getNumRowIndices();
  unsigned total = added + own;
  llvm::SmallBitVector columnSide(total);
  for (Region *region :
       {&contract.getScore(), &contract.getRowSums(), &contract.getColSums()}) {
    if (region->empty())
      continue;
    Block &block = region->front();
    Value column = block.getArgument(own);
    region->walk([&](Operation *op) {
      for (Value result : op->getResults()) {
        llvm::SmallPtrSet<Value, 8> indices;
        collectIndices(result, loop, indices);
        if (!indices.contains(column))
          continue;
        llvm::SmallBitVector uses(total);
        for (unsigned position = 0; position < total; ++position)
          if (indices.contains(position < added
                                   ? loopIndices[position]
                                   : block.getArgument(position - added)))
            uses.set(position);
        if (!uses.all())
          columnSide |= uses;
      }
    });
  }
  SmallVector<unsigned> order;
  for (unsigned position = 0; position < total; ++position)
    if (columnSide.test(position))
      order.push_back(position);
  for (unsigned position = 0; position < total; ++position)
    if (!columnSide.test(position))
      order.push_back(position);
  if (!contract.getColOutputs().empty() && order.back() != total - 1)
    return llvm::to_vector(llvm::seq(0u, total));
  return order;
}

/// A result of the lifted contraction, whose leading axes stand for the
/// positions `order` (loop indices first, then the old contraction's rows,
/// the last of which stands for the column in column sums), read as the
/// old contraction's result of `type` at the loop's position `loopIndices`.
Value readAtLoopPosition(OpBuilder &builder, Location loc, ArrayType type,
                         Value result, ArrayRef<unsigned> order,
                         ArrayRef<Value> loopIndices) {
  MLIRContext *context = builder.getContext();
  unsigned added = loopIndices.size();
  if (llvm::equal(order, llvm::seq(0u, unsigned(order.size()))))
    return ExtractOp::create(
        builder, loc, type, result,
        AffineMapAttr::get(AffineMap::getMultiDimIdentityMap(added, context)),
        loopIndices);
  // Permuted: a table over the old axes, each element read at its slot.
  unsigned count = order.size() - added;
  ArrayRef<StringAttr> shape = type.getShape();
  auto table = TabulateOp::create(
      builder, loc, type, sizesOfDims(context, shape.take_front(count)));
  Block &body = table.getBody().emplaceBlock();
  addDimIndices(body, shape.take_front(count));
  OpBuilder inside = endOf(body);
  SmallVector<Value> indices;
  for (unsigned position : order)
    indices.push_back(position < added ? loopIndices[position]
                                       : body.getArgument(position - added));
  Value element = ExtractOp::create(
      inside, loc, ArrayType::get(context, shape.drop_front(count)), result,
      AffineMapAttr::get(
          AffineMap::getMultiDimIdentityMap(indices.size(), context)),
      indices);
  YieldOp::create(inside, loc, element);
  return table;
}

/// Lifts `contract` over the loop around it; false when it stays.
bool liftContract(SoftmaxContractOp contract) {
  if (contract.getGivenLse() || contract.getReusesScores() ||
      contract.getNumRowIndices() == 0)
    return false;
  EnclosingLoop loop = enclosingLoop(contract);
  if (!loop.op || (contract.getTemperature() &&
                   !isDefinedOutside(contract.getTemperature(), loop.op)))
    return false;
  Block &body = *loop.body;

  // What the regions use from the loop's body: its indices, and ops that
  // only read (tables and sums included), cloned per pair.
  llvm::SetVector<Operation *> slice;
  addOperandsToSlice(contract, body, slice);
  if (llvm::any_of(slice, [](Operation *op) {
        return isa<SoftmaxContractOp>(op) || !onlyReads(op);
      }))
    return false;
  llvm::SmallPtrSet<Value, 4> used;
  auto noteIndices = [&](Operation *op) {
    op->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        if (auto argument = dyn_cast<BlockArgument>(operand);
            argument && argument.getOwner() == &body)
          used.insert(argument);
    });
  };
  noteIndices(contract);
  for (Operation *op : slice)
    noteIndices(op);
  if (used.empty())
    return false;

  // Nothing the lifted contraction reads may be written in the loop.
  llvm::StringSet<> written, read;
  loop.op->walk([&](Operation *op) {
    if (auto accumulate = dyn_cast<AccumulateOp>(op))
      written.insert(accumulate.getTensor());
    else if (auto store = dyn_cast<StoreOp>(op))
      written.insert(store.getTensor());
  });
  auto noteReads = [&](Operation *op) {
    op->walk([&](ReadOp nested) { read.insert(nested.getSource()); });
  };
  noteReads(contract);
  for (Operation *op : slice)
    noteReads(op);
  if (llvm::any_of(read.keys(),
                   [&](StringRef tensor) { return written.contains(tensor); }))
    return false;

  // Rows: the loop's indices the contraction uses, then its own, the
  // column side's batch axes first.
  SmallVector<Value> loopIndices;
  for (BlockArgument argument : body.getArguments())
    if (used.contains(argument))
      loopIndices.push_back(argument);
  unsigned added = loopIndices.size();
  unsigned own = contract.getNumRowIndices();
  SmallVector<unsigned> order = rowOrder(contract, loop.op, loopIndices);
  SmallVector<Attribute> defaultRows;
  SmallVector<Location> defaultLocations;
  for (Value index : loopIndices) {
    defaultRows.push_back(
        loop.sizes[cast<BlockArgument>(index).getArgNumber()]);
    defaultLocations.push_back(index.getLoc());
  }
  llvm::append_range(defaultRows, contract.getRows());
  for (BlockArgument argument : contract.getScore().getArguments())
    defaultLocations.push_back(argument.getLoc());
  SmallVector<Attribute> rows;
  SmallVector<Location> locations;
  SmallVector<unsigned> slotOf(order.size());
  for (auto [slot, position] : llvm::enumerate(order)) {
    rows.push_back(defaultRows[position]);
    locations.push_back(defaultLocations[position]);
    slotOf[position] = slot;
  }
  locations.push_back(defaultLocations.back());
  MLIRContext *context = contract.getContext();
  ContractBuilder lifted(context, ArrayAttr::get(context, rows),
                         cast<DimExprAttr>(contract.getCols()));
  lifted.nameIndices(locations);
  auto fill = [&](Region &from, Region &into) {
    if (from.empty())
      return;
    Block &source = from.front();
    Block &target = lifted.block(into);
    IRMapping mapping;
    for (unsigned position = 0; position < added + own; ++position)
      mapping.map(position < added ? loopIndices[position]
                                   : source.getArgument(position - added),
                  target.getArgument(slotOf[position]));
    mapping.map(source.getArgument(own), target.getArgument(added + own));
    llvm::SetVector<Operation *> needed;
    for (Operation &op : source)
      addOperandsToSlice(&op, body, needed);
    OpBuilder inside = endOf(target);
    cloneSlice(body, needed, inside, mapping);
    for (Operation &op : source)
      inside.clone(op, mapping);
  };
  fill(contract.getPredicate(), lifted.predicate);
  fill(contract.getScore(), lifted.score);
  fill(contract.getRowSums(), lifted.rowSums);
  fill(contract.getColSums(), lifted.colSums);

  OpBuilder builder(loop.op);
  SoftmaxContractOp op = lifted.create(builder, contract.getLoc(),
                                       contract.getTemperature(), Value());
  // Elements of the tables the slice computes per position (a head's row
  // of every head's projections) are computed where they are read, so that
  // the tables formed next are over the indices each element uses.
  RewritePatternSet patterns(context);
  ExtractOp::getCanonicalizationPatterns(patterns, context);
  (void)applyPatternsGreedily(op, std::move(patterns));
  // The loop reads each result at its position.
  builder.setInsertionPoint(contract);
  for (auto [old, result] :
       llvm::zip_equal(contract.getResults(), op.getResults()))
    old.replaceAllUsesWith(readAtLoopPosition(builder, contract.getLoc(),
                                              cast<ArrayType>(old.getType()),
                                              result, order, loopIndices));
  contract.erase();
  return true;
}

} // namespace

void mlir::energy::liftContractsOutOfLoops(ModelOp model) {
  for (bool changed = true; changed;) {
    changed = false;
    SmallVector<SoftmaxContractOp> contracts;
    model.walk([&](SoftmaxContractOp op) { contracts.push_back(op); });
    for (SoftmaxContractOp contract : contracts)
      changed |= liftContract(contract);
  }
}
