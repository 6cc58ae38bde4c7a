//===- SoftmaxContracts.h - What forming contractions shares ----*- C++ -*-===//
//
// Sums linear in a softmax weight, and the filling of a new contraction's
// regions from them: what the child side (SoftmaxContracts.cpp) and the
// parent side (ParentSide.cpp) of energy-plan-softmax-contracts share.
// Private to compiler/lib/Transforms.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_LIB_TRANSFORMS_SOFTMAXCONTRACTS_H
#define ENERGY_LIB_TRANSFORMS_SOFTMAXCONTRACTS_H

#include "ContractBuilder.h"
#include "Slices.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::energy {

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

/// Which operand of `op` depends on `weight`.
unsigned taintedOperand(Operation *op, Value weight);

/// `sum` as a sum linear in a softmax weight whose normaliser
/// `isNormaliser` accepts, or nullopt.
std::optional<WeightedSum>
matchWeightedSum(ReduceOp sum, function_ref<bool(Value)> isNormaliser);

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
    // (A table that only reads, a row's vector, is computed per pair too.)
    bool readingTable = isReadingTable(def);
    if (def->getNumRegions() && !readingTable &&
        !regionOpsAllowed.contains(def->getBlock()))
      return failure();
    if (!isMemoryEffectFree(def) && !isa<ReadOp, ReduceOp>(def) &&
        !readingTable)
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

/// Fills the predicate (when `lse` has one) and the score of `contract`
/// from `lse`'s, each with the filler `fill` makes for the target region
/// and the source block; false when some value could not be cloned.
bool fillPredicateAndScore(ContractBuilder &contract, ReduceOp lse,
                           function_ref<RegionFiller(Region &, Block &)> fill);

/// `extract %table[indices]` (a scalar table read at all its indices gives
/// a scalar), or the table itself when there are no indices.
Value extractAt(OpBuilder &builder, Location loc, Value table, Type type,
                ValueRange indices);

/// The value of `sum` from the sums of its terms (`termSums`, one per term,
/// in order): each with its taken-out ops applied, added up.
Value sumOfTerms(OpBuilder &builder, const WeightedSum &sum,
                 ArrayRef<Value> termSums);

/// The parent side: sums over rows weighted by the softmax of an lse over
/// the columns (an M-step's statistics, a column side of a contraction)
/// become contractions' column sums (ParentSide.cpp).
void formParentSides(ModelOp model);

} // namespace mlir::energy

#endif // ENERGY_LIB_TRANSFORMS_SOFTMAXCONTRACTS_H
