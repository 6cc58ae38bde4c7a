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

#include "ContractBuilder.h"
#include "PlanKernels.h"
#include "Slices.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Dominance.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

//===----------------------------------------------------------------------===//
// Sums linear in a softmax weight
//===----------------------------------------------------------------------===//

/// One term of a summand linear in a softmax weight w: the ops from w up to
/// the term, and which of them apply a factor that does not depend on the
/// sum's index and so is taken out of the sum.
struct LinearTerm {
  SmallVector<Operation *> chain;
  SmallVector<bool> pulledOut;
};

/// A sum whose summand is linear in w = exp((x − L) / T), with L a
/// normaliser: the summand is one term, or an addition of terms (the
/// adjoints of two uses of a value, as derivation adds them), each the
/// weight times factors; each term becomes one sum of the contraction.
struct WeightedSum {
  ReduceOp sum;
  SubOp shift;           ///< x − L
  Operation *weight;     ///< exp((x − L) / T)
  Value temperatureUsed; ///< T as the sum divides by it, or null
  SmallVector<LinearTerm> terms;
};

/// Whether `value` depends on `weight` within `body`.
bool dependsOnWeight(Value value, Value weight) {
  if (value == weight)
    return true;
  Operation *op = value.getDefiningOp();
  if (!op)
    return false;
  bool found = false;
  op->walk([&](Operation *nested) {
    for (Value operand : nested->getOperands())
      found |= operand == weight ||
               (operand.getDefiningOp() && operand.getDefiningOp() != nested &&
                dependsOnWeight(operand, weight));
  });
  return found;
}

/// The operand of a chain op that carries the weight (the other one is its
/// factor).
unsigned taintedOperand(Operation *op, Value weight) {
  if (op->getNumOperands() == 1)
    return 0;
  return dependsOnWeight(op->getOperand(0), weight) ? 0 : 1;
}

/// Adds to `terms` the terms of `value`: the operands of an addition in
/// `body` of two values of its own type that both depend on `weight`,
/// recursively, and otherwise `value` itself.
void collectTerms(Value value, Value weight, Block &body,
                  SmallVectorImpl<Value> &terms) {
  auto add = value.getDefiningOp<AddOp>();
  if (add && add->getBlock() == &body &&
      add.getLhs().getType() == add.getType() &&
      add.getRhs().getType() == add.getType() &&
      dependsOnWeight(add.getLhs(), weight) &&
      dependsOnWeight(add.getRhs(), weight)) {
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
    if (!dependsOnWeight(op->getOperand(tainted), weight))
      return failure();
    if (op->getNumOperands() == 2 &&
        dependsOnWeight(op->getOperand(1 - tainted), weight))
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

/// Finds w = exp((x − L) / T) in the body of `sum`, where `isNormaliser(L)`
/// says which L counts, and checks that the summand is linear in it.
std::optional<WeightedSum>
matchWeightedSum(ReduceOp sum, function_ref<bool(Value)> isNormaliser) {
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
// Filling the regions of a contraction
//===----------------------------------------------------------------------===//

/// Clones into a region of a new contraction the ops a value needs: values
/// defined in the `sources` blocks are cloned (their block arguments mapped
/// to the region's indices), others are used from outside. Fails on ops
/// with side effects, and on ops with regions from blocks that are not
/// cloned whole.
class RegionFiller {
public:
  RegionFiller(Block &target, IRMapping mapping, SmallVector<Block *> sources,
               llvm::DenseSet<Block *> regionOpsAllowed)
      : builder(endOf(target)), mapping(std::move(mapping)),
        sources(std::move(sources)),
        regionOpsAllowed(std::move(regionOpsAllowed)) {}

  FailureOr<Value> materialize(Value value) {
    if (Value mapped = mapping.lookupOrNull(value))
      return mapped;
    Operation *def = value.getDefiningOp();
    if (!def || !llvm::is_contained(sources, def->getBlock()))
      return value;
    if (def->getNumRegions() && !regionOpsAllowed.contains(def->getBlock()))
      return failure();
    if (!isMemoryEffectFree(def) && !isa<ReadOp, ReduceOp>(def))
      return failure();
    // Operands, and values that nested regions use from outside them.
    SmallVector<Value> needed(def->getOperands());
    def->walk([&](Operation *nested) {
      if (nested == def)
        return;
      for (Value operand : nested->getOperands())
        if (isDefinedOutside(operand, def))
          needed.push_back(operand);
    });
    for (Value operand : needed)
      if (failed(materialize(operand)))
        return failure();
    builder.clone(*def, mapping);
    return mapping.lookupOrDefault(value);
  }

  /// The value a term's chain builds from the weight with the taken-out
  /// ops skipped and the weight itself 1.
  FailureOr<Value> materializeTerm(const WeightedSum &sum,
                                   const LinearTerm &term) {
    Value weight = sum.weight->getResult(0);
    Value current; // null: the weight, i.e. 1
    for (auto [op, pulled] : llvm::zip(term.chain, term.pulledOut)) {
      if (pulled)
        continue;
      unsigned tainted = taintedOperand(op, weight);
      Value factor =
          op->getNumOperands() == 2 ? op->getOperand(1 - tainted) : Value();
      FailureOr<Value> factorValue =
          factor ? materialize(factor) : FailureOr<Value>(Value());
      if (failed(factorValue))
        return failure();
      if (!current && isa<MulOp>(op) &&
          (*factorValue).getType() == op->getResult(0).getType()) {
        current = *factorValue; // 1 · f
        continue;
      }
      Value operand = current ? current : one(op->getLoc());
      IRMapping local = mapping;
      local.map(op->getOperand(tainted), operand);
      if (factor)
        local.map(factor, *factorValue);
      current = builder.clone(*op, local)->getResult(0);
    }
    return current ? current : one(sum.weight->getLoc());
  }

  void yield(Location loc, ValueRange values) {
    YieldOp::create(builder, loc, values);
  }

  OpBuilder builder;
  IRMapping mapping;

private:
  Value one(Location loc) {
    return ConstantOp::create(builder, loc, 1.0).getResult();
  }

  SmallVector<Block *> sources;
  llvm::DenseSet<Block *> regionOpsAllowed;
};

/// `extract %table[indices]` (a scalar table read at all its indices gives
/// a scalar), or the table itself when there are no indices.
Value extractAt(OpBuilder &builder, Location loc, Value table, Type type,
                ValueRange indices) {
  if (indices.empty())
    return table;
  AffineMap map =
      AffineMap::getMultiDimIdentityMap(indices.size(), builder.getContext());
  return ExtractOp::create(builder, loc, type, table, AffineMapAttr::get(map),
                           indices);
}

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

/// The value of `sum` from the sums of its terms (`termSums`, one per term,
/// in order): each with its taken-out ops applied, added up.
Value sumOfTerms(OpBuilder &builder, const WeightedSum &sum,
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
/// per pair: no regions, no side effects beyond reads.
bool clonableContext(ArrayRef<Operation *> ops, Block &block) {
  llvm::SetVector<Operation *> slice;
  for (Operation *op : ops)
    addOperandsToSlice(op, block, slice);
  return llvm::all_of(slice, [&](Operation *op) {
    return !llvm::is_contained(ops, op)
               ? op->getNumRegions() == 0 &&
                     (isMemoryEffectFree(op) || isa<ReadOp>(op))
               : true;
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
  bool failedToFill = false;
  if (lse.hasPredicate()) {
    Block &predicate = lse.getPredicate().front();
    RegionFiller filler = fill(contract.predicate, predicate);
    FailureOr<Value> admitted = filler.materialize(
        cast<YieldOp>(predicate.getTerminator()).getValues()[0]);
    failedToFill |= failed(admitted);
    if (succeeded(admitted))
      filler.yield(lse.getLoc(), *admitted);
  }
  {
    RegionFiller filler = fill(contract.score, lse.getBody().front());
    FailureOr<Value> score = filler.materialize(lse.getBodyValue());
    failedToFill |= failed(score);
    if (succeeded(score))
      filler.yield(lse.getLoc(), *score);
  }
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
  auto lse = value.getDefiningOp<ReduceOp>();
  if (batches.empty() && rowIndices.size() == 1 && lse &&
      lse.getKind() == ReduceKind::lse && lse->getBlock() == &body)
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
  // x must compute the lse's body at (row, column).
  IRMapping toSum;
  toSum.map(lse.getBody().front().getArgument(0), column);
  if (source->rowBlock != &body)
    toSum.map(source->rowBlock->getArguments(), rowIndices);
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
    toPredicate.map(source->rowBlock->getArguments(), predicateRows);
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
    mapping.map(source->rowBlock->getArguments(),
                target.getArguments().take_front(rowCount));
    mapping.map(lseBlock.getArgument(0), target.getArgument(rowCount));
    return RegionFiller(target, mapping, {source->rowBlock, &lseBlock},
                        {&lseBlock});
  };
  bool failedToFill = false;
  if (lse.hasPredicate()) {
    Block &predicate = lse.getPredicate().front();
    RegionFiller filler = fill(contract.predicate, predicate);
    FailureOr<Value> admitted = filler.materialize(
        cast<YieldOp>(predicate.getTerminator()).getValues()[0]);
    failedToFill |= failed(admitted);
    if (succeeded(admitted))
      filler.yield(lse.getLoc(), *admitted);
  }
  {
    RegionFiller filler = fill(contract.score, lse.getBody().front());
    FailureOr<Value> score = filler.materialize(lse.getBodyValue());
    failedToFill |= failed(score);
    if (succeeded(score))
      filler.yield(lse.getLoc(), *score);
  }
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

} // namespace

namespace {
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

void mlir::energy::formSoftmaxContracts(ModelOp model) {
  recomputeContractNormalisers(model);
  // Parent side first: a sum whose normaliser is an lse in its own body
  // (an M-step's statistics) takes that lse into its contraction, before
  // the child side would lift the lse out on its own.
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

void mlir::energy::mergeAllSoftmaxContracts(ModelOp model,
                                            bool rowsOfBilinear) {
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
    mergeSoftmaxContracts(*block, rowsOfBilinear);
}
