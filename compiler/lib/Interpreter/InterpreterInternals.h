//===- InterpreterInternals.h - What the interpreter's files share -*- C++
//-*-===//
//
// The frame values are memoised in, and small helpers over index domains
// and bodies, shared by the interpreter's files. Private to
// compiler/lib/Interpreter.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_LIB_INTERPRETER_INTERPRETERINTERNALS_H
#define ENERGY_LIB_INTERPRETER_INTERPRETERINTERNALS_H

#include "energy/Interpreter/Interpreter.h"

#include "llvm/ADT/DenseMap.h"

#include <map>
#include <vector>

namespace mlir::energy {

struct Interpreter::Frame {
  Frame(Region *region, Frame *parent) : region(region), parent(parent) {}

  /// Forgets the values of the previous position and binds the region's
  /// arguments to `position`: one frame serves every position of a loop.
  void moveTo(ArrayRef<int64_t> position) {
    arrays.clear();
    hoisted.clear();
    integers.clear();
    for (auto [argument, index] :
         llvm::zip(region->front().getArguments(), position))
      integers[argument] = index;
  }

  Region *region;
  Frame *parent;
  llvm::DenseMap<Value, ArrayValue> arrays;
  /// Values of blocks below this frame, kept here for the positions of the
  /// loops they depend on (Interpreter::memoSlot).
  llvm::DenseMap<Value, std::map<std::vector<int64_t>, ArrayValue>> hoisted;
  /// Index and i1 values (i1 as 0 or 1), block arguments included.
  llvm::DenseMap<Value, int64_t> integers;
};

namespace interpreter {
/// Calls `visit` at every position of the box [0, sizes) in row-major order
/// (first index outermost); stops at the first failure.
LogicalResult
forEachPosition(ArrayRef<int64_t> sizes,
                function_ref<LogicalResult(ArrayRef<int64_t>)> visit);
/// The value yielded by the single block of `region`, or null.
Value yieldedValue(Region &region);
/// Checks, before an array of `shape` is allocated, that its doubles fit in
/// this machine's memory (so that allocating cannot abort the process); the
/// error, on `op`, starts with `what` when it is given ("tensor @x [N, D]").
LogicalResult checkAllocation(Operation *op, ArrayRef<int64_t> shape,
                              const Twine &what = {});
/// Checks that `indices` address leading axes of `shape`; `describe` names
/// the indexed array in the error.
LogicalResult
checkInRange(Operation *op, ArrayRef<int64_t> indices, ArrayRef<int64_t> shape,
             function_ref<void(InFlightDiagnostic &, size_t axis)> describe);
/// Whether an element of `t` is NaN.
bool containsNaN(const ArrayValue &t);
/// The error on `user` that dim `name` has no value.
InFlightDiagnostic unboundDim(Operation *user, StringRef name);
} // namespace interpreter

} // namespace mlir::energy

#endif // ENERGY_LIB_INTERPRETER_INTERPRETERINTERNALS_H
