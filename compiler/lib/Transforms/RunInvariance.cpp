//===- RunInvariance.cpp - Values that one call of the runtime never changes //
//
// The analysis of RunInvariance.h.
//
//===----------------------------------------------------------------------===//

#include "RunInvariance.h"
#include "Slices.h"
#include "energy/Transforms/ProgramReads.h"

#include "mlir/IR/Builders.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::energy;

RunInvariance::RunInvariance(ModelOp model)
    : model(model), stored(storedTensors(model)) {}

bool RunInvariance::isInvariant(Operation *op) {
  if (auto found = invariantOps.find(op); found != invariantOps.end())
    return found->second;
  bool invariant = computeInvariant(op);
  invariantOps[op] = invariant;
  return invariant;
}

bool RunInvariance::computeInvariant(Operation *op) {
  if (auto once = dyn_cast<OnceOp>(op))
    return !once.getPerStep();
  if (!onlyReads(op) || op->getNumResults() == 0)
    return false;
  if (!readsOnlyInvariant(op))
    return false;
  llvm::SetVector<Value> used;
  for (Region &region : op->getRegions())
    getUsedValuesDefinedAbove(region, used);
  used.insert(op->operand_begin(), op->operand_end());
  return llvm::all_of(used, [&](Value value) {
    Operation *def = value.getDefiningOp();
    return def && def->getBlock() == op->getBlock() && isInvariant(def);
  });
}

bool RunInvariance::readsOnlyInvariant(Operation *op) {
  return !op->walk([&](Operation *nested) {
              if (isa<StepOp, GradOp, ApplyOp, AggregateOp, AggregateWeightsOp>(
                      nested))
                return WalkResult::interrupt();
              if (auto read = dyn_cast<ReadOp>(nested))
                if (!isInvariantSymbol(read.getSource()))
                  return WalkResult::interrupt();
              return WalkResult::advance();
            }).wasInterrupted();
}

bool RunInvariance::isInvariantSymbol(StringRef name) {
  Operation *symbol = SymbolTable::lookupSymbolIn(model, name);
  if (isa_and_nonnull<ConstOp>(symbol))
    return true;
  if (auto tensor = dyn_cast_or_null<TensorOp>(symbol))
    return tensor.getRole() != Role::state && !tensor.getExchanged() &&
           !stored.contains(name);
  auto let = dyn_cast_or_null<LetOp>(symbol);
  if (!let)
    return false;
  if (auto found = invariantLets.find(name); found != invariantLets.end())
    return found->second;
  // Not invariant while its own body is asked about (no cycle runs).
  invariantLets[name] = false;
  bool invariant = readsOnlyInvariant(let);
  invariantLets[name] = invariant;
  return invariant;
}

SmallVector<Operation *> mlir::energy::coneOf(Operation *root,
                                              bool stopAtKeptValues) {
  return coneOf(root, [&](Operation *op) {
    return !(stopAtKeptValues && isa<OnceOp>(op));
  });
}

SmallVector<Operation *>
mlir::energy::coneOf(Operation *root, function_ref<bool(Operation *)> follow) {
  llvm::SetVector<Operation *> cone;
  SmallVector<Operation *> work{root};
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!cone.insert(op))
      continue;
    llvm::SetVector<Value> used;
    for (Region &region : op->getRegions())
      getUsedValuesDefinedAbove(region, used);
    used.insert(op->operand_begin(), op->operand_end());
    for (Value value : used)
      if (Operation *def = value.getDefiningOp();
          def && def->getBlock() == root->getBlock() && follow(def))
        work.push_back(def);
  }
  SmallVector<Operation *> ordered(cone.begin(), cone.end());
  llvm::sort(ordered,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return ordered;
}

std::pair<FlatSymbolRefAttr, FlatSymbolRefAttr>
mlir::energy::declareKeptValue(ModelOp model, ArrayRef<Attribute> shape,
                               ArrayRef<Attribute> flagShape, unsigned &next) {
  MLIRContext *context = model.getContext();
  std::string name;
  do
    name = "cache." + std::to_string(next++);
  while (SymbolTable::lookupSymbolIn(model, name) ||
         SymbolTable::lookupSymbolIn(model, name + ".valid"));
  OpBuilder declarations = OpBuilder::atBlockBegin(&model.getBody().front());
  for (TensorOp tensor : model.getBody().front().getOps<TensorOp>())
    declarations.setInsertionPointAfter(tensor);
  auto zeros = InitKindAttr::get(context, InitKind::zeros);
  auto cache = TensorOp::create(declarations, model.getLoc(), name, Role::state,
                                ArrayAttr::get(context, shape), zeros,
                                DenseF64ArrayAttr(), FlatSymbolRefAttr());
  auto valid =
      TensorOp::create(declarations, model.getLoc(), name + ".valid",
                       Role::state, ArrayAttr::get(context, flagShape), zeros,
                       DenseF64ArrayAttr(), FlatSymbolRefAttr());
  auto cacheRef = FlatSymbolRefAttr::get(cache.getSymNameAttr());
  auto validRef = FlatSymbolRefAttr::get(valid.getSymNameAttr());
  cache.setCacheFlagAttr(validRef);
  valid.setFlagOfAttr(cacheRef);
  return {cacheRef, validRef};
}
