//===- DynamicsTestSupport.cpp - Stepping models in the dynamics tests ----===//
//
// The stepping helper (energy-run's loop) and the plain-C++ references.
//
//===----------------------------------------------------------------------===//

#include "DynamicsTestSupport.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::energy;

namespace energy::testing {

//===----------------------------------------------------------------------===//
// DynamicsRun
//===----------------------------------------------------------------------===//

std::unique_ptr<DynamicsRun> DynamicsRun::start(CompiledModel &compiled,
                                                const Bindings &bindings) {
  if (!compiled.model)
    return nullptr;
  auto programs = compiled.model.getOps<UpdateProgramOp>();
  if (programs.empty()) {
    compiled.model.emitError("the model has no update program; compile it "
                             "with Pipeline::Update");
    return nullptr;
  }
  FailureOr<Interpreter> interpreter =
      Interpreter::create(compiled.model, bindings);
  if (failed(interpreter))
    return nullptr;
  return std::unique_ptr<DynamicsRun>(
      new DynamicsRun(compiled, std::move(*interpreter), *programs.begin()));
}

std::optional<int64_t> DynamicsRun::stepCount() {
  DynamicsOp dynamics = compiled.model.getDynamics();
  FailureOr<int64_t> count = dynamics.getSteps().evaluate(
      [&](StringRef name) { return interpreter.getDim(name); });
  if (failed(count)) {
    dynamics.emitError("the step count cannot be evaluated");
    return std::nullopt;
  }
  return *count;
}

bool DynamicsRun::step() {
  // energy-run's loop (tools/energy-run/energy-run.cpp, InterpretedRun::run).
  interpreter.setStep(taken);
  if (failed(interpreter.runUpdateProgram(program)))
    return false;
  ++taken;
  Region &until = compiled.model.getDynamics().getUntil();
  if (until.empty())
    return true;
  Value condition = cast<YieldOp>(until.front().back()).getValues().front();
  FailureOr<ArrayValue> done = interpreter.evaluate(condition);
  if (failed(done))
    return false;
  stoppedByRule = done->data[0] != 0.0;
  return true;
}

bool DynamicsRun::run(llvm::function_ref<void(int64_t)> afterStep) {
  std::optional<int64_t> count = stepCount();
  if (!count)
    return false;
  while (taken < *count && !stoppedByRule) {
    if (!step())
      return false;
    if (afterStep)
      afterStep(taken - 1);
  }
  return true;
}

std::optional<ArrayValue> DynamicsRun::value(StringRef tensor) {
  FailureOr<ArrayValue> result = interpreter.getTensorValue(tensor);
  if (failed(result))
    return std::nullopt;
  return std::move(*result);
}

std::optional<double> DynamicsRun::energy() {
  FailureOr<double> result = interpreter.evaluateEnergy();
  if (failed(result))
    return std::nullopt;
  return *result;
}

std::optional<ArrayValue> DynamicsRun::gradient(StringRef tensor) {
  FailureOr<ArrayValue> result = interpreter.evaluateGradient(tensor);
  if (failed(result))
    return std::nullopt;
  return std::move(*result);
}

//===----------------------------------------------------------------------===//
// The quadratic bowl
//===----------------------------------------------------------------------===//

std::string bowlSource(StringRef rule, StringRef tail) {
  return (R"(model bowl {
  dim D;
  input A : [D, D], c : [D];
  state y : [D];
  const eta = 0.3;
  energy bowl = 0.5 * quad(y - c, A);
  dynamics { y: )" +
          rule + "; " + tail + "; }\n}\n")
      .str();
}

Bindings bindBowl(ModelOp model) {
  RandomBindingOptions options;
  options.dims["D"] = 4;
  options.scale = 1.0;
  options.spd = {"A"};
  return bindRandom(model, options);
}

//===----------------------------------------------------------------------===//
// Plain C++ references
//===----------------------------------------------------------------------===//

Vector axpy(const Vector &a, double scale, const Vector &b) {
  Vector result = a;
  for (size_t i = 0; i < result.size(); ++i)
    result[i] += scale * b[i];
  return result;
}

double maxAbs(const Vector &v) {
  double largest = 0;
  for (double x : v)
    largest = std::max(largest, std::fabs(x));
  return largest;
}

double squaredNorm(const Vector &v) {
  double sum = 0;
  for (double x : v)
    sum += x * x;
  return sum;
}

double frobenius(const Vector &a) { return std::sqrt(squaredNorm(a)); }

void heavyBallStep(HeavyBall &state, double lr, double beta, bool nesterov,
                   llvm::function_ref<Vector(const Vector &)> gradient) {
  if (state.p.empty())
    state.p.assign(state.y.size(), 0.0);
  Vector at = nesterov ? axpy(state.y, -beta, state.p) : state.y;
  Vector g = gradient(at);
  for (size_t i = 0; i < state.p.size(); ++i)
    state.p[i] = beta * state.p[i] + g[i];
  state.y = axpy(state.y, -lr, state.p);
}

double relativeError(const ArrayValue &got, const Vector &want) {
  if (got.data.size() != want.size())
    return std::numeric_limits<double>::infinity();
  double largest = 0;
  for (size_t i = 0; i < want.size(); ++i)
    largest = std::max(largest, std::fabs(got.data[i] - want[i]));
  return largest / std::max(1.0, maxAbs(want));
}

const ArrayValue &bound(const Bindings &bindings, StringRef name) {
  auto found = bindings.getTensors().find(name);
  assert(found != bindings.getTensors().end() && "the tensor is not bound");
  return found->second;
}

} // namespace energy::testing
