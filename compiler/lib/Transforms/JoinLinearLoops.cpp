//===- JoinLinearLoops.cpp - One loop per linear map into a tensor --------===//
//
// Loops that add, at each position, the same linear map of rows of
// different arrays into one tensor — L(u₁[i]) and L(u₂[i]) into @T[i], L
// the same per position (a token's layer-norm backward, applied to the
// gradients of each energy term that reads the normalised row) — are one
// loop adding L(u₁[i] + u₂[i]): the map's work once. A loop may add maps
// of several rows (the first and second derivatives of the normalisation,
// L₁(a) + L₂(c)); one whose maps the other applies to some of its rows
// joins it, each row added to its partner (L₁(b) into it: L₁(a + b) +
// L₂(c)), rows of whole arrays as a sum of the arrays ahead of the loop.
//
//===----------------------------------------------------------------------===//

#include "Linearity.h"
#include "PlanKernels.h"
#include "Slices.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/bit.h"

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

/// Whether the value `loop` adds is a linear map of `row` alone: no term
/// that does not vary with it, no other varying value.
bool isLinearMapOf(AccumulatingLoop loop, Value row) {
  Block &body = loop.loop.getBody().front();
  llvm::DenseMap<Value, bool> memo;
  LinearDecomposition decomposition =
      decomposeLinearly(loop.accumulate.getValue(), body, [&](Value value) {
        return !dependsOnAnyOf(value, row, body, memo);
      });
  return decomposition.atoms.size() == 1 && decomposition.atoms.front() == row;
}

/// Whether the two loops run over the same domain and add values of one
/// type into the same tensor at the same indices.
bool sameTarget(AccumulatingLoop first, AccumulatingLoop second) {
  Block &firstBody = first.loop.getBody().front();
  Block &secondBody = second.loop.getBody().front();
  if (first.loop.getSizes() != second.loop.getSizes() ||
      firstBody.getNumArguments() != secondBody.getNumArguments() ||
      first.accumulate.getTensor() != second.accumulate.getTensor() ||
      first.accumulate.getMap() != second.accumulate.getMap() ||
      first.accumulate.getValue().getType() !=
          second.accumulate.getValue().getType())
    return false;
  IRMapping arguments;
  arguments.map(firstBody.getArguments(), secondBody.getArguments());
  for (auto [a, b] :
       llvm::zip(first.accumulate.getIndices(), second.accumulate.getIndices()))
    if (arguments.lookupOrDefault(a) != b)
      return false;
  return true;
}

/// The rows the two loops' maps apply to: values of each body such that
/// what `first` adds is a linear map of its row alone, and what `second`
/// adds the same map (the same ops on the same other operands) of its own;
/// the lowest such rows, so that the map does the most work.
std::optional<std::pair<Value, Value>> joinedRows(AccumulatingLoop first,
                                                  AccumulatingLoop second) {
  if (!sameTarget(first, second))
    return std::nullopt;
  Block &firstBody = first.loop.getBody().front();
  Block &secondBody = second.loop.getBody().front();
  IRMapping arguments;
  arguments.map(firstBody.getArguments(), secondBody.getArguments());
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

/// The rows of arrays from outside `loop`, read in its body, in which the
/// value it adds is linear, each with the others held fixed.
SmallVector<Value> linearRows(AccumulatingLoop loop) {
  Block &body = loop.loop.getBody().front();
  SmallVector<Value> rows;
  for (auto extract : body.getOps<ExtractOp>()) {
    Value row = extract.getResult();
    if (!isDefinedOutside(extract.getSource(), loop.loop) ||
        !isa<ArrayType>(row.getType()))
      continue;
    llvm::DenseMap<Value, bool> memo;
    LinearDecomposition decomposition =
        decomposeLinearly(loop.accumulate.getValue(), body, [&](Value value) {
          return !dependsOnAnyOf(value, row, body, memo);
        });
    if (decomposition.atoms.contains(row) &&
        llvm::all_of(decomposition.atoms, [&](Value atom) {
          return atom == row || !dependsOnAnyOf(atom, row, body, memo);
        }))
      rows.push_back(row);
  }
  return rows;
}

/// Whether what `loop` adds is linear in `rows` together; with `whole`,
/// also a map of them alone (no term that depends on none of them).
bool isLinearIn(AccumulatingLoop loop, ArrayRef<Value> rows, bool whole) {
  Block &body = loop.loop.getBody().front();
  llvm::DenseMap<Value, bool> memo;
  auto varies = [&](Value value) {
    return dependsOnAnyOf(value, rows, body, memo);
  };
  LinearDecomposition decomposition = decomposeLinearly(
      loop.accumulate.getValue(), body, [&](Value v) { return !varies(v); });
  return llvm::all_of(decomposition.atoms, [&](Value atom) {
    return llvm::is_contained(rows, atom) || (!whole && !varies(atom));
  });
}

/// The fewest rows that what `loop` adds is a sum of linear maps of, with
/// no other term (u and v of L₁(u) + L₂(v, c), not c, in which it is
/// linear too but not together with v); none where there are none or too
/// many rows to choose from.
SmallVector<Value> rowsOfWholeMap(AccumulatingLoop loop) {
  constexpr size_t kMostRows = 8;
  SmallVector<Value> rows = linearRows(loop);
  if (rows.empty() || rows.size() > kMostRows)
    return {};
  SmallVector<unsigned> subsets;
  for (unsigned subset = 1; subset < (1u << rows.size()); ++subset)
    subsets.push_back(subset);
  llvm::sort(subsets, [](unsigned a, unsigned b) {
    return std::make_pair(llvm::popcount(a), a) <
           std::make_pair(llvm::popcount(b), b);
  });
  for (unsigned subset : subsets) {
    SmallVector<Value> chosen;
    for (size_t i = 0; i < rows.size(); ++i)
      if (subset & (1u << i))
        chosen.push_back(rows[i]);
    if (isLinearIn(loop, chosen, /*whole=*/true))
      return chosen;
  }
  return {};
}

/// Pairs of rows, one of `first` and one of `second`, such that what
/// `first` adds is a sum of linear maps of its rows of the pairs, and what
/// `second` adds is linear in its rows of the pairs together and applies
/// the same map to each as `first` applies to its partner (L₁(u) into
/// L₁(u') + L₂(v')): `second` then adds what both add when each of its
/// rows has its partner added. Empty where there are none.
SmallVector<std::pair<Value, Value>> joinedRowSets(AccumulatingLoop first,
                                                   AccumulatingLoop second) {
  SmallVector<std::pair<Value, Value>> pairs;
  Block &firstBody = first.loop.getBody().front();
  Block &secondBody = second.loop.getBody().front();
  if (!sameTarget(first, second))
    return pairs;
  SmallVector<Value> firstRows = rowsOfWholeMap(first);
  SmallVector<Value> secondRows = linearRows(second);
  if (firstRows.empty() || secondRows.size() < firstRows.size())
    return pairs;
  IRMapping arguments;
  arguments.map(firstBody.getArguments(), secondBody.getArguments());
  // Each row's map, built ahead of the accumulates, and erased after.
  SmallVector<Operation *> built;
  OpBuilder firstBuilder(first.accumulate);
  OpBuilder secondBuilder(second.accumulate);
  auto mapOf = [&](AccumulatingLoop loop, Value row, OpBuilder &builder) {
    return linearPart(loop.accumulate.getValue(), loop.loop.getBody().front(),
                      row, builder, built);
  };
  SmallVector<std::optional<Value>> secondMaps;
  for (Value row : secondRows)
    secondMaps.push_back(mapOf(second, row, secondBuilder));
  SmallVector<bool> taken(secondRows.size(), false);
  for (Value row : firstRows) {
    std::optional<Value> map = mapOf(first, row, firstBuilder);
    bool found = false;
    for (size_t i = 0; map && *map && !found && i < secondRows.size(); ++i) {
      if (taken[i] || !secondMaps[i] || !*secondMaps[i] ||
          secondRows[i].getType() != row.getType())
        continue;
      IRMapping mapping = arguments;
      mapping.map(row, secondRows[i]);
      if (computeSame(*map, *secondMaps[i], mapping)) {
        taken[i] = found = true;
        pairs.push_back({row, secondRows[i]});
      }
    }
    if (!found) {
      pairs.clear();
      break;
    }
  }
  for (Operation *op : llvm::reverse(built))
    op->erase();
  SmallVector<Value> joined;
  for (auto &pair : pairs)
    joined.push_back(pair.second);
  if (!pairs.empty() && !isLinearIn(second, joined, /*whole=*/false))
    pairs.clear();
  return pairs;
}

/// The array whose row `row` is at the position of `body` (`extract %A[i…]`
/// with its indices mapped through `arguments` those of `body`), or null.
Value wholeArrayOf(Value row, Block &body, const IRMapping &arguments) {
  auto extract = row.getDefiningOp<ExtractOp>();
  if (!extract || !extract.getMap().isIdentity() ||
      extract.getIndices().size() != body.getNumArguments())
    return Value();
  for (auto [index, argument] :
       llvm::zip(extract.getIndices(), body.getArguments()))
    if (arguments.lookupOrDefault(index) != argument)
      return Value();
  return extract.getSource();
}

/// Joins `first` into `second`: `second` adds the map of each pair's rows'
/// sum. Where both rows are rows of whole arrays at the loop's position,
/// the arrays are added ahead of `second` (a sum of products that share a
/// factor is then one product); otherwise the ops computing the row of
/// `first` are copied to the start of `second`'s body (they read only
/// values from outside and the indices) and the rows added there.
void join(AccumulatingLoop first, AccumulatingLoop second,
          ArrayRef<std::pair<Value, Value>> pairs) {
  Block &firstBody = first.loop.getBody().front();
  Block &secondBody = second.loop.getBody().front();
  IRMapping mapping;
  mapping.map(firstBody.getArguments(), secondBody.getArguments());
  IRMapping identity;
  identity.map(secondBody.getArguments(), secondBody.getArguments());
  llvm::SetVector<Operation *> slice;
  SmallVector<std::pair<Value, Value>> rowSums;
  for (auto [firstRow, secondRow] : pairs) {
    Value firstArray = wholeArrayOf(firstRow, secondBody, mapping);
    Value secondArray = wholeArrayOf(secondRow, secondBody, identity);
    // (Arrays from outside the loops: one a loop computes per position,
    // from a value of its own, is a row it computes.)
    if (firstArray && secondArray &&
        firstArray.getType() == secondArray.getType() &&
        isDefinedOutside(firstArray, first.loop) &&
        isDefinedOutside(secondArray, second.loop)) {
      OpBuilder ahead(second.loop);
      auto sum = AddOp::create(ahead, second.loop.getLoc(),
                               secondArray.getType(), secondArray, firstArray);
      secondRow.getDefiningOp<ExtractOp>().getSourceMutable().assign(sum);
      continue;
    }
    addToSlice(firstRow, firstBody, slice);
    rowSums.push_back({firstRow, secondRow});
  }
  OpBuilder builder(&secondBody, secondBody.begin());
  for (Operation &op : firstBody)
    if (slice.contains(&op))
      builder.clone(op, mapping);
  for (auto [firstRow, secondRow] : rowSums) {
    builder.setInsertionPointAfterValue(secondRow);
    auto sum = AddOp::create(builder, secondRow.getLoc(), secondRow.getType(),
                             secondRow, mapping.lookup(firstRow));
    secondRow.replaceAllUsesExcept(sum.getResult(), sum);
  }
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
      if (!movableTo(*first, second->loop))
        continue;
      // Rows of arrays, several to a loop; else one row that the loop
      // computes itself (a cotangent row times a table's, before its map).
      SmallVector<std::pair<Value, Value>> pairs =
          joinedRowSets(*first, *second);
      if (pairs.empty())
        if (auto rows = joinedRows(*first, *second))
          pairs.push_back(*rows);
      if (pairs.empty())
        continue;
      join(*first, *second, pairs);
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
