//===- InterpretedRun.h - A model run on the reference interpreter -*- C++
//-*-===//
//
// What `energy-run --interp` does with a model: binds its dims, consts and
// tensors (given, initialised or random), steps its dynamics on one
// interpreter, and gives back its tensors and outputs.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TOOLS_ENERGYRUN_INTERPRETEDRUN_H
#define ENERGY_TOOLS_ENERGYRUN_INTERPRETEDRUN_H

#include "energy/Codegen/Artifact.h"
#include "energy/IR/EnergyOps.h"
#include "energy/Interpreter/Interpreter.h"
#include "energy/Runtime/DimInference.h"
#include "energy/Runtime/Initializer.h"
#include "energy/Runtime/Random.h"
#include "energy/Runtime/Session.h"
#include "energy/Runtime/Tensor.h"

#include <map>
#include <optional>
#include <string>

namespace mlir::energy::tools {

/// A tensor of the interpreter as a runtime tensor (f64), and back.
inline ::energy::Tensor toRuntime(const ArrayValue &tensor) {
  ::energy::Tensor value(::energy::DType::F64, tensor.shape);
  for (int64_t i = 0; i < tensor.size(); ++i)
    value.set(i, tensor.data[i]);
  return value;
}

inline ArrayValue fromRuntime(const ::energy::Tensor &tensor) {
  ArrayValue value(tensor.shape());
  for (int64_t i = 0; i < value.size(); ++i)
    value.data[i] = tensor.at(i);
  return value;
}

/// The body value an option or rule yields.
inline Value yieldedValue(Region &region) {
  return cast<YieldOp>(region.front().back()).getValues().front();
}

/// A model on the reference interpreter, used like a runtime::Session:
/// binding tensors, stepping the dynamics on one interpreter, evaluating
/// energies and gradients. Dims are resolved by the runtime's rule
/// (DimInference.h).
class InterpretedRun {
public:
  explicit InterpretedRun(ModelOp model) : model(model) {}

  /// Binds dims (given, then inferred from `given` tensors), consts, the
  /// `given` tensors, and every other tensor from its initialiser or
  /// `seed`.
  LogicalResult bind(ArrayRef<std::pair<std::string, int64_t>> dims,
                     ArrayRef<std::pair<std::string, double>> consts,
                     const std::map<std::string, ArrayValue> &given,
                     std::optional<uint64_t> seed) {
    for (auto &[name, value] : dims)
      bindings.setDim(name, value);
    if (failed(inferDims(given)))
      return failure();
    for (const auto &[name, value] : given)
      bindings.setTensor(name, value);
    for (auto &[name, value] : consts)
      bindings.setConst(name, value);
    FailureOr<Interpreter> shapes = Interpreter::create(model, bindings);
    if (failed(shapes))
      return failure();
    // Copies last: their sources must have values first.
    SmallVector<TensorOp> copies;
    for (TensorOp tensor : model.getBody().front().getOps<TensorOp>()) {
      if (given.count(tensor.getSymName().str()))
        continue;
      if (tensor.getInit() == InitKind::copy) {
        copies.push_back(tensor);
        continue;
      }
      FailureOr<std::vector<int64_t>> shape =
          shapes->getShape(tensor.getArrayType(), tensor);
      if (failed(shape))
        return failure();
      FailureOr<ArrayValue> value = initialValue(tensor, *shape, seed);
      if (failed(value))
        return failure();
      bindings.setTensor(tensor.getSymName(), std::move(*value));
    }
    for (TensorOp tensor : copies)
      if (!given.count(tensor.getSymName().str()))
        bindings.setTensor(tensor.getSymName(), bindings.getTensors().lookup(
                                                    *tensor.getInitSource()));
    return success();
  }

  FailureOr<Interpreter> interpreter() {
    return Interpreter::create(model, bindings);
  }

  /// Runs `steps` steps (or the model's count) of the model's update
  /// program, calling `report` after each with the step number and energy.
  /// Returns the number of steps taken.
  FailureOr<int64_t> run(int64_t firstStep, int64_t steps,
                         llvm::function_ref<void(int64_t, double)> report) {
    // A model without dynamics runs no steps: its outputs are still written.
    if (!hasDynamics())
      return 0;
    FailureOr<Interpreter> state = interpreter();
    if (failed(state))
      return failure();
    return run(*state, firstStep, steps, report);
  }

  /// Whether the model has dynamics to run.
  bool hasDynamics() {
    return model.getDynamics() &&
           !model.getBody().front().getOps<UpdateProgramOp>().empty();
  }

  /// Runs the steps on `state`, an interpreter of the bindings (see above).
  FailureOr<int64_t> run(Interpreter &state, int64_t firstStep, int64_t steps,
                         llvm::function_ref<void(int64_t, double)> report) {
    if (!hasDynamics())
      return 0;
    DynamicsOp dynamics = model.getDynamics();
    auto programs = model.getBody().front().getOps<UpdateProgramOp>();
    if (steps < 0) {
      FailureOr<int64_t> count = dynamics.getSteps().evaluate(
          [&](StringRef name) { return state.getDim(name); });
      if (failed(count))
        return dynamics.emitError("the step count cannot be evaluated");
      ::energy::Expected<int64_t> taken =
          ::energy::stepsToTake(std::nullopt, *count);
      if (!taken)
        return dynamics.emitError(taken.message());
      steps = *taken;
    }
    for (int64_t taken = 0; taken < steps; ++taken) {
      int64_t step = firstStep + taken;
      state.setStep(step);
      if (failed(state.runUpdateProgram(*programs.begin())))
        return failure();
      FailureOr<double> energy = state.evaluateEnergy();
      if (failed(energy))
        return failure();
      report(step, *energy);
      if (!dynamics.getUntil().empty()) {
        FailureOr<ArrayValue> done =
            state.evaluate(yieldedValue(dynamics.getUntil()));
        if (failed(done))
          return failure();
        if (done->data[0] != 0.0) {
          keep(state);
          return taken + 1;
        }
      }
    }
    keep(state);
    return steps;
  }

  /// The values to write with --out: every state tensor (optimizer state
  /// included) and every output, after a run.
  FailureOr<std::map<std::string, ArrayValue>> results() {
    FailureOr<Interpreter> state = interpreter();
    if (failed(state))
      return failure();
    std::map<std::string, ArrayValue> values;
    for (TensorOp tensor : model.getBody().front().getOps<TensorOp>()) {
      if (tensor.getRole() != Role::state)
        continue;
      FailureOr<ArrayValue> value = state->getTensorValue(tensor.getSymName());
      if (failed(value))
        return failure();
      values[tensor.getSymName().str()] = std::move(*value);
    }
    for (OutputOp output : model.getBody().front().getOps<OutputOp>()) {
      FailureOr<ArrayValue> value = state->evaluateOutput(output);
      if (failed(value))
        return failure();
      values[output.getSymName().str()] = std::move(*value);
    }
    return values;
  }

  //===--------------------------------------------------------------------===//
  // The calls of runtime::Session, so that interpreted and compiled runs are
  // driven alike: values in and out as runtime tensors (f64).
  //===--------------------------------------------------------------------===//

  /// The global energy of the current values.
  FailureOr<double> energy() {
    FailureOr<Interpreter> state = interpreter();
    if (failed(state))
      return failure();
    return state->evaluateEnergy();
  }

  /// The gradient of the energy with respect to `gradient`'s tensor.
  FailureOr<::energy::Tensor> gradient(GradientOp gradient) {
    FailureOr<Interpreter> state = interpreter();
    if (failed(state))
      return failure();
    FailureOr<ArrayValue> value = state->evaluateGradient(gradient);
    if (failed(value))
      return failure();
    return toRuntime(*value);
  }

  /// Every state tensor (optimizer state included) and output by name.
  FailureOr<std::map<std::string, ::energy::Tensor>> stateAndOutputs() {
    FailureOr<std::map<std::string, ArrayValue>> values = results();
    if (failed(values))
      return failure();
    std::map<std::string, ::energy::Tensor> converted;
    for (const auto &[name, value] : *values)
      converted.emplace(name, toRuntime(value));
    return converted;
  }

  /// Runs steps from stepCount() until their count (the model's when
  /// `options.steps` is absent) or the stopping rule; then stepCount()
  /// has advanced by the steps taken.
  FailureOr<::energy::RunResult> run(const ::energy::RunOptions &options) {
    ::energy::RunResult result;
    FailureOr<int64_t> taken = run(nextStep, options.steps.value_or(-1),
                                   [&](int64_t step, double energy) {
                                     result.trace.push_back(energy);
                                     if (options.onStep)
                                       options.onStep(step, energy);
                                   });
    if (failed(taken))
      return failure();
    nextStep += *taken;
    result.steps = *taken;
    if (!result.trace.empty()) {
      result.energy = result.trace.back();
    } else {
      FailureOr<double> start = energy();
      if (failed(start))
        return failure();
      result.energy = *start;
    }
    return result;
  }

  /// The values bound (after bind(), and a run's final states after it).
  Bindings &getBindings() { return bindings; }

  /// The number of the next step; set it to resume a saved run.
  int64_t stepCount() const { return nextStep; }
  void setStepCount(int64_t step) { nextStep = step; }

  /// Carries the final values of a run into the bindings.
  void keep(Interpreter &state) {
    for (TensorOp tensor : model.getBody().front().getOps<TensorOp>())
      if (tensor.getRole() == Role::state)
        if (FailureOr<ArrayValue> value =
                state.getTensorValue(tensor.getSymName());
            succeeded(value))
          bindings.setTensor(tensor.getSymName(), std::move(*value));
  }

private:
  /// Binds every dim by the runtime's rule (DimInference.h): --dim, else
  /// the axes of the tensors `given`, else defaults (derived dims are the
  /// interpreter's to compute). A tensor the model lacks or of another rank
  /// is an error at the model.
  LogicalResult inferDims(const std::map<std::string, ArrayValue> &given) {
    std::map<std::string, std::vector<int64_t>> shapes;
    for (const auto &[name, value] : given) {
      auto tensor =
          dyn_cast_or_null<TensorOp>(SymbolTable::lookupSymbolIn(model, name));
      if (!tensor)
        return model.emitError() << "--in binds '" << name
                                 << "', which is not a tensor of the model";
      if (tensor.getShape().size() != value.shape.size())
        return tensor.emitError()
               << "tensor '" << name << "' is declared "
               << tensor.getArrayType().shapeString() << " but --in gives "
               << ArrayValue::shapeString(value.shape);
      shapes[name] = value.shape;
    }
    std::map<std::string, int64_t> givenDims;
    for (auto &entry : bindings.getDims())
      givenDims[entry.getKey().str()] = entry.getValue();
    ::energy::Manifest described = describeDimsAndTensors(model);
    std::vector<int64_t> values;
    if (::energy::Status status = ::energy::resolveDims(
            described, givenDims, "--dim", shapes, values);
        !status)
      return model.emitError() << status.message();
    for (auto [dim, value] : llvm::zip(described.dims, values))
      if (!dim.derived)
        bindings.setDim(dim.name, value);
    return success();
  }

  /// The value the runtime's initialiser gives `tensor` (so that compiled
  /// and interpreted runs start from the same values).
  FailureOr<ArrayValue> initialValue(TensorOp tensor,
                                     const std::vector<int64_t> &shape,
                                     std::optional<uint64_t> seed) {
    std::optional<::energy::InitSpec> init;
    if (std::optional<InitKind> kind = tensor.getInit()) {
      init.emplace();
      init->kind = *::energy::initKindFromName(stringifyInitKind(*kind).str());
      if (tensor.getInitArgs())
        init->args.assign(tensor.getInitArgs()->begin(),
                          tensor.getInitArgs()->end());
    }
    ::energy::Expected<::energy::Tensor> value = ::energy::initialValue(
        ::energy::DType::F64, shape, tensor.getSymName().str(), init, seed);
    if (!value)
      return tensor.emitError() << value.message();
    ArrayValue result(shape);
    for (int64_t i = 0; i < result.size(); ++i)
      result.data[i] = value->at(i);
    return result;
  }

  ModelOp model;
  Bindings bindings;
  int64_t nextStep = 0;
};

} // namespace mlir::energy::tools

#endif // ENERGY_TOOLS_ENERGYRUN_INTERPRETEDRUN_H
