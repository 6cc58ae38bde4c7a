//===- Bindings.h - Run-time values given to the interpreter --------------===//
//
// What a caller supplies before evaluating a model: dim sizes, tensors by
// name, overrides of consts, and the current dynamics step. Checking them
// against a model (undeclared names, shapes, derived dims) is the
// interpreter's job when it is created.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_INTERPRETER_BINDINGS_H
#define ENERGY_INTERPRETER_BINDINGS_H

#include "energy/Interpreter/ArrayValue.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <limits>

namespace mlir::energy {

/// Values bound by name. Setting a name again replaces its value.
class Bindings {
public:
  Bindings &setDim(llvm::StringRef name, int64_t value) {
    dims[name] = value;
    return *this;
  }
  Bindings &setTensor(llvm::StringRef name, ArrayValue value) {
    tensors[name] = std::move(value);
    return *this;
  }
  Bindings &setConst(llvm::StringRef name, double value) {
    consts[name] = value;
    return *this;
  }
  Bindings &setStep(int64_t value) {
    step = value;
    return *this;
  }
  /// The machine epsilon `energy.rounding_unit` gives: f64's unless set (an
  /// f32 artifact's check sets f32's, so that tolerances that follow the
  /// precision decide as in the artifact).
  Bindings &setRoundingUnit(double value) {
    roundingUnit = value;
    return *this;
  }

  const llvm::StringMap<int64_t> &getDims() const { return dims; }
  const llvm::StringMap<ArrayValue> &getTensors() const { return tensors; }
  const llvm::StringMap<double> &getConsts() const { return consts; }
  int64_t getStep() const { return step; }
  double getRoundingUnit() const { return roundingUnit; }

private:
  llvm::StringMap<int64_t> dims;
  llvm::StringMap<ArrayValue> tensors;
  llvm::StringMap<double> consts;
  int64_t step = 0;
  double roundingUnit = std::numeric_limits<double>::epsilon();
};

} // namespace mlir::energy

#endif // ENERGY_INTERPRETER_BINDINGS_H
