//===- Dependence.h - What a value is computed from -------------*- C++ -*-===//
//
// The compiler's one answer to "is this value computed from that one", and
// to "which loop indices does this value vary with": through the op that
// defines a value and the ops nested in its regions, each op visited once.
// Gradient derivation, the closed forms of stationary rules and the plan
// steps ask here; two plan steps propagate finer facts of their own over a
// loop body: energy-plan-loop-tables which enclosing loops' indices a value
// varies with once some values are lifted out of them, and
// energy-plan-prefix-sums whether a value is linear in the varying ones.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TRANSFORMS_DEPENDENCE_H
#define ENERGY_TRANSFORMS_DEPENDENCE_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::energy {

/// Whether `value` is computed from a value `isSource` accepts: it is one,
/// or an operand of the op that defines it, or of an op nested in that op's
/// regions, is computed from one.
bool dependsOn(Value value, llvm::function_ref<bool(Value)> isSource);

/// Whether `value` is `source` or computed from it.
bool dependsOn(Value value, Value source);

/// Whether `value` is a result of `op` or computed from one.
bool dependsOn(Value value, Operation *op);

/// Whether `value` is defined outside `op` (not in a region of it).
bool isDefinedOutside(Value value, Operation *op);

/// The index arguments of the blocks inside `scope` (its own included)
/// that values vary with, through ops inside `scope`, remembered (the
/// bodies' values share operands widely): for many values of one IR that
/// does not change meanwhile.
class IndexDependence {
public:
  using IndexSet = llvm::SmallPtrSet<Value, 4>;

  explicit IndexDependence(Operation *scope) : scope(scope) {}

  /// The indices `value` depends on (valid until the next call).
  const IndexSet &of(Value value);

  bool dependsOn(Value value, Value index) { return of(value).contains(index); }

private:
  Operation *scope;
  llvm::DenseMap<Value, IndexSet> memo;
};

/// Adds to `indices` the index arguments of blocks inside `scope` (its own
/// included) that `value` depends on (IndexDependence, once).
void collectIndices(Value value, Operation *scope,
                    llvm::SmallPtrSetImpl<Value> &indices);

/// Whether `value` depends on no index of `scope` but those of `allowed`.
bool dependsOnlyOn(Value value, Operation *scope, ArrayRef<Value> allowed);

} // namespace mlir::energy

#endif // ENERGY_TRANSFORMS_DEPENDENCE_H
