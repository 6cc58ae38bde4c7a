//===- MalformedInputTest.cpp - Exact diagnostics for bad input -----------===//
//
// Each case is a malformed .energy source and the exact first error it must
// produce, as "line:col: message". None may crash or hang.
//
//===----------------------------------------------------------------------===//

#include "TestSupport.h"

#include <doctest/doctest.h>

using namespace energy::frontend;
using namespace energy::frontend::testing;

namespace {
struct MalformedCase {
  const char *name;
  std::string source;
  const char *expectedError;
};

/// A valid model prefix used by many cases (lines 1-6).
const char *kPrelude = "model m {\n"
                       "  dim N, K, D;\n"
                       "  state x : [N, D];\n"
                       "  input y : [K, D];\n"
                       "  param W : [D, D];\n"
                       "  const c = 1.0;\n";

std::string withPrelude(const std::string &rest) {
  return kPrelude + rest + "\n}\n";
}
} // namespace

static const MalformedCase kCases[] = {
    {"empty file", "", "1:1: expected `model`, found end of file"},
    {"only a comment", "# nothing here\n",
     "2:1: expected `model`, found end of file"},
    {"not a model", "dim N;", "1:1: expected `model`, found keyword `dim`"},
    {"unterminated model", "model m {\n  dim N;\n",
     "3:1: expected `}` to close model `m`"},
    {"unterminated dynamics",
     withPrelude("  energy e = sum(i: N) sum(j: D) x[i, j];\n"
                 "  dynamics { x: gd(lr = 1.0); steps 1;"),
     "10:1: expected `}` to close model `m`"},
    {"missing semicolon", "model m {\n  dim N\n  dim K;\n}\n",
     "3:3: expected `;` after dim declaration, found keyword `dim`"},
    {"unterminated parenthesis",
     withPrelude("  energy e = (sum(i: N) x[i, 0];"),
     "7:32: expected `)` to close the parenthesis, found `;`"},
    {"stray declaration keyword", withPrelude("  sum x;"),
     "7:3: expected a declaration (`dim`, `input`, `param`, `state`, `const`, "
     "`let`, `fn`, `energy`, `loss`, `output` or `dynamics`), found keyword "
     "`sum`"},
    {"two models", "model a {}\nmodel b {}\n",
     "2:1: only one model per file is allowed"},
    {"unknown name", withPrelude("  energy e = sum(i: N) dot(x[i], q[i]);"),
     "7:34: unknown name `q`"},
    {"unknown function", withPrelude("  energy e = sum(i: N) foo(x[i]);"),
     "7:24: unknown function `foo`"},
    {"unknown dim in shape", withPrelude("  state z : [N, Q];"),
     "7:17: unknown dim `Q`"},
    {"shape mismatch in dot",
     withPrelude("  energy e = sum(i: N) dot(x[i], y);"),
     "7:24: `dot` expects vectors, got [K, D]"},
    {"shape mismatch in dot lengths",
     "model m {\n  dim N, K, D;\n  state x : [N, D];\n  input v : [K];\n"
     "  energy e = sum(i: N) dot(x[i], v);\n}\n",
     "5:24: shape mismatch in `dot`: [D] vs [K]"},
    {"no broadcasting of vectors", withPrelude("  energy e = sum(x + x[0]);"),
     "7:20: shape mismatch in `+`: [N, D] vs [D]"},
    {"matmul mismatch", withPrelude("  energy e = sum(i: N) sum(W @ y);"),
     "7:30: shape mismatch in `@`: [D, D] vs [K, D]"},
    {"transpose of a vector",
     withPrelude("  energy e = sum(i: N) sum(x[i].T);"),
     "7:28: `.T` needs at least two axes, but the operand has shape [D]"},
    {"quad with a non-square matrix",
     "model m {\n  dim N, D;\n  state v : [D];\n  param M : [N, D];\n"
     "  energy e = quad(v, M);\n}\n",
     "5:14: shape mismatch in `quad`: [D] vs [N, D]"},
    {"logdet of a vector", withPrelude("  energy e = logdet(x[0]);"),
     "7:14: `logdet` expects a square matrix, got [D]"},
    {"a let over a dim expression",
     "model m {\n  dim T, K;\n  state x : [T, K];\n"
     "  let s[t: T - 1, k: K] = x[t, k];\n"
     "  energy e = sum(t: T - 1) s[t, 0];\n}\n",
     "4:12: index `t` of let `s` ranges over `T - 1`, but a let's or "
     "output's indices range over dims: declare one (`dim S = T - 1;`) and "
     "write `t: S`"},
    {"inverse of a non-square matrix",
     withPrelude("  energy e = sum(inverse(x));"),
     "7:18: `inverse` expects a square matrix, got [N, D]"},
    {"too many indices", withPrelude("  energy e = x[0, 0, 0];"),
     "7:14: too many indices: 3 for a tensor of shape [N, D]"},
    {"non-affine index", withPrelude("  energy e = sum(i: N) x[i * i, 0];"),
     "7:26: an index must be affine in index variables, `step` and dims"},
    {"index out of range past the end",
     "model m {\n  dim T, D;\n  state x : [T, D];\n"
     "  energy e = sum(t: T) sqnorm(x[t + 1]);\n}\n",
     "4:33: index may be out of range: it can reach `T` on an axis of size "
     "`T`"},
    {"index out of range below zero",
     "model m {\n  dim T, D;\n  state x : [T, D];\n"
     "  energy e = sum(t: T) sqnorm(x[t - 1]);\n}\n",
     "4:33: index may be out of range: it can be -1 on an axis of size `T`"},
    {"constant index out of range",
     "model m {\n  dim T, D;\n  state x : [T, D];\n"
     "  energy e = sqnorm(x[T]);\n}\n",
     "4:23: index may be out of range: it can reach `T` on an axis of size "
     "`T`"},
    {"predicate bound not enough",
     "model m {\n  dim T, D;\n  state x : [T, D];\n"
     "  energy e = sum(t: T where t >= 1) sqnorm(x[t - 2]);\n}\n",
     "4:46: index may be out of range: it can be -1 on an axis of size `T`"},
    {"cyclic lets",
     withPrelude("  let a = b + 1;\n  let b = a * 2;\n  energy e = a;"),
     "8:11: cyclic definition: `a` depends on itself"},
    {"self-referencing let", withPrelude("  let a = a;\n  energy e = a;"),
     "7:11: cyclic definition: `a` depends on itself"},
    {"wrong arity of a builtin", withPrelude("  energy e = dot(x[0]);"),
     "7:14: `dot` expects 2 arguments, got 1"},
    {"wrong arity of a fn",
     withPrelude("  fn f(v: [D]) -> [D] = tanh(v);\n"
                 "  energy e = sum(f(x[0], x[1]));"),
     "8:18: `f` expects 1 argument, got 2"},
    {"fn argument shape",
     withPrelude("  fn f(v: [D]) -> [D] = tanh(v);\n"
                 "  energy e = sum(f(y));"),
     "8:20: argument 1 of `f` has shape [K, D] but parameter `v` is [D]"},
    {"fn body shape",
     withPrelude("  fn f(v: [D]) -> [K] = tanh(v);\n"
                 "  energy e = sum(f(x[0]));"),
     "7:25: the body of fn `f` has shape [D] but `f` returns [K]"},
    {"non-scalar energy", withPrelude("  energy e = x;"),
     "7:14: energy `e` must be a scalar, but its value has shape [N, D]"},
    {"energy used in an expression",
     withPrelude("  energy e = sum(x);\n  energy f = e * 2;"),
     "8:14: energy `e` cannot be used in an expression"},
    {"non-scalar loss", withPrelude("  loss l = x[0];"),
     "7:12: loss `l` must be a scalar, but its value has shape [D]"},
    {"loss used in an expression",
     withPrelude("  loss l = sum(x);\n  loss m = l * 2;"),
     "8:12: loss `l` cannot be used in an expression"},
    {"partial output read in a loss",
     withPrelude("  output F[i: N, j: D] = x[i, j];\n"
                 "  loss l = sum(i: N) sum(F[i]);"),
     "8:26: output `F` needs 2 indices in a loss (`F[i, j]`), but this read "
     "has 1"},
    {"bare output read in a loss",
     withPrelude("  output F[i: N] = x[i, 0];\n  loss l = sum(F);"),
     "8:16: output `F` needs 1 index in a loss (`F[i]`), but this read has "
     "none"},
    {"output read in an energy",
     withPrelude("  output F[i: N, j: D] = x[i, j];\n"
                 "  energy e = sum(i: N) F[i, 0];"),
     "8:24: output `F` cannot be used in an expression"},
    {"output read in a let of a loss",
     withPrelude("  output F[i: N] = x[i, 0];\n"
                 "  let g = sum(i: N) F[i];\n  loss l = g;"),
     "8:21: output `F` cannot be used in an expression"},
    {"unknown optimizer",
     withPrelude("  energy e = sum(x);\n  dynamics { x: adam(lr = 1.0); }"),
     "8:17: unknown optimizer `adam`"},
    {"unknown option",
     withPrelude("  energy e = sum(x);\n"
                 "  dynamics { x: gd(lr = 1.0, beta = 0.9); }"),
     "8:30: unknown option `beta` for optimizer `gd`"},
    {"missing required option",
     withPrelude(
         "  energy e = sum(x);\n  dynamics { x: momentum(beta = 0.9); }"),
     "8:17: optimizer `momentum` requires option `lr`"},
    {"unknown ode method",
     withPrelude("  energy e = sum(x);\n"
                 "  dynamics { x: ode(rk4, dt = 0.5); }"),
     "8:21: unknown method `rk4` for optimizer `ode`; expected `euler` or "
     "`heun`"},
    {"integer option",
     withPrelude("  energy e = sum(x);\n"
                 "  dynamics { x: newton(lr = 1.0, cg = 2.5); }"),
     "8:39: option `cg` must be a non-negative integer literal"},
    {"precond matrix shape",
     withPrelude("  energy e = sum(x);\n"
                 "  dynamics { x: precond(lr = 1.0, P = W[0]); }"),
     "8:39: option `P` must have shape [D, D] (the last axis of `x`), but it "
     "has shape [D]"},
    {"precond on a node of rank 3",
     "model m {\n  dim N, D;\n  state z : [N, N, D];\n"
     "  energy e = sum(i: N, j: N) sqnorm(z[i, j]);\n"
     "  dynamics { z: precond(lr = 1.0, P = eye(D)); }\n}\n",
     "5:39: option `P` applies along the last axis of a vector or of the rows "
     "of a matrix, but `z` has shape [N, N, D]"},
    {"stationary without a closed form",
     withPrelude("  energy e = sum(i: N) sqnorm(x[i]);\n"
                 "  dynamics { x: stationary; }"),
     "8:17: no closed form for `stationary` node `x`: it does not appear "
     "inside an `lse` of any energy"},
    {"two rules for one node",
     withPrelude("  energy e = sum(x);\n"
                 "  dynamics { x: gd(lr = 1.0); x: gd(lr = 2.0); }"),
     "8:31: `x` has two rules"},
    {"rule on an input",
     withPrelude("  energy e = sum(x) + sum(y);\n"
                 "  dynamics { y: gd(lr = 1.0); }"),
     "8:14: a rule can only update a state, but `y` is an input"},
    {"explicit rule shape",
     withPrelude("  energy e = sum(x);\n  dynamics { x <- x[0]; }"),
     "8:19: the rule for `x` has shape [D] but `x` is [N, D]"},
    {"duplicate names", withPrelude("  param x : [D];"),
     "7:9: redefinition of `x`"},
    {"duplicate index", withPrelude("  energy e = sum(i: N, i: N) x[i, 0];"),
     "7:24: duplicate index `i`"},
    {"index shadows a tensor", withPrelude("  energy e = sum(x: N) c;"),
     "7:18: index `x` shadows state `x`"},
    {"huge dim", "model m {\n  dim D = 4294967296;\n}\n",
     "2:11: dim `D` = 4294967296 is too large (the limit is 2^31)"},
    {"huge dim beyond int64",
     "model m {\n  dim D = 99999999999999999999999;\n}\n",
     "2:11: dim `D` = 99999999999999999999999 is too large (the limit is "
     "2^31)"},
    {"zero dim", "model m {\n  dim D = 0;\n}\n",
     "2:11: dim `D` must be a positive integer, not `0`"},
    {"derived dim before its operands",
     "model m {\n  dim Dh = D / H, D = 64, H = 4;\n}\n",
     "2:12: dim `D` must be declared before it is used in a derived dim"},
    {"deep nesting",
     withPrelude("  energy e = " + std::string(300, '(') + "c" +
                 std::string(300, ')') + ";"),
     "7:270: expression is nested too deeply (the limit is 256 levels)"},
    {"non-UTF-8 bytes", "model m {\n  dim N\xff;\n}\n",
     "2:8: invalid UTF-8 byte 0xff"},
    {"temp outside lse",
     withPrelude("  energy e = sum(i: N; temp = c) x[i, 0];"),
     "7:31: `temp` is accepted by `lse` only"},
    {"max as a function", withPrelude("  energy e = max(x);"),
     "7:14: `max` is only a reduction over an index domain, such as "
     "`max(i: N) e`"},
    {"min as a function", withPrelude("  energy e = min(x);"),
     "7:14: `min` is only a reduction over an index domain, such as "
     "`min(i: N) e`"},
    {"leaky_relu with a vector slope",
     withPrelude("  energy e = sum(leaky_relu(x[0], x[1]));"),
     "7:18: `leaky_relu` expects a scalar as its second argument, got [D]"},
    {"non-integer exponent", withPrelude("  energy e = sum(x ^ 0.5);"),
     "7:22: the exponent of `^` must be an integer literal, such as `2` or "
     "`-1`"},
    {"comparison outside a condition", withPrelude("  energy e = c < 1;"),
     "7:16: `<` is only allowed in a `where` or `until` condition"},
    {"non-affine predicate",
     withPrelude("  energy e = sum(i: N where x[i, 0] > 0) c;"),
     "7:29: a `where` condition must compare affine expressions of index "
     "variables and dims"},
    {"eye initialiser on a vector",
     "model m {\n  dim D;\n  state w : [D] = eye;\n  energy e = sum(w);\n}\n",
     "3:19: `eye` initialiser needs a tensor whose last two axes are equal, "
     "but `w` is [D]"},
    {"initialiser shape",
     withPrelude("  state z : [K, D] = x;\n  energy e = sum(z) + sum(x);"),
     "7:22: initialiser `x` has shape [N, D] but `z` is [K, D]"},
    {"input with initialiser", withPrelude("  input q : [D] = zeros;"),
     "7:19: input `q` cannot have an initialiser: inputs are given at run "
     "time"},
    {"step in a const", withPrelude("  const s = step;"),
     "7:13: `step` cannot be used here: it is only defined during the "
     "dynamics"},
    {"tensor in a const", withPrelude("  const s = x;"),
     "7:13: state `x` cannot be used here: only numbers, consts and dims are "
     "allowed"},
    {"state in an optimizer option",
     withPrelude("  energy e = sum(x);\n"
                 "  dynamics { x: gd(lr = x[0, 0]); }"),
     "8:25: state `x` cannot be used in an optimizer option: only consts, "
     "params and dims are allowed"},
    {"duplicate steps",
     withPrelude("  energy e = sum(x);\n"
                 "  dynamics { x: gd(lr = 1.0); steps 2; steps 3; }"),
     "8:40: duplicate `steps` statement"},
    {"bad dynamics statement",
     withPrelude("  energy e = sum(x);\n  dynamics { 3; }"),
     "8:14: expected a rule (`node: optimizer(...)` or `node <- value`), "
     "`steps` or `order`, found `3`"},
    {"missing `T` after dot", withPrelude("  energy e = sum(W.x);"),
     "7:20: expected `T` after `.`, found `x`"},
    {"until without a comparison",
     withPrelude("  energy e = sum(x);\n"
                 "  dynamics { x: gd(lr = 1.0); steps 3 until maxabs(grad); }"),
     "8:45: expected a comparison (`==`, `!=`, `<`, `<=`, `>`, `>=`) in this "
     "condition"},
    {"where on a let",
     withPrelude("  let q[i: N where i > 0] = x[i];\n  energy e = sum(q);"),
     "7:20: a `where` clause is only allowed in a reduction"},
    {"domain size not affine", withPrelude("  energy e = sum(i: N * N) c;"),
     "7:21: a domain size must be an affine expression of dims and integers, "
     "such as `T - 1`"},
};

TEST_CASE("malformed inputs report the exact error") {
  CHECK(sizeof(kCases) / sizeof(kCases[0]) >= 40);
  for (const MalformedCase &malformed : kCases) {
    CAPTURE(malformed.name);
    std::unique_ptr<Compilation> compilation = compile(malformed.source);
    INFO(compilation->printed);
    CHECK(compilation->diagnostics.hasErrors());
    CHECK(compilation->firstError() == malformed.expectedError);
  }
}

TEST_CASE("printed diagnostics show file, line, column, source and caret") {
  std::unique_ptr<Compilation> compilation =
      compile("model m {\n  dim N, K, D;\n  state x : [N, D];\n"
              "  input v : [K];\n"
              "  energy e = sum(i: N) dot(x[i], v);\n}\n",
              "hopfield.energy");
  CHECK(compilation->printed ==
        "hopfield.energy:5:24: error: shape mismatch in `dot`: [D] vs [K]\n"
        "  energy e = sum(i: N) dot(x[i], v);\n"
        "                       ^~~~~~~~~~~~\n");
}

TEST_CASE("duplicate names come with a note at the previous definition") {
  std::unique_ptr<Compilation> compilation =
      compile(withPrelude("  param x : [D];"));
  const auto &diagnostics = compilation->diagnostics.getDiagnostics();
  REQUIRE(diagnostics.size() >= 2);
  CHECK(diagnostics[1].severity == Severity::Note);
  CHECK(diagnostics[1].message == "see previous definition here");
  CHECK(diagnostics[1].line == 3);
  CHECK(diagnostics[1].column == 9);
}

TEST_CASE("a long flat expression is rejected, not a stack overflow") {
  std::string terms = "c";
  for (int i = 0; i < 5000; ++i)
    terms += " + c";
  std::unique_ptr<Compilation> compilation =
      compile(withPrelude("  energy e = " + terms + ";"));
  CHECK(compilation->firstError() ==
        "7:14: expression is nested too deeply (the limit is 1024 levels)");
}

TEST_CASE("garbage input never crashes") {
  std::string garbage;
  for (int i = 0; i < 4096; ++i)
    garbage += static_cast<char>((i * 7919 + 13) % 256);
  std::unique_ptr<Compilation> compilation = compile(garbage);
  CHECK(compilation->diagnostics.hasErrors());
  std::unique_ptr<Compilation> braces =
      compile("model m { dynamics { { { ( [ ] ) } } ; ; } } } }");
  CHECK(braces->diagnostics.hasErrors());
}
