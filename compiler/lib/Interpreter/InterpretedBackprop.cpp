//===- InterpretedBackprop.cpp - Backward runs on the interpreter ---------===//
//
// The BackpropTarget of the reference interpreter.
//
//===----------------------------------------------------------------------===//

#include "energy/Interpreter/InterpretedBackprop.h"

using namespace mlir;
using namespace mlir::energy;
using ::energy::Status;

FailureOr<std::unique_ptr<InterpretedBackprop>>
InterpretedBackprop::create(ModelOp model, Interpreter &interpreter) {
  std::unique_ptr<InterpretedBackprop> target(
      new InterpretedBackprop(model, interpreter));
  Block &declarations = model.getBody().front();
  auto backwards = declarations.getOps<BackwardProgramOp>();
  if (backwards.empty())
    return model.emitError()
           << "has no backward program: it needs a `loss`, compiled through "
              "the update pipeline";
  target->backward = *backwards.begin();
  auto programs = declarations.getOps<UpdateProgramOp>();
  if (!programs.empty())
    target->program = *programs.begin();
  for (TensorOp tensor : declarations.getOps<TensorOp>()) {
    if (std::optional<StringRef> of = tensor.getAdjointOf()) {
      target->tensors.push_back(of->str());
      continue;
    }
    if (tensor.getRole() == Role::state && !tensor.getCotangentOf() &&
        !tensor.getSolverOf() && !tensor.getDeferredOf())
      target->states.push_back(tensor.getSymName().str());
  }
  return target;
}

Status InterpretedBackprop::run(Region &region, int64_t step,
                                const char *what) {
  interpreter.setStep(step);
  if (failed(interpreter.runProgram(region)))
    return Status::error(std::string(what) +
                         " failed in the interpreter (see the error above)");
  return Status::success();
}

Status InterpretedBackprop::forwardStep(int64_t step, bool &stop) {
  stop = false;
  lastStep = step;
  if (!program)
    return Status::success();
  if (Status ran = run(program.getBody(), step, "the step program"); !ran)
    return ran;
  Region &until = model.getDynamics().getUntil();
  if (until.empty())
    return Status::success();
  Value condition = cast<YieldOp>(until.front().back()).getValues().front();
  FailureOr<ArrayValue> done = interpreter.evaluate(condition);
  if (failed(done))
    return Status::error("the stopping rule failed in the interpreter");
  stop = done->data[0] != 0.0;
  return Status::success();
}

Status InterpretedBackprop::seed() {
  return run(backward.getSeed(), lastStep, "the loss's gradient");
}

Status InterpretedBackprop::backwardStep(int64_t step) {
  if (!backward.getCotangents().empty())
    if (Status ran = run(backward.getCotangents(), step,
                         "the backward step's cotangents");
        !ran)
      return ran;
  return run(backward.getBody(), step, "the backward step");
}

Status InterpretedBackprop::finish() {
  return run(backward.getFinish(), 0, "the backward program's finish");
}

Status InterpretedBackprop::save(size_t slot) {
  if (slots.size() <= slot)
    slots.resize(slot + 1);
  std::vector<ArrayValue> &snapshot = slots[slot];
  snapshot.clear();
  for (const std::string &state : states) {
    FailureOr<ArrayValue> value = interpreter.getTensorValue(state);
    if (failed(value))
      return Status::error("tensor '" + state + "' cannot be read");
    snapshot.push_back(std::move(*value));
  }
  return Status::success();
}

Status InterpretedBackprop::restore(size_t slot) {
  if (slot >= slots.size() || slots[slot].size() != states.size())
    return Status::error("snapshot " + std::to_string(slot) +
                         " was never saved");
  for (auto [state, value] : llvm::zip(states, slots[slot]))
    if (failed(interpreter.setTensorValue(state, value)))
      return Status::error("tensor '" + state + "' cannot be restored");
  return Status::success();
}

FailureOr<double> InterpretedBackprop::loss() {
  double total = 0;
  for (TermOp term : model.getBody().front().getOps<TermOp>()) {
    if (!term.getLoss())
      continue;
    FailureOr<double> value = interpreter.evaluateTerm(term);
    if (failed(value))
      return failure();
    total += *value;
  }
  return total;
}
