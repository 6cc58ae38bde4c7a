//===- ExchangeSums.cpp - Outer products summed over the narrower side ----===//
//
// A loop that adds a_i ⊗ Σ_j w(i, j) v_j into a slot that ignores i (a
// parameter's gradient through an attention: the query side times the
// weighted keys' inputs) adds the same as a loop over j of
// (Σ_i w(i, j) a_i) ⊗ v_j; likewise for a_i ⊙ Σ_j w(i, j) v_j, and for
// the terms of a sum over (…, i). Where a is narrower than v (Y against
// D), or the same at every i, or absent, the pairs then sum a (or the
// weight alone) instead of v, and the contraction that forms
// from the sum over i is the column side of the one over j. Inside the sum
// over j, a term (M u(i, j)) ⊙ v_j whose map M is the same at every pair
// (a projection's transpose) sums to Σ_j v_j ⊙ M Σ_i u(i, j): the pairs
// sum u (Y) rather than v (D).
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"
#include "SizeEstimates.h"
#include "Slices.h"
#include "SoftmaxContracts.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// One exchangeable term: `outer` (an `outer`, or an elementwise `mul` of
/// two arrays) of a row value `row` (varying with the loop's index number
/// `position`, or the same at every position: then it comes out of the
/// exchanged sum) and `sum`, a sum over j of a scalar weight times
/// `carrier`, which does not vary with that index; or `sum` alone (no
/// `row`, `outer` the sum). Or, with a `map` and no `weight`, a term of
/// what `sum` adds: `outer` of `map` times `row` (there a value per pair)
/// and `carrier`.
struct Exchange {
  Operation *outer;
  Value row;
  ReduceOp sum;
  Value weight, carrier;
  unsigned position;
  Value map;
  bool rowVaries;
};

/// A sum over j some of whose terms are exchanged: the terms it keeps.
struct PairSum {
  ReduceOp sum;
  SmallVector<SignedTerm> kept;
};

/// Exchanges in a loop that adds terms: a `foreach` with `accumulate` at
/// slots that ignore its other indices, or a `reduce sum`.
class Exchanger {
public:
  Exchanger(ForeachOp loop, AccumulateOp accumulate)
      : loop(loop), sizes(loop.getSizes()),
        slotIndices(accumulate.getIndices()), accumulate(accumulate),
        dependence(declarationOf(loop)),
        model(loop->getParentOfType<ModelOp>()) {}
  explicit Exchanger(ReduceOp sum)
      : loop(sum), sizes(sum.getSizes()), dependence(declarationOf(sum)),
        model(sum->getParentOfType<ModelOp>()) {}

  /// Splits `terms` into the exchanges that pay (with their signs) and the
  /// terms kept; whether there is an exchange.
  bool partition(ArrayRef<SignedTerm> terms,
                 SmallVectorImpl<std::pair<Exchange, bool>> &exchanges,
                 SmallVectorImpl<SignedTerm> &kept,
                 SmallVectorImpl<PairSum> &pairSums) {
    for (const SignedTerm &term : terms) {
      if (std::optional<Exchange> exchange = match(term.value)) {
        exchanges.push_back({*exchange, term.negated});
        continue;
      }
      if (matchPairTerms(term, exchanges, pairSums) &&
          pairSums.back().kept.empty())
        continue;
      kept.push_back(term);
    }
    return !exchanges.empty();
  }

  /// The terms of what the sum over j `term` adds that are exchanges, added
  /// to `exchanges` (their signs composed with the term's), and the sum
  /// with the terms it keeps to `pairSums`; whether there was one.
  bool matchPairTerms(const SignedTerm &term,
                      SmallVectorImpl<std::pair<Exchange, bool>> &exchanges,
                      SmallVectorImpl<PairSum> &pairSums) {
    auto sum = term.value.getDefiningOp<ReduceOp>();
    if (!sum || !sum->hasOneUse() || sum->getBlock() != &loopBody() ||
        !isPlainSum(sum) || !rowSumsAreNormalisers(sum, Value()))
      return false;
    auto yield = cast<YieldOp>(sum.getBody().front().getTerminator());
    SmallVector<SignedTerm> inner;
    collectSignedTerms(yield.getValues()[0], /*negated=*/false, inner);
    PairSum pairSum{sum, {}};
    bool found = false;
    for (const SignedTerm &innerTerm : inner) {
      if (std::optional<Exchange> exchange = matchPair(innerTerm.value, sum)) {
        exchanges.push_back({*exchange, term.negated != innerTerm.negated});
        found = true;
      } else {
        pairSum.kept.push_back(innerTerm);
      }
    }
    if (found)
      pairSums.push_back(std::move(pairSum));
    return found;
  }

  /// The term of what `sum` adds as an exchange with a map, when it is one
  /// and pays.
  std::optional<Exchange> matchPair(Value term, ReduceOp sum) {
    Operation *outer = term.getDefiningOp();
    if (!outer || outer->getBlock() != &sum.getBody().front() ||
        !isProduct(outer))
      return std::nullopt;
    Value lhs = outer->getOperand(0), rhs = outer->getOperand(1);
    for (auto [mapped, carrier] : {std::pair(lhs, rhs), std::pair(rhs, lhs)}) {
      auto product = mapped.getDefiningOp<MatmulOp>();
      if (!product || !isMatrix(product.getLhs()) || isScalar(carrier) ||
          !isDefinedOutside(product.getLhs(), sum))
        continue;
      Value map = product.getLhs(), summand = product.getRhs();
      if (estimatedElements(model, carrier.getType()) <=
          estimatedElements(model, summand.getType()))
        continue;
      std::optional<unsigned> position =
          exchangedIndex(summand, carrier, map, sum);
      if (!position)
        continue;
      return Exchange{outer,   summand,   sum, Value(),
                      carrier, *position, map, /*rowVaries=*/true};
    }
    return std::nullopt;
  }

  /// The term as an exchange, when it is one and pays.
  std::optional<Exchange> match(Value term) {
    Operation *outer = term.getDefiningOp();
    if (!outer || outer->getBlock() != &loopBody())
      return std::nullopt;
    if (auto sum = dyn_cast<ReduceOp>(outer))
      return matchRow(outer, Value(), sum);
    if (!isProduct(outer))
      return std::nullopt;
    Value lhs = outer->getOperand(0), rhs = outer->getOperand(1);
    for (auto [row, summed] : {std::pair(lhs, rhs), std::pair(rhs, lhs)}) {
      auto sum = summed.getDefiningOp<ReduceOp>();
      if (!sum || sum->getBlock() != outer->getBlock())
        continue;
      if (std::optional<Exchange> exchange = matchRow(outer, row, sum))
        return exchange;
    }
    return std::nullopt;
  }

  /// `outer` as an exchange of `row` (null: the term is `sum` alone) with
  /// `sum`, when it is one and pays.
  std::optional<Exchange> matchRow(Operation *outer, Value row, ReduceOp sum) {
    if (!isPlainSum(sum))
      return std::nullopt;
    auto product = sum.getBodyValue().getDefiningOp<MulOp>();
    if (!product)
      return std::nullopt;
    Value weight = product.getLhs(), carrier = product.getRhs();
    if (!isScalar(weight))
      std::swap(weight, carrier);
    if (!isScalar(weight) || isScalar(carrier))
      return std::nullopt;
    std::optional<unsigned> position = exchangedIndex(row, carrier, sum);
    if (!position || !rowSumsAreNormalisers(sum, row))
      return std::nullopt;
    // The pairs add the weight alone where the row is the same at every i.
    bool rowVaries =
        row && dependence.dependsOn(row, loopBody().getArgument(*position));
    if (estimatedElements(model, carrier.getType()) <=
        (rowVaries ? rowWidth(row) : 1))
      return std::nullopt;
    return Exchange{outer,   row,       sum,     weight,
                    carrier, *position, Value(), rowVaries};
  }

  /// Whether `op` is an `outer`, or an elementwise `mul` of two arrays.
  static bool isProduct(Operation *op) {
    return isa<OuterOp>(op) ||
           (isa<MulOp>(op) &&
            op->getOperand(0).getType() == op->getOperand(1).getType() &&
            !isScalar(op->getOperand(0)));
  }

  /// Whether `sum` is a plain sum over one index (a table over the
  /// exchanged domain needs plain dims).
  bool isPlainSum(ReduceOp sum) {
    return sum.getKind() == ReduceKind::sum && !sum.getTemperature() &&
           sum.getSizes().size() == 1 &&
           (accumulate || hasPlainDims(sum.getSizes()));
  }

  /// Adds the exchanged loop after `loop`, adding what `exchange` added
  /// (negated when `negated`): for a `reduce sum`, a table over the
  /// exchanged domain and its sum, which is returned.
  Value build(Exchange exchange, bool negated) {
    Location loc = exchange.outer->getLoc();
    tabulateRowSums(exchange.sum, exchange.row);
    Block &body = loopBody();
    Block &sumBody = exchange.sum.getBody().front();
    BlockArgument rowIndex = body.getArgument(exchange.position);
    BlockArgument columnIndex = sumBody.getArgument(0);

    // The loop over the same domain with j in place of i.
    SmallVector<Attribute> exchangedSizes(sizes.getValue());
    exchangedSizes[exchange.position] = exchange.sum.getSizes()[0];
    OpBuilder builder(loop->getContext());
    builder.setInsertionPointAfter(loop);
    ArrayAttr domain = builder.getArrayAttr(exchangedSizes);
    Type termType = exchange.outer->getResult(0).getType();
    // (A sum alone is multiplied as the weights' sum times v_j.)
    bool rowFirst =
        !exchange.row ||
        (exchange.map ? exchange.outer->getOperand(0) != exchange.carrier
                      : exchange.outer->getOperand(0) == exchange.row);
    // For a `reduce sum` of outer products, the table holds the rows' sums
    // (what the contraction's column pass fills) and a sum over the domain
    // their outer products with v_j: a table of the outer products would
    // hold a matrix per position.
    bool rowSumsTable = !accumulate && isa<OuterOp>(exchange.outer);
    Type tableElement =
        rowSumsTable ? exchange.outer->getOperand(rowFirst ? 0 : 1).getType()
                     : termType;
    auto tableType = [&] {
      MLIRContext *context = loop->getContext();
      SmallVector<StringAttr> dims;
      for (Attribute size : exchangedSizes)
        dims.push_back(
            StringAttr::get(context, *cast<DimExprAttr>(size).getDimName()));
      llvm::append_range(dims, cast<ArrayType>(tableElement).getShape());
      return ArrayType::get(context, dims);
    };
    Operation *exchanged =
        accumulate
            ? ForeachOp::create(builder, loop->getLoc(), domain).getOperation()
            : TabulateOp::create(builder, loop->getLoc(), tableType(), domain)
                  .getOperation();
    Block *outerBody = new Block();
    exchanged->getRegion(accumulate ? 1 : 0).push_back(outerBody);
    IRMapping outside;
    for (BlockArgument argument : body.getArguments())
      outside.map(argument, outerBody->addArgument(argument.getType(),
                                                   argument.getLoc()));
    Value columnArgument = outerBody->getArgument(exchange.position);
    outside.map(columnIndex, columnArgument);
    builder.setInsertionPointToStart(outerBody);

    // Σ_i w(i, j) a_i over i, under the sum's predicate.
    auto rows = ReduceOp::create(
        builder, loc,
        exchange.rowVaries ? exchange.row.getType() : exchange.weight.getType(),
        ReduceKind::sum, builder.getArrayAttr(sizes[exchange.position]),
        Value());
    auto indexBlock = [&](Region &region) {
      Block *block = new Block();
      region.push_back(block);
      IRMapping mapping = outside;
      mapping.map(rowIndex,
                  block->addArgument(rowIndex.getType(), rowIndex.getLoc()));
      return std::pair(block, mapping);
    };
    if (exchange.sum.hasPredicate()) {
      auto [block, mapping] = indexBlock(rows.getPredicate());
      Block &predicate = exchange.sum.getPredicate().front();
      mapping.map(predicate.getArgument(0), columnArgument);
      OpBuilder inner = OpBuilder::atBlockEnd(block);
      for (Operation &op : predicate)
        inner.clone(op, mapping);
    }
    {
      auto [block, mapping] = indexBlock(rows.getBody());
      OpBuilder inner = OpBuilder::atBlockEnd(block);
      llvm::SetVector<Operation *> slice;
      addOperandsToSlice(exchange.sum, body, slice);
      if (exchange.rowVaries)
        addToSlice(exchange.row, body, slice);
      cloneSlice(body, slice, inner, mapping);
      for (Operation &op : sumBody.without_terminator())
        inner.clone(op, mapping);
      Value summand = mapping.lookupOrDefault(exchange.weight);
      if (exchange.rowVaries && !exchange.weight) {
        summand = mapping.lookupOrDefault(exchange.row);
      } else if (exchange.rowVaries) {
        Value row = mapping.lookupOrDefault(exchange.row);
        // w a as Σ_k w_k a over the terms of w, each linear in the softmax
        // weight the parent side takes out.
        SmallVector<SignedTerm> weightTerms;
        collectSignedTerms(mapping.lookup(exchange.weight), /*negated=*/false,
                           weightTerms);
        for (SignedTerm &term : weightTerms)
          term.value = MulOp::create(inner, loc, term.value, row);
        summand = buildSignedSum(inner, loc, weightTerms);
      }
      YieldOp::create(inner, loc, summand);
      // (What the other terms of the sum needed.)
      eraseDeadOps(*block);
    }

    Value summed = rows.getResult();
    IRMapping columnMapping = outside;
    if (exchange.row && !exchange.rowVaries) {
      llvm::SetVector<Operation *> rowSlice;
      addToSlice(exchange.row, body, rowSlice);
      cloneSlice(body, rowSlice, builder, columnMapping);
      summed = MulOp::create(builder, loc, summed,
                             columnMapping.lookupOrDefault(exchange.row));
    }
    if (exchange.map) {
      llvm::SetVector<Operation *> mapSlice;
      addToSlice(exchange.map, body, mapSlice);
      cloneSlice(body, mapSlice, builder, columnMapping);
      summed = MatmulOp::create(
          builder, loc, columnMapping.lookupOrDefault(exchange.map), summed);
    }
    ReduceOp outerSum;
    if (rowSumsTable) {
      YieldOp::create(builder, loc, summed);
      builder.setInsertionPointAfter(exchanged);
      outerSum = ReduceOp::create(builder, loc, termType, ReduceKind::sum,
                                  domain, Value());
      Block *outerSumBody = new Block();
      outerSum.getBody().push_back(outerSumBody);
      columnMapping = IRMapping();
      SmallVector<Value> indices;
      for (BlockArgument argument : body.getArguments()) {
        indices.push_back(
            outerSumBody->addArgument(argument.getType(), argument.getLoc()));
        columnMapping.map(argument, indices.back());
      }
      columnMapping.map(columnIndex, indices[exchange.position]);
      builder.setInsertionPointToStart(outerSumBody);
      summed = extractAt(builder, loc, exchanged->getResult(0), tableElement,
                         indices);
    }

    // v_j at the loop's j, and the outer product in the original order.
    llvm::SetVector<Operation *> carrierSlice;
    addToSlice(exchange.carrier, sumBody, carrierSlice);
    llvm::SetVector<Operation *> outerSlice;
    for (Operation *op : carrierSlice)
      addOperandsToSlice(op, body, outerSlice);
    cloneSlice(body, outerSlice, builder, columnMapping);
    cloneSlice(sumBody, carrierSlice, builder, columnMapping);
    Value carrier = columnMapping.lookupOrDefault(exchange.carrier);
    Value first = rowFirst ? summed : carrier;
    Value second = rowFirst ? carrier : summed;
    Value product =
        isa<OuterOp>(exchange.outer)
            ? OuterOp::create(builder, loc, first, second).getResult()
            : MulOp::create(builder, loc, first, second).getResult();
    if (negated)
      product = NegOp::create(builder, loc, product);
    if (accumulate) {
      IRMapping accumulateMapping = outside;
      accumulateMapping.map(accumulate.getValue(), product);
      builder.clone(*accumulate, accumulateMapping);
      return Value();
    }
    YieldOp::create(builder, loc, product);
    if (outerSum)
      return outerSum.getResult();
    // Σ over the exchanged domain of the table.
    builder.setInsertionPointAfter(exchanged);
    auto total = ReduceOp::create(builder, loc, termType, ReduceKind::sum,
                                  domain, Value());
    Block *totalBody = new Block();
    total.getBody().push_back(totalBody);
    SmallVector<Value> indices;
    for (BlockArgument argument : outerBody->getArguments())
      indices.push_back(
          totalBody->addArgument(argument.getType(), argument.getLoc()));
    OpBuilder inside = OpBuilder::atBlockEnd(totalBody);
    YieldOp::create(
        inside, loc,
        extractAt(inside, loc, exchanged->getResult(0), termType, indices));
    return total.getResult();
  }

  Block &loopBody() { return loop->getRegion(1).front(); }

  /// The width that the exchanged sum adds per pair for `row`: that of the
  /// vector a matrix maps to it (the map then applies after the sum).
  double rowWidth(Value row) {
    double width = estimatedElements(model, row.getType());
    if (auto product = row.getDefiningOp<MatmulOp>();
        product && isMatrix(product.getLhs()))
      width =
          std::min(width, estimatedElements(model, product.getRhs().getType()));
    return width;
  }

private:
  /// Whether the sums per row that the exchanged sum over rows would
  /// recompute at every pair are normalisers alone (an lse per row, which
  /// the parent side of a contraction takes in); other sums per row would
  /// stay sums inside it.
  bool rowSumsAreNormalisers(ReduceOp sum, Value row) {
    for (Operation *op : rowSlice(sum, row)) {
      bool nestedSum = false;
      op->walk([&](ReduceOp reduce) {
        nestedSum |= reduce != op && reduce.getKind() != ReduceKind::lse;
      });
      if (nestedSum)
        return false;
    }
    return true;
  }

  /// The ops of the loop's body that `sum` and `row` (if any) need.
  llvm::SetVector<Operation *> rowSlice(ReduceOp sum, Value row) {
    Block &body = loopBody();
    llvm::SetVector<Operation *> slice;
    addOperandsToSlice(sum, body, slice);
    if (row)
      addToSlice(row, body, slice);
    return slice;
  }

  /// Reads each sum per row other than an lse, of those `sum` and `row`
  /// need, from a table of it over the loop's domain ahead of the loop: the
  /// exchanged loop reads it there rather than recomputing it per pair, and
  /// the table becomes the rows of a contraction.
  void tabulateRowSums(ReduceOp sum, Value row) {
    Block &body = loopBody();
    SmallVector<Value> indices(body.getArguments());
    for (Operation *op : rowSlice(sum, row)) {
      auto reduce = dyn_cast<ReduceOp>(op);
      if (!reduce || reduce.getKind() == ReduceKind::lse)
        continue;
      Value table = arrayOver(reduce.getResult(), indices, sizes.getValue(),
                              {&body}, loop);
      OpBuilder builder(reduce);
      Value element =
          extractAt(builder, reduce.getLoc(), table, reduce.getType(), indices);
      reduce.getResult().replaceAllUsesWith(element);
    }
  }

  /// The index of the loop that `row` varies with, `carrier` does not and
  /// the accumulation's slot ignores: the one to exchange with `sum`'s.
  std::optional<unsigned> exchangedIndex(Value row, Value carrier,
                                         ReduceOp sum) {
    return exchangedIndex(row, carrier, Value(), sum);
  }

  /// exchangedIndex for a value per pair `row` of `sum` under `map`: of
  /// the indices it would exchange, those `map` does not vary with (a head
  /// selects the map). Any of them may be exchanged; of several (a
  /// grouped head r besides the query i), the one `sum`'s predicate relates
  /// to j, else the innermost: the row index a contraction over (i, j)
  /// pairs with j (OrderLseRows.cpp puts it last), whose column side then
  /// sums the exchanged rows.
  std::optional<unsigned> exchangedIndex(Value row, Value carrier, Value map,
                                         ReduceOp sum) {
    Block &body = loopBody();
    auto candidatesVaryingWith = [&](Value varying) {
      SmallVector<unsigned> candidates;
      for (BlockArgument index : body.getArguments())
        if (!llvm::is_contained(slotIndices, index) &&
            dependence.dependsOn(varying, index) &&
            !dependence.dependsOn(carrier, index) &&
            (!map || !dependence.dependsOn(map, index)))
          candidates.push_back(index.getArgNumber());
      return candidates;
    };
    SmallVector<unsigned> candidates;
    if (row)
      candidates = candidatesVaryingWith(row);
    // A row value the same at every i (a head's vector), or none, is summed
    // over i all the same: Σ_i a ⊗ Σ_j w(i, j) v_j = a ⊗ Σ_j (Σ_i w(i, j))
    // v_j.
    if (candidates.empty() && !map)
      candidates = candidatesVaryingWith(sum.getResult());
    if (candidates.size() > 1 && sum.hasPredicate()) {
      llvm::SmallPtrSet<Value, 4> related;
      collectIndices(sum.getPredicate().front().getTerminator()->getOperand(0),
                     loop, related);
      SmallVector<unsigned> paired(candidates);
      llvm::erase_if(paired, [&](unsigned position) {
        return !related.contains(body.getArgument(position));
      });
      if (!paired.empty())
        candidates = paired;
    }
    if (candidates.empty())
      return std::nullopt;
    return candidates.back();
  }

  Operation *loop;
  ArrayAttr sizes;
  SmallVector<Value> slotIndices;
  AccumulateOp accumulate;
  IndexDependence dependence;
  ModelOp model;
};

/// Leaves in each sum of `pairSums` the terms it keeps.
void keepPairTerms(ArrayRef<PairSum> pairSums) {
  for (PairSum pairSum : pairSums) {
    Block &body = pairSum.sum.getBody().front();
    Operation *yield = body.getTerminator();
    if (!pairSum.kept.empty()) {
      OpBuilder builder(yield);
      yield->setOperand(0,
                        buildSignedSum(builder, yield->getLoc(), pairSum.kept));
    }
    eraseDeadOps(body);
  }
}

/// Exchanges the sums of the terms of one accumulation in `loop` that pay;
/// whether it did.
bool exchangeAccumulation(ForeachOp loop, AccumulateOp accumulate) {
  SmallVector<SignedTerm> terms;
  collectSignedTerms(accumulate.getValue(), /*negated=*/false, terms);
  Exchanger exchanger(loop, accumulate);
  SmallVector<std::pair<Exchange, bool>> exchanges;
  SmallVector<SignedTerm> kept;
  SmallVector<PairSum> pairSums;
  if (!exchanger.partition(terms, exchanges, kept, pairSums))
    return false;
  for (auto &[exchange, negated] : exchanges)
    exchanger.build(exchange, negated);
  keepPairTerms(pairSums);
  OpBuilder builder(accumulate);
  if (Value rest = buildSignedSum(builder, accumulate.getLoc(), kept))
    accumulate.getValueMutable().assign(rest);
  else
    accumulate->erase();
  eraseDeadOps(loop.getBody().front());
  return true;
}

/// Exchanges the sums of the terms that `sum` (a sum over an index domain)
/// adds, where they pay; whether it did.
bool exchangeSumTerms(ReduceOp sum) {
  auto yield = cast<YieldOp>(sum.getBody().front().getTerminator());
  SmallVector<SignedTerm> terms;
  collectSignedTerms(yield.getValues()[0], /*negated=*/false, terms);
  Exchanger exchanger(sum);
  SmallVector<std::pair<Exchange, bool>> exchanges;
  SmallVector<SignedTerm> kept;
  SmallVector<PairSum> pairSums;
  if (!exchanger.partition(terms, exchanges, kept, pairSums))
    return false;
  Operation *next = sum->getNextNode();
  SmallVector<SignedTerm> totals;
  for (auto &[exchange, negated] : exchanges)
    totals.push_back({exchanger.build(exchange, negated), false});
  keepPairTerms(pairSums);
  Location loc = sum.getLoc();
  if (!kept.empty()) {
    OpBuilder atYield(yield);
    yield->setOperand(0, buildSignedSum(atYield, loc, kept));
    totals.insert(totals.begin(), {sum.getResult(), false});
  }
  // After the tables and sums built (each right after `sum`).
  OpBuilder builder(next);
  Value total = buildSignedSum(builder, loc, totals);
  llvm::SmallPtrSet<Operation *, 4> adds;
  for (Operation *op = total.getDefiningOp(); op && op != next;
       op = op->getPrevNode())
    if (isa<AddOp>(op))
      adds.insert(op);
  if (kept.empty()) {
    sum.getResult().replaceAllUsesWith(total);
    sum->erase();
    return true;
  }
  sum.getResult().replaceAllUsesExcept(total, adds);
  eraseDeadOps(sum.getBody().front());
  return true;
}

/// Whether `declaration` reads the parent side of an lse term (a
/// `@T.gather` let): then its contractions have a column pass, which the
/// exchanged sums join; without one they make a pass of their own, which
/// pays in some plans and not in others (runKernelPlanPipeline weighs the
/// two).
bool hasParentSide(Operation *declaration) {
  WalkResult walk = declaration->walk([](ReadOp read) {
    return isGatherLet(read.getSource()) ? WalkResult::interrupt()
                                         : WalkResult::advance();
  });
  return walk.wasInterrupted();
}

} // namespace

void mlir::energy::exchangeSums(ModelOp model, bool withoutColumnPass) {
  // One accumulation at a time: an exchange adds a loop and erases ops.
  for (int round = 0; round < 256; ++round) {
    SmallVector<std::pair<ForeachOp, AccumulateOp>> accumulations;
    SmallVector<ReduceOp> sums;
    for (Operation &declaration : model.getBody().front()) {
      if (!withoutColumnPass && !hasParentSide(&declaration))
        continue;
      declaration.walk([&](Operation *op) {
        if (auto accumulate = dyn_cast<AccumulateOp>(op)) {
          auto loop = dyn_cast<ForeachOp>(accumulate->getParentOp());
          if (loop && !loop.hasPredicate())
            accumulations.push_back({loop, accumulate});
        } else if (auto sum = dyn_cast<ReduceOp>(op)) {
          Operation *value = sum.getBodyValue().getDefiningOp();
          if (sum.getKind() == ReduceKind::sum && !sum.hasPredicate() &&
              hasPlainDims(sum.getSizes()) && value &&
              isa<OuterOp, MulOp, AddOp, SubOp, NegOp, ReduceOp>(value))
            sums.push_back(sum);
        }
      });
    }
    bool changed = false;
    for (auto [loop, accumulate] : accumulations)
      if (exchangeAccumulation(loop, accumulate)) {
        changed = true;
        break;
      }
    for (ReduceOp sum : sums)
      if (!changed && exchangeSumTerms(sum))
        changed = true;
    if (!changed)
      return;
  }
}
