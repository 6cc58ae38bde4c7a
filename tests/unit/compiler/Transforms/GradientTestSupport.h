//===- GradientTestSupport.h - Helpers for the gradient tests ---*- C++ -*-===//
//
// Compiles a `.energy` model through the pipeline of `energyc --emit=grad`
// (parse and check, emit the energy dialect, energy-derive-gradients with a
// `wrt` list, cse, canonicalize) or through `buildUpdatePipeline` (the step
// program energy-run executes), binds seeded random tensors at small dims,
// and compares derived gradients with central finite differences of the
// interpreted energy. One harness, used by every model test.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TESTS_UNIT_GRADIENTS_GRADIENTTESTSUPPORT_H
#define ENERGY_TESTS_UNIT_GRADIENTS_GRADIENTTESTSUPPORT_H

#include "energy/IR/EnergyOps.h"
#include "energy/Interpreter/ArrayValue.h"
#include "energy/Interpreter/Bindings.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace energy::testing {

using mlir::energy::ArrayValue;
using mlir::energy::Bindings;

/// The pass pipeline a model is compiled with.
enum class Pipeline {
  /// `energyc --emit=grad`: energy-derive-gradients (with `wrt`), cse,
  /// canonicalize.
  Gradient,
  /// `buildUpdatePipeline`, what energy-run executes: energy-build-updates
  /// (the step program), then the gradient pipeline (with `wrt`).
  Update,
  /// `Update`, then the kernel plan (buildKernelPlanPipeline): what code
  /// generators lower.
  Plan,
};

/// A model compiled as `energyc --emit=grad` does. Every diagnostic (front
/// end, passes, interpreter) is printed into `diagnostics` as
/// `file:line:col: error: message` with the source line.
struct CompiledModel {
  mlir::MLIRContext context;
  llvm::SourceMgr sourceMgr;
  std::string diagnostics;
  llvm::raw_string_ostream diagnosticStream{diagnostics};
  /// Prints MLIR diagnostics into `diagnostics` (set up by compileSource).
  std::unique_ptr<mlir::SourceMgrDiagnosticHandler> handler;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  /// Null when compilation failed.
  mlir::energy::ModelOp model;

  /// The energy for `bindings`, or nullopt (the error is in `diagnostics`).
  std::optional<double> energy(const Bindings &bindings);
  /// The derived gradient of `tensor` for `bindings`, or nullopt.
  std::optional<ArrayValue> gradient(const Bindings &bindings,
                                     llvm::StringRef tensor);
  /// The names of the model's tensors, in declaration order.
  std::vector<std::string> tensorNames();
};

/// Compiles `source` (buffer name `name`) through `pipeline`, also
/// differentiating with respect to `wrt`. Never null; `model` is null on
/// failure.
std::unique_ptr<CompiledModel>
compileSource(llvm::StringRef source, const std::vector<std::string> &wrt = {},
              llvm::StringRef name = "test.energy",
              Pipeline pipeline = Pipeline::Gradient);
/// Reads examples/`stem`.energy and compiles it as `compileSource` does; when
/// `wrtAll`, differentiates with respect to every tensor of the model.
std::unique_ptr<CompiledModel>
compileExample(llvm::StringRef stem, bool wrtAll = true,
               Pipeline pipeline = Pipeline::Gradient);

/// How to bind a model's dims and tensors at random.
struct RandomBindingOptions {
  uint64_t seed = 1;
  /// Every dim that is not derived is bound to `defaultDim` unless listed.
  int64_t defaultDim = 3;
  llvm::StringMap<int64_t> dims;
  /// Entries are `scale` · N(0, 1): small enough to keep exponentials and
  /// softmax weights moderate.
  double scale = 0.3;
  /// Tensors of shape [..., D, D] bound as symmetric positive definite
  /// blocks A·Aᵀ/D + I, so logdet and inverse stay well-posed.
  std::set<std::string> spd;
  /// Left unbound, so that the interpreter gives them their initialiser's
  /// value (e.g. `H : [N, N] = zeros`). Optimizer state tensors
  /// (`@x.velocity`, marked `optimizer_state` by energy-build-updates) are
  /// always left unbound: they start at zero.
  std::set<std::string> unbound;
  /// Bound to a copy of another tensor (e.g. x = h), after the random ones.
  std::vector<std::pair<std::string, std::string>> copies;
  llvm::StringMap<double> consts;
  int64_t step = 0;
};

/// Binds every dim and every tensor of `model` as `options` says.
Bindings bindRandom(mlir::energy::ModelOp model,
                    const RandomBindingOptions &options);

/// The outcome of comparing a gradient with finite differences: the worst
/// ratio |fd − g·v| / tolerance over all samples (≤ 1 passes) and a
/// description of the worst sample.
struct FiniteDifferenceReport {
  double worstRatio = 0;
  std::string worst;
  int samples = 0;
  bool ok() const { return samples > 0 && worstRatio <= 1.0; }
};

/// Compares `gradient` (∂E/∂`tensor` at `bindings`) with central finite
/// differences of the interpreted energy along `directions` random unit
/// directions and at `coordinates` coordinates (the first, the last and
/// random ones).
FiniteDifferenceReport
compareWithFiniteDifferences(CompiledModel &compiled, const Bindings &bindings,
                             llvm::StringRef tensor, const ArrayValue &gradient,
                             uint64_t seed, int directions = 3,
                             int coordinates = 6);

/// The largest |a − b| over all elements (infinity when shapes differ).
double maxAbsDifference(const ArrayValue &a, const ArrayValue &b);
/// The largest |a|.
double maxAbs(const ArrayValue &a);

} // namespace energy::testing

#endif // ENERGY_TESTS_UNIT_GRADIENTS_GRADIENTTESTSUPPORT_H
