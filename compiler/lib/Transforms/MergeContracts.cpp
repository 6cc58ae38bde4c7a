//===- MergeContracts.cpp - Contractions that share their weights ---------===//
//
// Contractions of one block with the same domains, predicate, temperature
// and score, each computing its normaliser or both given the same one,
// compute the same weights: they become one, with the sums of
// both (a value both sum is summed once), so that the parent side reuses
// the child side's normaliser. When the later one's column sums need what
// is computed from the earlier one's results (second derivatives: the
// column side reads Σ_p w·s at each row), its row sums still join the
// earlier one, and its column sums take the merged normaliser as given:
// one row pass where there were two.
//
//===----------------------------------------------------------------------===//

#include "ContractBuilder.h"
#include "PlanKernels.h"
#include "Slices.h"

#include "mlir/Transforms/RegionUtils.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

Value yieldedAt(Region &region, unsigned position) {
  return cast<YieldOp>(region.front().getTerminator()).getValues()[position];
}

/// The ops between `earlier` and `later` that `later` (but what it holds
/// in `skipped`) needs, in block order, when they can all move above
/// `earlier`: free of effects but reads, with everything they use from
/// outside defined above `earlier`.
FailureOr<SmallVector<Operation *>> opsToMoveAbove(Operation *earlier,
                                                   Operation *later,
                                                   Region *skipped = nullptr) {
  Block *block = earlier->getBlock();
  llvm::SetVector<Operation *> needed;
  std::function<LogicalResult(Operation *)> need =
      [&](Operation *user) -> LogicalResult {
    LogicalResult result = success();
    user->walk([&](Operation *op) {
      if (skipped && skipped->isAncestor(op->getParentRegion()))
        return;
      for (Value operand : op->getOperands()) {
        if (!isDefinedOutside(operand, user))
          continue;
        Operation *def = operand.getDefiningOp();
        if (!def || def->getBlock() != block || def->isBeforeInBlock(earlier))
          continue;
        if (def == earlier || !def->isBeforeInBlock(later) ||
            (!isMemoryEffectFree(def) && !isa<ReadOp>(def))) {
          result = failure();
          continue;
        }
        if (!needed.contains(def)) {
          if (failed(need(def)))
            result = failure();
          needed.insert(def);
        }
      }
    });
    return result;
  };
  if (failed(need(later)))
    return failure();
  SmallVector<Operation *> ordered(needed.begin(), needed.end());
  llvm::sort(ordered,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return ordered;
}

/// The arguments of `from`'s block mapped to `to`'s: the k-th row index to
/// `to`'s `positions[k]`-th, the column to the column (regions of two
/// contractions with as many row indices).
IRMapping regionArguments(Region &from, Region &to,
                          ArrayRef<unsigned> positions) {
  IRMapping mapping;
  unsigned rowCount = positions.size();
  for (unsigned k = 0; k < rowCount; ++k)
    mapping.map(from.front().getArgument(k),
                to.front().getArgument(positions[k]));
  mapping.map(from.front().getArgument(rowCount),
              to.front().getArgument(rowCount));
  return mapping;
}

/// sameScores with `a`'s k-th row index standing for `b`'s
/// `positions[k]`-th, comparing computeSame `acrossLayouts` or not.
bool sameScoresInOrder(SoftmaxContractOp a, SoftmaxContractOp b,
                       ArrayRef<unsigned> positions, bool acrossLayouts) {
  if (a.getNumRowIndices() != positions.size() ||
      b.getNumRowIndices() != positions.size() || a.getCols() != b.getCols() ||
      a.hasPredicate() != b.hasPredicate())
    return false;
  for (auto [k, position] : llvm::enumerate(positions))
    if (a.getRows()[k] != b.getRows()[position])
      return false;
  Value t1 = a.getTemperature(), t2 = b.getTemperature();
  if (bool(t1) != bool(t2) ||
      (t1 && !computeSame(t1, t2, IRMapping(), acrossLayouts)))
    return false;
  if (!computeSame(a.getScoreValue(), b.getScoreValue(),
                   regionArguments(a.getScore(), b.getScore(), positions),
                   acrossLayouts))
    return false;
  return !a.hasPredicate() ||
         computeSame(
             yieldedAt(a.getPredicate(), 0), yieldedAt(b.getPredicate(), 0),
             regionArguments(a.getPredicate(), b.getPredicate(), positions),
             acrossLayouts);
}

} // namespace

bool mlir::energy::sameScores(SoftmaxContractOp a, SoftmaxContractOp b) {
  SmallVector<unsigned> inOrder =
      llvm::to_vector(llvm::seq(a.getNumRowIndices()));
  return sameScoresInOrder(a, b, inOrder, /*acrossLayouts=*/false);
}

namespace {

/// Whether `later` computes the same weights as `earlier` and can join it
/// (with `rowsOnly`: its score and row sums can, its column sums may need
/// what is computed from `earlier`'s results).
bool canMerge(SoftmaxContractOp earlier, SoftmaxContractOp later,
              bool rowsOnly = false) {
  // The same normaliser: each computes its own, or both are given one.
  if (earlier.getGivenLse() != later.getGivenLse() ||
      !sameScores(earlier, later))
    return false;
  // `later` may not move above a store: its reads would see other values.
  for (Operation *op = earlier->getNextNode(); op && op != later.getOperation();
       op = op->getNextNode())
    if (isa<StoreOp, RepeatOp>(op))
      return false;
  // Everything `later` uses from outside must exist where `earlier` is, or
  // be computed between them from what exists there by ops free of effects
  // (reads included: no store is between), which then move up.
  return succeeded(
      opsToMoveAbove(earlier, later, rowsOnly ? &later.getColSums() : nullptr));
}

/// One contraction with the sums of both; with `rowsOnly`, with the row
/// sums of both and `earlier`'s column sums, `later` keeping its column
/// sums in a column pass of their own, given the merged contraction's
/// normaliser. Fails, changing nothing, when what `later` needs cannot move
/// above `earlier`.
LogicalResult merge(SoftmaxContractOp earlier, SoftmaxContractOp later,
                    bool rowsOnly = false) {
  FailureOr<SmallVector<Operation *>> moved =
      opsToMoveAbove(earlier, later, rowsOnly ? &later.getColSums() : nullptr);
  if (failed(moved))
    return failure();
  for (Operation *op : *moved)
    op->moveBefore(earlier);
  SmallVector<SoftmaxContractOp> colSides = {earlier};
  if (!rowsOnly)
    colSides.push_back(later);
  OpBuilder atEarlier(earlier);
  SoftmaxContractOp merged = rebuildContract(
      atEarlier, earlier, {earlier, later}, colSides, earlier.getGivenLse());
  Value lse = merged.getGivenLse() ? merged.getGivenLse() : merged.getLse();
  if (Value earlierLse = earlier.getLse())
    earlierLse.replaceAllUsesWith(lse);
  if (Value laterLse = later.getLse())
    laterLse.replaceAllUsesWith(lse);
  if (rowsOnly) {
    OpBuilder atLater(later);
    rebuildContract(atLater, later, {}, {later}, lse);
  }
  later.erase();
  earlier.erase();
  return success();
}

/// The ops between `earlier` and `later` that read `earlier`'s column sums,
/// directly or through each other, in block order, when they can all move
/// below `later`: free of effects but reads, with no store between the
/// two contractions, and nothing of theirs that `later` reads.
FailureOr<SmallVector<Operation *>> readersBetween(SoftmaxContractOp earlier,
                                                   SoftmaxContractOp later) {
  Block *block = later->getBlock();
  if (earlier->getBlock() != block || !earlier->isBeforeInBlock(later))
    return failure();
  llvm::SetVector<Value> reading(earlier.getColOutputs().begin(),
                                 earlier.getColOutputs().end());
  SmallVector<Operation *> readers;
  for (Operation *op = earlier->getNextNode(); op != later.getOperation();
       op = op->getNextNode()) {
    if (isa<StoreOp, RepeatOp>(op))
      return failure();
    llvm::SetVector<Value> used;
    for (Region &region : op->getRegions())
      getUsedValuesDefinedAbove(region, used);
    used.insert(op->operand_begin(), op->operand_end());
    if (llvm::none_of(used,
                      [&](Value value) { return reading.contains(value); }))
      continue;
    if (!isMemoryEffectFree(op) && !isa<ReadOp>(op))
      return failure();
    readers.push_back(op);
    reading.insert(op->result_begin(), op->result_end());
  }
  llvm::SetVector<Value> laterUses;
  for (Region &region : later->getRegions())
    getUsedValuesDefinedAbove(region, laterUses);
  laterUses.insert(later->operand_begin(), later->operand_end());
  if (llvm::any_of(laterUses,
                   [&](Value value) { return reading.contains(value); }))
    return failure();
  return readers;
}

/// Whether `later` is a column-only contraction over the pairs and weights
/// of `earlier`, normalised by `earlier`'s lse, and `earlier`'s column sums
/// can join it: nothing reads them before `later`.
bool canJoinColumns(SoftmaxContractOp earlier, SoftmaxContractOp later) {
  Value lse = earlier.getLse();
  return lse && later.getGivenLse() == lse && later.getRowOutputs().empty() &&
         !earlier.getColOutputs().empty() && sameScores(earlier, later) &&
         succeeded(readersBetween(earlier, later));
}

/// `earlier`'s column sums join `later`'s pass (canJoinColumns): one pass
/// over the columns where there were two.
void joinColumns(SoftmaxContractOp earlier, SoftmaxContractOp later) {
  SmallVector<Operation *> readers = *readersBetween(earlier, later);
  for (Operation *reader : llvm::reverse(readers))
    reader->moveAfter(later);
  OpBuilder atLater(later);
  rebuildContract(atLater, later, {}, {later, earlier}, later.getGivenLse());
  later.erase();
  OpBuilder atEarlier(earlier);
  SoftmaxContractOp rows =
      rebuildContract(atEarlier, earlier, {earlier}, {}, Value());
  earlier.getLse().replaceAllUsesWith(rows.getLse());
  earlier.erase();
}

/// For `later` that sums no columns, the order of `earlier`'s row indices
/// in which `earlier` computes `later`'s normaliser and row sums (the same
/// domains, predicate, temperature and score, each computing its own
/// normaliser, and each of `later`'s row values one of `earlier`'s, with
/// the tables either reads compared across layouts): `order[q]` is the
/// position among `later`'s row indices of `earlier`'s q-th, and
/// `rowOutputs` the output of `earlier` for each of `later`'s. None when
/// there is no such order.
std::optional<SmallVector<unsigned>>
subsumingOrder(SoftmaxContractOp earlier, SoftmaxContractOp later,
               SmallVectorImpl<unsigned> &rowOutputs) {
  unsigned rowCount = later.getNumRowIndices();
  if (earlier.getNumRowIndices() != rowCount ||
      !later.getColOutputs().empty() || earlier.getGivenLse() ||
      later.getGivenLse())
    return std::nullopt;
  // (What both read is the same only where no store comes between.)
  for (Operation *op = earlier->getNextNode(); op && op != later.getOperation();
       op = op->getNextNode())
    if (isa<StoreOp, RepeatOp>(op))
      return std::nullopt;
  SmallVector<unsigned> positions = llvm::to_vector(llvm::seq(rowCount));
  do {
    // Later's k-th row index is earlier's positions[k].
    if (!sameScoresInOrder(later, earlier, positions, /*acrossLayouts=*/true))
      continue;
    IRMapping values =
        regionArguments(later.getRowSums(), earlier.getRowSums(), positions);
    ValueRange earlierValues = earlier.getRowValues();
    rowOutputs.clear();
    for (Value value : later.getRowValues()) {
      auto found = llvm::find_if(earlierValues, [&](Value other) {
        return other.getType() == value.getType() &&
               computeSame(value, other, values, /*acrossLayouts=*/true);
      });
      if (found == earlierValues.end())
        break;
      rowOutputs.push_back(found - earlierValues.begin());
    }
    if (rowOutputs.size() != later.getRowValues().size())
      continue;
    SmallVector<unsigned> order(rowCount);
    for (unsigned k = 0; k < rowCount; ++k)
      order[positions[k]] = k;
    return order;
  } while (std::next_permutation(positions.begin(), positions.end()));
  return std::nullopt;
}

/// `later`'s results as `earlier`'s read in `later`'s order (subsumingOrder).
void readFromSubsuming(SoftmaxContractOp earlier, SoftmaxContractOp later,
                       ArrayRef<unsigned> order,
                       ArrayRef<unsigned> rowOutputs) {
  OpBuilder builder(later);
  auto reread = [&](Value from, Value to) {
    to.replaceAllUsesWith(
        readInOrder(builder, from, to, order, later.getRows()));
  };
  reread(earlier.getLse(), later.getLse());
  for (auto [output, position] : llvm::zip(later.getRowOutputs(), rowOutputs))
    reread(earlier.getRowOutputs()[position], output);
  later.erase();
}

} // namespace

void mlir::energy::mergeSoftmaxContracts(Block &block, bool rowsOfBilinear,
                                         bool acrossRowOrders) {
  // Contractions whose normaliser and row sums an earlier one computes over
  // the same rows in another order (a later step's normaliser over (h, b,
  // i) where the gradient's is over (b, h, i)): they read the earlier's.
  bool subsumed = acrossRowOrders;
  while (subsumed) {
    subsumed = false;
    SmallVector<SoftmaxContractOp> contracts(block.getOps<SoftmaxContractOp>());
    for (size_t i = 0; i < contracts.size() && !subsumed; ++i)
      for (size_t j = i + 1; j < contracts.size() && !subsumed; ++j) {
        SmallVector<unsigned> rowOutputs;
        if (std::optional<SmallVector<unsigned>> order =
                subsumingOrder(contracts[i], contracts[j], rowOutputs)) {
          readFromSubsuming(contracts[i], contracts[j], *order, rowOutputs);
          subsumed = true;
        }
      }
  }
  bool merged = true;
  while (merged) {
    merged = false;
    SmallVector<SoftmaxContractOp> contracts(block.getOps<SoftmaxContractOp>());
    for (size_t i = 0; i < contracts.size() && !merged; ++i)
      for (size_t j = i + 1; j < contracts.size() && !merged; ++j)
        if (canMerge(contracts[i], contracts[j])) {
          merged = succeeded(merge(contracts[i], contracts[j]));
        } else if (rowsOfBilinear &&
                   contracts[i].getForm() == ContractForm::bilinear &&
                   contracts[j].getForm() == ContractForm::bilinear &&
                   canMerge(contracts[i], contracts[j], /*rowsOnly=*/true)) {
          merged =
              succeeded(merge(contracts[i], contracts[j], /*rowsOnly=*/true));
        }
  }
  // Column sums of a contraction that a later column pass over the same
  // weights (given its normaliser) can take: that pass sums them too.
  bool joined = true;
  while (joined) {
    joined = false;
    SmallVector<SoftmaxContractOp> contracts(block.getOps<SoftmaxContractOp>());
    for (size_t i = 0; i < contracts.size() && !joined; ++i)
      for (size_t j = i + 1; j < contracts.size() && !joined; ++j)
        if (canJoinColumns(contracts[i], contracts[j])) {
          joinColumns(contracts[i], contracts[j]);
          joined = true;
        }
  }
}
