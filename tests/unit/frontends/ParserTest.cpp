//===- ParserTest.cpp - Tests of the .energy parser -----------------------===//
//
// Operator precedence, the extent of reduction bodies, and every
// declaration form.
//
//===----------------------------------------------------------------------===//

#include "TestSupport.h"

#include <doctest/doctest.h>

using namespace energy::frontend;
using namespace energy::frontend::testing;
using llvm::cast;
using llvm::dyn_cast;

TEST_CASE("precedence, tightest first") {
  CHECK(parseExpression("a + b * c") == "(+ a (* b c))");
  CHECK(parseExpression("a - b - c") == "(- (- a b) c)");
  CHECK(parseExpression("-W @ v") == "(@ (neg W) v)");
  CHECK(parseExpression("a * W @ v") == "(* a (@ W v))");
  CHECK(parseExpression("-a ^ 2") == "(neg (^ a 2))");
  CHECK(parseExpression("2 ^ -1") == "(^ 2 (neg 1))");
  CHECK(parseExpression("a ^ 2 ^ 3") == "(^ a (^ 2 3))");
  CHECK(parseExpression("W[h].T @ x[i]") == "(@ (T (index W h)) (index x i))");
  CHECK(parseExpression("log_softmax(w)[k]") ==
        "(index (call log_softmax w) k)");
  CHECK(parseExpression("a < b and c >= d or e == f") ==
        "(or (and (< a b) (>= c d)) (== e f))");
  CHECK(parseExpression("p < -1") == "(< p (neg 1))");
  CHECK(parseExpression("-T / 2 * x") == "(* (/ (neg T) 2) x)");
  CHECK(parseExpression("(a + b) * c") == "(* (+ a b) c)");
  CHECK(parseExpression("step + 1") == "(+ step 1)");
}

TEST_CASE("comparisons do not chain") {
  CHECK(parseExpression("a < b < c") ==
        "<error: 1:7: comparisons cannot be chained; join them with `and`>");
}

TEST_CASE("reduction bodies extend as far right as arithmetic goes") {
  CHECK(parseExpression("-sum(i: N) lse(k: K) a * b + c") ==
        "(neg (sum i:N (lse k:K (+ (* a b) c))))");
  CHECK(parseExpression("(sum(i: N) x[i, 0]) + 1") ==
        "(+ (sum i:N (index x i 0)) 1)");
  CHECK(parseExpression("sum(t: T - 1) x[t + 1]") ==
        "(sum t:(- T 1) (index x (+ t 1)))");
  CHECK(parseExpression("sum(h: H, c: N) e") == "(sum h:H c:N e)");
  CHECK(parseExpression("lse(p: N where p <= c and p != 0; temp = tau) e") ==
        "(lse p:N where (and (<= p c) (!= p 0)) temp tau e)");
  CHECK(parseExpression("mean(i: N) x[i] < 3") ==
        "(< (mean i:N (index x i)) 3)");
  CHECK(parseExpression("max(i: N) a") == "(max i:N a)");
  // `sum(v)` without an index binding is the builtin call.
  CHECK(parseExpression("sum(v) + lse(v)") == "(+ (call sum v) (call lse v))");
}

TEST_CASE("every declaration form") {
  std::unique_ptr<Compilation> parsed = parseOnly(R"(
model forms {
  dim N, K, D = 64;
  dim H = 4, Dh = D / H;
  input x : [N, D];
  param Wq : [H, Dh, D] = normal(0, 0.02), Wk : [D, D], b : [D] = uniform(-1, 1);
  state z : [N, D] = x, s : [] = zeros;
  const tau = 8.0, a = 0.5;
  let q[c: N, h: H] = Wq[h] @ z[c];
  let total = sum(i: N) z[i, 0];
  fn f(v: [K], w: [D]) -> [D] = tanh(w);
  energy e = sum(i: N) dot(z[i], b);
  output F[t: N, j: D] = z[t, j];
  loss l = mean(t: N) F[t, 0];
  dynamics {
    z: ode(heun, dt = 0.5, rtol = 1e-3, atol = 1e-3);
    s: stationary;
    z <- a * z;
    steps 12 until maxabs(grad) < 1e-5;
    order sequential;
  }
}
)");
  INFO(parsed->printed);
  REQUIRE(parsed->model);
  CHECK(parsed->diagnostics.getNumErrors() == 0);
  ModelSpec &model = *parsed->model;
  CHECK(model.name == "forms");
  REQUIRE(model.decls.size() == 19);
  auto *dimD = dyn_cast<DimDecl>(model.decls[2].get());
  REQUIRE(dimD);
  CHECK(dimD->getName() == "D");
  CHECK(dimD->getDefault() == 64);
  CHECK(!dimD->isDerived());
  auto *dimDh = dyn_cast<DimDecl>(model.decls[4].get());
  REQUIRE(dimDh);
  CHECK(dimDh->isDerived());
  auto *wq = dyn_cast<TensorDecl>(model.decls[6].get());
  REQUIRE(wq);
  CHECK(wq->getRole() == energy::TensorRole::Param);
  CHECK(wq->getShape().str() == "[H, Dh, D]");
  CHECK(wq->getInitializer().kind == Initializer::Kind::Normal);
  CHECK(wq->getInitializer().args.size() == 2);
  auto *z = dyn_cast<TensorDecl>(model.decls[9].get());
  REQUIRE(z);
  CHECK(z->getInitializer().kind == Initializer::Kind::Tensor);
  CHECK(z->getInitializer().tensorName == "x");
  auto *s = dyn_cast<TensorDecl>(model.decls[10].get());
  REQUIRE(s);
  CHECK(s->getShape().isScalar());
  CHECK(llvm::isa<ConstDecl>(model.decls[11].get()));
  auto *let = dyn_cast<LetDecl>(model.decls[13].get());
  REQUIRE(let);
  CHECK(let->getDomain().bindings.size() == 2);
  auto *fn = dyn_cast<FnDecl>(model.decls[15].get());
  REQUIRE(fn);
  CHECK(fn->getParams().size() == 2);
  CHECK(fn->getResultShape().str() == "[D]");
  CHECK(llvm::isa<EnergyDecl>(model.decls[16].get()));
  auto *output = dyn_cast<OutputDecl>(model.decls[17].get());
  REQUIRE(output);
  CHECK(output->getDomain().bindings[1].name == "j");
  auto *loss = dyn_cast<LossDecl>(model.decls[18].get());
  REQUIRE(loss);
  CHECK(loss->getName() == "l");
  CHECK(printExpr(loss->getBody()) == "(mean t:N (index F t 0))");

  REQUIRE(model.dynamics);
  DynamicsBlock &dynamics = *model.dynamics;
  REQUIRE(dynamics.rules.size() == 3);
  CHECK(dynamics.rules[0].optimizer == "ode");
  REQUIRE(dynamics.rules[0].positional.size() == 1);
  CHECK(dynamics.rules[0].positional[0].name == "heun");
  CHECK(dynamics.rules[0].options.size() == 3);
  CHECK(dynamics.rules[0].findOption("dt"));
  CHECK(dynamics.rules[1].optimizer == "stationary");
  CHECK(dynamics.rules[2].kind == UpdateRule::Kind::Explicit);
  REQUIRE(dynamics.steps);
  CHECK(printExpr(*dynamics.steps->count) == "12");
  REQUIRE(dynamics.steps->until);
  CHECK(printExpr(*dynamics.steps->until) == "(< (call maxabs grad) 1e-5)");
  CHECK(dynamics.sequential);
}

TEST_CASE("source ranges point at the text") {
  std::unique_ptr<Compilation> parsed =
      parseOnly("model m {\n  energy e = a + b;\n}\n");
  REQUIRE(parsed->model);
  auto &energy = cast<EnergyDecl>(*parsed->model->decls[0]);
  llvm::SMRange range = energy.getBody().getRange();
  CHECK(llvm::StringRef(range.Start.getPointer(),
                        range.End.getPointer() - range.Start.getPointer()) ==
        "a + b");
  auto [line, column] =
      parsed->sourceMgr.getLineAndColumn(energy.getNameRange().Start);
  CHECK(line == 2);
  (void)column;
}

TEST_CASE("error recovery reports several errors in one run") {
  std::unique_ptr<Compilation> parsed = parseOnly(R"(model m {
  dim N
  state x : [N];
  energy e = (x;
  const c = ;
}
)");
  CHECK(parsed->allErrors() ==
        "3:3: expected `;` after dim declaration, found keyword `state`\n"
        "4:16: expected `)` to close the parenthesis, found `;`\n"
        "5:13: expected an expression, found `;`\n");
  REQUIRE(parsed->model);
  // The state after the broken dim was still parsed.
  CHECK(parsed->model->decls.size() == 2);
}
