//===- PairSums.cpp - A pair bias's gradient summed by the kernel ---------===//
//
// A loop over pairs (r, c) that adds Σ_b exp(S − L) · w, over other
// indices b, into a tensor at an index linear in r and c (the gradient of a
// bias per relative offset, T5's, that a softmax's scores S read; L their
// normaliser, computed before) is a softmax contraction given L, with rows
// (the tensor's other indices, b, r) and column c, whose column values w
// are summed at its pair bias's index (pair sums), then summed over b. The
// kernel computes the scores as small matrix products where the loop
// computed a dot product per pair and index b.
//
//===----------------------------------------------------------------------===//

#include "ContractBuilder.h"
#include "PlanKernels.h"
#include "Slices.h"
#include "SoftmaxContracts.h"

#include "energy/Transforms/Dependence.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// A loop of the form above, matched.
struct PairSumLoop {
  ForeachOp loop;
  AccumulateOp accumulate;
  WeightedSum weighted;
  ExtractOp normaliser;
  /// The contraction's rows (the tensor's batch indices in its order, the
  /// summed ones, then r) and column, as the loop's and the sum's indices.
  SmallVector<BlockArgument> rows;
  BlockArgument column;
  /// How many rows lead the tensor's index (the rest are summed but r).
  unsigned kept = 0;
  /// The pair index a·r + b·c + o.
  DimLinear rowCoefficient, colCoefficient, offset;
};

/// Whether `value` is `index` alone, as a linear index.
bool isIndex(const LinearIndex &value, unsigned index) {
  if (!value.constant.isZero())
    return false;
  for (auto [k, coefficient] : llvm::enumerate(value.coefficients))
    if (!(k == index ? coefficient == DimLinear(1) : coefficient.isZero()))
      return false;
  return true;
}

/// `loop` as a PairSumLoop, or nothing.
std::optional<PairSumLoop> matchPairSumLoop(ForeachOp loop) {
  Block &body = loop.getBody().front();
  if (!hasPlainDims(loop.getSizes()))
    return std::nullopt;
  // One accumulate, of a plain sum over one index that only it reads.
  AccumulateOp accumulate;
  for (Operation &op : body) {
    if (auto add = dyn_cast<AccumulateOp>(op)) {
      if (accumulate)
        return std::nullopt;
      accumulate = add;
    } else if (!isMemoryEffectFree(&op) && !isa<ReadOp, ReduceOp>(op)) {
      return std::nullopt;
    }
  }
  auto sum =
      accumulate ? accumulate.getValue().getDefiningOp<ReduceOp>() : ReduceOp();
  if (!sum || !sum->hasOneUse() || sum->getBlock() != &body ||
      !isPlainSum(sum) ||
      !cast<ArrayType>(accumulate.getValue().getType()).isScalar())
    return std::nullopt;
  Block &summed = sum.getBody().front();
  // L: a scalar computed outside the loop, read at distinct indices.
  auto isNormaliser = [&](Value value) {
    auto extract = value.getDefiningOp<ExtractOp>();
    if (!extract || !isDefinedOutside(extract.getSource(), loop) ||
        !cast<ArrayType>(extract.getType()).isScalar())
      return false;
    llvm::SmallDenseSet<Value> seen;
    for (auto [result, operand] :
         llvm::zip(extract.getMap().getResults(), extract.getIndices())) {
      auto argument = dyn_cast<BlockArgument>(operand);
      if (!isa<AffineDimExpr>(result) || !argument ||
          (argument.getOwner() != &body && argument.getOwner() != &summed) ||
          !seen.insert(operand).second)
        return false;
    }
    return extract.getMap().getNumResults() ==
           body.getNumArguments() + summed.getNumArguments() - 1;
  };
  std::optional<WeightedSum> weighted = matchWeightedSum(sum, isNormaliser);
  if (!weighted || (weighted->temperatureUsed &&
                    !isDefinedOutside(weighted->temperatureUsed, loop)))
    return std::nullopt;
  PairSumLoop match{loop, accumulate, *weighted, {}, {}, {}, 0, {}, {}, {}};
  match.normaliser = weighted->shift.getRhs().getDefiningOp<ExtractOp>();
  // The column: the loop's index that L does not read.
  SmallVector<Value> normaliserIndices(match.normaliser.getIndices());
  for (BlockArgument argument : body.getArguments())
    if (!llvm::is_contained(normaliserIndices, argument))
      match.column = argument;
  if (!match.column)
    return std::nullopt;

  // The tensor's index: batch indices, then the pair index a·r + b·c + o.
  AffineMap map = accumulate.getMap();
  if (map.getNumResults() == 0)
    return std::nullopt;
  SmallVector<LinearIndex> results;
  for (AffineExpr result : map.getResults()) {
    std::optional<LinearIndex> index = linearIndexOfExpr(
        result, accumulate.getIndices(), map.getNumDims(), body);
    if (!index)
      return std::nullopt;
    results.push_back(*index);
  }
  const LinearIndex &pair = results.back();
  const unsigned columnPosition = match.column.getArgNumber();
  BlockArgument row;
  for (auto [k, coefficient] : llvm::enumerate(pair.coefficients)) {
    if (coefficient.isZero() || k == columnPosition)
      continue;
    if (row)
      return std::nullopt;
    row = body.getArgument(k);
  }
  if (!row || pair.coefficients[columnPosition].isZero())
    return std::nullopt;
  match.rowCoefficient = pair.coefficients[row.getArgNumber()];
  match.colCoefficient = pair.coefficients[columnPosition];
  match.offset = pair.constant;
  for (const LinearIndex &batch : ArrayRef(results).drop_back()) {
    auto found = llvm::find_if(body.getArguments(), [&](BlockArgument arg) {
      return isIndex(batch, arg.getArgNumber());
    });
    if (found == body.getArguments().end() || *found == row ||
        *found == match.column || llvm::is_contained(match.rows, *found))
      return std::nullopt;
    match.rows.push_back(*found);
  }
  match.kept = match.rows.size();
  for (BlockArgument argument : body.getArguments())
    if (argument != row && argument != match.column &&
        !llvm::is_contained(match.rows, argument))
      match.rows.push_back(argument);
  llvm::append_range(match.rows, summed.getArguments());
  match.rows.push_back(row);
  return match;
}

/// The size of the index `argument` runs over.
Attribute sizeOf(PairSumLoop &match, BlockArgument argument) {
  if (argument.getOwner()->getParentOp() == match.loop)
    return match.loop.getSizes()[argument.getArgNumber()];
  return match.weighted.sum.getSizes()[argument.getArgNumber()];
}

/// L over the contraction's rows, in their order, a new table.
TabulateOp tabulateNewNormaliser(OpBuilder &builder, PairSumLoop &match) {
  MLIRContext *context = builder.getContext();
  SmallVector<Attribute> sizes;
  SmallVector<StringAttr> shape;
  for (BlockArgument row : match.rows) {
    sizes.push_back(sizeOf(match, row));
    shape.push_back(StringAttr::get(
        context, *cast<DimExprAttr>(sizes.back()).getDimName()));
  }
  Location loc = match.normaliser.getLoc();
  auto table = TabulateOp::create(builder, loc, ArrayType::get(context, shape),
                                  ArrayAttr::get(context, sizes));
  Block &body = table.getBody().emplaceBlock();
  IRMapping mapping;
  for (BlockArgument row : match.rows)
    mapping.map(row, body.addArgument(row.getType(), row.getLoc()));
  OpBuilder inside = OpBuilder::atBlockEnd(&body);
  Operation *element = inside.clone(*match.normaliser, mapping);
  YieldOp::create(inside, loc, element->getResult(0));
  return table;
}

/// L over the contraction's rows, in their order: a table built for an
/// earlier loop of the same block that reads the same normaliser in the
/// same order, or a new one.
Value tabulateNormaliser(OpBuilder &builder, PairSumLoop &match,
                         SmallVectorImpl<TabulateOp> &earlier) {
  for (TabulateOp table : earlier) {
    if (table->getBlock() != match.loop->getBlock())
      continue;
    Block &body = table.getBody().front();
    auto read = dyn_cast<ExtractOp>(body.front());
    if (!read || read.getSource() != match.normaliser.getSource() ||
        read.getMap() != match.normaliser.getMap())
      continue;
    bool sameOrder = true;
    for (auto [index, old] :
         llvm::zip(read.getIndices(), match.normaliser.getIndices()))
      sameOrder =
          sameOrder && cast<BlockArgument>(index).getArgNumber() ==
                           llvm::find(match.rows, old) - match.rows.begin();
    if (sameOrder)
      return table.getResult();
  }
  TabulateOp table = tabulateNewNormaliser(builder, match);
  earlier.push_back(table);
  return table.getResult();
}

/// The contraction of `match` ahead of its loop, or null (having built
/// nothing) when a value cannot be cloned into its regions.
SoftmaxContractOp buildContraction(OpBuilder &builder, PairSumLoop &match,
                                   Value given) {
  MLIRContext *context = builder.getContext();
  SmallVector<Attribute> rowSizes;
  for (BlockArgument row : match.rows)
    rowSizes.push_back(sizeOf(match, row));
  ContractBuilder contract(context, ArrayAttr::get(context, rowSizes),
                           cast<DimExprAttr>(sizeOf(match, match.column)));
  SmallVector<BlockArgument> indices(match.rows);
  indices.push_back(match.column);
  SmallVector<Location> locations;
  for (BlockArgument index : indices)
    locations.push_back(index.getLoc());
  contract.nameIndices(locations);
  Block &loopBody = match.loop.getBody().front();
  Block &sumBody = match.weighted.sum.getBody().front();
  auto fill = [&](Region &region, SmallVector<Block *> sources) {
    IRMapping mapping;
    for (auto [index, argument] :
         llvm::zip(indices, region.front().getArguments()))
      mapping.map(index, argument);
    return RegionFiller(region.front(), mapping, std::move(sources), {});
  };
  Location loc = match.loop.getLoc();
  if (match.loop.hasPredicate()) {
    // The loop's predicate reads its own arguments, the loop's indices.
    Block &predicate = match.loop.getPredicate().front();
    IRMapping mapping;
    for (auto [index, argument] :
         llvm::zip(predicate.getArguments(), loopBody.getArguments()))
      mapping.map(index, contract.predicate.front().getArgument(
                             llvm::find(indices, argument) - indices.begin()));
    RegionFiller filler(contract.predicate.front(), mapping, {&predicate}, {});
    FailureOr<Value> admitted = filler.materialize(
        cast<YieldOp>(predicate.getTerminator()).getValues()[0]);
    if (failed(admitted))
      return {};
    filler.yield(loc, {*admitted});
  }
  RegionFiller score = fill(contract.score, {&loopBody, &sumBody});
  FailureOr<Value> scoreValue =
      score.materialize(match.weighted.shift.getLhs());
  if (failed(scoreValue))
    return {};
  score.yield(loc, {*scoreValue});
  RegionFiller rows = fill(contract.rowSums, {});
  rows.yield(loc, {});
  // Every term whole: the factors a sum over b alone would take out of it
  // vary with the pair.
  WeightedSum whole = match.weighted;
  for (LinearTerm &term : whole.terms)
    llvm::fill(term.pulledOut, false);
  RegionFiller columns = fill(contract.colSums, {&loopBody, &sumBody});
  SmallVector<Value> values;
  for (const LinearTerm &term : whole.terms) {
    FailureOr<Value> value = columns.materializeTerm(whole, term);
    if (failed(value) || !cast<ArrayType>(value->getType()).isScalar())
      return {};
    values.push_back(*value);
  }
  columns.yield(loc, values);
  return contract.create(builder, loc, match.weighted.temperatureUsed, given);
}

/// Adds each pair sum of `contract` into the tensor of `match`, summed over
/// the rows the tensor does not index, after `contract`.
void accumulateSums(SoftmaxContractOp contract, PairSumLoop &match) {
  OpBuilder builder(contract->getContext());
  builder.setInsertionPointAfter(contract);
  MLIRContext *context = contract.getContext();
  Location loc = match.accumulate.getLoc();
  SmallVector<StringAttr> keptDims, summedDims;
  for (auto [k, row] : llvm::enumerate(ArrayRef(match.rows).drop_back()))
    (k < match.kept ? keptDims : summedDims)
        .push_back(StringAttr::get(
            context, *cast<DimExprAttr>(sizeOf(match, row)).getDimName()));
  auto wholeMap = AffineMapAttr::get(AffineMap::get(0, 0, {}, context));
  for (Value sums : contract.getColOutputs()) {
    if (summedDims.empty()) {
      AccumulateOp::create(builder, loc, sums, match.accumulate.getTensorAttr(),
                           wholeMap, ValueRange());
      continue;
    }
    if (keptDims.empty()) {
      Value total = sumOfRows(builder, loc, sums, ValueRange(), summedDims);
      AccumulateOp::create(builder, loc, total,
                           match.accumulate.getTensorAttr(), wholeMap,
                           ValueRange());
      continue;
    }
    auto adding =
        ForeachOp::create(builder, loc, sizesOfDims(context, keptDims));
    Block &body = adding.getBody().emplaceBlock();
    SmallVector<Value> kept = addDimIndices(body, keptDims);
    OpBuilder inside = OpBuilder::atBlockEnd(&body);
    Value total = sumOfRows(inside, loc, sums, kept, summedDims);
    AccumulateOp::create(inside, loc, total, match.accumulate.getTensorAttr(),
                         AffineMapAttr::get(AffineMap::getMultiDimIdentityMap(
                             kept.size(), context)),
                         kept);
  }
}

/// Whether `contract` (built for `match`) is bilinear with a pair bias at
/// the index the loop adds into, of the tensor's length.
bool readsBiasWhereAdded(SoftmaxContractOp contract, PairSumLoop &match) {
  std::string reason;
  FailureOr<BilinearContract> form = contract.matchBilinear(reason);
  if (contract.getForm() != ContractForm::bilinear || failed(form) ||
      !form->pairBias || form->pairBiasRowCoefficient != match.rowCoefficient ||
      form->pairBiasColCoefficient != match.colCoefficient ||
      form->pairBiasOffset != match.offset)
    return false;
  auto model = contract->getParentOfType<ModelOp>();
  auto tensor = dyn_cast_or_null<TensorOp>(
      model.lookupSymbol(match.accumulate.getTensorAttr()));
  if (!tensor)
    return false;
  ArrayRef<StringAttr> axes = tensor.getArrayType().getShape();
  ArrayRef<StringAttr> table =
      cast<ArrayType>(form->pairBias.getType()).getShape();
  if (axes.size() != match.kept + 1 || axes.back() != table.back())
    return false;
  for (auto [axis, row] : llvm::zip(axes.drop_back(), match.rows))
    if (axis.getValue() != *cast<DimExprAttr>(sizeOf(match, row)).getDimName())
      return false;
  return true;
}

/// A contraction of pair sums and the ops after it that add them into the
/// tensor.
struct PairSumContract {
  SoftmaxContractOp contract;
  SmallVector<Operation *> adding;
};

/// `contract` (rebuilt) summing pairs in its every column value, in the CPU
/// kernel.
void markPairSums(SoftmaxContractOp contract) {
  contract.setPairSums(contract.getColValues().size());
  for (auto [result, type] :
       llvm::zip(contract.getResults(), contract.inferResultTypes()))
    result.setType(type);
  contract.setEngine(kCpuEngine);
}

/// Rewrites the loop of `match` as a contraction with pair sums, or leaves
/// the IR as it was.
std::optional<PairSumContract> sumPairs(PairSumLoop &match,
                                        SmallVectorImpl<TabulateOp> &tables) {
  ForeachOp loop = match.loop;
  Operation *before = loop->getPrevNode();
  OpBuilder builder(loop);
  const size_t tableCount = tables.size();
  Value given = tabulateNormaliser(builder, match, tables);
  auto revert = [&] {
    eraseBuiltBefore(loop, before);
    tables.truncate(tableCount);
  };
  SoftmaxContractOp contract = buildContraction(builder, match, given);
  if (!contract) {
    revert();
    return std::nullopt;
  }
  hoistTablesOf(contract);
  if (contract.getForm() == ContractForm::generic)
    tablePairBias(contract);
  if (!readsBiasWhereAdded(contract, match)) {
    revert();
    return std::nullopt;
  }
  markPairSums(contract);
  accumulateSums(contract, match);
  PairSumContract built{contract, {}};
  for (Operation *op = contract->getNextNode(); op != loop;
       op = op->getNextNode())
    built.adding.push_back(op);
  loop.erase();
  return built;
}

/// Contractions of pair sums over the same weights (the same scores, given
/// the same normaliser) as one, at the later's place, the earlier's adds
/// after it: one pass over the pairs where there were two (the two terms of
/// a relative bias's gradient through a backward step).
void mergePairSums(std::vector<PairSumContract> &built) {
  for (size_t i = 0; i < built.size(); ++i)
    for (size_t j = i + 1; j < built.size() && built[i].contract; ++j) {
      SoftmaxContractOp earlier = built[i].contract, later = built[j].contract;
      if (!later || earlier->getBlock() != later->getBlock() ||
          earlier.getGivenLse() != later.getGivenLse() ||
          !sameScores(earlier, later))
        continue;
      OpBuilder atLater(later);
      SoftmaxContractOp merged = rebuildContract(
          atLater, later, {}, {earlier, later}, later.getGivenLse());
      markPairSums(merged);
      for (Operation *op : llvm::reverse(built[i].adding))
        op->moveAfter(merged);
      earlier.erase();
      later.erase();
      built[j].contract = merged;
      built[j].adding.insert(built[j].adding.begin(), built[i].adding.begin(),
                             built[i].adding.end());
      built[i].contract = SoftmaxContractOp();
    }
}

} // namespace

void mlir::energy::sumPairsInKernels(ModelOp model) {
  // The CPU kernel alone sums pairs (the generated loops of other targets
  // already run as the loop does).
  if (model->hasAttr(kDeviceLoopsAttr))
    return;
  std::vector<PairSumLoop> matches;
  model.walk([&](ForeachOp loop) {
    if (isa<ForeachOp, ReduceOp, TabulateOp, SoftmaxContractOp>(
            loop->getParentOp()))
      return;
    if (std::optional<PairSumLoop> match = matchPairSumLoop(loop))
      matches.push_back(*match);
  });
  std::vector<PairSumContract> built;
  SmallVector<TabulateOp> tables;
  for (PairSumLoop &match : matches)
    if (std::optional<PairSumContract> contract = sumPairs(match, tables))
      built.push_back(*contract);
  mergePairSums(built);
}
