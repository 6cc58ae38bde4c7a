//===- InterpretedBackprop.h - Backward runs on the interpreter -*- C++ -*-===//
//
// A model's step program and backward program run by the reference
// interpreter under runForwardBackward's schedule: the oracle for compiled
// backward runs, and what interpreted training runs.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_INTERPRETER_INTERPRETEDBACKPROP_H
#define ENERGY_INTERPRETER_INTERPRETEDBACKPROP_H

#include "energy/Interpreter/Interpreter.h"
#include "energy/Runtime/Backprop.h"

#include <memory>
#include <string>
#include <vector>

namespace mlir::energy {

class InterpretedBackprop : public ::energy::BackpropTarget {
public:
  /// Fails, with an error on the model, when it has no backward program
  /// (no `loss`, or not compiled through buildUpdatePipeline).
  static FailureOr<std::unique_ptr<InterpretedBackprop>>
  create(ModelOp model, Interpreter &interpreter);

  ::energy::Status forwardStep(int64_t step, bool &stop) override;
  ::energy::Status seed() override;
  ::energy::Status backwardStep(int64_t step) override;
  ::energy::Status finish() override;
  ::energy::Status save(size_t slot) override;
  ::energy::Status restore(size_t slot) override;
  bool implicit() override { return backward.getImplicit(); }

  /// The sum of the model's losses at the current values.
  FailureOr<double> loss();
  /// The names of the tensors that carry adjoints (`NAME.adjoint` holds
  /// each one's), in declaration order.
  const std::vector<std::string> &differentiable() const { return tensors; }

private:
  InterpretedBackprop(ModelOp model, Interpreter &interpreter)
      : model(model), interpreter(interpreter) {}

  ::energy::Status run(Region &program, int64_t step, const char *what);

  ModelOp model;
  Interpreter &interpreter;
  UpdateProgramOp program;
  BackwardProgramOp backward;
  /// The forward state (snapshots hold these) and the tensors with adjoints.
  std::vector<std::string> states, tensors;
  std::vector<std::vector<ArrayValue>> slots;
  int64_t lastStep = 0;
};

} // namespace mlir::energy

#endif // ENERGY_INTERPRETER_INTERPRETEDBACKPROP_H
