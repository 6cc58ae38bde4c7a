//===- GradientTestSupport.cpp - Helpers for the gradient tests -----------===//
//
// The compile-bind-compare harness shared by the gradient tests.
//
//===----------------------------------------------------------------------===//

#include "GradientTestSupport.h"

#include "energy/Frontend/EmitEnergyDialect.h"
#include "energy/Frontend/Frontend.h"
#include "energy/IR/EnergyDialect.h"
#include "energy/Interpreter/Interpreter.h"
#include "energy/Transforms/Passes.h"
#include "energy/Transforms/Pipelines.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

using namespace mlir;
using namespace mlir::energy;
namespace fe = ::energy::frontend;

/// `value` with 12 significant digits, for reports.
static std::string format(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.12g", value);
  return text;
}

namespace energy::testing {

//===----------------------------------------------------------------------===//
// Compilation
//===----------------------------------------------------------------------===//

std::unique_ptr<CompiledModel>
compileSource(llvm::StringRef source, const std::vector<std::string> &wrt,
              llvm::StringRef name, Pipeline pipeline) {
  auto compiled = std::make_unique<CompiledModel>();
  unsigned buffer = compiled->sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(source, name), llvm::SMLoc());

  fe::DiagnosticEngine diagnostics(compiled->sourceMgr);
  diagnostics.redirectTo(compiled->diagnosticStream);
  MLIRContext &context = compiled->context;
  compiled->handler = std::make_unique<SourceMgrDiagnosticHandler>(
      compiled->sourceMgr, &context, compiled->diagnosticStream);
  compiled->module =
      fe::emitSource(context, compiled->sourceMgr, buffer, diagnostics);
  if (!compiled->module)
    return compiled;

  PassManager passes(&context, ModuleOp::getOperationName());
  OpPassManager &perModel = passes.nest<ModelOp>();
  if (pipeline == Pipeline::Update || pipeline == Pipeline::Plan) {
    buildUpdatePipeline(perModel, wrt);
    if (pipeline == Pipeline::Plan)
      buildKernelPlanPipeline(perModel);
  } else {
    // The pipeline of `energyc --emit=grad`.
    EnergyDeriveGradientsOptions options;
    options.wrt.assign(wrt.begin(), wrt.end());
    perModel.addPass(createEnergyDeriveGradients(options));
    perModel.addPass(createCSEPass());
    perModel.addPass(createCanonicalizerPass());
  }
  if (failed(passes.run(*compiled->module)))
    return compiled;

  auto models = compiled->module->getOps<ModelOp>();
  if (!models.empty())
    compiled->model = *models.begin();
  return compiled;
}

std::unique_ptr<CompiledModel> compileExample(llvm::StringRef stem, bool wrtAll,
                                              Pipeline pipeline) {
  std::string path = (ENERGY_EXAMPLES_DIR "/" + stem + ".energy").str();
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!file) {
    auto compiled = std::make_unique<CompiledModel>();
    compiled->diagnostics = "cannot read " + path;
    return compiled;
  }
  std::string source = (*file)->getBuffer().str();
  std::vector<std::string> wrt;
  if (wrtAll) {
    // Parse once without derivation to learn the tensors' names (those of
    // the model and its backward program, not the plan's scratch).
    std::unique_ptr<CompiledModel> plain =
        compileSource(source, {}, path,
                      pipeline == Pipeline::Plan ? Pipeline::Update : pipeline);
    if (!plain->model)
      return plain;
    wrt = plain->tensorNames();
  }
  return compileSource(source, wrt, path, pipeline);
}

std::vector<std::string> CompiledModel::tensorNames() {
  std::vector<std::string> names;
  if (model)
    for (TensorOp tensor : model.getOps<TensorOp>())
      names.push_back(tensor.getSymName().str());
  return names;
}

std::optional<double> CompiledModel::energy(const Bindings &bindings) {
  FailureOr<Interpreter> interpreter = Interpreter::create(model, bindings);
  if (failed(interpreter))
    return std::nullopt;
  FailureOr<double> value = interpreter->evaluateEnergy();
  if (failed(value))
    return std::nullopt;
  return *value;
}

std::optional<ArrayValue> CompiledModel::gradient(const Bindings &bindings,
                                                  llvm::StringRef tensor) {
  FailureOr<Interpreter> interpreter = Interpreter::create(model, bindings);
  if (failed(interpreter))
    return std::nullopt;
  FailureOr<ArrayValue> value = interpreter->evaluateGradient(tensor);
  if (failed(value))
    return std::nullopt;
  return std::move(*value);
}

//===----------------------------------------------------------------------===//
// Random bindings
//===----------------------------------------------------------------------===//

Bindings bindRandom(ModelOp model, const RandomBindingOptions &options) {
  Bindings bindings;
  bindings.setStep(options.step);
  llvm::StringMap<int64_t> dims;
  for (DimOp dim : model.getOps<DimOp>()) {
    StringRef name = dim.getSymName();
    if (DimExprAttr derived = dim.getDerivedAttr()) {
      FailureOr<int64_t> value =
          derived.evaluate([&](StringRef input) -> std::optional<int64_t> {
            auto found = dims.find(input);
            if (found == dims.end())
              return std::nullopt;
            return found->second;
          });
      if (succeeded(value))
        dims[name] = *value;
      continue;
    }
    auto listed = options.dims.find(name);
    int64_t value =
        listed != options.dims.end() ? listed->second : options.defaultDim;
    dims[name] = value;
    bindings.setDim(name, value);
  }
  for (const auto &entry : options.consts)
    bindings.setConst(entry.getKey(), entry.getValue());

  std::mt19937_64 engine(options.seed);
  std::normal_distribution<double> normal;
  for (TensorOp tensor : model.getOps<TensorOp>()) {
    std::vector<int64_t> shape;
    for (StringAttr dim : tensor.getArrayType().getShape())
      shape.push_back(dims.lookup(dim.getValue()));
    ArrayValue value(shape);
    std::string name = tensor.getSymName().str();
    if (options.unbound.count(name) || tensor.getOptimizerState())
      continue;
    if (options.spd.count(name) && shape.size() >= 2 &&
        shape.back() == shape[shape.size() - 2]) {
      // Per trailing D × D block: A·Aᵀ/D + I, eigenvalues in [1, ~5].
      int64_t d = shape.back();
      for (int64_t block = 0; block < value.size() / (d * d); ++block) {
        std::vector<double> a(d * d);
        for (double &entry : a)
          entry = normal(engine);
        for (int64_t r = 0; r < d; ++r)
          for (int64_t c = 0; c < d; ++c) {
            double sum = r == c ? 1.0 : 0.0;
            for (int64_t k = 0; k < d; ++k)
              sum += a[r * d + k] * a[c * d + k] / d;
            value.data[block * d * d + r * d + c] = sum;
          }
      }
    } else {
      for (double &entry : value.data)
        entry = options.scale * normal(engine);
    }
    bindings.setTensor(name, std::move(value));
  }
  for (const auto &[target, source] : options.copies)
    bindings.setTensor(target, bindings.getTensors().lookup(source));
  return bindings;
}

//===----------------------------------------------------------------------===//
// Finite differences
//===----------------------------------------------------------------------===//

double maxAbs(const ArrayValue &a) {
  double largest = 0;
  for (double value : a.data)
    largest = std::max(largest, std::fabs(value));
  return largest;
}

double maxAbsDifference(const ArrayValue &a, const ArrayValue &b) {
  if (a.shape != b.shape || a.data.size() != b.data.size())
    return std::numeric_limits<double>::infinity();
  double largest = 0;
  for (size_t i = 0; i < a.data.size(); ++i)
    largest = std::max(largest, std::fabs(a.data[i] - b.data[i]));
  return largest;
}

FiniteDifferenceReport
compareWithFiniteDifferences(CompiledModel &compiled, const Bindings &bindings,
                             StringRef tensor, const ArrayValue &gradient,
                             uint64_t seed, int directions, int coordinates) {
  FiniteDifferenceReport report;
  auto fail = [&](const std::string &why) {
    report.worstRatio = std::numeric_limits<double>::infinity();
    report.worst = why + "\n" + compiled.diagnostics;
    return report;
  };
  auto bound = bindings.getTensors().find(tensor);
  if (bound == bindings.getTensors().end())
    return fail("tensor @" + tensor.str() + " is not bound");
  const ArrayValue &point = bound->second;
  if (gradient.shape != point.shape)
    return fail("gradient of @" + tensor.str() + " has shape " +
                ArrayValue::shapeString(gradient.shape) + ", tensor " +
                ArrayValue::shapeString(point.shape));
  std::optional<double> energy = compiled.energy(bindings);
  if (!energy)
    return fail("the energy cannot be evaluated");

  // Tolerance. The central difference (E(t + hv) − E(t − hv)) / 2h differs
  // from g·v by a truncation error h²/6·|∂³E/∂v³| and a roundoff error of
  // about κ·ε·|E|/h, where κ (≲ 1e2 here) bounds the cancellation in summing
  // the terms of E. With h = 1e-5·max(1, |t|∞), |v|₂ = 1 and our scales
  // (entries ~0.3, third derivatives ≲ 10) both stay below ~1e-9·max(1,
  // |E|) (observed: ≤ 4e-10), so 1e-7·max(1, |E|, |g·v|) leaves two orders
  // of margin while an error of 1e-6 in one gradient entry is still caught
  // at its coordinate.
  double h = 1e-5 * std::max(1.0, maxAbs(point));
  std::mt19937_64 engine(seed);
  std::normal_distribution<double> normal;

  std::vector<std::pair<std::string, std::vector<double>>> samples;
  for (int d = 0; d < directions; ++d) {
    std::vector<double> v(point.data.size());
    double norm = 0;
    for (double &entry : v) {
      entry = normal(engine);
      norm += entry * entry;
    }
    norm = std::sqrt(norm);
    for (double &entry : v)
      entry /= norm == 0 ? 1 : norm;
    samples.emplace_back("random direction " + std::to_string(d), v);
  }
  std::vector<int64_t> picked;
  int64_t count = static_cast<int64_t>(point.data.size());
  if (count > 0) {
    picked.push_back(0);
    picked.push_back(count - 1);
    std::uniform_int_distribution<int64_t> any(0, count - 1);
    while (static_cast<int>(picked.size()) < coordinates)
      picked.push_back(any(engine));
    std::sort(picked.begin(), picked.end());
    picked.erase(std::unique(picked.begin(), picked.end()), picked.end());
  }
  for (int64_t index : picked) {
    std::vector<double> v(point.data.size(), 0.0);
    v[index] = 1.0;
    samples.emplace_back("coordinate " + std::to_string(index), v);
  }

  for (const auto &sample : samples) {
    const std::string &label = sample.first;
    const std::vector<double> &v = sample.second;
    auto energyAt = [&](double step) -> std::optional<double> {
      Bindings moved = bindings;
      ArrayValue value = point;
      for (size_t i = 0; i < v.size(); ++i)
        value.data[i] += step * v[i];
      moved.setTensor(tensor, std::move(value));
      return compiled.energy(moved);
    };
    std::optional<double> plus = energyAt(h), minus = energyAt(-h);
    if (!plus || !minus)
      return fail("the energy cannot be evaluated along " + label);
    double fd = (*plus - *minus) / (2 * h);
    double predicted = 0;
    for (size_t i = 0; i < v.size(); ++i)
      predicted += gradient.data[i] * v[i];
    double tolerance =
        1e-7 * std::max({1.0, std::fabs(*energy), std::fabs(predicted)});
    double ratio = std::fabs(fd - predicted) / tolerance;
    ++report.samples;
    if (ratio >= report.worstRatio) {
      report.worstRatio = ratio;
      report.worst = "@" + tensor.str() + " along " + label +
                     ": finite difference " + format(fd) + ", derived " +
                     format(predicted) +
                     " (|difference| / tolerance = " + format(ratio) + ")";
    }
  }
  return report;
}

} // namespace energy::testing
