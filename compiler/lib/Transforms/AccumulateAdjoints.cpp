//===- AccumulateAdjoints.cpp - Gradients added into adjoints in place ----===//
//
// A backward step adds each gradient of the step into an adjoint: `store
// (read @W.adjoint + grad) into @W.adjoint`, a parameter's, or a state's
// whose value the step also reads ahead of the gradient (its cotangent).
// The gradient's kernel can add into the adjoint's buffer as it computes,
// with no array of its own, no pass that clears it and none that adds it.
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// `store (read @A) + gradient into @A`, the gradient one result of a grad op.
struct AdjointUpdate {
  unsigned tensorPosition;
  FlatSymbolRefAttr target;
  ReadOp read;
  AddOp add;
  StoreOp store;
};

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

/// Whether what `read` read is used by `add` and otherwise only ahead of
/// `grad`, which is to add into the tensor in place.
bool readBeforeOnly(ReadOp read, AddOp add, GradOp grad) {
  Block *block = grad->getBlock();
  return llvm::all_of(read->getUsers(), [&](Operation *user) {
    if (user == add.getOperation())
      return true;
    Operation *statement = block->findAncestorOpInBlock(*user);
    return statement && read->isBeforeInBlock(grad) &&
           statement->isBeforeInBlock(grad);
  });
}

/// The update of a tensor that result `result` of `grad` makes, when only
/// that update reads the result, the read's other users come ahead of the
/// grad op, and nothing else between the read, the grad op and the store
/// names the tensor or lets the called gradient read it.
std::optional<AdjointUpdate> adjointUpdate(GradOp grad, unsigned position) {
  Value result = grad.getResultOf(position);
  if (!result || !result.hasOneUse())
    return std::nullopt;
  auto add = dyn_cast<AddOp>(*result.getUsers().begin());
  if (!add || add->getBlock() != grad->getBlock() || !add->hasOneUse() ||
      add.getType() != result.getType() ||
      add.getLhs().getType() != add.getRhs().getType())
    return std::nullopt;
  Value other = add.getLhs() == result ? add.getRhs() : add.getLhs();
  auto read = other.getDefiningOp<ReadOp>();
  auto store = dyn_cast<StoreOp>(*add->getUsers().begin());
  if (!read || !store || !read.getIndices().empty() ||
      read->getBlock() != grad->getBlock() ||
      !readBeforeOnly(read, add, grad) ||
      store->getBlock() != grad->getBlock() ||
      store.getTensorAttr() != read.getSourceAttr() ||
      other.getType() != result.getType())
    return std::nullopt;
  auto target = read.getSourceAttr();
  auto tensor = SymbolTable::lookupNearestSymbolFrom<TensorOp>(grad, target);
  if (!tensor || tensor.getArrayType() != result.getType())
    return std::nullopt;
  GradientOp gradient = grad.getGradient();
  if (!gradient || names(gradient, target.getAttr()))
    return std::nullopt;
  Operation *first =
      read->isBeforeInBlock(grad) ? read.getOperation() : grad.getOperation();
  for (Operation *op = first; op != store.getOperation();
       op = op->getNextNode()) {
    if (op == read.getOperation() || op == add.getOperation())
      continue;
    if (touches(op, target.getAttr()))
      return std::nullopt;
  }
  return AdjointUpdate{position, target, read, add, store};
}

/// Rewrites `grad` to add the gradients of `updates` into their tensors.
void accumulateInto(GradOp grad, ArrayRef<AdjointUpdate> updates) {
  SmallVector<Attribute> into;
  if (ArrayAttr existing = grad.getIntoAttr())
    into.assign(existing.begin(), existing.end());
  else
    into.assign(grad.getTensors().size(), UnitAttr::get(grad.getContext()));
  for (const AdjointUpdate &update : updates)
    into[update.tensorPosition] = update.target;
  SmallVector<Value> keptResults;
  SmallVector<Type> keptTypes;
  for (auto [position, entry] : llvm::enumerate(into))
    if (isa<UnitAttr>(entry)) {
      keptResults.push_back(grad.getResultOf(position));
      keptTypes.push_back(keptResults.back().getType());
    }
  OpBuilder builder(grad);
  auto rewritten = GradOp::create(builder, grad.getLoc(), keptTypes,
                                  grad.getTensorAttr(), grad.getAlsoAttr(),
                                  grad.getOfAttr(), builder.getArrayAttr(into));
  for (AdjointUpdate update : updates) {
    update.store.erase();
    update.add.erase();
    if (update.read->use_empty())
      update.read.erase();
  }
  for (auto [from, to] : llvm::zip(keptResults, rewritten.getResults()))
    from.replaceAllUsesWith(to);
  grad.erase();
}

} // namespace

void mlir::energy::accumulateAdjointsInPlace(ModelOp model) {
  SmallVector<GradOp> calls;
  model.walk([&](GradOp call) {
    if (call->getParentOfType<UpdateProgramOp>() ||
        call->getParentOfType<BackwardProgramOp>())
      calls.push_back(call);
  });
  for (GradOp call : calls) {
    SmallVector<AdjointUpdate> updates;
    for (unsigned position = 0, e = call.getTensors().size(); position < e;
         ++position) {
      std::optional<AdjointUpdate> update = adjointUpdate(call, position);
      // Two results added into one tensor: the first only.
      if (update && llvm::none_of(updates, [&](const AdjointUpdate &other) {
            return other.target == update->target;
          }))
        updates.push_back(*update);
    }
    if (!updates.empty())
      accumulateInto(call, updates);
  }
}
