//===- AccumulateAdjoints.cpp - Gradients added into adjoints in place ----===//
//
// A backward step adds each gradient of the step into an adjoint: `store
// (read @W.adjoint + grad) into @W.adjoint`, a parameter's, or a state's
// whose value the step also reads ahead of the gradient (its cotangent);
// a step that evaluates gradients more than once (Heun's two stages) adds
// them all, in adds or in one fused loop over the adjoint's positions.
// The gradients' kernels can add into the adjoint's buffer as they compute,
// with no arrays of their own, no pass that clears them and none that adds
// them.
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"
#include "Slices.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// Whether `op` or an op nested in it names `tensor`.
bool names(Operation *op, StringAttr tensor) {
  return op
      ->walk([&](Operation *nested) {
        return nested->getAttrDictionary().walk([&](SymbolRefAttr reference) {
          return reference.getRootReference() == tensor
                     ? WalkResult::interrupt()
                     : WalkResult::advance();
        });
      })
      .wasInterrupted();
}

/// Whether `op` or an op nested in it names `tensor`, or calls a gradient
/// that does or that is not derived.
bool touches(Operation *op, StringAttr tensor) {
  if (names(op, tensor))
    return true;
  return op
      ->walk([&](GradOp call) {
        GradientOp gradient = call.getGradient();
        return !gradient || names(gradient, tensor) ? WalkResult::interrupt()
                                                    : WalkResult::advance();
      })
      .wasInterrupted();
}

/// What a backward step stores into a tensor, as a sum: the values it adds
/// (`leaves`) and the ops that add them (`sum`: adds, and tabulates that
/// fusion made of adds of the values at the loop's positions).
struct StoredSum {
  SmallVector<Value> leaves;
  SmallVector<Operation *> sum;
};

/// Whether `extract` reads an array of the loop's own type, defined
/// outside the loop, at the loop's positions.
bool readsAtLoopPositions(ExtractOp extract, Block &body) {
  Value source = extract.getSource();
  return atBlockIndices(extract.getMap(), extract.getIndices(), body) &&
         !body.getParent()->isAncestor(source.getParentRegion()) &&
         source.getType() == body.getParentOp()->getResult(0).getType();
}

/// Adds to `found` the terms of `value`, an element of a tabulate's body:
/// sums of arrays read at the loop's positions.
bool collectLoopTerms(Value value, Block &body, StoredSum &found,
                      unsigned &opsUsed) {
  Operation *op = value.getDefiningOp();
  if (!op || op->getBlock() != &body || !op->hasOneUse())
    return false;
  ++opsUsed;
  if (auto add = dyn_cast<AddOp>(op))
    return add.getLhs().getType() == add.getRhs().getType() &&
           collectLoopTerms(add.getLhs(), body, found, opsUsed) &&
           collectLoopTerms(add.getRhs(), body, found, opsUsed);
  auto extract = dyn_cast<ExtractOp>(op);
  if (!extract || !readsAtLoopPositions(extract, body))
    return false;
  found.leaves.push_back(extract.getSource());
  return true;
}

/// Adds to `found` the terms of `value`, which only the sum uses, in
/// `block`.
void collectTerms(Value value, Block *block, StoredSum &found) {
  Operation *op = value.getDefiningOp();
  bool owned = op && op->getBlock() == block && op->hasOneUse();
  if (auto add = dyn_cast_if_present<AddOp>(op);
      owned && add && add.getLhs().getType() == add.getType() &&
      add.getRhs().getType() == add.getType()) {
    found.sum.push_back(add);
    collectTerms(add.getLhs(), block, found);
    collectTerms(add.getRhs(), block, found);
    return;
  }
  if (auto table = dyn_cast_if_present<TabulateOp>(op); owned && table) {
    Block &body = table.getBody().front();
    auto yield = cast<YieldOp>(body.getTerminator());
    StoredSum terms;
    unsigned opsUsed = 0;
    if (yield->getNumOperands() == 1 &&
        collectLoopTerms(yield->getOperand(0), body, terms, opsUsed) &&
        opsUsed + 1 == body.getOperations().size()) {
      found.sum.push_back(table);
      llvm::append_range(found.leaves, terms.leaves);
      return;
    }
  }
  found.leaves.push_back(value);
}

/// A store of a tensor's value plus gradients into the tensor, which the
/// grad ops can add into it in place: the read and each gradient once in
/// the sum, nothing else; each gradient one result of its grad op, used
/// only there; the read's other users ahead of the first grad op; and
/// nothing between the read, the grad ops and the store names the tensor
/// or lets a called gradient read it.
struct AdjointUpdate {
  FlatSymbolRefAttr target;
  ReadOp read;
  StoreOp store;
  StoredSum stored;
  /// Each grad op with the position of the tensor whose gradient it adds.
  SmallVector<std::pair<GradOp, unsigned>> grads;
};

std::optional<AdjointUpdate> adjointUpdate(StoreOp store) {
  Block *block = store->getBlock();
  AdjointUpdate update;
  update.store = store;
  update.target = store.getTensorAttr();
  collectTerms(store.getValue(), block, update.stored);
  for (Value leaf : update.stored.leaves) {
    if (auto read = leaf.getDefiningOp<ReadOp>()) {
      if (update.read || read->getBlock() != block ||
          read.getSourceAttr() != update.target || !read.getIndices().empty())
        return std::nullopt;
      update.read = read;
      continue;
    }
    auto grad = leaf.getDefiningOp<GradOp>();
    if (!grad || grad->getBlock() != block || !leaf.hasOneUse())
      return std::nullopt;
    std::optional<unsigned> position;
    for (unsigned k = 0, e = grad.getTensors().size(); k < e; ++k)
      if (grad.getResultOf(k) == leaf)
        position = k;
    if (!position || llvm::any_of(update.grads, [&](auto entry) {
          return entry.first == grad;
        }))
      return std::nullopt;
    update.grads.push_back({grad, *position});
  }
  if (!update.read || update.grads.empty())
    return std::nullopt;
  auto tensor =
      SymbolTable::lookupNearestSymbolFrom<TensorOp>(store, update.target);
  if (!tensor || tensor.getArrayType() != update.read.getType())
    return std::nullopt;
  Operation *firstGrad = nullptr;
  for (auto [grad, position] : update.grads) {
    GradientOp gradient = grad.getGradient();
    if (!gradient || names(gradient, update.target.getAttr()) ||
        grad.getResultOf(position).getType() != update.read.getType() ||
        !grad->isBeforeInBlock(store))
      return std::nullopt;
    if (!firstGrad || grad->isBeforeInBlock(firstGrad))
      firstGrad = grad;
  }
  Operation *first =
      update.read->isBeforeInBlock(firstGrad) ? update.read : firstGrad;
  // The read's other users see the tensor as it was ahead of the grad ops.
  for (Operation *user : update.read->getUsers()) {
    Operation *statement = block->findAncestorOpInBlock(*user);
    if (llvm::is_contained(update.stored.sum, statement))
      continue;
    if (!statement || first != update.read.getOperation() ||
        !statement->isBeforeInBlock(firstGrad))
      return std::nullopt;
  }
  for (Operation *op = first; op != store.getOperation();
       op = op->getNextNode()) {
    if (op == update.read.getOperation() ||
        llvm::is_contained(update.stored.sum, op) ||
        llvm::any_of(update.grads,
                     [&](auto entry) { return entry.first == op; }))
      continue;
    if (touches(op, update.target.getAttr()))
      return std::nullopt;
  }
  return update;
}

/// Rewrites `grad` to add its gradient of tensor `position` into `target`.
void accumulateInto(GradOp grad, unsigned position, FlatSymbolRefAttr target) {
  SmallVector<Attribute> into;
  if (ArrayAttr existing = grad.getIntoAttr())
    into.assign(existing.begin(), existing.end());
  else
    into.assign(grad.getTensors().size(), UnitAttr::get(grad.getContext()));
  into[position] = target;
  SmallVector<Value> keptResults;
  SmallVector<Type> keptTypes;
  for (auto [index, entry] : llvm::enumerate(into))
    if (isa<UnitAttr>(entry)) {
      keptResults.push_back(grad.getResultOf(index));
      keptTypes.push_back(keptResults.back().getType());
    }
  OpBuilder builder(grad);
  auto rewritten = GradOp::create(builder, grad.getLoc(), keptTypes,
                                  grad.getTensorAttr(), grad.getAlsoAttr(),
                                  grad.getOfAttr(), builder.getArrayAttr(into));
  for (auto [from, to] : llvm::zip(keptResults, rewritten.getResults()))
    from.replaceAllUsesWith(to);
  grad.erase();
}

/// Makes `update`'s grad ops add into its tensor, and removes its store,
/// its sum, and its read where nothing else uses it.
void applyUpdate(AdjointUpdate &update) {
  update.store.erase();
  // The sum's ops read one another: every use is dropped before any goes.
  for (Operation *op : update.stored.sum) {
    op->dropAllUses();
    op->dropAllReferences();
  }
  for (Operation *op : update.stored.sum)
    op->erase();
  if (update.read->use_empty())
    update.read.erase();
  for (auto [grad, position] : update.grads)
    accumulateInto(grad, position, update.target);
}

} // namespace

void mlir::energy::accumulateAdjointsInPlace(ModelOp model) {
  SmallVector<StoreOp> stores;
  model.walk([&](StoreOp store) {
    if (isInProgram(store))
      stores.push_back(store);
  });
  for (StoreOp store : stores)
    if (std::optional<AdjointUpdate> update = adjointUpdate(store))
      applyUpdate(*update);
}
