//===- RunInvariance.h - Values that one call of the runtime never changes ===//
//
// Which values of a model stay the same through every step and backward
// step of one call of the runtime: those computed from params, inputs and
// consts that no program stores into. Energy-plan-run-caches keeps them
// between steps; energy-plan-defer-invariant-products multiplies by them
// once per call.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TRANSFORMS_RUNINVARIANCE_H
#define ENERGY_TRANSFORMS_RUNINVARIANCE_H

#include "energy/IR/EnergyOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::energy {

/// Which values of a model do not change while the runtime runs one call:
/// those computed from params, inputs and consts that no program stores
/// into, through lets of the same, with no step number and no plugin code;
/// and the values kept once per call (`energy.once` without `per_step`).
class RunInvariance {
public:
  explicit RunInvariance(ModelOp model);

  /// Whether the top-level op `op` (of a block whose earlier ops were asked
  /// about first) computes run-invariant values.
  bool isInvariant(Operation *op);

private:
  bool computeInvariant(Operation *op);
  /// Whether `op` and the ops in it read only run-invariant symbols, and
  /// neither the step number, nor a gradient (whose reads are not ops
  /// here), nor plugin code.
  bool readsOnlyInvariant(Operation *op);
  bool isInvariantSymbol(StringRef name);

  ModelOp model;
  llvm::StringSet<> stored;
  DenseMap<Operation *, bool> invariantOps;
  llvm::StringMap<bool> invariantLets;
};

/// The top-level ops of its block that `root` needs, itself included, in
/// block order; with `stopAtKeptValues`, not those behind an `energy.once`
/// (its value is kept, its ops need not run again).
SmallVector<Operation *> coneOf(Operation *root, bool stopAtKeptValues);

/// The same, through the ops of the block for which `follow` holds (the
/// ops that compute what they read are not its cone's).
SmallVector<Operation *> coneOf(Operation *root,
                                function_ref<bool(Operation *)> follow);

/// A new scratch tensor `@cache.N` of `shape` (dim symbols) that kernels
/// keep a value in within one call of the runtime, and its flag
/// `@cache.N.valid` of `flagShape` (one flag per row of a value kept per
/// step), both zeros, marked as each other's (`cache_flag`, `flag_of`):
/// the first N from `next` on that names no symbol of `model`.
std::pair<FlatSymbolRefAttr, FlatSymbolRefAttr>
declareKeptValue(ModelOp model, ArrayRef<Attribute> shape,
                 ArrayRef<Attribute> flagShape, unsigned &next);

} // namespace mlir::energy

#endif // ENERGY_TRANSFORMS_RUNINVARIANCE_H
