//===- DistributeSums.cpp - Linear maps distributed over sums -------------===//
//
// L(x + y) = L(x) + L(y) for a value L linear in a sum it is built from:
// a summand whose maps apply to a sum of differently weighted terms (the
// backward of an attention score adds the weight's and the score's parts
// before a projection's transpose) becomes a sum of terms that are each a
// weight times a transformed row, which factorLinearMaps then sums.
//
//===----------------------------------------------------------------------===//

#include "Linearity.h"
#include "Slices.h"

#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// The ops of `body` that compute `value` (its backward slice in the body).
llvm::SmallPtrSet<Operation *, 16> opsComputing(Value value, Block &body) {
  llvm::SetVector<Operation *> slice;
  addToSlice(value, body, slice);
  return llvm::SmallPtrSet<Operation *, 16>(slice.begin(), slice.end());
}

/// The ops between `sum` and `value` that depend on `sum`, in the body's
/// order, when `value` is linear in `sum` with degree one through them.
std::optional<SmallVector<Operation *>> linearPath(Value value, Operation *sum,
                                                   Block &body) {
  llvm::SmallPtrSet<Operation *, 16> computing = opsComputing(value, body);
  llvm::SmallPtrSet<Value, 16> dependent;
  dependent.insert(sum->getResult(0));
  SmallVector<Operation *> path;
  for (Operation *op = sum->getNextNode(); op; op = op->getNextNode()) {
    if (!computing.contains(op))
      continue;
    SmallVector<unsigned> operands;
    for (auto [index, operand] : llvm::enumerate(op->getOperands()))
      if (dependent.contains(operand))
        operands.push_back(index);
    bool nestedUse = false;
    op->walk([&](Operation *nested) {
      if (nested != op)
        for (Value operand : nested->getOperands())
          nestedUse |= dependent.contains(operand);
    });
    if (nestedUse)
      return std::nullopt;
    if (operands.empty())
      continue;
    Linearity linearity = linearityOf(op);
    if (linearity == Linearity::None ||
        (linearity == Linearity::Separate && operands.size() != 1) ||
        !llvm::all_of(operands,
                      [&](unsigned i) { return isLinearInOperand(op, i); }))
      return std::nullopt;
    for (Value result : op->getResults())
      dependent.insert(result);
    path.push_back(op);
  }
  return path;
}

/// Whether `term` is a weight times a transformed row (or fixed).
bool isScaledTerm(Value term, Block &body,
                  function_ref<bool(Value)> invariant) {
  return invariant(term) || decomposeScaled(term, body, invariant).has_value();
}

} // namespace

bool mlir::energy::distributeOverSums(
    Value value, Block &body, function_ref<bool(Value)> invariant,
    function_ref<bool(Operation *)> transforms, unsigned maxTerms,
    SmallVectorImpl<Value> &terms) {
  if (isScaledTerm(value, body, invariant))
    return false;
  Operation *yield = body.getTerminator();
  OpBuilder builder(yield);
  SmallVector<Operation *> created;
  SmallVector<Value> pending = {value};
  SmallVector<Value> done;
  auto undo = [&] {
    for (Operation *op : llvm::reverse(created))
      op->erase();
    return false;
  };
  while (!pending.empty()) {
    Value term = pending.pop_back_val();
    if (isScaledTerm(term, body, invariant)) {
      done.push_back(term);
      continue;
    }
    // The latest sum or difference of varying terms it is linear in.
    Operation *split = nullptr;
    std::optional<SmallVector<Operation *>> path;
    llvm::SmallPtrSet<Operation *, 16> computing = opsComputing(term, body);
    for (Operation &op : llvm::reverse(body)) {
      if (!computing.contains(&op) || !isa<AddOp, SubOp>(op) ||
          invariant(op.getResult(0)))
        continue;
      path = linearPath(term, &op, body);
      if (path) {
        split = &op;
        break;
      }
    }
    if (!split || done.size() + pending.size() + 2 > maxTerms)
      return undo();
    // A scalar that the sum adds to every element (x − q) stands in for
    // the sum as that array (below); other operands of another shape do
    // not split.
    Type type = split->getResult(0).getType();
    if (llvm::any_of(split->getOperands(), [&](Value part) {
          return part.getType() != type && !isScalar(part);
        }))
      return undo();
    Location loc = split->getLoc();
    Value first = split->getOperand(0);
    Value second = split->getOperand(1);
    if (isa<SubOp>(split)) {
      second = NegOp::create(builder, loc, second);
      created.push_back(second.getDefiningOp());
    }
    for (Value *part : {&first, &second})
      if (part->getType() != type) {
        *part = BroadcastOp::create(builder, loc, type, *part);
        created.push_back(part->getDefiningOp());
      }
    for (Value part : {first, second}) {
      IRMapping mapping;
      mapping.map(split->getResult(0), part);
      for (Operation *op : *path)
        created.push_back(builder.clone(*op, mapping));
      pending.push_back(mapping.lookupOrDefault(term));
    }
  }
  // Worth it only when some term's maps transform its row.
  bool transformed = llvm::any_of(done, [&](Value term) {
    std::optional<ScaledDecomposition> scaled =
        decomposeScaled(term, body, invariant);
    return scaled && llvm::any_of(scaled->maps, transforms);
  });
  if (!transformed)
    return undo();
  llvm::append_range(terms, llvm::reverse(done));
  return true;
}
