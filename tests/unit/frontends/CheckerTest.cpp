//===- CheckerTest.cpp - Tests of name resolution and shape checking ------===//
//
// Shape annotations, name resolution, range proofs that must succeed,
// unused-declaration warnings and the optimizer table.
//
//===----------------------------------------------------------------------===//

#include "TestSupport.h"

#include "llvm/Support/MemoryBuffer.h"

#include <doctest/doctest.h>

using namespace energy::frontend;
using namespace energy::frontend::testing;
using llvm::cast;

namespace {
/// The first energy's body of a checked model.
const Expr *energyBody(const Compilation &compilation) {
  for (const DeclPtr &decl : compilation.model->decls)
    if (auto *energy = llvm::dyn_cast<EnergyDecl>(decl.get()))
      return &energy->getBody();
  return nullptr;
}
} // namespace

TEST_CASE("every expression is annotated with its symbolic shape") {
  std::unique_ptr<Compilation> compilation = compile(R"(model m {
  dim N, D, H = 4, Dh = D / H;
  state x : [N, D];
  param Wq : [H, Dh, D];
  energy e = -sum(h: H, i: N) sqnorm(Wq[h] @ x[i]);
})");
  INFO(compilation->printed);
  REQUIRE(!compilation->diagnostics.hasErrors());
  const Expr *body = energyBody(*compilation);
  REQUIRE(body);
  const auto &negation = cast<UnaryExpr>(*body);
  CHECK(negation.getShape().isScalar());
  const auto &sum = cast<ReductionExpr>(negation.getOperand());
  CHECK(sum.getDomain().bindings[0].sizeSymbol == "H");
  const auto &sqnorm = cast<CallExpr>(sum.getBody());
  REQUIRE(sqnorm.getBuiltin());
  CHECK(sqnorm.getBuiltin()->id == BuiltinId::Sqnorm);
  const auto &matmul = cast<BinaryExpr>(*sqnorm.getArgs()[0]);
  CHECK(matmul.getShape().str() == "[Dh]");
  CHECK(matmul.getLhs().getShape().str() == "[Dh, D]");
  CHECK(matmul.getRhs().getShape().str() == "[D]");
  const auto &index = cast<IndexExpr>(matmul.getRhs());
  const auto &i = cast<NameExpr>(*index.getIndices()[0]);
  CHECK(i.getSymbolKind() == SymbolKind::IndexVar);
  CHECK(i.getBinding() == &sum.getDomain().bindings[1]);
  const auto &x = cast<NameExpr>(index.getBase());
  CHECK(x.getSymbolKind() == SymbolKind::Tensor);
  CHECK(x.getDecl()->getName() == "x");
}

TEST_CASE("lets, outputs and fns get their shapes") {
  std::unique_ptr<Compilation> compilation = compile(R"(model m {
  dim T, D, K, S = T - 1;
  input q : [T, D];
  param W : [D, K];
  let s[t: T, u: S] = dot(q[t], q[u + 1]);
  fn f(v: [K]) -> [D] = tanh(W @ v);
  output F[t: T] = s[t] + sum(f(W[0]));
  output G = outer(q[0], W[0]).T @ q[1];
})");
  INFO(compilation->printed);
  REQUIRE(!compilation->diagnostics.hasErrors());
  auto &let = cast<LetDecl>(*compilation->model->decls[6]);
  CHECK(let.getShape().str() == "[T, S]");
  auto &output = cast<OutputDecl>(*compilation->model->decls[8]);
  CHECK(output.getShape().str() == "[T, S]");
  auto &outputG = cast<OutputDecl>(*compilation->model->decls[9]);
  CHECK(outputG.getShape().str() == "[K]");
  const auto &sum = cast<BinaryExpr>(output.getBody());
  const auto &call = cast<CallExpr>(*cast<CallExpr>(sum.getRhs()).getArgs()[0]);
  CHECK(call.getFn() == compilation->model->decls[7].get());
}

TEST_CASE("losses read outputs with all their domain indices") {
  std::unique_ptr<Compilation> compilation = compile(R"(model m {
  dim N, D, C;
  input x : [N, D], y : [N, C];
  param W : [C, D], V : [C, D];
  state z : [N, D] = x;
  energy e = 0.5 * sum(i: N) sqnorm(z[i]);
  loss xent = -sum(i: N) dot(y[i], log_softmax(V @ z[i]));
  loss mse = (mean(i: N, c: C) (logits[i, c] - y[i, c]) ^ 2) + rows[0, 1]
             + spread;
  output logits[i: N, c: C] = dot(W[c], z[i]);
  output rows[i: N] = W @ z[i];
  output spread = sum(i: N) sqnorm(z[i]);
  dynamics { z: gd(lr = 0.1); steps 3; }
})");
  INFO(compilation->printed);
  // V is used by a loss only; losses and outputs are never unused.
  CHECK(compilation->diagnostics.getNumErrors() == 0);
  CHECK(compilation->diagnostics.getNumWarnings() == 0);
  auto &mse = cast<LossDecl>(*compilation->model->decls[10]);
  CHECK(mse.getBody().getShape().isScalar());
  const auto &sum = cast<BinaryExpr>(mse.getBody());
  const auto &spread = cast<NameExpr>(sum.getRhs());
  CHECK(spread.getSymbolKind() == SymbolKind::Output);
  CHECK(spread.getShape().isScalar());
  const auto &rows = cast<IndexExpr>(cast<BinaryExpr>(sum.getLhs()).getRhs());
  CHECK(cast<NameExpr>(rows.getBase()).getShape().str() == "[N, C]");
  CHECK(rows.getShape().isScalar());
  const auto &mean =
      cast<ReductionExpr>(cast<BinaryExpr>(sum.getLhs()).getLhs());
  const auto &square = cast<BinaryExpr>(mean.getBody());
  const auto &read =
      cast<IndexExpr>(cast<BinaryExpr>(square.getLhs()).getLhs());
  const auto &logits = cast<NameExpr>(read.getBase());
  CHECK(logits.getSymbolKind() == SymbolKind::Output);
  CHECK(logits.getDecl() == compilation->model->decls[11].get());
  CHECK(read.getShape().isScalar());
}

TEST_CASE("a loss needs no dynamics") {
  std::unique_ptr<Compilation> compilation = compile(R"(model m {
  dim N;
  input x : [N];
  param w : [N];
  loss fit = sum(i: N) (w[i] - x[i]) ^ 2;
})");
  INFO(compilation->printed);
  CHECK(compilation->diagnostics.getNumErrors() == 0);
  CHECK(compilation->diagnostics.getNumWarnings() == 0);
}

TEST_CASE("range proofs accept the in-range cases") {
  std::unique_ptr<Compilation> compilation = compile(R"(model m {
  dim T, D, L;
  state x : [T, D];
  param W : [L, D, D];
  energy shifted = sum(t: T - 1) dot(x[t + 1], x[t]);
  energy lagged = sum(t: T where t >= 1) dot(x[t - 1], x[t]);
  energy causal = sum(i: T) lse(j: T where j < i) dot(x[j + 1], x[i]);
  energy layered = sum(i: T) sqnorm(W[step] @ x[i]);
  energy unknown = sum(t: T where t != 0) x[t - 1, 0];
  dynamics { x: gd(lr = 0.1); steps L; }
})");
  INFO(compilation->printed);
  CHECK(compilation->diagnostics.getNumErrors() == 0);
}

TEST_CASE("step indices are checked against the step count") {
  std::unique_ptr<Compilation> compilation = compile(R"(model m {
  dim D, L;
  state x : [D];
  param W : [L, D, D];
  energy e = sqnorm(W[step + 1] @ x);
  dynamics { x: gd(lr = 0.1); steps L; }
})");
  CHECK(compilation->firstError() ==
        "5:23: index may be out of range: it can reach `L` on an axis of size "
        "`L`");
}

TEST_CASE("unused declarations are warned about") {
  std::unique_ptr<Compilation> compilation = compile(R"(model m {
  dim N, K;
  state x : [N];
  const unused = 2.0;
  energy e = sum(x);
  dynamics { x: gd(lr = 0.1); }
})");
  CHECK(compilation->diagnostics.getNumErrors() == 0);
  CHECK(compilation->diagnostics.getNumWarnings() == 2);
  CHECK(compilation->firstWarning() == "2:10: dim `K` is never used");
}

TEST_CASE("no unused warnings after a syntax error") {
  std::unique_ptr<Compilation> compilation = compile(R"(model m {
  dim B;
  input y : [B];
  state x : [B];
  energy e = sqnorm(x);
  loss output = sqnorm(x - y);
  dynamics { x: gd(lr = 0.1); }
})");
  CHECK(compilation->diagnostics.getNumErrors() > 0);
  CHECK(compilation->firstError() ==
        "6:8: expected a loss name, found keyword `output`");
  CHECK(compilation->diagnostics.getNumWarnings() == 0);
}

TEST_CASE("several errors are reported in one run") {
  std::unique_ptr<Compilation> compilation = compile(R"(model m {
  dim N;
  state x : [N];
  energy a = x;
  energy b = sum(q);
  dynamics { x: gd(rate = 1.0); }
})");
  CHECK(compilation->allErrors() ==
        "4:14: energy `a` must be a scalar, but its value has shape [N]\n"
        "5:18: unknown name `q`\n"
        "6:20: unknown option `rate` for optimizer `gd`\n"
        "6:17: optimizer `gd` requires option `lr`\n");
}

TEST_CASE("the optimizer table can be extended") {
  OptimizerTable table = getDefaultOptimizerTable();
  CHECK(table.lookup("gd"));
  CHECK(table.lookup("ode")->positionalChoices.size() == 2);
  CHECK(table.lookup("precond")->findOption("P")->required());
  CHECK(!table.lookup("adam"));
  llvm::cantFail(table.add({"adam",
                            "a plugin's optimizer",
                            OptimizerCategory::Gradient,
                            {},
                            "",
                            {{"lr", "step size"}}}));
  // A name can be registered once.
  llvm::Error duplicate = table.add({"gd", "another gd"});
  CHECK(llvm::toString(std::move(duplicate)) ==
        "optimizer 'gd' is registered twice (a plugin's name must be new)");
  std::unique_ptr<Compilation> compilation = compile(R"(model m {
  dim N;
  state x : [N];
  energy e = sum(x);
  dynamics { x: adam(lr = 0.1); }
})");
  CHECK(compilation->firstError() == "5:17: unknown optimizer `adam`");
  // The same model checks against the extended table.
  Compilation again;
  again.sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(
          "model m { dim N; state x : [N]; energy e = sum(x);"
          " dynamics { x: adam(lr = 0.1); } }",
          "adam.energy"),
      llvm::SMLoc());
  again.diagnostics.redirectTo(again.printed);
  again.model = parseAndCheck(again.sourceMgr, 1, again.diagnostics, table);
  CHECK(!again.diagnostics.hasErrors());
}
