//===- FactorContractOutputs.cpp - Linear maps out of contraction sums ----===//
//
// A contraction that sums both f(u) and f(u M), where u is a row of a table
// U read at some position, u M the same row of the product table U M, and f
// linear (a scalar factor), sums the second as (Σ w f(u)) M: one matrix
// product per output row after the contraction instead of the width of M
// more multiply-adds per pair, M square or not (a Hopfield layer's keys
// project D to A). The backward step's second derivatives sum x, Wk x and
// s·x, s·Wk x and c, Wkᵀ c over the same weights.
//
// A value that is a map linear in what varies with the pair, whose other
// operands are the output position's (a row's vector times a column's,
// element-wise; a row's matrix times a column's vector), sums what varies
// and the map applies after the contraction, once per output position:
// Σ_c w(r, c) (a_r ⊙ v_c) = a_r ⊙ Σ_c w(r, c) v_c. What is left may be a
// row of a table, the bilinear form. (A product is first regrouped by what
// its factors depend on, so that the output position's come last and the
// summed side's form one table row.) A value a side yields twice is summed
// once, and outputs that one table only adds up, scaled by numbers known
// ahead of the contraction, are one output: Σ_c w (a f₁ + b f₂) in place of
// a Σ_c w f₁ + b Σ_c w f₂.
//
//===----------------------------------------------------------------------===//

#include "Linearity.h"
#include "PlanKernels.h"
#include "Slices.h"

#include "energy/Transforms/Dependence.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"

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

/// Whether `first` is a row `firstRow` and `second` a row `secondRow` (of
/// another width: u and u M for a matrix M that is not square) scaled alike,
/// through the same negations and products and quotients by the same
/// scalars.
bool sameScaling(Value first, Value firstRow, Value second, Value secondRow) {
  if (first == firstRow || second == secondRow)
    return first == firstRow && second == secondRow;
  Operation *x = first.getDefiningOp(), *y = second.getDefiningOp();
  if (!x || !y || x->getName() != y->getName() ||
      !isa<MulOp, DivOp, NegOp>(x) ||
      x->getNumOperands() != y->getNumOperands())
    return false;
  // One operand is the scaled row: the dividend of a quotient.
  if (llvm::count_if(x->getOperands(), [](Value v) { return !isScalar(v); }) !=
          1 ||
      (isa<DivOp>(x) && isScalar(x->getOperand(0))))
    return false;
  for (auto [a, b] : llvm::zip(x->getOperands(), y->getOperands())) {
    if (isScalar(a) && isScalar(b)) {
      if (!computeSame(a, b, {}))
        return false;
    } else if (isScalar(a) || isScalar(b) ||
               !sameScaling(a, firstRow, b, secondRow)) {
      return false;
    }
  }
  return true;
}

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
      if (!computeSame(candidate, value, substitution) &&
          !sameScaling(candidate, row.getResult(), value, mapped.getResult()))
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
/// A copy of `op`, its regions moved into it, without the results
/// `dropped` (whose values the caller no longer yields) and, with `added`,
/// one more result of that type before result `addedBefore` (the caller
/// yields its value; its number goes to `addedNumber`); `newNumber` gets each
/// result's number in the copy, -1 for the dropped ones. The uses of the kept
/// results move to the copy; `op` stays, for the caller to erase.
Operation *rebuilt(SoftmaxContractOp op,
                   const llvm::SmallDenseSet<unsigned> &dropped,
                   SmallVectorImpl<int> &newNumber, Type added = Type(),
                   unsigned addedBefore = 0, int *addedNumber = nullptr) {
  OperationState state(op.getLoc(), op->getName());
  state.addOperands(op->getOperands());
  state.propertiesAttr = op->getPropertiesAsAttribute();
  for (Region &region : op->getRegions())
    state.addRegion()->takeBody(region);
  for (OpResult result : op->getResults()) {
    if (added && result.getResultNumber() == addedBefore) {
      if (addedNumber)
        *addedNumber = state.types.size();
      state.addTypes(added);
    }
    bool isDropped = dropped.contains(result.getResultNumber());
    newNumber.push_back(isDropped ? -1 : int(state.types.size()));
    if (!isDropped)
      state.addTypes(result.getType());
  }
  if (added && addedBefore >= op->getNumResults()) {
    if (addedNumber)
      *addedNumber = state.types.size();
    state.addTypes(added);
  }
  OpBuilder builder(op);
  Operation *replacement = builder.create(state);
  for (OpResult result : op->getResults())
    if (int number = newNumber[result.getResultNumber()]; number >= 0)
      result.replaceAllUsesWith(replacement->getResult(number));
  return replacement;
}

/// A side that yields the same value twice sums it once: the second
/// output reads the first's; one that yields a value and that value times
/// scalars known ahead (a row of an array and of its negation) sums it
/// once too, the second output the first's times the scalars. Returns the
/// contraction (a new op when some output went).
SoftmaxContractOp dropDuplicateOutputs(SoftmaxContractOp op) {
  llvm::SmallDenseSet<unsigned> dropped;
  SmallVector<std::pair<unsigned, unsigned>> sameAs;
  // Output, the output it is a multiple of, and the scalars.
  SmallVector<std::tuple<unsigned, unsigned, SmallVector<Value>>> scaledAs;
  SmallVector<Operation *> built;
  auto scan = [&](Region &region, ResultRange outputs) {
    if (region.empty())
      return;
    auto yield = cast<YieldOp>(region.front().getTerminator());
    OpBuilder builder(yield);
    SmallVector<unsigned> positions;
    for (unsigned i = 0, e = yield.getNumOperands(); i < e; ++i)
      for (unsigned j = 0; j < i; ++j) {
        if (llvm::is_contained(positions, j) ||
            yield.getOperand(j).getType() != yield.getOperand(i).getType())
          continue;
        SmallVector<Value> factors;
        if (!isScaledCopy(yield.getOperand(i), yield.getOperand(j), op, factors,
                          builder, built))
          continue;
        positions.push_back(i);
        dropped.insert(outputs[i].getResultNumber());
        unsigned kept = outputs[j].getResultNumber();
        if (factors.empty())
          sameAs.push_back({outputs[i].getResultNumber(), kept});
        else
          scaledAs.push_back({outputs[i].getResultNumber(), kept, factors});
        break;
      }
    for (unsigned position : llvm::reverse(positions))
      yield.getValuesMutable().erase(position);
  };
  // Both sides' outputs as they are now: which results are the column
  // side's depends on how many values the row side yields.
  ResultRange rowOutputs = op.getRowOutputs(), colOutputs = op.getColOutputs();
  scan(op.getRowSums(), rowOutputs);
  scan(op.getColSums(), colOutputs);
  // The scalars that minus signs made are built ahead of the contraction;
  // the rest of what was built is erased.
  OpBuilder ahead(op);
  for (auto &[output, kept, factors] : scaledAs)
    for (Value &factor : factors)
      if (auto constant = factor.getDefiningOp<ConstantOp>();
          constant && llvm::is_contained(built, constant.getOperation()))
        factor = ConstantOp::create(ahead, constant.getLoc(),
                                    constant.getValueAttr().getValueAsDouble());
  for (Operation *temporary : llvm::reverse(built))
    temporary->erase();
  if (dropped.empty())
    return op;
  SmallVector<int> newNumber;
  Operation *replacement = rebuilt(op, dropped, newNumber);
  for (auto [duplicate, kept] : sameAs)
    op->getResult(duplicate).replaceAllUsesWith(
        replacement->getResult(newNumber[kept]));
  OpBuilder after(replacement->getBlock(),
                  std::next(Block::iterator(replacement)));
  for (auto &[output, kept, factors] : scaledAs) {
    Value value = replacement->getResult(newNumber[kept]);
    for (Value factor : factors)
      value = MulOp::create(after, op.getLoc(), value, factor);
    op->getResult(output).replaceAllUsesWith(value);
  }
  op.erase();
  return cast<SoftmaxContractOp>(replacement);
}

/// One summand of a table's row: `leaf` times the scalars `factors` (each
/// multiplied, or divided by when its flag is set), negated or not.
struct ScaledLeaf {
  Value leaf;
  SmallVector<std::pair<Value, bool>> factors;
  bool negated = false;
};

/// Adds to `terms` the summands of `value` (a value of `body` of type
/// `rowType`) through sums, differences, negations and products and
/// quotients by scalars that `isFactor` accepts.
void expandRow(Value value, Type rowType, Block &body, ScaledLeaf current,
               function_ref<bool(Value)> isFactor,
               SmallVectorImpl<ScaledLeaf> &terms) {
  Operation *def = value.getDefiningOp();
  // Through ops that only this sum reads.
  if (def && def->getBlock() == &body && def->hasOneUse()) {
    auto isRow = [&](Value operand) { return operand.getType() == rowType; };
    if (isa<AddOp, SubOp>(def) && isRow(def->getOperand(0)) &&
        isRow(def->getOperand(1))) {
      expandRow(def->getOperand(0), rowType, body, current, isFactor, terms);
      current.negated ^= isa<SubOp>(def);
      expandRow(def->getOperand(1), rowType, body, current, isFactor, terms);
      return;
    }
    if (auto neg = dyn_cast<NegOp>(def)) {
      current.negated = !current.negated;
      expandRow(neg.getOperand(), rowType, body, current, isFactor, terms);
      return;
    }
    if (isa<MulOp, DivOp>(def)) {
      Value lhs = def->getOperand(0), rhs = def->getOperand(1);
      if (isRow(lhs) && isScalar(rhs) && isFactor(rhs)) {
        current.factors.push_back({rhs, isa<DivOp>(def)});
        expandRow(lhs, rowType, body, current, isFactor, terms);
        return;
      }
      if (isa<MulOp>(def) && isRow(rhs) && isScalar(lhs) && isFactor(lhs)) {
        current.factors.push_back({lhs, false});
        expandRow(rhs, rowType, body, current, isFactor, terms);
        return;
      }
    }
  }
  current.leaf = value;
  terms.push_back(current);
}

/// `term`'s leaf replaced by `leaf`, built with `builder` (constants among
/// its factors cloned).
Value buildScaled(OpBuilder &builder, Location loc, const ScaledLeaf &term,
                  Value leaf) {
  Value value = leaf;
  for (auto [factor, divides] : term.factors) {
    if (auto constant = factor.getDefiningOp<ConstantOp>())
      factor = builder.clone(*constant)->getResult(0);
    value = divides ? DivOp::create(builder, loc, value, factor).getResult()
                    : MulOp::create(builder, loc, value, factor).getResult();
  }
  return term.negated ? NegOp::create(builder, loc, value).getResult() : value;
}

/// Erases the ops of `op`'s block that read its results, directly or
/// through others, and that nothing uses (last first).
void eraseUnusedReaders(SoftmaxContractOp op) {
  llvm::SmallPtrSet<Operation *, 16> readers;
  readers.insert(op);
  SmallVector<Operation *> order;
  for (Operation *next = op->getNextNode(); next; next = next->getNextNode()) {
    bool reads = false;
    next->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        if (Operation *def = operand.getDefiningOp())
          if (Operation *ancestor = op->getBlock()->findAncestorOpInBlock(*def))
            reads |= readers.contains(ancestor);
    });
    if (reads) {
      readers.insert(next);
      order.push_back(next);
    }
  }
  // Contractions stay (the caller may hold them; canonicalization erases
  // the unused ones).
  auto holdsContract = [](Operation *reader) {
    return reader
        ->walk([](SoftmaxContractOp) { return WalkResult::interrupt(); })
        .wasInterrupted();
  };
  for (Operation *reader : llvm::reverse(order))
    if (isOpTriviallyDead(reader) && !holdsContract(reader))
      reader->erase();
}

/// Row outputs of `op` that one table only reads, each once at the same
/// position, and adds up scaled by scalars computed ahead of `op` (what
/// combined products leave: a - b/s + c/s of three outputs) are one output
/// that sums the scaled values; with `keepBilinear`, only values of the
/// column side. Returns the contraction (a new op when outputs merged).
SoftmaxContractOp mergeLinearOutputs(SoftmaxContractOp op, bool keepBilinear) {
  Block *rowBlock =
      op.getRowSums().empty() ? nullptr : &op.getRowSums().front();
  if (!rowBlock)
    return op;
  // What combining products left unused (the tables it read the outputs
  // from) reads them no more.
  eraseUnusedReaders(op);
  // The outputs each read once, by an element of a table at its indices.
  struct Read {
    unsigned position;
    ExtractOp extract;
  };
  llvm::MapVector<TabulateOp, SmallVector<Read>> readsOf;
  for (auto [position, output] : llvm::enumerate(op.getRowOutputs())) {
    if (!output.hasOneUse())
      continue;
    auto extract = dyn_cast<ExtractOp>(*output.getUsers().begin());
    auto table =
        extract ? dyn_cast<TabulateOp>(extract->getParentOp()) : TabulateOp();
    if (!table || !extract.getMap().isIdentity() ||
        !extract.getResult().hasOneUse() ||
        extract->getBlock() != &table.getBody().front())
      continue;
    readsOf[table].push_back({static_cast<unsigned>(position), extract});
  }
  for (auto &[table, reads] : readsOf) {
    if (reads.size() < 2)
      continue;
    Block &body = table.getBody().front();
    Value row = table.getBodyValue();
    auto isFactor = [&](Value factor) {
      return factor.getDefiningOp<ConstantOp>() || availableBefore(factor, op);
    };
    SmallVector<ScaledLeaf> terms;
    expandRow(row, row.getType(), body, ScaledLeaf(), isFactor, terms);
    // The merged terms: outputs read at the same indices as the first; of a
    // contraction that is not generic, values of the column side only
    // (rows of tables over its batch rows and column), so that their sum is
    // one such row too.
    auto rowYield = cast<YieldOp>(rowBlock->getTerminator());
    SmallVector<Value> columnSide(
        rowBlock->getArguments().take_front(op.getNumRowIndices() - 1));
    columnSide.push_back(rowBlock->getArgument(op.getNumRowIndices()));
    SmallVector<std::pair<ScaledLeaf, unsigned>> merged;
    SmallVector<ScaledLeaf> others;
    OperandRange indices = reads.front().extract.getIndices();
    for (const ScaledLeaf &term : terms) {
      Read *read = llvm::find_if(reads, [&](Read &read) {
        return read.extract.getResult() == term.leaf &&
               llvm::equal(read.extract.getIndices(), indices);
      });
      bool once = read != reads.end() &&
                  llvm::count_if(terms, [&](const ScaledLeaf &other) {
                    return other.leaf == term.leaf;
                  }) == 1;
      if (once &&
          (!keepBilinear ||
           dependsOnlyOn(rowYield.getOperand(read->position), op, columnSide)))
        merged.push_back({term, read->position});
      else
        others.push_back(term);
    }
    if (merged.size() < 2)
      continue;
    // The results as they are now (the yield changes below).
    Type outputType = op.getRowOutputs()[merged.front().second].getType();
    llvm::SmallDenseSet<unsigned> dropped;
    for (auto &[term, position] : merged)
      dropped.insert(op.getRowOutputs()[position].getResultNumber());
    unsigned firstColumn = op.getColOutputs().empty()
                               ? op->getNumResults()
                               : op.getColOutputs()[0].getResultNumber();
    // The new row value: Σ c_k f_k, yielded last.
    auto yield = cast<YieldOp>(rowBlock->getTerminator());
    OpBuilder inside(yield);
    Value sum;
    for (auto &[term, position] : merged) {
      Value scaled =
          buildScaled(inside, yield.getLoc(), term, yield.getOperand(position));
      sum = sum ? AddOp::create(inside, yield.getLoc(), sum, scaled).getResult()
                : scaled;
    }
    yield.getValuesMutable().append(sum);
    SmallVector<unsigned> positions;
    for (auto &[term, position] : merged)
      positions.push_back(position);
    llvm::sort(positions, std::greater<unsigned>());
    for (unsigned position : positions)
      yield.getValuesMutable().erase(position);
    // The same op with the merged output in place of the merged ones, after
    // the other row outputs.
    SmallVector<int> newNumber;
    int mergedNumber = -1;
    Operation *replacement =
        rebuilt(op, dropped, newNumber, outputType, firstColumn, &mergedNumber);
    // The table reads the merged output and adds the others.
    OpBuilder reader(reads.front().extract);
    Location loc = row.getLoc();
    Value total =
        ExtractOp::create(reader, loc, reads.front().extract.getType(),
                          replacement->getResult(mergedNumber),
                          reads.front().extract.getMapAttr(), indices);
    reader.setInsertionPoint(body.getTerminator());
    for (const ScaledLeaf &term : others)
      total = AddOp::create(reader, loc, total,
                            buildScaled(reader, loc, term, term.leaf));
    body.getTerminator()->setOperand(0, total);
    eraseDeadOps(body);
    op.erase();
    // The merged value is no row of a table until contract-tables makes
    // one of it: the form is marked again.
    auto contract = cast<SoftmaxContractOp>(replacement);
    contract.setForm(ContractForm::generic);
    markContractForm(contract);
    // One merge per call: the other tables' reads referred to `op`.
    return mergeLinearOutputs(contract, keepBilinear);
  }
  return op;
}

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
  SmallVector<int> newNumber;
  Operation *replacement = rebuilt(op, dropped, newNumber);
  OpBuilder builder(op);
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

/// A value of one side whose map applies after the contraction: the value
/// at `position` is `map` (an op of the side's region) of the operand
/// `varying`, its other operands the output position's.
struct PositionMap {
  unsigned position;
  Operation *map;
  unsigned varying;
};

/// The indices of a side's region that choose its output position (the
/// rows for the child side, the batch rows and the column for the parent
/// side) and the one its sum runs over; `op` has row indices.
std::pair<SmallVector<Value>, Value> sideIndices(SoftmaxContractOp op,
                                                 Block &block, bool rowSide) {
  unsigned rowCount = op.getNumRowIndices();
  SmallVector<Value> position(block.getArguments().take_front(rowCount));
  Value summed = block.getArgument(rowCount);
  if (!rowSide) {
    summed = position.back();
    position.back() = block.getArgument(rowCount);
  }
  return {position, summed};
}

/// The values of a side (`rowSide`: the child side) that are a map linear
/// in the one operand varying with the pair, its others the output
/// position's.
SmallVector<PositionMap> findPositionMaps(SoftmaxContractOp op, bool rowSide) {
  SmallVector<PositionMap> found;
  Block &block = (rowSide ? op.getRowSums() : op.getColSums()).front();
  // Without row indices a side's output is one value, not a table of
  // rows: nothing to apply per row.
  if (op.getNumRowIndices() == 0)
    return found;
  auto [position, summed] = sideIndices(op, block, rowSide);
  auto yield = cast<YieldOp>(block.getTerminator());
  for (auto [j, value] : llvm::enumerate(yield.getValues())) {
    Operation *map = value.getDefiningOp();
    if (!map || map->getBlock() != &block || !isa<MulOp, MatmulOp, DivOp>(map))
      continue;
    std::optional<unsigned> varying;
    bool single = true;
    for (auto [k, operand] : llvm::enumerate(map->getOperands()))
      if (!dependsOnlyOn(operand, op, position)) {
        single = !varying;
        varying = k;
      }
    if (varying && single && isLinearInOperand(map, *varying))
      found.push_back({static_cast<unsigned>(j), map, *varying});
  }
  return found;
}

/// A product of a side's value regrouped by what its factors depend on:
/// ((pair factors × the summed side's) × the output position's).
struct ProductGroups {
  SmallVector<Value> pair, summedSide, position;
};

/// The factors of the product tree of `value` (multiplications in `block`).
void productFactors(Value value, Block &block, SmallVectorImpl<Value> &into) {
  auto product = value.getDefiningOp<MulOp>();
  if (!product || product->getBlock() != &block) {
    into.push_back(value);
    return;
  }
  productFactors(product.getLhs(), block, into);
  productFactors(product.getRhs(), block, into);
}

/// Whether `value` is the product tree of `factors` multiplied from the left
/// (f1 × f2) × f3 ..., a single factor being itself.
bool isChain(Value value, ArrayRef<Value> factors) {
  if (factors.size() == 1)
    return value == factors.front();
  auto product = value.getDefiningOp<MulOp>();
  return product && product.getRhs() == factors.back() &&
         isChain(product.getLhs(), factors.drop_back());
}

/// The groups' product, each group a chain, the groups nested as
/// ((pair × summed side) × position); empty groups left out.
bool isGrouped(Value value, const ProductGroups &groups) {
  SmallVector<ArrayRef<Value>> parts;
  for (const SmallVector<Value> *group :
       {&groups.pair, &groups.summedSide, &groups.position})
    if (!group->empty())
      parts.push_back(*group);
  std::function<bool(Value, ArrayRef<ArrayRef<Value>>)> nested =
      [&](Value at, ArrayRef<ArrayRef<Value>> rest) {
        if (rest.size() == 1)
          return isChain(at, rest.front());
        auto product = at.getDefiningOp<MulOp>();
        return product && isChain(product.getRhs(), rest.back()) &&
               nested(product.getLhs(), rest.drop_back());
      };
  return nested(value, parts);
}

/// Regroups the products a side of a generic contraction yields so that
/// the factors of the output position come last, where factorPositionMaps
/// takes them out of the sum, and those of the summed side's indices alone
/// are one product, which ContractTables tabulates: Σ_c w (s m_c) q_c, m and
/// q rows of the row side, is Σ_c w s (m_c q_c), a bilinear value. Only
/// products of scalars and at most one array. Returns whether it changed.
bool regroupSideProducts(SoftmaxContractOp op) {
  if (op.getNumRowIndices() == 0)
    return false;
  bool changed = false;
  for (bool rowSide : {true, false}) {
    Block &block = (rowSide ? op.getRowSums() : op.getColSums()).front();
    auto [position, summed] = sideIndices(op, block, rowSide);
    SmallVector<Value> summedSide(position.begin(), position.end() - 1);
    summedSide.push_back(summed);
    auto yield = cast<YieldOp>(block.getTerminator());
    for (OpOperand &yielded : yield->getOpOperands()) {
      Value value = yielded.get();
      auto product = value.getDefiningOp<MulOp>();
      if (!product || product->getBlock() != &block)
        continue;
      SmallVector<Value> factors;
      productFactors(value, block, factors);
      unsigned arrays = llvm::count_if(factors, [](Value factor) {
        return !cast<ArrayType>(factor.getType()).isScalar();
      });
      if (factors.size() < 3 || arrays > 1)
        continue;
      ProductGroups groups;
      for (Value factor : factors) {
        // What depends on no index stays with the pair's factors (where
        // mergeLinearOutputs finds a scale known ahead).
        if (dependsOnlyOn(factor, op, {}))
          groups.pair.push_back(factor);
        else if (dependsOnlyOn(factor, op, position))
          groups.position.push_back(factor);
        else if (dependsOnlyOn(factor, op, summedSide))
          groups.summedSide.push_back(factor);
        else
          groups.pair.push_back(factor);
      }
      if (isGrouped(value, groups))
        continue;
      OpBuilder builder(yield);
      auto chain = [&](ArrayRef<Value> group) {
        Value result = group.front();
        for (Value factor : group.drop_front())
          result = MulOp::create(builder, product.getLoc(), result, factor)
                       .getResult();
        return result;
      };
      Value regrouped;
      for (const SmallVector<Value> *group :
           {&groups.pair, &groups.summedSide, &groups.position}) {
        if (group->empty())
          continue;
        Value part = chain(*group);
        regrouped = regrouped ? MulOp::create(builder, product.getLoc(),
                                              regrouped, part)
                                    .getResult()
                              : part;
      }
      if (regrouped.getType() != value.getType()) {
        // A type the regrouping cannot keep: the value stays.
        eraseDeadOps(block);
        continue;
      }
      yielded.set(regrouped);
      changed = true;
    }
    if (changed)
      eraseDeadOps(block);
  }
  return changed;
}

} // namespace

SoftmaxContractOp mlir::energy::withYieldedValues(SoftmaxContractOp op) {
  OperationState state(op.getLoc(), op->getName());
  state.addOperands(op->getOperands());
  state.propertiesAttr = op->getPropertiesAsAttribute();
  state.addTypes(op.inferResultTypes());
  for (Region &region : op->getRegions())
    state.addRegion()->takeBody(region);
  OpBuilder builder(op);
  return cast<SoftmaxContractOp>(builder.create(state));
}

SoftmaxContractOp mlir::energy::factorPositionMaps(SoftmaxContractOp op) {
  SmallVector<PositionMap> rows = findPositionMaps(op, true);
  SmallVector<PositionMap> cols = findPositionMaps(op, false);
  if (rows.empty() && cols.empty())
    return op;
  unsigned rowStart = op.getGivenLse() ? 0 : 1;
  unsigned colStart = rowStart + op.getRowValues().size();
  // Each map's output, by result number, with its side.
  SmallVector<std::tuple<unsigned, PositionMap, bool>> outputs;
  for (auto [side, maps, start] : {std::tuple(true, &rows, rowStart),
                                   std::tuple(false, &cols, colStart)}) {
    Block &block = (side ? op.getRowSums() : op.getColSums()).front();
    auto yield = cast<YieldOp>(block.getTerminator());
    for (const PositionMap &map : *maps) {
      yield->setOperand(map.position, map.map->getOperand(map.varying));
      outputs.emplace_back(start + map.position, map, side);
    }
  }
  SoftmaxContractOp replacement = withYieldedValues(op);
  OpBuilder builder(op->getContext());
  builder.setInsertionPointAfter(replacement);
  for (auto &[number, map, side] : outputs) {
    Block &block =
        (side ? replacement.getRowSums() : replacement.getColSums()).front();
    auto [position, summed] = sideIndices(replacement, block, side);
    SmallVector<Attribute> sizes(replacement.getRows().begin(),
                                 replacement.getRows().end());
    if (!side)
      sizes.back() = replacement.getCols();
    Value output = op->getResult(number);
    auto table =
        TabulateOp::create(builder, map.map->getLoc(), output.getType(),
                           builder.getArrayAttr(sizes));
    Block &body = table.getBody().emplaceBlock();
    IRMapping mapping;
    SmallVector<Value> bodyIndices;
    for (Value index : position) {
      bodyIndices.push_back(body.addArgument(index.getType(), index.getLoc()));
      mapping.map(index, bodyIndices.back());
    }
    OpBuilder inside = OpBuilder::atBlockEnd(&body);
    Value summedRow = ExtractOp::create(
        inside, map.map->getLoc(), map.map->getOperand(map.varying).getType(),
        replacement->getResult(number),
        AffineMapAttr::get(AffineMap::getMultiDimIdentityMap(
            bodyIndices.size(), builder.getContext())),
        bodyIndices);
    llvm::SetVector<Operation *> slice;
    for (auto [k, operand] : llvm::enumerate(map.map->getOperands()))
      if (k != map.varying)
        addToSlice(operand, block, slice);
    cloneSlice(block, slice, inside, mapping);
    mapping.map(map.map->getOperand(map.varying), summedRow);
    Value applied = inside.clone(*map.map, mapping)->getResult(0);
    YieldOp::create(inside, map.map->getLoc(), applied);
    output.replaceAllUsesWith(table.getResult());
  }
  for (OpResult result : op->getResults())
    if (!result.use_empty())
      result.replaceAllUsesWith(
          replacement->getResult(result.getResultNumber()));
  op.erase();
  for (Region *region : {&replacement.getRowSums(), &replacement.getColSums()})
    eraseDeadOps(region->front());
  markContractForm(replacement);
  return replacement;
}

void mlir::energy::factorContractOutputs(ModelOp model) {
  SmallVector<SoftmaxContractOp> contracts;
  model.walk([&](SoftmaxContractOp op) { contracts.push_back(op); });
  for (SoftmaxContractOp op : contracts) {
    if (op.getForm() == ContractForm::generic)
      regroupSideProducts(op);
    op = dropDuplicateOutputs(op);
    op = mergeLinearOutputs(op, op.getForm() != ContractForm::generic);
    if (op.getForm() == ContractForm::generic && factorPositionMaps(op) != op)
      continue;
    factorOutputs(op);
  }
}
