//===- DerivativeRulesTest.cpp - Derivative rules vs finite differences ---===//
//
// The independent oracle for the derivative rules of DerivativeRules.cpp.
// For one op at a time, f = Σ seed ⊙ op(operands) with a fixed random seed;
// the op's buildAdjoints (with the seed as the result's adjoint) builds the
// adjoint of each operand, which the interpreter evaluates and compares with
// central finite differences of f in every element of the tensor the operand
// reads. Reductions over index domains also have their buildBodyAdjoint
// checked, against finite differences in the tensor their body reads.
//
//===----------------------------------------------------------------------===//

#include "energy/IR/EnergyDialect.h"
#include "energy/IR/EnergyOps.h"
#include "energy/Interfaces/DerivativeOpInterface.h"
#include "energy/Interpreter/Interpreter.h"
#include "energy/Plugin/FunctionTable.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/StringSet.h"

#include <doctest/doctest.h>

#include <cmath>
#include <random>

using namespace mlir;
using namespace mlir::energy;

namespace {
/// One op under test. `tensors` declares param tensors and reads each whole
/// at the top of the term as `%name`: "a:N;s:" is a = [N], s a scalar.
/// Tensors whose name starts with "spd" hold symmetric positive definite
/// matrices. `body` defines `%y`, of shape `resultShape` ("N, K").
struct RuleCase {
  std::string name;
  std::string tensors;
  std::string body;
  std::string resultShape;
  bool positive = false;
  std::string extraDeclarations = "";
};

const llvm::StringMap<int64_t> kDims = {{"N", 3}, {"K", 2}};

/// f and the adjoints are compared in double precision with a central
/// difference of step h = 1e-6 · max(1, |x|): its truncation error is
/// O(h² f''') ≈ 1e-12 · f''' and its rounding error O(ε |f| / h) ≈
/// 1e-10 · |f|, so a correct rule agrees to about 1e-8 relative here; 1e-6
/// relative plus 1e-7 · (1 + |f|) absolute leaves two orders of margin while
/// any wrong factor, sign or transpose is off by O(1).
bool agrees(double numeric, double analytic, double f) {
  double tolerance = 1e-6 * std::max(std::fabs(numeric), std::fabs(analytic)) +
                     1e-7 * (1 + std::fabs(f));
  return std::fabs(numeric - analytic) <= tolerance;
}

std::string typeOf(StringRef dims) {
  return ("!energy.array<" + dims + ">").str();
}

/// "N, K" → "[@N, @K]".
std::string declaredShape(StringRef dims) {
  SmallVector<StringRef> names;
  dims.split(names, ',', -1, /*KeepEmpty=*/false);
  std::string text = "[";
  for (auto [i, name] : llvm::enumerate(names))
    text += (i ? ", @" : "@") + name.trim().str();
  return text + "]";
}

std::string modelText(const RuleCase &rule) {
  std::string declarations, reads;
  SmallVector<StringRef> tensors;
  StringRef(rule.tensors).split(tensors, ';', -1, /*KeepEmpty=*/false);
  for (StringRef tensor : tensors) {
    auto [name, dims] = tensor.split(':');
    declarations += "  energy.tensor @" + name.str() + " : param " +
                    declaredShape(dims) + "\n";
    reads += "    %" + name.str() + " = energy.read @" + name.str() + " : " +
             typeOf(dims) + "\n";
  }
  std::string type = typeOf(rule.resultShape);
  return "energy.model @m {\n  energy.dim @N = 3\n  energy.dim @K = 2\n" +
         declarations + "  energy.tensor @seed : param " +
         declaredShape(rule.resultShape) + "\n  " + rule.extraDeclarations +
         "\n  energy.term @f {\n" + reads + rule.body +
         "\n    %seed = energy.read @seed : " + type +
         "\n    %p = energy.mul %seed, %y : " + type + ", " + type +
         "\n    %f = energy.reduce_elements sum %p : " + type +
         "\n    energy.yield %f : !energy.array<>\n  }\n}\n";
}

/// Random values for every tensor of `model`: away from 0 (where relu, abs,
/// heaviside and sign are not smooth), positive where asked, SPD for "spd*".
Bindings randomBindings(ModelOp model, bool positive, std::mt19937_64 &rng) {
  std::uniform_real_distribution<double> magnitude(0.2, 1.5);
  std::bernoulli_distribution negative(positive ? 0.0 : 0.5);
  Bindings bindings;
  for (TensorOp tensor : model.getOps<TensorOp>()) {
    std::vector<int64_t> shape;
    for (StringAttr dim : tensor.getArrayType().getShape())
      shape.push_back(kDims.lookup(dim.getValue()));
    ArrayValue value(shape);
    for (double &element : value.data)
      element = negative(rng) ? -magnitude(rng) : magnitude(rng);
    if (tensor.getSymName().starts_with("spd")) {
      // A Aᵀ + n I.
      int64_t n = shape[0];
      ArrayValue spd({n, n});
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) {
          for (int64_t k = 0; k < n; ++k)
            spd.data[i * n + j] +=
                value.data[i * n + k] * value.data[j * n + k];
          spd.data[i * n + j] += i == j ? n : 0;
        }
      value = spd;
    }
    bindings.setTensor(tensor.getSymName(), value);
  }
  // Consts are bound explicitly, so that finite differences can shift them.
  for (ConstOp constant : model.getOps<ConstOp>())
    bindings.setConst(constant.getSymName(),
                      constant.getValue().convertToDouble());
  return bindings;
}

/// A parsed rule case with f's parts located.
struct RuleHarness {
  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  ModelOp model;
  TermOp term;
  Operation *target = nullptr;
  Value seed;
  std::string diagnostics;
  ScopedDiagnosticHandler handler;

  explicit RuleHarness(const std::string &text)
      : handler(&context, [this](Diagnostic &diagnostic) {
          diagnostics += diagnostic.str() + "\n";
          return success();
        }) {
    context.loadDialect<EnergyDialect, arith::ArithDialect>();
    module = parseSourceString<ModuleOp>(text, &context);
    if (!module)
      return;
    model = *module->getOps<ModelOp>().begin();
    term = *model.getOps<TermOp>().begin();
    auto yield = cast<YieldOp>(term.getBody().front().getTerminator());
    auto sum = yield.getValues()[0].getDefiningOp<ReduceElementsOp>();
    auto product = sum.getOperand().getDefiningOp<MulOp>();
    seed = product.getLhs();
    target = product.getRhs().getDefiningOp();
  }

  FailureOr<double> energy(const Bindings &bindings) {
    FailureOr<Interpreter> interpreter = Interpreter::create(model, bindings);
    if (failed(interpreter))
      return failure();
    return interpreter->evaluateTerm(term);
  }

  FailureOr<ArrayValue> value(const Bindings &bindings, Value value) {
    FailureOr<Interpreter> interpreter = Interpreter::create(model, bindings);
    if (failed(interpreter))
      return failure();
    return interpreter->evaluate(value);
  }

  /// Central differences of f in every element of tensor or const `name`,
  /// compared with `analytic` (all zeros when null). Returns the number of
  /// disagreements, reported through doctest.
  int compareWithFiniteDifferences(const Bindings &bindings, StringRef name,
                                   const ArrayValue *analytic, StringRef what) {
    double f = *energy(bindings);
    bool isConst = !bindings.getTensors().count(name);
    ArrayValue base =
        isConst ? ArrayValue::scalar(bindings.getConsts().lookup(name))
                : bindings.getTensors().lookup(name);
    if (analytic && analytic->shape != base.shape) {
      FAIL_CHECK(what.str() << ": adjoint of shape "
                            << ArrayValue::shapeString(analytic->shape)
                            << " for an operand of shape "
                            << ArrayValue::shapeString(base.shape));
      return 1;
    }
    int failures = 0;
    for (int64_t k = 0; k < base.size(); ++k) {
      double h = 1e-6 * std::max(1.0, std::fabs(base.data[k]));
      auto at = [&](double delta) {
        Bindings shifted = bindings;
        ArrayValue value = base;
        value.data[k] += delta;
        if (isConst)
          shifted.setConst(name, value.data[0]);
        else
          shifted.setTensor(name, value);
        FailureOr<double> result = energy(shifted);
        return succeeded(result) ? *result : NAN;
      };
      double numeric = (at(h) - at(-h)) / (2 * h);
      double expected = analytic ? analytic->data[k] : 0.0;
      if (!agrees(numeric, expected, f)) {
        ++failures;
        FAIL_CHECK(what.str()
                   << " @" << name.str() << " element " << k << ": rule gives "
                   << expected << ", finite differences " << numeric);
      }
    }
    return failures;
  }
};

/// Checks the operand adjoints `target` builds for the seed.
void checkOperandAdjoints(RuleHarness &harness, const RuleCase &rule,
                          const Bindings &bindings) {
  OpBuilder builder(harness.term.getBody().front().getTerminator());
  SmallVector<Value> adjoints;
  auto derivative = cast<DerivativeOpInterface>(harness.target);
  REQUIRE_MESSAGE(succeeded(derivative.buildAdjoints(
                      builder, ValueRange{harness.seed}, adjoints)),
                  harness.diagnostics);
  REQUIRE(adjoints.size() == harness.target->getNumOperands());
  for (auto [operand, adjoint] :
       llvm::zip(harness.target->getOperands(), adjoints)) {
    auto read = operand.getDefiningOp<ReadOp>();
    if (!isa<ArrayType>(operand.getType()) || !read)
      continue;
    std::optional<ArrayValue> analytic;
    if (adjoint) {
      CHECK_MESSAGE(adjoint.getType() == operand.getType(), rule.name);
      FailureOr<ArrayValue> value = harness.value(bindings, adjoint);
      REQUIRE_MESSAGE(succeeded(value),
                      rule.name << ": " << harness.diagnostics);
      analytic = *value;
    }
    harness.compareWithFiniteDifferences(
        bindings, read.getSource(), analytic ? &*analytic : nullptr, rule.name);
  }
}

/// For a reduction whose body yields a read of @e: builds
/// Σ_p bodyAdjoint(p) ⊙ dir[p] (dir read like e), and checks it against
/// finite differences of f in each element of e, with dir one-hot there.
void checkBodyAdjoint(RuleHarness &harness, const RuleCase &rule,
                      Bindings bindings) {
  auto reduce = cast<ReduceOp>(harness.target);
  MLIRContext *context = &harness.context;
  Location loc = reduce.getLoc();
  auto source = SymbolTable::lookupNearestSymbolFrom<TensorOp>(
      reduce, FlatSymbolRefAttr::get(context, "e"));
  REQUIRE(source);
  OpBuilder builder(source);
  auto direction = cast<TensorOp>(builder.clone(*source));
  direction.setSymName("dir");

  builder.setInsertionPoint(harness.term.getBody().front().getTerminator());
  auto check = ReduceOp::create(builder, loc, ArrayType::getScalar(context),
                                ReduceKind::sum, reduce.getSizes(), Value());
  IRMapping mapping;
  reduce.getPredicate().cloneInto(&check.getPredicate(), mapping);
  reduce.getBody().cloneInto(&check.getBody(), mapping);
  Block &body = check.getBody().front();
  auto yield = cast<YieldOp>(body.getTerminator());
  ReadOp bodyRead;
  body.walk([&](ReadOp read) {
    if (read.getSource() == "e")
      bodyRead = read;
  });
  REQUIRE(bodyRead);
  builder.setInsertionPoint(yield);
  auto directionRead = cast<ReadOp>(builder.clone(*bodyRead));
  directionRead.setSource("dir");
  Value weight = reduce.buildBodyAdjoint(
      builder, harness.seed, reduce.getResult(), yield.getValues()[0]);
  REQUIRE_MESSAGE(weight, harness.diagnostics);
  Value weighted = MulOp::create(builder, loc, weight, directionRead);
  if (!cast<ArrayType>(weighted.getType()).isScalar())
    weighted =
        ReduceElementsOp::create(builder, loc, ElementsKind::sum, weighted);
  yield->setOperands(weighted);

  ArrayValue e = bindings.getTensors().lookup("e");
  ArrayValue analytic(e.shape);
  for (int64_t k = 0; k < e.size(); ++k) {
    ArrayValue oneHot(e.shape);
    oneHot.data[k] = 1.0;
    bindings.setTensor("dir", oneHot);
    FailureOr<ArrayValue> value = harness.value(bindings, check);
    REQUIRE_MESSAGE(succeeded(value), rule.name << ": " << harness.diagnostics);
    analytic.data[k] = value->data[0];
  }
  bindings.setTensor("dir", ArrayValue(e.shape));
  harness.compareWithFiniteDifferences(bindings, "e", &analytic,
                                       rule.name + " (body adjoint)");
}

std::vector<RuleCase> ruleCases() {
  std::vector<RuleCase> cases = {
      {"add", "a:N;b:N",
       "%y = energy.add %a, %b : !energy.array<N>, !energy.array<N>", "N"},
      {"add scalar", "a:N;s:",
       "%y = energy.add %a, %s : !energy.array<N>, !energy.array<>", "N"},
      {"sub", "a:N;b:N",
       "%y = energy.sub %a, %b : !energy.array<N>, !energy.array<N>", "N"},
      {"sub scalar", "s:;a:N",
       "%y = energy.sub %s, %a : !energy.array<>, !energy.array<N>", "N"},
      {"mul", "a:N;b:N",
       "%y = energy.mul %a, %b : !energy.array<N>, !energy.array<N>", "N"},
      {"mul scalar", "s:;m:N,K",
       "%y = energy.mul %s, %m : !energy.array<>, !energy.array<N, K>", "N, K"},
      {"div", "a:N;b:N",
       "%y = energy.div %a, %b : !energy.array<N>, !energy.array<N>", "N"},
      {"div by scalar", "a:N;s:",
       "%y = energy.div %a, %s : !energy.array<N>, !energy.array<>", "N"},
      {"div scalar", "s:;a:N",
       "%y = energy.div %s, %a : !energy.array<>, !energy.array<N>", "N"},
      {"pow 3", "x:N", "%y = energy.pow %x, 3 : !energy.array<N>", "N"},
      {"pow -2", "x:N", "%y = energy.pow %x, -2 : !energy.array<N>", "N"},
      {"pow 1", "x:N", "%y = energy.pow %x, 1 : !energy.array<N>", "N"},
      {"pow 0", "x:N", "%y = energy.pow %x, 0 : !energy.array<N>", "N"},
      {"inverse", "spdM:N,N", "%y = energy.inverse %spdM : !energy.array<N, N>",
       "N, N"},
      {"matmul vector", "m:N,K;v:K",
       "%y = energy.matmul %m, %v : !energy.array<N, K>, !energy.array<K>",
       "N"},
      {"matmul matrix", "m:N,K;q:K,N",
       "%y = energy.matmul %m, %q : !energy.array<N, K>, !energy.array<K, N>",
       "N, N"},
      {"transpose", "m:N,K", "%y = energy.transpose %m : !energy.array<N, K>",
       "K, N"},
      {"dot", "a:N;b:N", "%y = energy.dot %a, %b : !energy.array<N>", ""},
      {"plugin element-wise", "x:N",
       "%y = energy.apply \"test_cubic\"[0] %x : !energy.array<N>", "N"},
      {"plugin element-wise f'", "x:N",
       "%y = energy.apply \"test_cubic\"[1] %x : !energy.array<N>", "N"},
      {"plugin similarity", "a:N;b:N",
       "%y = energy.similarity \"test_distance\" %a, %b : !energy.array<N>",
       ""},
      {"quad", "v:N;m:N,N",
       "%y = energy.quad %v, %m : !energy.array<N>, !energy.array<N, N>", ""},
      {"outer", "a:N;b:K",
       "%y = energy.outer %a, %b : !energy.array<N>, !energy.array<K>", "N, K"},
      {"sum_last matrix", "m:N,K",
       "%y = energy.sum_last %m : !energy.array<N, K>", "N"},
      {"sum_last vector", "a:N", "%y = energy.sum_last %a : !energy.array<N>",
       ""},
      {"broadcast scalar", "s:",
       "%y = energy.broadcast %s : !energy.array<> to !energy.array<N, K>",
       "N, K"},
      {"broadcast vector", "a:N",
       "%y = energy.broadcast %a : !energy.array<N> to !energy.array<N, K>",
       "N, K"},
      {"diag", "a:N", "%y = energy.diag %a : !energy.array<N>", "N, N"},
      {"diag_part", "m:N,N", "%y = energy.diag_part %m : !energy.array<N, N>",
       "N"},
      {"extract", "m:N,K", R"(
    %one = arith.constant 1 : index
    %y = energy.extract %m[%one + 1] : !energy.array<N, K> -> !energy.array<K>)",
       "K"},
      {"embed", "v:K", R"(
    %one = arith.constant 1 : index
    %y = energy.embed %v into [%one] : !energy.array<K> -> !energy.array<N, K>)",
       "N, K"},
      {"logdet", "spdM:N,N", "%y = energy.logdet %spdM : !energy.array<N, N>",
       ""},
      {"select true", "a:N;b:N", R"(
    %c = arith.constant true
    %y = energy.select %c, %a, %b : !energy.array<N>)",
       "N"},
      {"select false", "a:N;b:N", R"(
    %c = arith.constant false
    %y = energy.select %c, %a, %b : !energy.array<N>)",
       "N"},
      {"reduce lse, predicate and temperature", "e:N,N", R"(
    %T = energy.read @T : !energy.array<>
    %y = energy.reduce lse (%i : @N, %j : @N) where {
      %ok = arith.cmpi sle, %j, %i : index
      energy.yield %ok : i1
    } temp(%T : !energy.array<>) {
      %v = energy.read @e[%i, %j] : !energy.array<>
      energy.yield %v : !energy.array<>
    } : !energy.array<>)",
       "", false, "energy.const @T = 0.7"},
      {"reduce lse, vector body, temperature from a tensor", "e:N,K;t:", R"(
    %y = energy.reduce lse (%j : @N) temp(%t : !energy.array<>) {
      %v = energy.read @e[%j] : !energy.array<K>
      energy.yield %v : !energy.array<K>
    } : !energy.array<K>)",
       "K"},
      {"reduce lse, predicate", "e:N", R"(
    %y = energy.reduce lse (%j : @N) where {
      %one = arith.constant 1 : index
      %ok = arith.cmpi ne, %j, %one : index
      energy.yield %ok : i1
    } {
      %v = energy.read @e[%j] : !energy.array<>
      energy.yield %v : !energy.array<>
    } : !energy.array<>)",
       ""},
      {"reduce sum, vector body", "e:N,K", R"(
    %y = energy.reduce sum (%j : @N) {
      %v = energy.read @e[%j] : !energy.array<K>
      energy.yield %v : !energy.array<K>
    } : !energy.array<K>)",
       "K"},
      {"reduce mean, predicate", "e:N,N,K", R"(
    %y = energy.reduce mean (%i : @N, %j : @N) where {
      %ok = arith.cmpi sle, %j, %i : index
      energy.yield %ok : i1
    } {
      %v = energy.read @e[%i, %j] : !energy.array<K>
      energy.yield %v : !energy.array<K>
    } : !energy.array<K>)",
       "K"},
      {"reduce mean, affine offset", "e:N", R"(
    %y = energy.reduce mean (%t : @N - 1) {
      %v = energy.read @e[%t + 1] : !energy.array<>
      energy.yield %v : !energy.array<>
    } : !energy.array<>)",
       ""},
  };
  for (std::string kind : {"sum", "mean", "lse", "sqnorm", "norm"})
    for (std::string shape : {"N", "N, K"})
      cases.push_back(
          {"reduce_elements " + kind + " [" + shape + "]",
           shape == "N" ? "x:N" : "x:N,K",
           "%y = energy.reduce_elements " + kind + " %x : " + typeOf(shape),
           ""});
  struct Unary {
    const char *name;
    bool positive;
    bool alongLastAxis;
  };
  for (Unary unary : std::initializer_list<Unary>{
           {"neg", false, false},       {"exp", false, false},
           {"log", true, false},        {"tanh", false, false},
           {"sigmoid", false, false},   {"silu", false, false},
           {"softplus", false, false},  {"gelu", false, false},
           {"erf", false, false},       {"relu", false, false},
           {"heaviside", false, false}, {"sign", false, false},
           {"sqrt", true, false},       {"abs", false, false},
           {"silu_int", false, false},  {"sin", false, false},
           {"cos", false, false},       {"elu", false, false},
           {"softmax", false, true},    {"log_softmax", false, true},
           {"rmsnorm", false, true},    {"layernorm", false, true}})
    for (std::string shape : {"N", "N, K"}) {
      if (!unary.alongLastAxis && shape != "N")
        continue;
      cases.push_back(
          {std::string(unary.name) + " [" + shape + "]",
           shape == "N" ? "x:N" : "x:N,K",
           std::string("%y = energy.") + unary.name + " %x : " + typeOf(shape),
           shape, unary.positive});
    }
  return cases;
}

/// A plugin's element-wise function and similarity, as run-time code
/// linked into this test: f(x) = x³ + x and s(a, b) = −|a − b|².
double cubic(double x) { return x * x * x + x; }
double cubicDerivative(double x) { return 3 * x * x + 1; }
double cubicSecondDerivative(double x) { return 6 * x; }
double negatedSquaredDistance(int64_t n, const double *a, const double *b) {
  double total = 0;
  for (int64_t i = 0; i < n; ++i)
    total -= (a[i] - b[i]) * (a[i] - b[i]);
  return total;
}
void negatedSquaredDistanceGradient(int64_t n, const double *a, const double *b,
                                    double *gradA, double *gradB) {
  for (int64_t i = 0; i < n; ++i) {
    gradA[i] = -2 * (a[i] - b[i]);
    gradB[i] = -gradA[i];
  }
}

void registerTestPluginFunctions() {
  namespace plugin = ::energy::plugin;
  static bool registered = false;
  if (registered)
    return;
  registered = true;
  auto code = [](std::vector<std::string> symbols,
                 std::vector<void *> addresses) {
    return plugin::RuntimeCode{"test", "1", "", std::move(symbols),
                               std::move(addresses)};
  };
  plugin::FunctionInfo function;
  function.name = "test_cubic";
  function.kind = plugin::FunctionKind::Elementwise;
  function.code = code({"cubic", "cubic_d1", "cubic_d2"},
                       {reinterpret_cast<void *>(&cubic),
                        reinterpret_cast<void *>(&cubicDerivative),
                        reinterpret_cast<void *>(&cubicSecondDerivative)});
  REQUIRE(
      !llvm::errorToBool(plugin::getFunctionTable().add(std::move(function))));
  plugin::FunctionInfo similarity;
  similarity.name = "test_distance";
  similarity.kind = plugin::FunctionKind::Similarity;
  similarity.code =
      code({"distance", "distance_gradient"},
           {reinterpret_cast<void *>(&negatedSquaredDistance),
            reinterpret_cast<void *>(&negatedSquaredDistanceGradient)});
  REQUIRE(!llvm::errorToBool(
      plugin::getFunctionTable().add(std::move(similarity))));
}

/// Builds and checks the rules of one case.
void checkRuleCase(const RuleCase &rule, std::mt19937_64 &rng,
                   llvm::StringSet<> &covered) {
  CAPTURE(rule.name);
  std::string text = modelText(rule);
  RuleHarness harness(text);
  REQUIRE_MESSAGE(harness.module, text << harness.diagnostics);
  REQUIRE(harness.target);
  covered.insert(harness.target->getName().getStringRef());
  Bindings bindings = randomBindings(harness.model, rule.positive, rng);
  checkOperandAdjoints(harness, rule, bindings);
  if (isa<ReduceOp>(harness.target))
    checkBodyAdjoint(harness, rule, bindings);
}
} // namespace

TEST_CASE("derivative rules agree with finite differences") {
  registerTestPluginFunctions();
  std::mt19937_64 rng(20240607);
  llvm::StringSet<> covered;
  for (const RuleCase &rule : ruleCases())
    checkRuleCase(rule, rng, covered);

  // Every op with a rule is covered here, except the leaves, whose rules
  // yield no operand adjoints (checked below).
  MLIRContext context;
  context.loadDialect<EnergyDialect>();
  for (RegisteredOperationName name : context.getRegisteredOperations()) {
    if (!name.hasInterface<DerivativeOpInterface>())
      continue;
    StringRef opName = name.getStringRef();
    if (opName == "energy.read" || opName == "energy.to_real" ||
        opName == "energy.eye")
      continue;
    CHECK_MESSAGE(covered.contains(opName), opName.str()
                                                << " has no rule case");
  }
}

TEST_CASE("leaf rules yield no operand adjoints") {
  MLIRContext context;
  context.loadDialect<EnergyDialect, arith::ArithDialect>();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(R"(
    energy.model @m {
      energy.dim @N = 3
      energy.tensor @x : param [@N]
      energy.term @f {
        %s = energy.step : index
        %r = energy.to_real %s : !energy.array<>
        %x = energy.read @x[%s] : !energy.array<>
        %e = energy.eye @N : !energy.array<N, N>
        energy.yield %r : !energy.array<>
      }
    })",
                                                             &context);
  REQUIRE(module);
  module->walk([&](DerivativeOpInterface op) {
    OpBuilder builder(op);
    SmallVector<Value> adjoints;
    REQUIRE(succeeded(op.buildAdjoints(builder, op->getResults(), adjoints)));
    CHECK(adjoints.size() == op->getNumOperands());
    CHECK(llvm::all_of(adjoints, [](Value adjoint) { return !adjoint; }));
  });
}
