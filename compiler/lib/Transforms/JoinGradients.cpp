//===- JoinGradients.cpp - The energy-join-gradients pass -----------------===//
//
// Gradients asked for at the same values (a stopping rule's maxabs over
// several nodes, a group of gradient rules) become one `energy.grad` with a
// result per tensor, derived as one joint program.
//
//===----------------------------------------------------------------------===//

#include "energy/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::energy {
#define GEN_PASS_DEF_ENERGYJOINGRADIENTS
#include "energy/Transforms/Passes.h.inc"
} // namespace mlir::energy

using namespace mlir;
using namespace mlir::energy;

namespace {
/// Whether `op` may change what a gradient taken after it sees: a store,
/// or an op with one inside.
bool changesState(Operation *op) {
  return op
      ->walk([](Operation *nested) {
        return isa<StoreOp, RepeatOp>(nested) ? WalkResult::interrupt()
                                              : WalkResult::advance();
      })
      .wasInterrupted();
}

/// Replaces `grads`, all of the same term and at the same values, by one
/// joint `energy.grad` at the place of the first, with one result per
/// tensor (a tensor asked for twice gets one result).
void join(ArrayRef<GradOp> grads) {
  GradOp first = grads.front();
  OpBuilder builder(first);
  SmallVector<Type> types;
  SmallVector<Attribute> tensors;
  for (GradOp grad : grads)
    for (auto [tensor, result] :
         llvm::zip(grad.getTensors(), grad.getResults()))
      if (!llvm::is_contained(tensors, tensor)) {
        tensors.push_back(tensor);
        types.push_back(result.getType());
      }
  if (tensors.size() < 2)
    return;
  auto also = builder.getArrayAttr(ArrayRef<Attribute>(tensors).drop_front());
  auto joint = GradOp::create(builder, first.getLoc(), types,
                              cast<FlatSymbolRefAttr>(tensors.front()), also,
                              first.getOfAttr(), /*into=*/nullptr);
  for (GradOp grad : grads) {
    for (auto [tensor, result] :
         llvm::zip(grad.getTensors(), grad.getResults()))
      result.replaceAllUsesWith(
          joint.getResult(llvm::find(tensors, tensor) - tensors.begin()));
    grad.erase();
  }
}

/// Joins the gradients of `block` between state changes, by term.
void joinInBlock(Block &block) {
  SmallVector<SmallVector<GradOp>> groups;
  auto flush = [&] {
    for (ArrayRef<GradOp> group : groups)
      if (group.size() > 1)
        join(group);
    groups.clear();
  };
  for (Operation &op : llvm::make_early_inc_range(block)) {
    if (changesState(&op)) {
      flush();
      continue;
    }
    auto grad = dyn_cast<GradOp>(op);
    if (!grad)
      continue;
    auto group = llvm::find_if(groups, [&](SmallVector<GradOp> &existing) {
      return existing.front().getOfAttr() == grad.getOfAttr();
    });
    if (group == groups.end())
      groups.push_back({grad});
    else
      group->push_back(grad);
  }
  flush();
}

struct JoinGradientsPass
    : public mlir::energy::impl::EnergyJoinGradientsBase<JoinGradientsPass> {
  void runOnOperation() override {
    SmallVector<Block *> blocks;
    getOperation().walk([&](Block *block) {
      if (llvm::any_of(*block, [](Operation &op) { return isa<GradOp>(op); }))
        blocks.push_back(block);
    });
    for (Block *block : blocks)
      joinInBlock(*block);
  }
};
} // namespace
