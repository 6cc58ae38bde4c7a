//===- LoopSums.cpp - Loops that add over indices their slots ignore -----===//
//
// A loop over (J, K) that accumulates, at slots only J chooses, what each
// position computes adds the same slot at every position of K: it becomes a
// loop over J of sums over K, so that the linear maps of what is added come
// out of the sums (FactorLinearMaps.cpp) and the sums become products or
// contractions. The derivation leaves such loops wherever a term reads a
// tensor at some of its indices (a Hopfield module's gradient, added over
// tokens and memories into each token). A loop whose slots use none of its
// indices is one sum. And a table of the column sums of an array adds its
// whole rows instead.
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"
#include "Slices.h"
#include "energy/Transforms/InternalErrors.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// Whether the ops of `slice` weigh by a softmax (an lse, or a
/// contraction's normaliser).
bool sliceWeighsBySoftmax(const llvm::SetVector<Operation *> &slice) {
  bool weighted = false;
  for (Operation *member : slice)
    member->walk([&](Operation *op) {
      if (auto reduce = dyn_cast<ReduceOp>(op))
        weighted |= reduce.getKind() == ReduceKind::lse;
      if (auto extract = dyn_cast<ExtractOp>(op))
        if (auto result = dyn_cast<OpResult>(extract.getSource()))
          if (auto contract = dyn_cast<SoftmaxContractOp>(result.getOwner()))
            weighted |= result == contract.getLse();
    });
  return weighted;
}

/// Whether `value`, computed in `body`, weighs by a softmax: a
/// contraction's to plan over the loop's whole domain as its rows.
bool weighsBySoftmax(Value value, Block &body) {
  llvm::SetVector<Operation *> slice;
  addToSlice(value, body, slice);
  return sliceWeighsBySoftmax(slice);
}

/// The ops of a body that an accumulation's value needs.
struct BodySlice {
  Block *block;
  llvm::SetVector<Operation *> ops;
};

/// The indices of `indices` (a loop nest's, outermost first) that choose
/// the slots of `accumulate` (each an index of the nest or a value from
/// outside `scope`), or nothing where a slot is chosen otherwise.
std::optional<SmallVector<bool>> slotIndices(AccumulateOp accumulate,
                                             ArrayRef<BlockArgument> indices,
                                             Operation *scope) {
  SmallVector<bool> used(indices.size(), false);
  for (Value index : accumulate.getIndices()) {
    if (isDefinedOutside(index, scope))
      continue;
    auto *position = llvm::find(indices, index);
    if (position == indices.end())
      return std::nullopt;
    used[position - indices.begin()] = true;
  }
  return used;
}

/// Replaces `accumulate`, in a loop nest over `indices` (of sizes `sizes`)
/// that `builder` is before, by a loop over the `used` indices (none where
/// none is used) that accumulates, at the same slots, the sum over the
/// others of the value, computed by `slices` (cloned in order); under
/// `predicate` (null for none), whose arguments stand for
/// `predicateIndices`.
void gatherAccumulation(OpBuilder &builder, AccumulateOp accumulate,
                        ArrayRef<BlockArgument> indices,
                        ArrayRef<Attribute> sizes, ArrayRef<bool> used,
                        Block *predicate,
                        ArrayRef<BlockArgument> predicateIndices,
                        ArrayRef<BodySlice> slices) {
  SmallVector<Attribute> slotSizes, summedSizes;
  for (auto [size, isUsed] : llvm::zip(sizes, used))
    (isUsed ? slotSizes : summedSizes).push_back(size);
  Location loc = accumulate.getLoc();
  IRMapping mapping;
  if (!slotSizes.empty()) {
    auto slots =
        ForeachOp::create(builder, loc, builder.getArrayAttr(slotSizes));
    Block &slotBody = slots.getBody().emplaceBlock();
    for (auto [index, isUsed] : llvm::zip(indices, used))
      if (isUsed)
        mapping.map(index,
                    slotBody.addArgument(index.getType(), index.getLoc()));
    builder.setInsertionPointToStart(&slotBody);
  }
  Value value = accumulate.getValue();
  auto sum = ReduceOp::create(builder, loc, value.getType(), ReduceKind::sum,
                              builder.getArrayAttr(summedSizes), Value());
  auto addSummed = [&](Block &block) {
    for (auto [index, isUsed] : llvm::zip(indices, used))
      if (!isUsed)
        mapping.map(index, block.addArgument(index.getType(), index.getLoc()));
  };
  if (predicate) {
    Block &summedPredicate = sum.getPredicate().emplaceBlock();
    addSummed(summedPredicate);
    IRMapping predicateMapping = mapping;
    for (auto [from, to] :
         llvm::zip(predicate->getArguments(), predicateIndices))
      predicateMapping.map(from, mapping.lookup(to));
    OpBuilder inside = OpBuilder::atBlockEnd(&summedPredicate);
    for (Operation &op : *predicate)
      inside.clone(op, predicateMapping);
  }
  Block &sumBody = sum.getBody().emplaceBlock();
  addSummed(sumBody);
  OpBuilder inside = OpBuilder::atBlockEnd(&sumBody);
  for (const BodySlice &slice : slices)
    cloneSlice(*slice.block, slice.ops, inside, mapping);
  YieldOp::create(inside, loc, mapping.lookupOrDefault(value));
  moveLoopInvariantCode(cast<LoopLikeOpInterface>(sum.getOperation()));
  builder.setInsertionPointAfter(sum);
  SmallVector<Value> slots;
  for (Value index : accumulate.getIndices())
    slots.push_back(mapping.lookupOrDefault(index));
  AccumulateOp::create(builder, loc, sum.getResult(),
                       accumulate.getTensorAttr(), accumulate.getMapAttr(),
                       slots);
  accumulate.erase();
}

/// An accumulation in `loop` at slots that some of the loop's indices
/// choose (J) and not the others (K) adds, at each position of J, the sum
/// over K: it becomes a loop over J, before `loop`, that accumulates a
/// sum over K (the predicate, over all indices, goes with the sum). A
/// Hopfield module's gradient added over (b, a, mu) into x[b, a] becomes
/// a sum over the memories mu per token (b, a).
bool gatherOverUnusedIndices(ForeachOp loop, AccumulateOp accumulate) {
  Block &body = loop.getBody().front();
  SmallVector<BlockArgument> indices(body.getArguments());
  std::optional<SmallVector<bool>> used =
      slotIndices(accumulate, indices, loop);
  if (!used || llvm::all_of(*used, [](bool u) { return u; }))
    return false;
  // What a softmax weighs is a contraction's to plan, over the loop's
  // whole domain as its rows: nested in a loop over fewer indices, it would
  // be one contraction per position of the loop. (Summed over the whole
  // loop, it is one sum where the loop was.)
  bool whole = llvm::none_of(*used, [](bool u) { return u; });
  if (!whole && weighsBySoftmax(accumulate.getValue(), body))
    return false;
  BodySlice slice{&body, {}};
  addToSlice(accumulate.getValue(), body, slice.ops);
  OpBuilder builder(loop);
  Block *predicate =
      loop.hasPredicate() ? &loop.getPredicate().front() : nullptr;
  gatherAccumulation(builder, accumulate, indices, loop.getSizes().getValue(),
                     *used, predicate, indices, {slice});
  return true;
}

/// An accumulation in a loop nested in `outer` (its body's op), at slots
/// that the inner loop's indices and some of the outer's choose (J) and not
/// the outer's others (K), when what it adds weighs by a softmax: a loop
/// over J, before `outer`, of sums over K, each recomputing what the outer
/// body computes for it. The inner loop's predicate goes with the sums. A
/// second derivative's column side, added per pair (b, h, i, j) into the
/// keys' slots [b, h, j] from a loop over the query rows (b, h, i), becomes
/// sums over the rows i per column (b, h, j): the parent side of a
/// contraction (ParentSide.cpp) where it was a loop over pairs.
bool gatherOverOuterIndices(ForeachOp inner, AccumulateOp accumulate) {
  auto outer = dyn_cast<ForeachOp>(inner->getParentOp());
  if (!outer || outer.hasPredicate() || !hasPlainDims(outer.getSizes()) ||
      !hasPlainDims(inner.getSizes()))
    return false;
  Block &outerBody = outer.getBody().front();
  Block &innerBody = inner.getBody().front();
  // Which indices of (outer…, inner…) choose the slot.
  unsigned outerCount = outerBody.getNumArguments();
  SmallVector<BlockArgument> indices(outerBody.getArguments());
  llvm::append_range(indices, innerBody.getArguments());
  std::optional<SmallVector<bool>> used =
      slotIndices(accumulate, indices, outer);
  if (!used ||
      !llvm::all_of(ArrayRef(*used).drop_front(outerCount),
                    [](bool u) { return u; }) ||
      llvm::all_of(ArrayRef(*used).take_front(outerCount),
                   [](bool u) { return u; }))
    return false;
  // What the value needs from both bodies; the predicate may read indices
  // and values from outside the outer loop only.
  BodySlice outerSlice{&outerBody, {}}, innerSlice{&innerBody, {}};
  addToSlice(accumulate.getValue(), innerBody, innerSlice.ops);
  for (Operation *op : innerSlice.ops)
    addOperandsToSlice(op, outerBody, outerSlice.ops);
  if (!sliceWeighsBySoftmax(innerSlice.ops) &&
      !sliceWeighsBySoftmax(outerSlice.ops))
    return false;
  if (inner.hasPredicate()) {
    bool closed = true;
    inner.getPredicate().walk([&](Operation *op) {
      for (Value operand : op->getOperands())
        closed &= !operand.getDefiningOp() ||
                  isDefinedOutside(operand, outer) ||
                  inner.getPredicate().isAncestor(operand.getParentRegion());
    });
    if (!closed)
      return false;
  }
  SmallVector<Attribute> sizes(outer.getSizes().getValue());
  llvm::append_range(sizes, inner.getSizes().getValue());
  OpBuilder builder(outer);
  Block *predicate =
      inner.hasPredicate() ? &inner.getPredicate().front() : nullptr;
  gatherAccumulation(builder, accumulate, indices, sizes, *used, predicate,
                     innerBody.getArguments(), {outerSlice, innerSlice});
  return true;
}

/// A sum over (J, K) whose body computes arrays that depend on J alone
/// (a token's layer norm and its backward, in a sum over tokens and
/// memories) is a sum over J of sums over K, those arrays computed once
/// per position of J: J is the proper subset of the indices that the most
/// array-valued ops of the body depend on exactly. The inner sums' linear
/// maps then come out of them (FactorLinearMaps.cpp).
bool nestOverInvariantWork(ReduceOp sum) {
  if (sum.getKind() != ReduceKind::sum || sum.getTemperature() ||
      sum.getSizes().size() < 2 || !hasPlainDims(sum.getSizes()))
    return false;
  Block &body = sum.getBody().front();
  Value value = cast<YieldOp>(body.getTerminator()).getValues().front();
  if (weighsBySoftmax(value, body))
    return false;
  unsigned count = body.getNumArguments();
  // Array-valued ops per set of indices (as a bit mask).
  llvm::SmallDenseMap<unsigned, unsigned> arrays;
  for (Operation &op : body.without_terminator()) {
    if (op.getNumResults() != 1 || isScalar(op.getResult(0)) ||
        !isa<ArrayType>(op.getResult(0).getType()))
      continue;
    llvm::SmallPtrSet<Value, 8> indices;
    collectIndices(op.getResult(0), sum, indices);
    unsigned mask = 0;
    for (auto [position, argument] : llvm::enumerate(body.getArguments()))
      if (indices.contains(argument))
        mask |= 1u << position;
    if (mask != 0 && mask != (1u << count) - 1)
      ++arrays[mask];
  }
  unsigned outer = 0, most = 0;
  for (auto [mask, number] : arrays)
    if (number > most || (number == most && mask < outer)) {
      outer = mask;
      most = number;
    }
  if (most == 0)
    return false;

  SmallVector<Attribute> outerSizes, innerSizes;
  for (auto [position, size] : llvm::enumerate(sum.getSizes()))
    ((outer >> position) & 1 ? outerSizes : innerSizes).push_back(size);
  OpBuilder builder(sum);
  Location loc = sum.getLoc();
  auto outerSum = ReduceOp::create(builder, loc, sum.getType(), ReduceKind::sum,
                                   builder.getArrayAttr(outerSizes), Value());
  Block &outerBody = outerSum.getBody().emplaceBlock();
  IRMapping mapping;
  for (auto [position, argument] : llvm::enumerate(body.getArguments()))
    if ((outer >> position) & 1)
      mapping.map(argument,
                  outerBody.addArgument(argument.getType(), argument.getLoc()));
  builder.setInsertionPointToStart(&outerBody);
  auto innerSum = ReduceOp::create(builder, loc, sum.getType(), ReduceKind::sum,
                                   builder.getArrayAttr(innerSizes), Value());
  auto addInner = [&](Block &block, Block &from) {
    for (auto [position, argument] : llvm::enumerate(from.getArguments())) {
      if ((outer >> position) & 1)
        mapping.map(argument, mapping.lookup(body.getArgument(position)));
      else
        mapping.map(argument,
                    block.addArgument(argument.getType(), argument.getLoc()));
    }
  };
  if (sum.hasPredicate()) {
    Block &from = sum.getPredicate().front();
    Block &predicate = innerSum.getPredicate().emplaceBlock();
    addInner(predicate, from);
    OpBuilder inside = OpBuilder::atBlockEnd(&predicate);
    for (Operation &op : from)
      inside.clone(op, mapping);
  }
  Block &innerBody = innerSum.getBody().emplaceBlock();
  addInner(innerBody, body);
  OpBuilder inside = OpBuilder::atBlockEnd(&innerBody);
  for (Operation &op : body)
    inside.clone(op, mapping);
  builder.setInsertionPointAfter(innerSum);
  YieldOp::create(builder, loc, innerSum.getResult());
  moveLoopInvariantCode(cast<LoopLikeOpInterface>(innerSum.getOperation()));
  sum.replaceAllUsesWith(outerSum.getResult());
  sum.erase();
  return true;
}

/// Rewrites Σ_I A[I, K] in a table over K (the column sums of an array, a
/// mixture's weights Σ_i r[i, k] / N) as the element K of Σ_I A[I], whole
/// rows added ahead of the table: one pass over A in its order, not one
/// strided pass per column.
bool sumRowsForColumns(TabulateOp table, ReduceOp sum) {
  Block &body = table.getBody().front();
  if (sum->getBlock() != &body || sum.getKind() != ReduceKind::sum ||
      sum.hasPredicate() || sum.getTemperature() ||
      !hasPlainDims(table.getSizes()))
    return false;
  Block &inner = sum.getBody().front();
  if (inner.getOperations().size() != 2)
    return false;
  Operation *element = &inner.front();
  if (inner.getTerminator()->getOperand(0) != element->getResult(0))
    return false;
  // A read (or extract) at the sum's indices, then the table's.
  auto read = dyn_cast<ReadOp>(element);
  auto extract = dyn_cast<ExtractOp>(element);
  if (!read && !extract)
    return false;
  AffineMap map = read ? read.getMap() : extract.getMap();
  ValueRange indices = read ? read.getIndices() : extract.getIndices();
  size_t leading = inner.getNumArguments();
  if (!map.isIdentity() || indices.size() != leading + body.getNumArguments() ||
      !llvm::equal(indices.take_front(leading), inner.getArguments()) ||
      !llvm::equal(indices.drop_front(leading), body.getArguments()) ||
      (extract && !isDefinedOutside(extract.getSource(), table)))
    return false;
  MLIRContext *context = table.getContext();
  // A row holds the table's positions, each an element of the sum's type.
  SmallVector<StringAttr> dims;
  for (Attribute size : table.getSizes())
    dims.push_back(
        StringAttr::get(context, *cast<DimExprAttr>(size).getDimName()));
  llvm::append_range(dims, cast<ArrayType>(sum.getType()).getShape());
  auto rowType = ArrayType::get(context, dims);
  OpBuilder builder(table);
  Location loc = sum.getLoc();
  auto rows = ReduceOp::create(builder, loc, rowType, ReduceKind::sum,
                               sum.getSizes(), Value());
  Block &rowBody = rows.getBody().emplaceBlock();
  SmallVector<Value> rowIndices;
  for (BlockArgument index : inner.getArguments())
    rowIndices.push_back(rowBody.addArgument(index.getType(), index.getLoc()));
  OpBuilder inside = OpBuilder::atBlockEnd(&rowBody);
  auto rowMap =
      AffineMapAttr::get(AffineMap::getMultiDimIdentityMap(leading, context));
  Value row =
      read ? Value(ReadOp::create(inside, loc, rowType, read.getSourceAttr(),
                                  rowMap, rowIndices))
           : Value(ExtractOp::create(inside, loc, rowType, extract.getSource(),
                                     rowMap, rowIndices));
  YieldOp::create(inside, loc, row);
  // The array's trailing axes must be the table's dims, which the read's
  // verifier checks against the tensor or let it reads.
  {
    GuardedDiagnosticHandler quiet(context,
                                   [](Diagnostic &) { return success(); });
    if (failed(verify(rows))) {
      rows.erase();
      return false;
    }
  }
  builder.setInsertionPoint(sum);
  auto tableMap = AffineMapAttr::get(
      AffineMap::getMultiDimIdentityMap(body.getNumArguments(), context));
  Value column = ExtractOp::create(builder, loc, sum.getType(), rows, tableMap,
                                   body.getArguments());
  sum.replaceAllUsesWith(column);
  sum.erase();
  return true;
}

} // namespace

void mlir::energy::gatherLoopSums(ModelOp model) {
  SmallVector<ForeachOp> loops;
  model.walk([&](ForeachOp loop) { loops.push_back(loop); });
  for (ForeachOp loop : loops) {
    Block &body = loop.getBody().front();
    bool gathered = false;
    for (AccumulateOp accumulate :
         llvm::to_vector(body.getOps<AccumulateOp>())) {
      if (gatherOverUnusedIndices(loop, accumulate))
        gathered = true;
      else
        gathered |= gatherOverOuterIndices(loop, accumulate);
    }
    // A loop left without effects computes nothing.
    if (gathered && body.getOps<AccumulateOp>().empty() &&
        body.getOps<ForeachOp>().empty())
      loop.erase();
  }
  SmallVector<ReduceOp> sums;
  model.walk([&](ReduceOp sum) { sums.push_back(sum); });
  for (ReduceOp sum : sums)
    nestOverInvariantWork(sum);
  SmallVector<TabulateOp> tables;
  model.walk([&](TabulateOp table) { tables.push_back(table); });
  for (TabulateOp table : tables)
    for (ReduceOp sum :
         llvm::to_vector(table.getBody().front().getOps<ReduceOp>()))
      sumRowsForColumns(table, sum);
}
