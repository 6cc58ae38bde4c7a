//===- SoftmaxContracts.cpp - Forming energy.softmax_contract ops ---------===//
//
// Finds the softmax contractions of derived IR and writes each as one
// `energy.softmax_contract`: an lse with the sums linear in its weights
// over the same domain (child side), and sums over rows weighted by the
// softmax of an lse that a let or the sum itself recomputes (parent side).
// A summand that adds terms linear in the weight (derivation adds the
// adjoints of a value's uses) gives the contraction one sum per term.
// Contractions of one block with the same score then merge, so that the
// parent side reuses the child side's normaliser.
//
//===----------------------------------------------------------------------===//

#include "SoftmaxContracts.h"

#include "PlanKernels.h"
#include "energy/Transforms/Dependence.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Dominance.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace mlir::energy;

/// The operand of a chain op that carries the weight (the other one is its
/// factor).
unsigned mlir::energy::taintedOperand(Operation *op, Value weight) {
  if (op->getNumOperands() == 1)
    return 0;
  return dependsOn(op->getOperand(0), weight) ? 0 : 1;
}

namespace {

/// Adds to `terms` the terms of `value`: the operands of an addition in
/// `body` of two values of its own type that both depend on `weight`,
/// recursively, and otherwise `value` itself.
void collectTerms(Value value, Value weight, Block &body,
                  SmallVectorImpl<Value> &terms) {
  auto add = value.getDefiningOp<AddOp>();
  if (add && add->getBlock() == &body &&
      add.getLhs().getType() == add.getType() &&
      add.getRhs().getType() == add.getType() &&
      dependsOn(add.getLhs(), weight) && dependsOn(add.getRhs(), weight)) {
    collectTerms(add.getLhs(), weight, body, terms);
    collectTerms(add.getRhs(), weight, body, terms);
    return;
  }
  terms.push_back(value);
}

/// The ops from the weight to `value` when `value` is the weight times
/// factors that do not depend on it, top down.
FailureOr<SmallVector<Operation *>> linearChainTo(Value value, Value weight) {
  SmallVector<Operation *> topDown;
  while (value != weight) {
    Operation *op = value.getDefiningOp();
    if (!op || !isa<MulOp, MatmulOp, DivOp, NegOp>(op))
      return failure();
    unsigned tainted = taintedOperand(op, weight);
    if (!dependsOn(op->getOperand(tainted), weight))
      return failure();
    if (op->getNumOperands() == 2 &&
        dependsOn(op->getOperand(1 - tainted), weight))
      return failure();
    // A quotient is linear in its numerator only.
    if (isa<DivOp>(op) && tainted != 0)
      return failure();
    topDown.push_back(op);
    value = op->getOperand(tainted);
  }
  return topDown;
}

/// Fills `sum.terms` when every term of the summand is the weight times
/// factors that do not depend on it.
bool findLinearTerms(WeightedSum &sum) {
  Value weight = sum.weight->getResult(0);
  SmallVector<Value> termValues;
  collectTerms(sum.sum.getBodyValue(), weight, sum.sum.getBody().front(),
               termValues);
  sum.terms.clear();
  llvm::SmallPtrSet<Operation *, 8> chainOps;
  for (Value termValue : termValues) {
    FailureOr<SmallVector<Operation *>> topDown =
        linearChainTo(termValue, weight);
    if (failed(topDown))
      return false;
    chainOps.insert(topDown->begin(), topDown->end());
    LinearTerm &term = sum.terms.emplace_back();
    term.chain.assign(topDown->rbegin(), topDown->rend());
    // Factors outside the sum come out of it: scalars wherever they are
    // (they commute with every linear op), others while every op above
    // them comes out too.
    term.pulledOut.assign(term.chain.size(), false);
    bool outermost = true;
    for (int i = static_cast<int>(term.chain.size()) - 1; i >= 0; --i) {
      Operation *op = term.chain[i];
      Value factor = op->getNumOperands() == 2
                         ? op->getOperand(1 - taintedOperand(op, weight))
                         : Value();
      bool outside = !factor || isDefinedOutside(factor, sum.sum);
      bool scalar = !factor || (cast<ArrayType>(factor.getType()).isScalar() &&
                                !isa<MatmulOp>(op));
      if (outside && (outermost || scalar))
        term.pulledOut[i] = true;
      else
        outermost = false;
    }
  }
  // The weight must reach the summand through the chains only (or be it).
  for (Operation *user : weight.getUsers())
    if (!chainOps.contains(user) && !isa<YieldOp>(user))
      return false;
  return true;
}

/// s · (A u) = A (s u) for a scalar s and a matrix A from outside `sum`:
/// written so, A becomes a factor the sum can take out (a mixture's
/// symmetrised precision in the gradient of its means).
void distributeMatrixFactors(ReduceOp sum) {
  SmallVector<MulOp> products;
  sum.getBody().front().walk([&](MulOp mul) { products.push_back(mul); });
  for (MulOp mul : products) {
    for (unsigned side = 0; side < 2; ++side) {
      Value scale = mul->getOperand(side);
      auto product = mul->getOperand(1 - side).getDefiningOp<MatmulOp>();
      if (!cast<ArrayType>(scale.getType()).isScalar() || !product ||
          !product->hasOneUse() ||
          !isDefinedOutside(product.getLhs(), sum.getOperation()) ||
          cast<ArrayType>(product.getRhs().getType()).getRank() != 1)
        continue;
      OpBuilder builder(mul);
      Value scaled =
          MulOp::create(builder, mul.getLoc(), scale, product.getRhs());
      Value result =
          MatmulOp::create(builder, mul.getLoc(), product.getLhs(), scaled);
      mul.getResult().replaceAllUsesWith(result);
      mul.erase();
      product.erase();
      break;
    }
  }
}

} // namespace

/// Finds w = exp((x − L) / T) in the body of `sum`, where `isNormaliser(L)`
/// says which L counts, and checks that the summand is linear in it.
std::optional<WeightedSum>
mlir::energy::matchWeightedSum(ReduceOp sum,
                               function_ref<bool(Value)> isNormaliser) {
  if (sum.getKind() != ReduceKind::sum || sum.getSizes().size() != 1)
    return std::nullopt;
  distributeMatrixFactors(sum);
  for (auto shift : sum.getBody().front().getOps<SubOp>()) {
    if (!isNormaliser(shift.getRhs()) || !shift->hasOneUse())
      continue;
    WeightedSum found{sum, shift, nullptr, Value(), {}};
    Operation *argument = shift;
    if (auto scaled = dyn_cast<DivOp>(*shift->getUsers().begin());
        scaled && scaled.getLhs() == shift.getResult()) {
      if (!scaled->hasOneUse() ||
          !isDefinedOutside(scaled.getRhs(), sum.getOperation()))
        continue;
      found.temperatureUsed = scaled.getRhs();
      argument = scaled;
    }
    auto exponential = dyn_cast<ExpOp>(*argument->getUsers().begin());
    if (!exponential)
      continue;
    found.weight = exponential;
    if (findLinearTerms(found))
      return found;
  }
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Filling the regions of a contraction (RegionFiller is in the header)
//===----------------------------------------------------------------------===//

bool mlir::energy::fillPredicateAndScore(
    ContractBuilder &contract, ReduceOp lse,
    function_ref<RegionFiller(Region &, Block &)> fill) {
  bool filled = true;
  if (lse.hasPredicate()) {
    Block &predicate = lse.getPredicate().front();
    RegionFiller filler = fill(contract.predicate, predicate);
    FailureOr<Value> admitted = filler.materialize(
        cast<YieldOp>(predicate.getTerminator()).getValues()[0]);
    filled &= succeeded(admitted);
    if (succeeded(admitted))
      filler.yield(lse.getLoc(), *admitted);
  }
  RegionFiller filler = fill(contract.score, lse.getBody().front());
  FailureOr<Value> score = filler.materialize(lse.getBodyValue());
  filled &= succeeded(score);
  if (succeeded(score))
    filler.yield(lse.getLoc(), *score);
  return filled;
}

Value mlir::energy::extractAt(OpBuilder &builder, Location loc, Value table,
                              Type type, ValueRange indices) {
  if (indices.empty())
    return table;
  AffineMap map =
      AffineMap::getMultiDimIdentityMap(indices.size(), builder.getContext());
  return ExtractOp::create(builder, loc, type, table, AffineMapAttr::get(map),
                           indices);
}

namespace {
/// Applies the ops of a term's chain that were taken out of the sum to
/// `value`.
Value applyPulledOut(OpBuilder &builder, const WeightedSum &sum,
                     const LinearTerm &term, Value value) {
  Value weight = sum.weight->getResult(0);
  for (auto [op, pulled] : llvm::zip(term.chain, term.pulledOut)) {
    if (!pulled)
      continue;
    IRMapping mapping;
    mapping.map(op->getOperand(taintedOperand(op, weight)), value);
    Operation *copy = builder.clone(*op, mapping);
    // Its result now has the type the sum of the kept ops gives.
    SmallVector<Type> types;
    if (isa<NegOp>(copy))
      copy->getResult(0).setType(value.getType());
    else if (auto inferring = dyn_cast<InferTypeOpInterface>(copy);
             inferring &&
             succeeded(inferring.inferReturnTypes(
                 builder.getContext(), copy->getLoc(), copy->getOperands(),
                 copy->getRawDictionaryAttrs(), copy->getPropertiesStorage(),
                 copy->getRegions(), types)))
      copy->getResult(0).setType(types.front());
    value = copy->getResult(0);
  }
  return value;
}

} // namespace

Value mlir::energy::sumOfTerms(OpBuilder &builder, const WeightedSum &sum,
                               ArrayRef<Value> termSums) {
  Location loc = sum.sum->getLoc();
  Value total;
  for (auto [term, termSum] : llvm::zip_equal(sum.terms, termSums)) {
    Value value = applyPulledOut(builder, sum, term, termSum);
    total =
        total ? AddOp::create(builder, loc, total, value).getResult() : value;
  }
  return total;
}

namespace {

//===----------------------------------------------------------------------===//
// Child side
//===----------------------------------------------------------------------===//

/// The op whose body encloses an lse and over whose domain the contraction
/// is lifted, when it can be: a loop or reduction with no predicate over
/// plain dims; `sizes` gets its domain.
Operation *liftingLoop(ReduceOp lse, ArrayAttr &sizes) {
  Operation *parent = lse->getParentOp();
  sizes = {};
  if (auto loop = dyn_cast<ForeachOp>(parent); loop && !loop.hasPredicate())
    sizes = loop.getSizes();
  else if (auto reduce = dyn_cast<ReduceOp>(parent);
           reduce && !reduce.hasPredicate())
    sizes = reduce.getSizes();
  else if (auto table = dyn_cast<TabulateOp>(parent))
    sizes = table.getSizes();
  if (!sizes || !hasPlainDims(sizes))
    return nullptr;
  return parent;
}

/// Whether the ops of `block` that `ops` use (transitively) can be cloned
/// per pair: no side effects beyond reads, and no regions but tables' (a
/// row's vector; energy-plan-contract-tables computes it per row again).
bool clonableContext(ArrayRef<Operation *> ops, Block &block) {
  llvm::SetVector<Operation *> slice;
  for (Operation *op : ops)
    addOperandsToSlice(op, block, slice);
  return llvm::all_of(slice, [&](Operation *op) {
    if (llvm::is_contained(ops, op))
      return true;
    if (op->getNumRegions() != 0)
      return isReadingTable(op);
    return isMemoryEffectFree(op) || isa<ReadOp>(op);
  });
}

/// Whether the predicates of `lse` and `sum` admit the same positions.
bool samePredicate(ReduceOp lse, ReduceOp sum) {
  if (lse.hasPredicate() != sum.hasPredicate())
    return false;
  if (!lse.hasPredicate())
    return true;
  IRMapping arguments;
  arguments.map(lse.getPredicate().front().getArguments(),
                sum.getPredicate().front().getArguments());
  auto admits = [](ReduceOp op) {
    return cast<YieldOp>(op.getPredicate().front().getTerminator())
        .getValues()[0];
  };
  return computeSame(admits(lse), admits(sum), arguments);
}

/// Whether every value the regions of `op` read from its block is defined
/// ahead of it, after moving there the reads and effect-free ops that
/// follow it (a weighted sum's row value read after the lse the
/// contraction takes the place of; not in programs, where a store may come
/// between). Moves nothing where it answers no.
bool operandsDefinedAhead(SoftmaxContractOp op) {
  llvm::SetVector<Value> used;
  getUsedValuesDefinedAbove(op->getRegions(), used);
  bool inProgram = isInProgram(op);
  // The ops after `op` in its block that its regions need, in block order.
  llvm::SetVector<Operation *> later;
  SmallVector<Value> work(used.begin(), used.end());
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def)
      continue;
    Operation *ancestor = op->getBlock()->findAncestorOpInBlock(*def);
    if (!ancestor || ancestor->isBeforeInBlock(op) || later.contains(ancestor))
      continue;
    if (inProgram || ancestor->getNumRegions() != 0 ||
        !(isMemoryEffectFree(ancestor) || isa<ReadOp>(ancestor)))
      return false;
    later.insert(ancestor);
    llvm::append_range(work, ancestor->getOperands());
  }
  SmallVector<Operation *> ordered(later.begin(), later.end());
  llvm::sort(ordered,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  for (Operation *def : ordered)
    def->moveBefore(op);
  return true;
}

/// Writes `lse` and the sums of its block linear in its weight as one
/// contraction.
void formChildSide(ReduceOp lse) {
  if (lse.getSizes().size() != 1 || !hasPlainDims(lse.getSizes()))
    return;
  Block &block = *lse->getBlock();
  Value normaliser = lse.getResult();
  SmallVector<WeightedSum> sums;
  for (auto sum : block.getOps<ReduceOp>()) {
    if (sum == lse || sum.getSizes() != lse.getSizes() ||
        !samePredicate(lse, sum) || !lse->isBeforeInBlock(sum))
      continue;
    std::optional<WeightedSum> weighted =
        matchWeightedSum(sum, [&](Value value) { return value == normaliser; });
    if (!weighted || weighted->temperatureUsed != lse.getTemperature())
      continue;
    IRMapping arguments;
    arguments.map(lse.getBody().front().getArguments(),
                  sum.getBody().front().getArguments());
    if (!computeSame(lse.getBodyValue(), weighted->shift.getLhs(), arguments))
      continue;
    // L is used in the sum's body by the shift only.
    bool onlyShift = true;
    sum.getBody().walk([&](Operation *op) {
      if (op != weighted->shift.getOperation() &&
          llvm::is_contained(op->getOperands(), normaliser))
        onlyShift = false;
    });
    if (onlyShift)
      sums.push_back(*weighted);
  }

  // Lift over the enclosing loop's domain when the work the contraction
  // needs from the loop's body can be recomputed per pair.
  ArrayAttr loopSizes;
  Operation *loop = liftingLoop(lse, loopSizes);
  SmallVector<Operation *> groupOps = {lse};
  for (const WeightedSum &sum : sums)
    groupOps.push_back(sum.sum);
  if (loop &&
      (!clonableContext(groupOps, block) ||
       (lse.getTemperature() && !isDefinedOutside(lse.getTemperature(), loop))))
    loop = nullptr;
  // In place, the contraction runs where the lse was: drop sums that use
  // values computed between the two.
  if (!loop)
    llvm::erase_if(sums, [&](const WeightedSum &sum) {
      bool late = false;
      sum.sum->walk([&](Operation *op) {
        for (Value operand : op->getOperands())
          if (Operation *def = operand.getDefiningOp();
              def && def->getBlock() == &block && lse->isBeforeInBlock(def))
            late = true;
      });
      return late;
    });

  // The rows are the loop's indices that the contraction uses.
  SmallVector<Value> rowArguments;
  SmallVector<Attribute> rowSizes;
  if (loop) {
    llvm::SetVector<Operation *> needed;
    for (Operation *op : groupOps)
      addOperandsToSlice(op, block, needed);
    needed.insert(groupOps.begin(), groupOps.end());
    for (BlockArgument argument : block.getArguments()) {
      bool used = llvm::any_of(needed, [&](Operation *op) {
        bool found = false;
        op->walk([&](Operation *nested) {
          found |= llvm::is_contained(nested->getOperands(), argument);
        });
        return found;
      });
      if (used) {
        rowArguments.push_back(argument);
        rowSizes.push_back(loopSizes[argument.getArgNumber()]);
      }
    }
    if (rowArguments.empty())
      loop = nullptr;
  }
  MLIRContext *context = lse.getContext();
  ArrayAttr rows =
      ArrayAttr::get(context, loop ? rowSizes : SmallVector<Attribute>());
  ContractBuilder contract(context, rows, cast<DimExprAttr>(lse.getSizes()[0]));
  unsigned rowCount = rows.size();
  SmallVector<Location> indexLocations;
  for (Value argument : rowArguments)
    indexLocations.push_back(argument.getLoc());
  indexLocations.push_back(lse.getBody().front().getArgument(0).getLoc());
  contract.nameIndices(indexLocations);
  // Region arguments: the loop's indices (when lifted), then the column.
  auto fill = [&](Region &region, Block &source) {
    IRMapping mapping;
    Block &target = contract.block(region);
    mapping.map(rowArguments, target.getArguments().take_front(rowCount));
    mapping.map(source.getArguments(),
                target.getArguments().drop_front(rowCount));
    SmallVector<Block *> sources = {&source};
    if (loop)
      sources.insert(sources.begin(), &block);
    return RegionFiller(target, mapping, sources, {&source});
  };
  bool failedToFill = !fillPredicateAndScore(contract, lse, fill);
  SmallVector<Value> rowValues;
  Block &rowBlock = contract.block(contract.rowSums);
  for (WeightedSum &sum : sums) {
    IRMapping mapping;
    mapping.map(rowArguments, rowBlock.getArguments().take_front(rowCount));
    Block &body = sum.sum.getBody().front();
    mapping.map(body.getArguments(),
                rowBlock.getArguments().drop_front(rowCount));
    SmallVector<Block *> sources = {&body};
    if (loop)
      sources.insert(sources.begin(), &block);
    RegionFiller filler(rowBlock, mapping, sources, {&body});
    for (const LinearTerm &term : sum.terms) {
      FailureOr<Value> value = filler.materializeTerm(sum, term);
      failedToFill |= failed(value);
      if (succeeded(value))
        rowValues.push_back(*value);
    }
  }
  if (failedToFill)
    return;
  OpBuilder rowBuilder = endOf(rowBlock);
  YieldOp::create(rowBuilder, lse.getLoc(), rowValues);
  OpBuilder colBuilder = endOf(contract.block(contract.colSums));
  YieldOp::create(colBuilder, lse.getLoc(), ValueRange());

  OpBuilder builder(loop ? loop : lse.getOperation());
  SoftmaxContractOp op =
      contract.create(builder, lse.getLoc(), lse.getTemperature(), Value());
  if (!operandsDefinedAhead(op)) {
    op.erase();
    return;
  }
  // The loop's body reads its row of each result.
  ValueRange rowIndices = rowArguments;
  builder.setInsertionPoint(lse);
  lse.getResult().replaceAllUsesWith(
      extractAt(builder, lse.getLoc(), op.getLse(), lse.getType(), rowIndices));
  ResultRange rowOutputs = op.getRowOutputs();
  for (WeightedSum &sum : sums) {
    builder.setInsertionPoint(sum.sum);
    SmallVector<Value> termSums;
    for (Value output : rowOutputs.take_front(sum.terms.size())) {
      ArrayRef<StringAttr> shape = cast<ArrayType>(output.getType()).getShape();
      Type rowType = ArrayType::get(context, shape.drop_front(rowCount));
      termSums.push_back(
          extractAt(builder, sum.sum.getLoc(), output, rowType, rowIndices));
    }
    rowOutputs = rowOutputs.drop_front(sum.terms.size());
    sum.sum.getResult().replaceAllUsesWith(sumOfTerms(builder, sum, termSums));
    sum.sum.erase();
  }
  lse.erase();
}

} // namespace

void mlir::energy::formSoftmaxContracts(ModelOp model) {
  // Parent side first: a sum whose normaliser is an lse in its own body
  // (an M-step's statistics) takes that lse into its contraction, before
  // the child side would lift the lse out on its own.
  formParentSides(model);

  // Child side: innermost lse first, so that an lse inside the body of
  // another is planned before its enclosing one is considered.
  SmallVector<ReduceOp> lses;
  model.walk<WalkOrder::PostOrder>([&](ReduceOp reduce) {
    if (reduce.getKind() == ReduceKind::lse &&
        !isa<LetOp>(reduce->getParentOp()))
      lses.push_back(reduce);
  });
  for (ReduceOp lse : lses)
    formChildSide(lse);

  mergeAllSoftmaxContracts(model);
  liftContractsOutOfLoops(model);
  mergeAllSoftmaxContracts(model);
}

void mlir::energy::mergeAllSoftmaxContracts(ModelOp model, bool rowsOfBilinear,
                                            bool acrossRowOrders) {
  // Deepest blocks first: merging erases contractions and with them the
  // blocks nested in their regions, which must not be visited afterwards.
  llvm::SetVector<Block *> blocks;
  model.walk([&](SoftmaxContractOp op) { blocks.insert(op->getBlock()); });
  auto depth = [](Block *block) {
    unsigned levels = 0;
    for (Operation *op = block->getParentOp(); op; op = op->getParentOp())
      ++levels;
    return levels;
  };
  SmallVector<Block *> ordered(blocks.begin(), blocks.end());
  llvm::stable_sort(ordered,
                    [&](Block *a, Block *b) { return depth(a) > depth(b); });
  for (Block *block : ordered)
    mergeSoftmaxContracts(*block, rowsOfBilinear, acrossRowOrders);
}
