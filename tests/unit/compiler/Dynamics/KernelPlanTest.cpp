//===- KernelPlanTest.cpp - Planned kernels compute what they planned -----===//
//
// energy-plan-kernels rewrites derived IR into softmax contractions, tables
// and parallel loops; it must not change a single value. For every example
// model, the reference interpreter evaluates the energy, every tensor's
// gradient and three steps of the dynamics on the IR before and after
// planning, from the same random bindings, and they must agree to rounding
// (both in double precision; only summation orders differ); and the loss
// gradients through a run, whose backward program the plan rewrites too.
//
//===----------------------------------------------------------------------===//

#include "DynamicsTestSupport.h"

#include "energy/Interpreter/InterpretedBackprop.h"
#include "energy/Runtime/Backprop.h"

#include <doctest/doctest.h>

#include <cmath>
#include <map>

using namespace energy::testing;
using namespace mlir;
using namespace mlir::energy;

namespace {

/// Per-model dims (small, with rows ≠ columns) and tensors that must be
/// symmetric positive definite.
struct Case {
  const char *model;
  std::vector<std::pair<const char *, int64_t>> dims;
  std::set<std::string> spd;
};

const std::vector<Case> kCases = {
    {"cem_mlp", {{"N", 4}, {"D", 3}, {"Dv", 5}}, {}},
    {"cross_attention", {{"NQ", 4}, {"NK", 5}, {"D", 3}}, {}},
    {"free_energy_mixer", {{"N", 5}, {"D", 3}}, {}},
    {"gmm", {{"N", 7}, {"K", 2}, {"D", 2}}, {"prec"}},
    {"hopfield", {{"N", 4}, {"K", 3}, {"D", 5}}, {}},
    {"hopfield_attention", {{"N", 4}, {"D", 3}, {"L", 3}}, {}},
    {"linear_attention", {{"N", 4}, {"D", 3}}, {}},
    {"nag_attention", {{"N", 4}, {"D", 3}, {"L", 3}}, {}},
    {"predictive_coding", {{"N", 4}, {"K", 3}, {"D", 3}, {"Z", 2}}, {}},
    {"quadratic_bowl", {{"D", 3}}, {"A"}},
    {"self_attention", {{"N", 5}, {"D", 4}}, {}},
    {"slds", {{"T", 5}, {"K", 2}, {"D", 2}}, {"prec"}},
    {"slot_attention", {{"N", 5}, {"S", 2}, {"D", 3}}, {}},
    {"tied_mha", {{"N", 4}, {"D", 8}, {"H", 2}}, {}},
};

/// |a − b| relative to the larger magnitude (absolute below 1).
double relativeDifference(double a, double b) {
  return std::fabs(a - b) / std::max({1.0, std::fabs(a), std::fabs(b)});
}

double relativeDifference(const ArrayValue &a, const ArrayValue &b) {
  return maxAbsDifference(a, b) / std::max({1.0, maxAbs(a), maxAbs(b)});
}

constexpr double kTolerance = 1e-10;

/// Checks that the interpreter gives the same energy and gradients of
/// `tensors` on the unplanned and the planned model, bound alike.
void checkSameEnergyAndGradients(CompiledModel &unplanned,
                                 CompiledModel &planned, Bindings &before,
                                 Bindings &after,
                                 const std::vector<std::string> &tensors) {
  std::optional<double> energyBefore = unplanned.energy(before);
  std::optional<double> energyAfter = planned.energy(after);
  REQUIRE_MESSAGE(energyBefore, unplanned.diagnostics);
  REQUIRE_MESSAGE(energyAfter, planned.diagnostics);
  CHECK(relativeDifference(*energyBefore, *energyAfter) <= kTolerance);
  for (const std::string &tensor : tensors) {
    CAPTURE(tensor);
    std::optional<ArrayValue> gradientBefore =
        unplanned.gradient(before, tensor);
    std::optional<ArrayValue> gradientAfter = planned.gradient(after, tensor);
    REQUIRE_MESSAGE(gradientBefore, unplanned.diagnostics);
    REQUIRE_MESSAGE(gradientAfter, planned.diagnostics);
    CHECK(relativeDifference(*gradientBefore, *gradientAfter) <= kTolerance);
  }
}

} // namespace

TEST_CASE("planning changes no value of any example") {
  for (const Case &example : kCases) {
    CAPTURE(example.model);
    std::unique_ptr<CompiledModel> unplanned =
        compileExample(example.model, /*wrtAll=*/true, Pipeline::Update);
    std::unique_ptr<CompiledModel> planned =
        compileExample(example.model, /*wrtAll=*/true, Pipeline::Plan);
    REQUIRE_MESSAGE(unplanned->model, unplanned->diagnostics);
    REQUIRE_MESSAGE(planned->model, planned->diagnostics);

    RandomBindingOptions options;
    for (auto [name, size] : example.dims)
      options.dims[name] = size;
    options.spd = example.spd;
    if (std::string(example.model) == "tied_mha" ||
        std::string(example.model) == "cem_mlp")
      options.copies = {{"x", "h"}};
    Bindings before = bindRandom(unplanned->model, options);
    Bindings after = bindRandom(planned->model, options);

    checkSameEnergyAndGradients(*unplanned, *planned, before, after,
                                unplanned->tensorNames());

    std::unique_ptr<DynamicsRun> runBefore =
        DynamicsRun::start(*unplanned, before);
    std::unique_ptr<DynamicsRun> runAfter = DynamicsRun::start(*planned, after);
    if (!runBefore)
      continue; // a model without dynamics
    REQUIRE_MESSAGE(runAfter, planned->diagnostics);
    for (int step = 0; step < 3; ++step) {
      REQUIRE_MESSAGE(runBefore->step(), unplanned->diagnostics);
      REQUIRE_MESSAGE(runAfter->step(), planned->diagnostics);
    }
    for (const std::string &tensor : unplanned->tensorNames()) {
      CAPTURE(tensor);
      std::optional<ArrayValue> valueBefore = runBefore->value(tensor);
      std::optional<ArrayValue> valueAfter = runAfter->value(tensor);
      REQUIRE(valueBefore);
      REQUIRE(valueAfter);
      CHECK(relativeDifference(*valueBefore, *valueAfter) <= kTolerance);
    }
  }
}

namespace {

/// The adjoints of a model's loss after `steps` steps, as the interpreter
/// runs its step and backward programs (runForwardBackward's schedule).
std::map<std::string, ArrayValue>
lossAdjoints(CompiledModel &compiled, const Bindings &bindings, int64_t steps) {
  std::map<std::string, ArrayValue> adjoints;
  FailureOr<Interpreter> interpreter =
      Interpreter::create(compiled.model, bindings);
  REQUIRE_MESSAGE(succeeded(interpreter), compiled.diagnostics);
  FailureOr<std::unique_ptr<InterpretedBackprop>> target =
      InterpretedBackprop::create(compiled.model, *interpreter);
  REQUIRE_MESSAGE(succeeded(target), compiled.diagnostics);
  ::energy::BackpropSchedule schedule;
  schedule.maxSteps = steps;
  ::energy::Expected<int64_t> taken =
      ::energy::runForwardBackward(**target, schedule);
  REQUIRE_MESSAGE(bool(taken), compiled.diagnostics);
  for (const std::string &name : (*target)->differentiable()) {
    FailureOr<ArrayValue> adjoint =
        interpreter->getTensorValue(name + ".adjoint");
    REQUIRE(succeeded(adjoint));
    adjoints.emplace(name, *adjoint);
  }
  return adjoints;
}

} // namespace

// The plan rewrites the backward program too: a backward step's gradients
// of the parameters are added into their adjoints by the grad op itself
// (`into`). The loss gradients through three steps that the interpreter
// runs on the planned programs equal those of the unplanned ones.
TEST_CASE("planning changes no loss gradient") {
  const char *source = R"(
model adjoint_sums {
  dim N, D;
  input x0 : [N, D], target : [N, D];
  state x : [N, D] = x0;
  param W : [D, D], c : [D];
  energy fit = 0.5 * sum(i: N) sqnorm(x[i] - tanh(W @ x[i] + c));
  loss l = 0.5 * sum(i: N) sqnorm(x[i] - target[i]);
  dynamics { x: gd(lr = 0.1); steps 3; }
}
)";
  std::unique_ptr<CompiledModel> unplanned =
      compileSource(source, {}, "adjoint_sums.energy", Pipeline::Update);
  std::unique_ptr<CompiledModel> planned =
      compileSource(source, {}, "adjoint_sums.energy", Pipeline::Plan);
  REQUIRE_MESSAGE(unplanned->model, unplanned->diagnostics);
  REQUIRE_MESSAGE(planned->model, planned->diagnostics);
  // What this test is about: the planned backward step adds into adjoints.
  bool into = false;
  planned->model.walk([&](GradOp grad) { into |= bool(grad.getIntoAttr()); });
  REQUIRE(into);

  RandomBindingOptions options;
  options.dims["N"] = 4;
  options.dims["D"] = 3;
  options.copies = {{"x", "x0"}};
  std::map<std::string, ArrayValue> before =
      lossAdjoints(*unplanned, bindRandom(unplanned->model, options), 3);
  std::map<std::string, ArrayValue> after =
      lossAdjoints(*planned, bindRandom(planned->model, options), 3);
  REQUIRE(before.size() == after.size());
  for (const auto &entry : before) {
    const std::string &name = entry.first;
    CAPTURE(name);
    REQUIRE(after.count(name));
    CHECK(maxAbs(entry.second) > 0);
    CHECK(relativeDifference(entry.second, after.at(name)) <= kTolerance);
  }
}

namespace {

/// Compiles `source` with and without the kernel plan (gradients of `wrt`
/// too), requires `planned` of the plan, and checks that the reference
/// interpreter gives the same energy, gradients of `wrt` and loss gradients
/// through three steps on both, from the same random bindings at `dims`.
void checkPlanChangesNoValue(const char *source,
                             const std::vector<std::string> &wrt,
                             llvm::StringMap<int64_t> dims,
                             llvm::function_ref<bool(ModelOp)> planned) {
  std::unique_ptr<CompiledModel> before =
      compileSource(source, wrt, "planned.energy", Pipeline::Update);
  std::unique_ptr<CompiledModel> after =
      compileSource(source, wrt, "planned.energy", Pipeline::Plan);
  REQUIRE_MESSAGE(before->model, before->diagnostics);
  REQUIRE_MESSAGE(after->model, after->diagnostics);
  REQUIRE(planned(after->model));

  RandomBindingOptions options;
  options.dims = std::move(dims);
  options.copies = {{"x", "x0"}};
  Bindings bindingsBefore = bindRandom(before->model, options);
  Bindings bindingsAfter = bindRandom(after->model, options);
  std::vector<std::string> tensors(wrt);
  tensors.push_back("x");
  checkSameEnergyAndGradients(*before, *after, bindingsBefore, bindingsAfter,
                              tensors);
  std::map<std::string, ArrayValue> adjointsBefore =
      lossAdjoints(*before, bindRandom(before->model, options), 3);
  std::map<std::string, ArrayValue> adjointsAfter =
      lossAdjoints(*after, bindRandom(after->model, options), 3);
  REQUIRE(adjointsBefore.size() == adjointsAfter.size());
  for (const auto &[name, adjoint] : adjointsBefore) {
    CAPTURE(name);
    REQUIRE(adjointsAfter.count(name));
    CHECK(maxAbs(adjoint) > 0);
    CHECK(relativeDifference(adjoint, adjointsAfter.at(name)) <= kTolerance);
  }
}

} // namespace

// Grouped heads: query head r of group g projects with Wq[g, r], the
// group's key head with Wk[g]. The plan multiplies them as batches over
// the two head axes (batch_axes = 2) and sums over both as one summed
// product; the interpreter evaluates those products on the planned IR.
TEST_CASE("planned products over grouped heads change no value") {
  checkPlanChangesNoValue(
      R"(
model grouped_heads {
  dim B, N, D, G, R, Y;
  input x0 : [B, N, D], target : [B, N, D];
  state x : [B, N, D] = x0;
  param Wq : [G, R, Y, D], Wk : [G, Y, D];
  energy attn = -sum(b: B, g: G, r: R, i: N) lse(j: N) dot(Wq[g, r] @ x[b, i], Wk[g] @ x[b, j]) / sqrt(Y);
  loss l = 0.5 * mean(b: B, i: N) sqnorm(x[b, i] - target[b, i]);
  dynamics { x: gd(lr = 0.5); steps 3; }
}
)",
      {"Wq", "Wk"},
      {{"B", 2}, {"N", 4}, {"D", 5}, {"G", 2}, {"R", 3}, {"Y", 3}},
      [](ModelOp model) {
        bool batched = false, summed = false;
        model.walk([&](BatchMatmulOp product) {
          batched |= product.getBatchAxes() == 2;
          summed |= product.getBatchAxes() == 2 && product.getSumBatch();
        });
        return batched && summed;
      });
}

// Sigmoid attention's weights σ(s_ij) are a table of pairs per (head,
// sequence) that a batch of products sums; its scores are one batch of
// products K Qᵀ over both (PairScores.cpp), no dot product per pair.
TEST_CASE("planned pair scores change no value") {
  checkPlanChangesNoValue(R"(
model pair_scores {
  dim B, N, D, H, Y;
  input x0 : [B, N, D], target : [B, N, D];
  state x : [B, N, D] = x0;
  param Wq : [H, Y, D], Wk : [H, Y, D];
  energy attn = -sum(b: B, k: H, i: N, j: N) softplus(dot(Wq[k] @ x[b, i], Wk[k] @ x[b, j]) / sqrt(Y) - log(N));
  loss l = 0.5 * mean(b: B, i: N) sqnorm(x[b, i] - target[b, i]);
  dynamics { x: gd(lr = 0.5); steps 3; }
}
)",
                          {"Wq", "Wk"},
                          {{"B", 2}, {"N", 5}, {"D", 4}, {"H", 2}, {"Y", 3}},
                          [](ModelOp model) {
                            bool pairScores = false;
                            model.walk([&](BatchMatmulOp product) {
                              pairScores |= product.getBatchAxes() == 2 &&
                                            product.getTransposeRhs() &&
                                            !product.getSumBatch();
                            });
                            bool dotPerPair = false;
                            model.walk([&](TabulateOp table) {
                              if (table->getParentOfType<TabulateOp>())
                                table.walk([&](DotOp) { dotPerPair = true; });
                            });
                            return pairScores && !dotPerPair;
                          });
}

// T5's relative bias under a causal mask: the bias's gradient through the
// backward steps is summed at each pair's offset by contractions given the
// normaliser (pair_sums, energy-plan-pair-sums), whose normaliser over
// rows (h, b, i) is itself reordered to be bilinear (energy-plan-row-order);
// the interpreter evaluates the pair sums on the planned IR.
TEST_CASE("planned pair sums change no value") {
  checkPlanChangesNoValue(
      R"(
model pair_sums {
  dim B, N, D, H, Y;
  input x0 : [B, N, D], target : [B, N, D];
  state x : [B, N, D] = x0;
  param Wq : [H, Y, D], Wk : [H, Y, D], bias : [H, N];
  energy attn = -sum(b: B, h: H, i: N) lse(j: N where j <= i) (dot(Wq[h] @ x[b, i], Wk[h] @ x[b, j]) / sqrt(Y) + bias[h, i - j]);
  loss l = 0.5 * mean(b: B, i: N) sqnorm(x[b, i] - target[b, i]);
  dynamics { x: gd(lr = 0.5); steps 3; }
}
)",
      {"Wq", "Wk", "bias"}, {{"B", 2}, {"N", 5}, {"D", 4}, {"H", 2}, {"Y", 3}},
      [](ModelOp model) {
        bool pairSums = false, generic = false;
        model.walk([&](SoftmaxContractOp contract) {
          pairSums |= contract.getNumPairSums() > 0;
          generic |= contract.getForm() == ContractForm::generic;
        });
        return pairSums && !generic;
      });
}
