//===- GradientProgramTest.cpp - Running energy.gradient programs ---------===//
//
// The interpreter's execution of gradient programs on hand-written IR:
// foreach loops with predicates, accumulation into slices, values scoped per
// iteration, energy.grad in stopping rules, and the errors it reports.
//
//===----------------------------------------------------------------------===//

#include "support/ParsedModel.h"
#include "GradientTestSupport.h"

#include "energy/IR/EnergyDialect.h"
#include "energy/Interpreter/Interpreter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Parser/Parser.h"

#include <doctest/doctest.h>

using namespace mlir;
using namespace mlir::energy;
using namespace ::energy::testing;

namespace {

/// The model @gradients of tests/lit/Dialect/energy/ops.mlir: a predicated
/// loop that adds 2·x[t + 1] at t + 1 for 0 < t < T − 1, then all of x.
const char *kLoopProgram = R"(energy.model @gradients {
  energy.dim @T
  energy.dim @D
  energy.tensor @x : state [@T, @D]
  energy.gradient @x {
    %two = energy.constant 2.0
    energy.foreach (%t : @T - 1) where {
      %c0 = arith.constant 0 : index
      %ok = arith.cmpi sgt, %t, %c0 : index
      energy.yield %ok : i1
    } {
      %xt = energy.read @x[%t + 1] : !energy.array<D>
      %g = energy.mul %two, %xt : !energy.array<>, !energy.array<D>
      energy.accumulate %g into @x[%t + 1] : !energy.array<D>
    }
    %x = energy.read @x : !energy.array<T, D>
    energy.accumulate %x into @x : !energy.array<T, D>
  }
})";
} // namespace

TEST_CASE("gradient program: predicated foreach and slice accumulation") {
  ParsedModel parsed(kLoopProgram);
  ArrayValue x({5, 2});
  for (size_t i = 0; i < x.data.size(); ++i)
    x.data[i] = 0.5 + static_cast<double>(i);
  Bindings bindings;
  bindings.setDim("T", 5).setDim("D", 2).setTensor("x", x);
  FailureOr<Interpreter> interpreter =
      Interpreter::create(parsed.model, bindings);
  REQUIRE_MESSAGE(succeeded(interpreter), parsed.diagnostics);
  FailureOr<ArrayValue> gradient = interpreter->evaluateGradient("x");
  REQUIRE_MESSAGE(succeeded(gradient), parsed.diagnostics);
  // t ranges over 0..3 and the predicate admits 1..3: rows 2..4 get 2·x.
  ArrayValue expected = x;
  for (int64_t row = 2; row < 5; ++row)
    for (int64_t col = 0; col < 2; ++col)
      expected.at({row, col}) = 3 * x.at({row, col});
  CHECK(maxAbsDifference(*gradient, expected) == 0.0);
  // Cached: the same result again.
  CHECK(maxAbsDifference(*interpreter->evaluateGradient("x"), expected) == 0);
}

TEST_CASE("gradient program: values are scoped per iteration") {
  // %xi depends on the loop index: it must be recomputed at each position,
  // while %c, defined outside, is shared.
  ParsedModel parsed(R"(energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.gradient @x {
    %c = energy.constant 3.0
    energy.foreach (%i : @N) {
      %xi = energy.read @x[%i] : !energy.array<>
      %g = energy.mul %c, %xi : !energy.array<>, !energy.array<>
      energy.accumulate %g into @x[%i] : !energy.array<>
    }
  }
})");
  Bindings bindings;
  bindings.setDim("N", 3).setTensor("x", ArrayValue({3}, {1.0, -2.0, 4.0}));
  FailureOr<Interpreter> interpreter =
      Interpreter::create(parsed.model, bindings);
  REQUIRE(succeeded(interpreter));
  FailureOr<ArrayValue> gradient = interpreter->evaluateGradient("x");
  REQUIRE_MESSAGE(succeeded(gradient), parsed.diagnostics);
  CHECK(gradient->data == std::vector<double>{3.0, -6.0, 12.0});
}

TEST_CASE("gradient program: accumulation out of range is an error") {
  ParsedModel parsed(R"(energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.gradient @x {
    energy.foreach (%i : @N) {
      %xi = energy.read @x[%i] : !energy.array<>
      energy.accumulate %xi into @x[%i + 1] : !energy.array<>
    }
  }
})");
  Bindings bindings;
  bindings.setDim("N", 3).setTensor("x", ArrayValue({3}, 1.0));
  FailureOr<Interpreter> interpreter =
      Interpreter::create(parsed.model, bindings);
  REQUIRE(succeeded(interpreter));
  CHECK(failed(interpreter->evaluateGradient("x")));
  CHECK_MESSAGE(parsed.reported("'energy.accumulate' op accumulates into @x "
                                "at index 3 of axis 0, whose size is 3"),
                parsed.diagnostics);
}

TEST_CASE("gradient program: a tensor without a gradient is an error") {
  ParsedModel parsed(kLoopProgram);
  Bindings bindings;
  bindings.setDim("T", 2).setDim("D", 1).setTensor("x", ArrayValue({2, 1}));
  FailureOr<Interpreter> interpreter =
      Interpreter::create(parsed.model, bindings);
  REQUIRE(succeeded(interpreter));
  CHECK(failed(interpreter->evaluateGradient("y")));
  CHECK_MESSAGE(parsed.reported("gradient of @y is not derived"),
                parsed.diagnostics);
}

TEST_CASE("energy.grad in a stopping rule runs the derived gradient") {
  // gmm's stopping rule is maxabs(grad) over mu, prec and w, asked for at
  // the same values: one joint gradient program computes all three, equal
  // to the programs derived for each tensor alone.
  std::unique_ptr<CompiledModel> compiled =
      compileExample("gmm", /*wrtAll=*/false, Pipeline::Update);
  REQUIRE_MESSAGE(compiled->model, compiled->diagnostics);
  RandomBindingOptions options;
  options.spd = {"prec"};
  Bindings bindings = bindRandom(compiled->model, options);
  FailureOr<Interpreter> interpreter =
      Interpreter::create(compiled->model, bindings);
  REQUIRE(succeeded(interpreter));
  Block &until = compiled->model.getDynamics().getUntil().front();
  int grads = 0, gradients = 0;
  for (GradOp grad : until.getOps<GradOp>()) {
    ++grads;
    for (auto [tensor, result] :
         llvm::zip(grad.getTensors(), grad.getResults())) {
      FailureOr<ArrayValue> value = interpreter->evaluate(result);
      REQUIRE_MESSAGE(succeeded(value), compiled->diagnostics);
      FailureOr<ArrayValue> alone =
          interpreter->evaluateGradient(tensor.getValue());
      REQUIRE(succeeded(alone));
      // The same sums in another order: equal to rounding.
      CHECK(maxAbsDifference(*value, *alone) <= 1e-12 * maxAbs(*alone));
      CHECK(maxAbs(*value) > 0.0);
      ++gradients;
    }
  }
  CHECK(grads == 1);
  CHECK(gradients == 3);
  Value done = cast<YieldOp>(until.getTerminator()).getValues()[0];
  FailureOr<ArrayValue> stop = interpreter->evaluate(done);
  REQUIRE_MESSAGE(succeeded(stop), compiled->diagnostics);
  // Random parameters are far from a fixed point of EM.
  CHECK(stop->data[0] == 0.0);
}
