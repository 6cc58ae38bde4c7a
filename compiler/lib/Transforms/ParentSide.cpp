//===- ParentSide.cpp - Contractions' column sums ------------------------===//
//
// The parent side of energy-plan-softmax-contracts: a sum over rows r of
// w(r, c) · g with w the softmax weight of an lse over the columns c (an
// M-step's statistics; a second derivative's column side, weighted by an
// earlier contraction's normaliser) becomes the column sums of a
// contraction ahead of the loop over c.
//
//===----------------------------------------------------------------------===//

#include "SoftmaxContracts.h"

#include "PlanKernels.h"

#include "mlir/IR/Builders.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

//===----------------------------------------------------------------------===//
// Parent side
//===----------------------------------------------------------------------===//

/// Where a parent-side sum's normaliser L_r comes from: the lse op that
/// defines it, and how that lse's row is indexed.
struct NormaliserSource {
  ReduceOp lse;
  /// The block whose arguments are the rows of the lse (a let's body, or
  /// the sum's body when the sum recomputes the lse itself).
  Block *rowBlock;
  /// When L is a contraction's: a detached table over its rows whose body
  /// is the lse of its score (what `lse` and `rowBlock` refer to), erased
  /// once the sum is planned; and the contraction.
  std::shared_ptr<TabulateOp> shadow;
  SoftmaxContractOp contract;
};

/// The lse a contraction computes, written as the table over its rows of an
/// lse over its columns (detached: what the parent side reads the score,
/// predicate and temperature from). Null when the contraction takes its
/// normaliser as given.
std::shared_ptr<TabulateOp> shadowOfNormaliser(SoftmaxContractOp contract) {
  if (contract.getGivenLse())
    return nullptr;
  MLIRContext *context = contract.getContext();
  OpBuilder builder(context);
  SmallVector<StringAttr> dims;
  for (Attribute size : contract.getRows())
    dims.push_back(
        StringAttr::get(context, *cast<DimExprAttr>(size).getDimName()));
  auto table =
      TabulateOp::create(builder, contract.getLoc(),
                         ArrayType::get(context, dims), contract.getRows());
  Block &rows = table.getBody().emplaceBlock();
  Block &score = contract.getScore().front();
  unsigned rowCount = contract.getNumRowIndices();
  for (BlockArgument argument : score.getArguments().take_front(rowCount))
    rows.addArgument(argument.getType(), argument.getLoc());
  builder.setInsertionPointToEnd(&rows);
  auto lse = ReduceOp::create(builder, contract.getLoc(),
                              ArrayType::getScalar(context), ReduceKind::lse,
                              builder.getArrayAttr({contract.getCols()}),
                              contract.getTemperature());
  auto copy = [&](Region &from, Region &into) {
    Block &source = from.front();
    Block &target = into.emplaceBlock();
    BlockArgument column = source.getArgument(rowCount);
    IRMapping mapping;
    mapping.map(source.getArguments().take_front(rowCount),
                rows.getArguments());
    mapping.map(column, target.addArgument(column.getType(), column.getLoc()));
    OpBuilder inside = OpBuilder::atBlockEnd(&target);
    for (Operation &op : source)
      inside.clone(op, mapping);
  };
  if (contract.hasPredicate())
    copy(contract.getPredicate(), lse.getPredicate());
  copy(contract.getScore(), lse.getBody());
  YieldOp::create(builder, contract.getLoc(), lse.getResult());
  return std::shared_ptr<TabulateOp>(new TabulateOp(table), [](TabulateOp *op) {
    op->erase();
    delete op;
  });
}

/// The sums whose bodies enclose `sum` up to the loop around them, outermost
/// first: a sum over (b…, r) split into Σ_b Σ_r by splitBatchIndices.
SmallVector<ReduceOp> batchSums(ReduceOp sum) {
  SmallVector<ReduceOp> batches;
  for (auto outer = dyn_cast<ReduceOp>(sum->getParentOp());
       outer && outer.getKind() == ReduceKind::sum && !outer.hasPredicate() &&
       hasPlainDims(outer.getSizes());
       outer = dyn_cast<ReduceOp>(outer->getParentOp()))
    batches.insert(batches.begin(), outer);
  return batches;
}

/// The indices of the batch sums then the sum's own: the rows of the lse
/// that the sum's normaliser reads.
SmallVector<Value> rowIndicesOf(ReduceOp sum, ArrayRef<ReduceOp> batches) {
  SmallVector<Value> indices;
  for (ReduceOp batch : batches)
    llvm::append_range(indices, batch.getBody().front().getArguments());
  indices.push_back(sum.getBody().front().getArgument(0));
  return indices;
}

/// Their domains, in the same order.
SmallVector<Attribute> rowSizesOf(ReduceOp sum, ArrayRef<ReduceOp> batches) {
  SmallVector<Attribute> sizes;
  for (ReduceOp batch : batches)
    llvm::append_range(sizes, batch.getSizes());
  llvm::append_range(sizes, sum.getSizes());
  return sizes;
}

/// The let that `value` reads at exactly `indices` (identity map), when its
/// domain is `domain`; null otherwise.
LetOp letReadAt(Value value, ArrayRef<Value> indices,
                ArrayRef<Attribute> domain, SymbolTable &symbols) {
  auto read = value.getDefiningOp<ReadOp>();
  auto let = read ? symbols.lookup<LetOp>(read.getSource()) : LetOp();
  if (!let || !read.getMap().isIdentity() ||
      !llvm::equal(read.getIndices(), indices) ||
      !llvm::equal(let.getDomain(), domain))
    return {};
  return let;
}

/// `value` as a read of a contraction's normaliser, `extract %L[indices]`,
/// also through tables that copy it (an element of a table whose body reads
/// L at the table's indices): the contraction and the indices of L.
std::optional<std::pair<SoftmaxContractOp, SmallVector<Value>>>
normaliserRead(Value value) {
  auto extract = value.getDefiningOp<ExtractOp>();
  if (!extract || !extract.getMap().isIdentity())
    return std::nullopt;
  SmallVector<Value> indices(extract.getIndices());
  Value source = extract.getSource();
  while (auto table = source.getDefiningOp<TabulateOp>()) {
    Block &body = table.getBody().front();
    auto inner = table.getBodyValue().getDefiningOp<ExtractOp>();
    if (!inner || !inner.getMap().isIdentity() ||
        body.getNumArguments() != indices.size())
      return std::nullopt;
    SmallVector<Value> mapped;
    for (Value index : inner.getIndices()) {
      auto argument = dyn_cast<BlockArgument>(index);
      if (argument && argument.getOwner() == &body)
        mapped.push_back(indices[argument.getArgNumber()]);
      else if (isDefinedOutside(index, table))
        mapped.push_back(index);
      else
        return std::nullopt;
    }
    indices = std::move(mapped);
    source = inner.getSource();
  }
  auto result = dyn_cast<OpResult>(source);
  auto contract =
      result ? dyn_cast<SoftmaxContractOp>(result.getOwner()) : nullptr;
  if (!contract || result != contract.getLse())
    return std::nullopt;
  return std::make_pair(contract, indices);
}

/// `score` as x / s, also when written x · (1 / s) (how a contraction's
/// tables state a scale): x and s.
std::optional<std::pair<Value, Value>> asQuotient(Value score) {
  if (auto quotient = score.getDefiningOp<DivOp>())
    return std::make_pair(quotient.getLhs(), quotient.getRhs());
  auto product = score.getDefiningOp<MulOp>();
  if (!product)
    return std::nullopt;
  for (auto [x, factor] :
       {std::make_pair(product.getLhs(), product.getRhs()),
        std::make_pair(product.getRhs(), product.getLhs())}) {
    auto reciprocal = factor.getDefiningOp<DivOp>();
    auto one = reciprocal ? reciprocal.getLhs().getDefiningOp<ConstantOp>()
                          : ConstantOp();
    if (one && one.getValueAttr().getValueAsDouble() == 1.0 && isScalar(factor))
      return std::make_pair(x, reciprocal.getRhs());
  }
  return std::nullopt;
}

/// Whether the scores `a` (in the lse) and `b` (in the sum, through
/// `mapping`) are the same, up to x / s against x · (1 / s).
bool sameScore(Value a, Value b, const IRMapping &mapping) {
  if (computeSame(a, b, mapping))
    return true;
  auto first = asQuotient(a), second = asQuotient(b);
  return first && second && isScalar(first->second) &&
         computeSame(first->first, second->first, mapping) &&
         computeSame(first->second, second->second, mapping);
}

/// L as a read of a let whose body is an lse, read at the rows
/// `rowIndices` over `rowSizes` (the sum's own index after those of its
/// batch), or as an lse in the sum's body.
std::optional<NormaliserSource> normaliserOf(Value value, ReduceOp sum,
                                             ArrayRef<ReduceOp> batches,
                                             ArrayRef<Value> rowIndices,
                                             ArrayRef<Attribute> rowSizes,
                                             SymbolTable &symbols) {
  Block &body = sum.getBody().front();
  if (value.getDefiningOp<ReadOp>()) {
    LetOp let = letReadAt(value, rowIndices, rowSizes, symbols);
    if (!let)
      return std::nullopt;
    auto lse = cast<YieldOp>(let.getBody().front().getTerminator())
                   .getValues()[0]
                   .getDefiningOp<ReduceOp>();
    if (!lse || lse.getKind() != ReduceKind::lse ||
        lse->getBlock() != &let.getBody().front())
      return std::nullopt;
    return NormaliserSource{lse, &let.getBody().front(), nullptr, {}};
  }
  // A contraction's normaliser at exactly these rows.
  if (value.getDefiningOp<ExtractOp>()) {
    auto read = normaliserRead(value);
    if (!read)
      return std::nullopt;
    auto [contract, indices] = *read;
    if (!llvm::equal(indices, rowIndices) ||
        !llvm::equal(contract.getRows(), rowSizes))
      return std::nullopt;
    std::shared_ptr<TabulateOp> shadow = shadowOfNormaliser(contract);
    if (!shadow)
      return std::nullopt;
    Block &rows = shadow->getBody().front();
    return NormaliserSource{cast<ReduceOp>(rows.front()), &rows, shadow,
                            contract};
  }
  // An lse in the sum's body: its row is the sum's index after the loop's.
  auto lse = value.getDefiningOp<ReduceOp>();
  if (batches.empty() && lse && lse.getKind() == ReduceKind::lse &&
      lse->getBlock() == &body)
    return NormaliserSource{lse, &body, nullptr, {}};
  return std::nullopt;
}

/// Writes a sum over several indices (b…, r) whose summand shifts by a
/// normaliser read at all of them as Σ_b Σ_r, the batch sums outside, so
/// that the sum over r can become the parent side of a batched contraction
/// (the rows of a multi-head term are (head, position)); what depends on b
/// only moves out of the sum over r. Returns that inner sum, or null.
ReduceOp splitBatchIndices(ReduceOp sum, SymbolTable &symbols) {
  ArrayAttr sizes = sum.getSizes();
  if (sum.getKind() != ReduceKind::sum || sizes.size() < 2 ||
      !hasPlainDims(sizes))
    return nullptr;
  Block &body = sum.getBody().front();
  // The let may also be indexed, ahead of the sum's indices, by values from
  // outside the sum (the batch index of the loop around it).
  auto readAtSumIndices = [&](Value value) {
    auto read = value.getDefiningOp<ReadOp>();
    auto let = read ? symbols.lookup<LetOp>(read.getSource()) : LetOp();
    if (!let || !read.getMap().isIdentity())
      return false;
    size_t leading = read.getIndices().size() - body.getNumArguments();
    if (read.getIndices().size() < body.getNumArguments() ||
        let.getDomain().size() != read.getIndices().size())
      return false;
    return llvm::equal(read.getIndices().drop_front(leading),
                       body.getArguments()) &&
           llvm::equal(let.getDomain().getValue().drop_front(leading),
                       sizes.getValue()) &&
           llvm::all_of(
               read.getIndices().take_front(leading),
               [&](Value index) { return isDefinedOutside(index, sum); });
  };
  bool shiftedByLet = llvm::any_of(body.getOps<SubOp>(), [&](SubOp shift) {
    return readAtSumIndices(shift.getRhs());
  });
  if (!shiftedByLet)
    return nullptr;
  MLIRContext *context = sum.getContext();
  OpBuilder builder(sum);
  auto outer = ReduceOp::create(
      builder, sum.getLoc(), sum.getType(), ReduceKind::sum,
      ArrayAttr::get(context, sizes.getValue().drop_back()), Value());
  Block &outerBody = outer.getBody().emplaceBlock();
  for (BlockArgument index : body.getArguments().drop_back())
    outerBody.addArgument(index.getType(), index.getLoc());
  builder.setInsertionPointToStart(&outerBody);
  auto inner = ReduceOp::create(
      builder, sum.getLoc(), sum.getType(), ReduceKind::sum,
      ArrayAttr::get(context, sizes.getValue().back()), Value());
  Block &innerBody = inner.getBody().emplaceBlock();
  BlockArgument last = body.getArguments().back();
  innerBody.addArgument(last.getType(), last.getLoc());
  YieldOp::create(builder, sum.getLoc(), inner.getResult());
  for (auto [from, to] :
       llvm::zip(body.getArguments().drop_back(), outerBody.getArguments()))
    from.replaceAllUsesWith(to);
  last.replaceAllUsesWith(innerBody.getArgument(0));
  innerBody.getOperations().splice(innerBody.end(), body.getOperations());
  // The predicate admits the same (b…, r), as a predicate on r.
  if (sum.hasPredicate()) {
    inner.getPredicate().takeBody(sum.getPredicate());
    Block &predicate = inner.getPredicate().front();
    for (auto [from, to] : llvm::zip(predicate.getArguments().drop_back(),
                                     outerBody.getArguments()))
      from.replaceAllUsesWith(to);
    predicate.eraseArguments(0, predicate.getNumArguments() - 1);
  }
  sum.getResult().replaceAllUsesWith(outer.getResult());
  sum.erase();
  moveLoopInvariantCode(cast<LoopLikeOpInterface>(inner.getOperation()));
  return inner;
}

/// Writes `sum`, a sum over rows r of w(r, c) · g with c the index of the
/// loop or table around it and w the softmax weight of an lse over c, as
/// the parent side of a contraction placed before that loop. Sums over
/// batch indices b between the two (splitBatchIndices) make the rows
/// (b…, r) and the outputs per (b…, c); so do leading indices b of the loop
/// itself, over (b…, c), when rows and columns share them (a batch of
/// attention problems).
void formParentSide(ReduceOp sum, SymbolTable &symbols) {
  if (sum.getKind() != ReduceKind::sum || sum.getSizes().size() != 1 ||
      !hasPlainDims(sum.getSizes()))
    return;
  SmallVector<ReduceOp> batches = batchSums(sum);
  Operation *outermost =
      batches.empty() ? sum.getOperation() : batches.front().getOperation();
  Operation *loop = outermost->getParentOp();
  ArrayAttr loopSizes;
  if (auto foreach = dyn_cast<ForeachOp>(loop);
      foreach && !foreach.hasPredicate())
    loopSizes = foreach.getSizes();
  else if (auto table = dyn_cast<TabulateOp>(loop))
    loopSizes = table.getSizes();
  if (!loopSizes || loopSizes.empty() || !hasPlainDims(loopSizes))
    return;
  const size_t shared = loopSizes.size() - 1;
  Block &loopBody = *outermost->getBlock();
  Value column = loopBody.getArgument(shared);
  Block &body = sum.getBody().front();
  SmallVector<Value> rowIndices(loopBody.getArguments().take_front(shared));
  llvm::append_range(rowIndices, rowIndicesOf(sum, batches));
  SmallVector<Attribute> rowSizes(loopSizes.getValue().take_front(shared));
  llvm::append_range(rowSizes, rowSizesOf(sum, batches));
  const unsigned rowCount = rowIndices.size();
  std::optional<NormaliserSource> source;
  std::optional<WeightedSum> weighted = matchWeightedSum(sum, [&](Value value) {
    source = normaliserOf(value, sum, batches, rowIndices, rowSizes, symbols);
    return source.has_value();
  });
  if (!weighted || !source)
    return;
  // The new contraction goes ahead of the loop: the one it takes its score
  // from must not read what the loop computes.
  if (source->contract && loop->isAncestor(source->contract))
    return;
  ReduceOp lse = source->lse;
  if (lse.getSizes().size() != 1 || lse.getSizes()[0] != loopSizes[shared])
    return;
  // The temperature: what the sum divides by must be the lse's, and
  // available before the loop.
  Value temperature = weighted->temperatureUsed;
  if (bool(temperature) != bool(lse.getTemperature()) ||
      (temperature &&
       (!isDefinedOutside(temperature, loop) ||
        !computeSame(lse.getTemperature(), temperature, IRMapping()))))
    return;
  // Maps the lse's rows to `rows` (the rows' indices in another block): the
  // arguments of its row block, or, for an lse in the sum's body, the
  // sum's index and the loop's shared ones.
  auto mapRows = [&](IRMapping &mapping, ArrayRef<Value> rows) {
    if (source->rowBlock != &body) {
      mapping.map(source->rowBlock->getArguments(), rows);
      return;
    }
    mapping.map(body.getArgument(0), rows.back());
    for (auto [index, row] :
         llvm::zip(ArrayRef(rowIndices).drop_back(), rows.drop_back()))
      if (index != row)
        mapping.map(index, row);
  };
  // x must compute the lse's body at (row, column).
  IRMapping toSum;
  toSum.map(lse.getBody().front().getArgument(0), column);
  mapRows(toSum, rowIndices);
  if (!sameScore(lse.getBodyValue(), weighted->shift.getLhs(), toSum))
    return;
  if (lse.hasPredicate() != sum.hasPredicate())
    return;
  if (lse.hasPredicate()) {
    Block &sumPredicate = sum.getPredicate().front();
    IRMapping toPredicate;
    toPredicate.map(lse.getPredicate().front().getArgument(0), column);
    SmallVector<Value> predicateRows(ArrayRef(rowIndices).drop_back());
    predicateRows.push_back(sumPredicate.getArgument(0));
    mapRows(toPredicate, predicateRows);
    auto admits = [](Region &region) {
      return cast<YieldOp>(region.front().getTerminator()).getValues()[0];
    };
    if (!computeSame(admits(lse.getPredicate()), admits(sum.getPredicate()),
                     toPredicate))
      return;
  }

  MLIRContext *context = sum.getContext();
  ContractBuilder contract(context, ArrayAttr::get(context, rowSizes),
                           cast<DimExprAttr>(lse.getSizes()[0]));
  SmallVector<Location> indexLocations;
  for (Value index : rowIndices)
    indexLocations.push_back(index.getLoc());
  indexLocations.push_back(column.getLoc());
  contract.nameIndices(indexLocations);
  // Region arguments: (rows…, column).
  auto fill = [&](Region &region, Block &lseBlock) {
    Block &target = contract.block(region);
    IRMapping mapping;
    SmallVector<Value> rows(target.getArguments().take_front(rowCount));
    mapRows(mapping, rows);
    mapping.map(lseBlock.getArgument(0), target.getArgument(rowCount));
    return RegionFiller(target, mapping, {source->rowBlock, &lseBlock},
                        {&lseBlock});
  };
  bool failedToFill = !fillPredicateAndScore(contract, lse, fill);
  {
    Block &target = contract.block(contract.colSums);
    IRMapping mapping;
    mapping.map(rowIndices, target.getArguments().take_front(rowCount));
    mapping.map(column, target.getArgument(rowCount));
    SmallVector<Block *> sources = {&loopBody};
    for (ReduceOp batch : batches)
      sources.push_back(&batch.getBody().front());
    sources.push_back(&body);
    RegionFiller filler(target, mapping, sources, {&body});
    SmallVector<Value> values;
    for (const LinearTerm &term : weighted->terms) {
      FailureOr<Value> value = filler.materializeTerm(*weighted, term);
      failedToFill |= failed(value);
      if (succeeded(value))
        values.push_back(*value);
    }
    if (!failedToFill)
      filler.yield(sum.getLoc(), values);
  }
  if (failedToFill)
    return;
  OpBuilder rowBuilder = endOf(contract.block(contract.rowSums));
  YieldOp::create(rowBuilder, sum.getLoc(), ValueRange());

  OpBuilder builder(loop);
  SoftmaxContractOp op =
      contract.create(builder, sum.getLoc(), temperature, Value());
  builder.setInsertionPoint(sum);
  // The outputs are per (batch…, column).
  SmallVector<Value> outputIndices(ArrayRef(rowIndices).drop_back());
  outputIndices.push_back(column);
  SmallVector<Value> termSums;
  for (Value output : op.getColOutputs()) {
    auto rowType =
        ArrayType::get(context, cast<ArrayType>(output.getType())
                                    .getShape()
                                    .drop_front(outputIndices.size()));
    termSums.push_back(
        extractAt(builder, sum.getLoc(), output, rowType, outputIndices));
  }
  sum.getResult().replaceAllUsesWith(sumOfTerms(builder, *weighted, termSums));
  sum.erase();
}

/// Whether `value` is the normaliser of a contraction computed before
/// `sum`, over the sum's domain, read at a row that does not vary in the sum
/// (`extract %L[rows]` with the rows of the loop around): the child side. A
/// normaliser read at the sum's own index is the parent side's.
bool isContractNormaliserOver(Value value, ReduceOp sum) {
  auto extract = value.getDefiningOp<ExtractOp>();
  if (!extract)
    return false;
  auto result = dyn_cast<OpResult>(extract.getSource());
  auto contract =
      result ? dyn_cast<SoftmaxContractOp>(result.getOwner()) : nullptr;
  return contract && result == contract.getLse() &&
         contract.getCols() == sum.getSizes()[0] &&
         llvm::all_of(extract.getIndices(), [&](Value index) {
           return isDefinedOutside(index, sum);
         });
}

/// A sum weighted by the softmax of a contraction's normaliser, read at the
/// row of the loop around (what the derivation of a second derivative
/// leaves once the first one's contraction is formed), gets that normaliser
/// from an lse of its own over the same domain, just before it: then the
/// child side forms a contraction of it, which merges with the one that
/// computed the normaliser (same score, domains and predicate): its sums
/// become row sums of that contraction.
void recomputeContractNormalisers(ModelOp model) {
  SmallVector<ReduceOp> sums;
  model.walk([&](ReduceOp sum) {
    if (sum.getKind() == ReduceKind::sum && sum.getSizes().size() == 1 &&
        !sum->getParentOfType<SoftmaxContractOp>() &&
        !sum->getParentOfType<LetOp>())
      sums.push_back(sum);
  });
  for (ReduceOp sum : sums) {
    std::optional<WeightedSum> weighted = matchWeightedSum(
        sum, [&](Value value) { return isContractNormaliserOver(value, sum); });
    if (!weighted)
      continue;
    Value normaliser = weighted->shift.getRhs();
    // The lse of the score x over the sum's domain and predicate, at the
    // temperature the weight divides by.
    OpBuilder builder(sum);
    Location loc = sum.getLoc();
    auto lse =
        ReduceOp::create(builder, loc, normaliser.getType(), ReduceKind::lse,
                         sum.getSizes(), weighted->temperatureUsed);
    IRMapping mapping;
    sum.getPredicate().cloneInto(&lse.getPredicate(), mapping);
    Block &body = sum.getBody().front();
    Block &lseBody = lse.getBody().emplaceBlock();
    addIndexArguments(lseBody, body, mapping);
    Value score = weighted->shift.getLhs();
    llvm::SetVector<Operation *> slice;
    addToSlice(score, body, slice);
    OpBuilder inside = OpBuilder::atBlockEnd(&lseBody);
    cloneSlice(body, slice, inside, mapping);
    YieldOp::create(inside, loc, mapping.lookupOrDefault(score));
    weighted->shift.getRhsMutable().assign(lse.getResult());
  }
}
} // namespace

void mlir::energy::formParentSides(ModelOp model) {
  recomputeContractNormalisers(model);
  SymbolTable symbols(model);
  SmallVector<ReduceOp> sums;
  model.walk([&](ReduceOp reduce) {
    if (reduce.getKind() == ReduceKind::sum &&
        !reduce->getParentOfType<LetOp>())
      sums.push_back(reduce);
  });
  for (ReduceOp sum : sums) {
    if (ReduceOp inner = splitBatchIndices(sum, symbols))
      sum = inner;
    formParentSide(sum, symbols);
  }
}
