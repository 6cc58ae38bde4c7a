//===- energy-run.cpp - Runs an energy model ------------------------------===//
//
// `energy-run MODEL.energy --interp [--dim N=V]... [--init random:SEED]
// [--steps K] [--eval energy|grad|run] [--trace] [--json]`: binds the
// model's tensors, then evaluates its energy, its gradients, or runs its
// dynamics and reports the energy after every step. Today it runs on the
// reference interpreter (`--interp`); compiled artifacts come with code
// generation.
//
//===----------------------------------------------------------------------===//

#include "energy/Dynamics/FrontendOptimizers.h"
#include "energy/Frontend/EmitEnergyDialect.h"
#include "energy/Frontend/Frontend.h"
#include "energy/IR/EnergyDialect.h"
#include "energy/IR/EnergyOps.h"
#include "energy/Interpreter/Interpreter.h"
#include "energy/Runtime/Random.h"
#include "energy/Runtime/Safetensors.h"
#include "energy/Transforms/Pipelines.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/WithColor.h"

#include <chrono>
#include <cmath>

using namespace llvm;
using namespace mlir;
using namespace mlir::energy;
namespace fe = ::energy::frontend;

namespace {
/// The optimizers the front end accepts: the registry's.
const fe::OptimizerTable &frontendOptimizers() {
  static const fe::OptimizerTable table =
      mlir::energy::buildFrontendOptimizerTable(
          mlir::energy::OptimizerRegistry::get());
  return table;
}

enum class EvalKind { Energy, Grad, Run };

cl::OptionCategory runOptions("energy-run options");
cl::opt<std::string> modelFile(cl::Positional, cl::desc("<model.energy>"),
                               cl::Required, cl::cat(runOptions));
cl::opt<bool>
    useInterpreter("interp",
                   cl::desc("Evaluate with the reference interpreter"),
                   cl::cat(runOptions));
cl::list<std::string> dimValues("dim", cl::desc("Bind a dim"),
                                cl::value_desc("NAME=VALUE"),
                                cl::cat(runOptions));
cl::list<std::string> constValues("const", cl::desc("Override a const"),
                                  cl::value_desc("NAME=VALUE"),
                                  cl::cat(runOptions));
cl::opt<std::string>
    initSpec("init",
             cl::desc("Initialise tensors that have no value from a documented "
                      "generator: normal, scaled by 1/sqrt(last dim)"),
             cl::value_desc("random:SEED"), cl::cat(runOptions));
cl::list<std::string>
    inputFiles("in",
               cl::desc("Bind the tensors of a safetensors file (dims are "
                        "inferred from their shapes)"),
               cl::value_desc("FILE.safetensors"), cl::cat(runOptions));
cl::opt<std::string> outputFile(
    "out",
    cl::desc("Write the results (state tensors, outputs, or grad.T) to a "
             "safetensors file"),
    cl::value_desc("FILE.safetensors"), cl::cat(runOptions));
cl::opt<int64_t> stepsOverride("steps", cl::desc("Number of steps to run"),
                               cl::init(-1), cl::cat(runOptions));
cl::opt<EvalKind> evalKind(
    "eval", cl::desc("What to evaluate"), cl::init(EvalKind::Run),
    cl::values(clEnumValN(EvalKind::Energy, "energy", "the global energy"),
               clEnumValN(EvalKind::Grad, "grad",
                          "dE/dT for each state tensor (or --wrt)"),
               clEnumValN(EvalKind::Run, "run", "run the dynamics (default)")),
    cl::cat(runOptions));
cl::list<std::string> wrt("wrt", cl::CommaSeparated,
                          cl::desc("Tensors to differentiate (--eval grad)"),
                          cl::value_desc("a,b"), cl::cat(runOptions));
cl::opt<bool> trace("trace", cl::desc("Print the energy after every step"),
                    cl::cat(runOptions));
cl::opt<bool> jsonOutput("json", cl::desc("Print results as one JSON object"),
                         cl::cat(runOptions));

int fail(const Twine &message) {
  WithColor::error(errs(), "energy-run") << message << "\n";
  return 1;
}

/// Parses `NAME=VALUE` settings into (name, value) pairs.
template <typename Number>
FailureOr<std::vector<std::pair<std::string, Number>>>
parseSettings(ArrayRef<std::string> settings, StringRef option) {
  std::vector<std::pair<std::string, Number>> result;
  for (const std::string &setting : settings) {
    auto [name, text] = StringRef(setting).split('=');
    Number value;
    bool bad;
    if constexpr (std::is_same_v<Number, double>)
      bad = text.getAsDouble(value);
    else
      bad = text.getAsInteger(10, value) || value <= 0;
    if (name.empty() || bad) {
      (void)fail(
          "--" + option + " " + setting + ": expected NAME=VALUE with a " +
          (std::is_same_v<Number, double> ? "number" : "positive integer"));
      return failure();
    }
    result.emplace_back(name.str(), value);
  }
  return result;
}

/// The body value an option or rule yields.
Value yieldedValue(Region &region) {
  return cast<YieldOp>(region.front().back()).getValues().front();
}

/// Runs a model on the reference interpreter: binding tensors, stepping the
/// dynamics on one interpreter, and evaluating energies and gradients.
class InterpretedRun {
public:
  explicit InterpretedRun(ModelOp model) : model(model) {}

  /// Binds dims (given, then inferred from `given` tensors), consts, the
  /// `given` tensors, and every other tensor from its initialiser or
  /// `seed`.
  LogicalResult bind(ArrayRef<std::pair<std::string, int64_t>> dims,
                     ArrayRef<std::pair<std::string, double>> consts,
                     const std::map<std::string, Tensor> &given,
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
      FailureOr<Tensor> value = initialValue(tensor, *shape, seed);
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
  FailureOr<int64_t> run(int64_t steps,
                         llvm::function_ref<void(int64_t, double)> report) {
    DynamicsOp dynamics = model.getDynamics();
    auto programs = model.getBody().front().getOps<UpdateProgramOp>();
    if (!dynamics || programs.empty())
      return model.emitError("the model has no dynamics to run");
    FailureOr<Interpreter> state = interpreter();
    if (failed(state))
      return failure();
    if (steps < 0) {
      FailureOr<int64_t> count = dynamics.getSteps().evaluate(
          [&](StringRef name) { return state->getDim(name); });
      if (failed(count))
        return dynamics.emitError("the step count cannot be evaluated");
      steps = *count;
    }
    for (int64_t step = 0; step < steps; ++step) {
      state->setStep(step);
      if (failed(state->runUpdateProgram(*programs.begin())))
        return failure();
      FailureOr<double> energy = state->evaluateEnergy();
      if (failed(energy))
        return failure();
      report(step, *energy);
      if (!dynamics.getUntil().empty()) {
        FailureOr<Tensor> done =
            state->evaluate(yieldedValue(dynamics.getUntil()));
        if (failed(done))
          return failure();
        if (done->data[0] != 0.0) {
          keep(*state);
          return step + 1;
        }
      }
    }
    keep(*state);
    return steps;
  }

  /// The values to write with --out: every state tensor (optimizer state
  /// included) and every output, after a run.
  FailureOr<std::map<std::string, Tensor>> results() {
    FailureOr<Interpreter> state = interpreter();
    if (failed(state))
      return failure();
    std::map<std::string, Tensor> values;
    for (TensorOp tensor : model.getBody().front().getOps<TensorOp>()) {
      if (tensor.getRole() != Role::state)
        continue;
      FailureOr<Tensor> value = state->getTensorValue(tensor.getSymName());
      if (failed(value))
        return failure();
      values[tensor.getSymName().str()] = std::move(*value);
    }
    for (OutputOp output : model.getBody().front().getOps<OutputOp>()) {
      FailureOr<Tensor> value = state->evaluateOutput(output);
      if (failed(value))
        return failure();
      values[output.getSymName().str()] = std::move(*value);
    }
    return values;
  }

  /// Carries the final values of a run into the bindings.
  void keep(Interpreter &state) {
    for (TensorOp tensor : model.getBody().front().getOps<TensorOp>())
      if (tensor.getRole() == Role::state)
        if (FailureOr<Tensor> value = state.getTensorValue(tensor.getSymName());
            succeeded(value))
          bindings.setTensor(tensor.getSymName(), std::move(*value));
  }

private:
  /// Binds the dims that bound tensors determine: a dim that is neither
  /// given nor derived takes the size of the axis it names; a conflict with
  /// --dim or another tensor is an error naming both.
  LogicalResult inferDims(const std::map<std::string, Tensor> &given) {
    llvm::StringMap<std::pair<int64_t, std::string>> sources;
    for (auto &entry : bindings.getDims())
      sources[entry.getKey()] = {entry.getValue(), "--dim"};
    for (const auto &[name, value] : given) {
      auto tensor =
          dyn_cast_or_null<TensorOp>(SymbolTable::lookupSymbolIn(model, name));
      if (!tensor)
        return model.emitError() << "--in binds '" << name
                                 << "', which is not a tensor of the model";
      ArrayAttr dims = tensor.getShape();
      if (dims.size() != value.shape.size())
        return tensor.emitError()
               << "tensor '" << name << "' is declared "
               << tensor.getArrayType().shapeString() << " but --in gives "
               << Tensor::shapeString(value.shape);
      for (auto [dim, size] : llvm::zip(dims, value.shape)) {
        StringRef dimName = cast<FlatSymbolRefAttr>(dim).getValue();
        auto dimOp = SymbolTable::lookupSymbolIn(model, dimName);
        if (cast<DimOp>(dimOp).getDerived())
          continue;
        auto [it, inserted] = sources.try_emplace(
            dimName, std::make_pair(size, "tensor '" + name + "'"));
        if (!inserted && it->second.first != size)
          return tensor.emitError()
                 << "dim " << dimName << " is " << it->second.first << " from "
                 << it->second.second << " but tensor '" << name
                 << "' gives it " << size;
        if (inserted)
          bindings.setDim(dimName, size);
      }
    }
    return success();
  }

  FailureOr<Tensor> initialValue(TensorOp tensor,
                                 const std::vector<int64_t> &shape,
                                 std::optional<uint64_t> seed) {
    Tensor value(shape, 0.0);
    ::energy::RandomStream stream = ::energy::RandomStream::forTensor(
        seed.value_or(0), tensor.getSymName().str());
    std::optional<InitKind> kind = tensor.getInit();
    ArrayRef<double> args =
        tensor.getInitArgs() ? *tensor.getInitArgs() : ArrayRef<double>();
    if (!kind) {
      if (!seed)
        return tensor.emitError()
               << "tensor '" << tensor.getSymName()
               << "' has no value: it has no initialiser; give --init "
                  "random:SEED";
      double scale =
          1.0 /
          std::sqrt(static_cast<double>(shape.empty() ? 1 : shape.back()));
      for (double &x : value.data)
        x = scale * stream.nextNormal();
      return value;
    }
    switch (*kind) {
    case InitKind::zeros:
      break;
    case InitKind::ones:
      std::fill(value.data.begin(), value.data.end(), 1.0);
      break;
    case InitKind::eye: {
      int64_t n = shape.back();
      for (int64_t i = 0; i < value.size(); ++i)
        value.data[i] = (i % n) == ((i / n) % n) ? 1.0 : 0.0;
      break;
    }
    case InitKind::normal:
      for (double &x : value.data)
        x = args[0] + args[1] * stream.nextNormal();
      break;
    case InitKind::uniform:
      for (double &x : value.data)
        x = args[0] + (args[1] - args[0]) * stream.nextUniform();
      break;
    case InitKind::copy:
      llvm_unreachable("copies are bound after their sources");
    }
    return value;
  }

  ModelOp model;
  Bindings bindings;
};

/// The tensors of the --in files, as the interpreter's tensors.
FailureOr<std::map<std::string, Tensor>> readInputs() {
  std::map<std::string, Tensor> tensors;
  for (const std::string &path : inputFiles) {
    ::energy::Expected<::energy::SafetensorsContents> contents =
        ::energy::readSafetensors(path);
    if (!contents)
      return fail(contents.message()), failure();
    for (const auto &[name, value] : contents->tensors) {
      Tensor tensor(value.shape());
      for (int64_t i = 0; i < tensor.size(); ++i)
        tensor.data[i] = value.at(i);
      if (!tensors.emplace(name, std::move(tensor)).second)
        return fail("--in: tensor '" + name + "' is given twice"), failure();
    }
  }
  return tensors;
}

/// Writes `tensors` (in double precision) to the --out file.
bool writeOutputs(const std::map<std::string, Tensor> &tensors) {
  std::map<std::string, ::energy::Tensor> values;
  for (const auto &[name, tensor] : tensors) {
    ::energy::Tensor value(::energy::DType::F64, tensor.shape);
    for (int64_t i = 0; i < tensor.size(); ++i)
      value.set(i, tensor.data[i]);
    values.emplace(name, std::move(value));
  }
  ::energy::Status status = ::energy::writeSafetensors(outputFile, values);
  if (!status)
    return fail(status.message()), false;
  return true;
}

json::Array toJson(const Tensor &tensor) {
  json::Array data;
  for (double x : tensor.data)
    data.push_back(x);
  return data;
}
} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(runOptions);
  cl::ParseCommandLineOptions(
      argc, argv,
      "energy-run: evaluates an energy model's energy and gradients, or runs "
      "its dynamics\n");
  if (!useInterpreter)
    return fail("compiled execution comes with code generation; run the "
                "model on the reference interpreter with --interp");
  std::optional<uint64_t> seed;
  if (!initSpec.empty()) {
    uint64_t value;
    StringRef spec(initSpec);
    if (!spec.consume_front("random:") || spec.getAsInteger(10, value))
      return fail("--init " + initSpec + ": expected random:SEED");
    seed = value;
  }
  auto dims = parseSettings<int64_t>(dimValues, "dim");
  auto consts = parseSettings<double>(constValues, "const");
  if (failed(dims) || failed(consts))
    return 1;

  SourceMgr sourceMgr;
  fe::DiagnosticEngine diagnostics(sourceMgr);
  std::string readError;
  std::unique_ptr<fe::Model> ast = fe::parseAndCheckFile(
      modelFile, sourceMgr, diagnostics, frontendOptimizers(), readError);
  if (!readError.empty())
    return fail(readError);
  if (!ast)
    return 1;

  MLIRContext context;
  context.loadDialect<EnergyDialect, arith::ArithDialect>();
  context.printOpOnDiagnostic(false);
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  OwningOpRef<ModuleOp> module =
      fe::emitEnergyDialect(context, *ast, sourceMgr);
  if (!module)
    return 1;
  PassManager passes(&context, ModuleOp::getOperationName());
  buildUpdatePipeline(passes.nest<ModelOp>(),
                      std::vector<std::string>(wrt.begin(), wrt.end()));
  if (failed(passes.run(*module)))
    return 1;
  ModelOp model = *module->getOps<ModelOp>().begin();

  FailureOr<std::map<std::string, Tensor>> inputs = readInputs();
  if (failed(inputs))
    return 1;
  InterpretedRun run(model);
  if (failed(run.bind(*dims, *consts, *inputs, seed)))
    return 1;

  if (evalKind == EvalKind::Energy) {
    FailureOr<Interpreter> interpreter = run.interpreter();
    if (failed(interpreter))
      return 1;
    FailureOr<double> energy = interpreter->evaluateEnergy();
    if (failed(energy))
      return 1;
    if (jsonOutput)
      outs() << formatv("{0}", json::Value(json::Object{{"energy", *energy}}))
             << "\n";
    else
      outs() << formatv("energy {0:e}\n", *energy);
    return 0;
  }

  if (evalKind == EvalKind::Grad) {
    FailureOr<Interpreter> interpreter = run.interpreter();
    if (failed(interpreter))
      return 1;
    json::Object result;
    std::map<std::string, Tensor> gradients;
    for (GradientOp gradient : model.getBody().front().getOps<GradientOp>()) {
      if (gradient.getOf())
        continue;
      FailureOr<Tensor> value = interpreter->evaluateGradient(gradient);
      if (failed(value))
        return 1;
      std::string name = ("grad." + gradient.getTensor()).str();
      gradients[name] = *value;
      if (jsonOutput) {
        json::Array shape;
        for (int64_t size : value->shape)
          shape.push_back(size);
        result[name] =
            json::Object{{"shape", std::move(shape)}, {"data", toJson(*value)}};
      } else {
        outs() << name << " " << Tensor::shapeString(value->shape) << "\n";
        for (double x : value->data)
          outs() << formatv("  {0:e}\n", x);
      }
    }
    if (jsonOutput)
      outs() << formatv("{0}", json::Value(std::move(result))) << "\n";
    if (!outputFile.empty() && !writeOutputs(gradients))
      return 1;
    return 0;
  }

  if (trace && !jsonOutput) {
    FailureOr<Interpreter> initial = run.interpreter();
    if (failed(initial))
      return 1;
    FailureOr<double> energy = initial->evaluateEnergy();
    if (failed(energy))
      return 1;
    outs() << formatv("start       energy {0:e}\n", *energy);
  }
  std::vector<double> energies;
  auto start = std::chrono::steady_clock::now();
  auto lastProgress = start;
  FailureOr<int64_t> steps = run.run(stepsOverride, [&](int64_t step,
                                                        double energy) {
    energies.push_back(energy);
    if (trace && !jsonOutput)
      outs() << formatv("step {0,4}  energy {1:e}\n", step, energy);
    auto now = std::chrono::steady_clock::now();
    if (!trace && now - lastProgress > std::chrono::seconds(1)) {
      errs() << formatv("energy-run: step {0}, energy {1:e}\n", step, energy);
      lastProgress = now;
    }
  });
  if (failed(steps))
    return 1;
  if (!outputFile.empty()) {
    FailureOr<std::map<std::string, Tensor>> results = run.results();
    if (failed(results) || !writeOutputs(*results))
      return 1;
  }
  double final = energies.empty() ? 0.0 : energies.back();
  if (jsonOutput) {
    json::Array traceJson;
    for (double e : energies)
      traceJson.push_back(e);
    outs() << formatv("{0}", json::Value(
                                 json::Object{{"energy", final},
                                              {"steps", *steps},
                                              {"trace", std::move(traceJson)}}))
           << "\n";
  } else {
    outs() << formatv("final energy {0:e} after {1} steps\n", final, *steps);
  }
  return 0;
}
