//===- DynamicsTestSupport.h - Stepping the dynamics tests ------*- C++ -*-===//
//-*-===//
//
// The one stepping helper of the dynamics tests: it runs a model compiled
// through `buildUpdatePipeline` (see GradientTestSupport's
// `Pipeline::Update`) on the reference interpreter exactly as energy-run
// does (`setStep(k)`, `runUpdateProgram`, then the stopping rule), and the
// plain-C++ pieces the tests build their references from.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TESTS_UNIT_DYNAMICS_DYNAMICSTESTSUPPORT_H
#define ENERGY_TESTS_UNIT_DYNAMICS_DYNAMICSTESTSUPPORT_H

#include "compiler/Transforms/GradientTestSupport.h"
#include "support/DenseMath.h"

#include "energy/Interpreter/Interpreter.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace energy::testing {

/// A run of a compiled model's dynamics from `bindings`, on one interpreter
/// that carries the tensors from step to step. Every failure is an MLIR
/// diagnostic in the model's `CompiledModel::diagnostics`.
class DynamicsRun {
public:
  /// Null (the error in `compiled.diagnostics`) when the model has no step
  /// program or `bindings` do not fit it.
  static std::unique_ptr<DynamicsRun> start(CompiledModel &compiled,
                                            const Bindings &bindings);

  /// The model's `steps` count for the bound dims.
  std::optional<int64_t> stepCount();
  /// Takes step `stepsTaken()` as energy-run does: sets `step`, runs the
  /// update program, then evaluates the stopping rule (if any). False on an
  /// error.
  bool step();
  /// Steps until the model's step count is reached or its stopping rule
  /// holds, calling `afterStep(k)` after step k. False on an error.
  bool run(llvm::function_ref<void(int64_t)> afterStep = nullptr);

  int64_t stepsTaken() const { return taken; }
  /// Whether the stopping rule held after the last step.
  bool stopped() const { return stoppedByRule; }

  /// The current value of a tensor (bound, initialised or last stored).
  std::optional<ArrayValue> value(llvm::StringRef tensor);
  /// The global energy at the current values and step.
  std::optional<double> energy();
  /// The derived gradient of `tensor` at the current values and step.
  std::optional<ArrayValue> gradient(llvm::StringRef tensor);

private:
  DynamicsRun(CompiledModel &compiled, mlir::energy::Interpreter interpreter,
              mlir::energy::UpdateProgramOp program)
      : compiled(compiled), interpreter(std::move(interpreter)),
        program(program) {}

  CompiledModel &compiled;
  mlir::energy::Interpreter interpreter;
  mlir::energy::UpdateProgramOp program;
  int64_t taken = 0;
  bool stoppedByRule = false;
};

//===----------------------------------------------------------------------===//
// The quadratic bowl
//===----------------------------------------------------------------------===//

/// `model bowl`: E = ½ (y − c)ᵀ A (y − c) with inputs A : [D, D], c : [D],
/// a const `eta = 0.3` for options to use, and `dynamics { y: RULE; TAIL; }`
/// (e.g. RULE `nesterov(lr = 0.1)`, TAIL `steps 10`).
std::string bowlSource(llvm::StringRef rule, llvm::StringRef tail);
/// Binds the bowl at D = 4: A symmetric positive definite (eigenvalues in
/// [1, ~5]), c and y ~ N(0, 1).
Bindings bindBowl(mlir::energy::ModelOp model);

//===----------------------------------------------------------------------===//
// Plain C++ references
//===----------------------------------------------------------------------===//

/// a + scale · b.
Vector axpy(const Vector &a, double scale, const Vector &b);
/// max |v_i|.
double maxAbs(const Vector &v);
/// Σ v_i².
double squaredNorm(const Vector &v);
/// The Frobenius norm of a matrix (an upper bound of its spectral norm).
double frobenius(const Vector &a);

/// The state of paper 000's momentum forms: the node y and its velocity p.
struct HeavyBall {
  Vector y;
  /// p⁽⁰⁾ = 0.
  Vector p;
};
/// One step of paper 000 eq. 9 (momentum) or eq. 10 (nesterov):
///   ŷ = y − β p (nesterov) or y (momentum);  p ← β p + ∇E(ŷ);  y ← y − lr p.
/// With β = 0 it is plain gradient descent.
void heavyBallStep(HeavyBall &state, double lr, double beta, bool nesterov,
                   llvm::function_ref<Vector(const Vector &)> gradient);

/// max |got − want| / max(1, max |want|): the error relative to the
/// reference's scale (infinity when the sizes differ).
double relativeError(const ArrayValue &got, const Vector &want);

/// The tensor `name` of `bindings` (which must be bound).
const ArrayValue &bound(const Bindings &bindings, llvm::StringRef name);

} // namespace energy::testing

#endif // ENERGY_TESTS_UNIT_DYNAMICS_DYNAMICSTESTSUPPORT_H
