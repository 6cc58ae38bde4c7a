//===- JoinLinearLoops.cpp - One loop per linear map into a tensor --------===//
//
// Loops that add, at each position, the same linear map of rows of
// different arrays into one tensor — L(u₁[i]) and L(u₂[i]) into @T[i], L
// the same per position (a token's layer-norm backward, applied to the
// gradients of each energy term that reads the normalised row) — are one
// loop adding L(u₁[i] + u₂[i]): the map's work once.
//
//===----------------------------------------------------------------------===//

#include "Linearity.h"
#include "PlanKernels.h"
#include "Slices.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// A loop whose only effect is one accumulate into a tensor.
struct AccumulatingLoop {
  ForeachOp loop;
  AccumulateOp accumulate;
};

std::optional<AccumulatingLoop> accumulatingLoop(ForeachOp loop) {
  if (loop.hasPredicate() || loop.getParallel())
    return std::nullopt;
  AccumulateOp accumulate;
  for (Operation &op : loop.getBody().front()) {
    if (auto found = dyn_cast<AccumulateOp>(op)) {
      if (accumulate)
        return std::nullopt;
      accumulate = found;
      continue;
    }
    if (!onlyReads(&op))
      return std::nullopt;
  }
  if (!accumulate)
    return std::nullopt;
  return AccumulatingLoop{loop, accumulate};
}

/// The tensors `op` (and what it holds) reads, and those it writes. What
/// an accumulate writes is the gradient's buffer for its tensor, which no
/// op reads, and accumulates commute: they are not writes here.
void collectTensors(Operation *op, llvm::StringSet<> &read,
                    llvm::StringSet<> &written) {
  op->walk([&](Operation *inner) {
    if (auto readOp = dyn_cast<ReadOp>(inner))
      read.insert(readOp.getSource());
    else if (isa<AccumulateOp>(inner))
      return;
    else if (auto store = dyn_cast<StoreOp>(inner))
      written.insert(store.getTensor());
    else if (!isMemoryEffectFree(inner) && !isa<YieldOp>(inner) &&
             inner->getNumRegions() == 0)
      written.insert("");
  });
}

/// Whether `first` may run where `second` is: nothing between them writes
/// what `first` reads, and the ops between have no effects but reads,
/// stores we can name and adds into the gradient.
bool movableTo(AccumulatingLoop first, ForeachOp second) {
  llvm::StringSet<> readByFirst, writtenByFirst;
  collectTensors(first.loop, readByFirst, writtenByFirst);
  for (Operation *op = first.loop->getNextNode(); op && op != second;
       op = op->getNextNode()) {
    llvm::StringSet<> read, written;
    collectTensors(op, read, written);
    if (written.contains(""))
      return false;
    for (const auto &tensor : written)
      if (readByFirst.contains(tensor.getKey()) ||
          writtenByFirst.contains(tensor.getKey()))
        return false;
    for (const auto &tensor : read)
      if (writtenByFirst.contains(tensor.getKey()))
        return false;
  }
  return true;
}

/// Whether `value`, a value of `body`, depends on `root`: through operands,
/// or values the regions of an op use (a sum over a row inside the loop).
bool dependsOn(Value value, Value root, Block &body,
               llvm::DenseMap<Value, bool> &memo) {
  if (value == root)
    return true;
  Operation *op = value.getDefiningOp();
  if (!op || op->getBlock() != &body)
    return false;
  if (auto found = memo.find(value); found != memo.end())
    return found->second;
  llvm::SetVector<Value> used;
  getUsedValuesDefinedAbove(op->getRegions(), used);
  used.insert(op->operand_begin(), op->operand_end());
  bool depends = llvm::any_of(used, [&](Value operand) {
    return dependsOn(operand, root, body, memo);
  });
  memo[value] = depends;
  return depends;
}

/// Whether the value `loop` adds is a linear map of `row` alone: no term
/// that does not vary with it, no other varying value.
bool isLinearMapOf(AccumulatingLoop loop, Value row) {
  Block &body = loop.loop.getBody().front();
  llvm::DenseMap<Value, bool> memo;
  LinearDecomposition decomposition =
      decomposeLinearly(loop.accumulate.getValue(), body, [&](Value value) {
        return !dependsOn(value, row, body, memo);
      });
  return decomposition.atoms.size() == 1 && decomposition.atoms.front() == row;
}

/// The rows the two loops' maps apply to: values of each body such that
/// what `first` adds is a linear map of its row alone, and what `second`
/// adds the same map (the same ops on the same other operands) of its own;
/// the lowest such rows, so that the map does the most work.
std::optional<std::pair<Value, Value>> joinedRows(AccumulatingLoop first,
                                                  AccumulatingLoop second) {
  Block &firstBody = first.loop.getBody().front();
  Block &secondBody = second.loop.getBody().front();
  if (first.loop.getSizes() != second.loop.getSizes() ||
      firstBody.getNumArguments() != secondBody.getNumArguments() ||
      first.accumulate.getTensor() != second.accumulate.getTensor() ||
      first.accumulate.getMap() != second.accumulate.getMap() ||
      first.accumulate.getValue().getType() !=
          second.accumulate.getValue().getType())
    return std::nullopt;
  IRMapping arguments;
  for (auto [a, b] :
       llvm::zip(firstBody.getArguments(), secondBody.getArguments()))
    arguments.map(a, b);
  for (auto [a, b] :
       llvm::zip(first.accumulate.getIndices(), second.accumulate.getIndices()))
    if (arguments.lookupOrDefault(a) != b)
      return std::nullopt;
  auto rowsOf = [](AccumulatingLoop loop) {
    SmallVector<Value> rows;
    for (Operation &op : loop.loop.getBody().front())
      if (op.getNumResults() == 1 &&
          op.getResult(0) != loop.accumulate.getValue() &&
          isa<ArrayType>(op.getResult(0).getType()) &&
          isLinearMapOf(loop, op.getResult(0)))
        rows.push_back(op.getResult(0));
    return rows;
  };
  SmallVector<Value> secondRows = rowsOf(second);
  for (Value row : rowsOf(first))
    for (Value other : secondRows) {
      if (other.getType() != row.getType())
        continue;
      IRMapping mapping = arguments;
      mapping.map(row, other);
      if (computeSame(first.accumulate.getValue(), second.accumulate.getValue(),
                      mapping))
        return std::make_pair(row, other);
    }
  return std::nullopt;
}

/// Joins `first` into `second`: the ops computing `firstRow` are copied to
/// the start of `second`'s body (they read only values from outside and the
/// indices), and `second` adds the map of both rows' sum.
void join(AccumulatingLoop first, Value firstRow, Value secondRow) {
  Block &firstBody = first.loop.getBody().front();
  Block &secondBody = *secondRow.getParentBlock();
  IRMapping mapping;
  for (auto [a, b] :
       llvm::zip(firstBody.getArguments(), secondBody.getArguments()))
    mapping.map(a, b);
  llvm::SetVector<Operation *> slice;
  addToSlice(firstRow, firstBody, slice);
  OpBuilder builder(&secondBody, secondBody.begin());
  for (Operation &op : firstBody)
    if (slice.contains(&op))
      builder.clone(op, mapping);
  builder.setInsertionPointAfterValue(secondRow);
  auto sum = AddOp::create(builder, secondRow.getLoc(), secondRow.getType(),
                           secondRow, mapping.lookup(firstRow));
  secondRow.replaceAllUsesExcept(sum.getResult(), sum);
  first.loop->erase();
}

/// Joins the loops of `block` pairwise, each into the first later one it
/// can join, until none joins.
bool joinLoopsOf(Block &block) {
  bool changed = false;
  SmallVector<ForeachOp> loops(block.getOps<ForeachOp>());
  for (size_t i = 0; i < loops.size(); ++i) {
    std::optional<AccumulatingLoop> first = accumulatingLoop(loops[i]);
    if (!first)
      continue;
    for (size_t j = i + 1; j < loops.size(); ++j) {
      std::optional<AccumulatingLoop> second = accumulatingLoop(loops[j]);
      if (!second)
        continue;
      auto rows = joinedRows(*first, *second);
      if (!rows || !movableTo(*first, second->loop))
        continue;
      join(*first, rows->first, rows->second);
      changed = true;
      break;
    }
  }
  return changed;
}

} // namespace

void mlir::energy::joinLinearLoops(ModelOp model) {
  SmallVector<Block *> blocks;
  model.walk([&](ForeachOp loop) {
    Block *block = loop->getBlock();
    if (blocks.empty() || blocks.back() != block)
      blocks.push_back(block);
  });
  for (Block *block : llvm::SetVector<Block *>(blocks.begin(), blocks.end()))
    while (joinLoopsOf(*block)) {
    }
}
