//===- Dependence.cpp - What a value is computed from ---------------------===//
//
// Walks from a value back through the ops that compute it (their nested
// regions included), each op once, for the queries of Dependence.h.
//
//===----------------------------------------------------------------------===//

#include "energy/Transforms/Dependence.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::energy;

bool mlir::energy::dependsOn(Value value,
                             llvm::function_ref<bool(Value)> isSource) {
  if (isSource(value))
    return true;
  Operation *root = value.getDefiningOp();
  if (!root)
    return false;
  llvm::SmallPtrSet<Operation *, 32> visited;
  SmallVector<Operation *> pending = {root};
  while (!pending.empty()) {
    Operation *op = pending.pop_back_val();
    if (!visited.insert(op).second)
      continue;
    WalkResult walk = op->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands()) {
        if (isSource(operand))
          return WalkResult::interrupt();
        // Ops inside `op` are walked already.
        if (Operation *def = operand.getDefiningOp();
            def && !op->isAncestor(def))
          pending.push_back(def);
      }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return true;
  }
  return false;
}

bool mlir::energy::dependsOn(Value value, Value source) {
  return dependsOn(value, [&](Value candidate) { return candidate == source; });
}

bool mlir::energy::dependsOn(Value value, Operation *op) {
  return dependsOn(
      value, [&](Value candidate) { return candidate.getDefiningOp() == op; });
}

bool mlir::energy::isDefinedOutside(Value value, Operation *op) {
  return !op->isAncestor(value.getParentRegion()->getParentOp());
}

const IndexDependence::IndexSet &IndexDependence::of(Value value) {
  if (auto found = memo.find(value); found != memo.end())
    return found->second;
  IndexSet indices;
  if (!isDefinedOutside(value, scope)) {
    if (isa<BlockArgument>(value)) {
      indices.insert(value);
    } else {
      Operation *def = value.getDefiningOp();
      def->walk([&](Operation *nested) {
        for (Value operand : nested->getOperands())
          if (isDefinedOutside(operand, def))
            for (Value index : of(operand))
              indices.insert(index);
      });
    }
  }
  return memo[value] = std::move(indices);
}

void mlir::energy::collectIndices(Value value, Operation *scope,
                                  llvm::SmallPtrSetImpl<Value> &indices) {
  IndexDependence dependence(scope);
  for (Value index : dependence.of(value))
    indices.insert(index);
}

bool mlir::energy::dependsOnlyOn(Value value, Operation *scope,
                                 ArrayRef<Value> allowed) {
  IndexDependence dependence(scope);
  return llvm::all_of(dependence.of(value), [&](Value index) {
    return llvm::is_contained(allowed, index);
  });
}
