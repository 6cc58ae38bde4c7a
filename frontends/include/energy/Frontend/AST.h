//===- AST.h - Abstract syntax tree of the .energy language -----*- C++ -*-===//
//
// The AST is what the parser builds, the checker annotates, and emission to
// the energy dialect walks. It is deliberately plain:
//
//  - Expressions (`Expr`) and declarations (`Decl`) are class hierarchies
//    with LLVM-style RTTI: a `Kind` enum plus `classof`, so use
//    `llvm::isa<BinaryExpr>(e)`, `llvm::dyn_cast<CallExpr>(e)`, never
//    dynamic_cast. Children are owned through std::unique_ptr.
//  - Every node keeps the llvm::SMRange of its source text (`getRange()`),
//    and names keep the range of the name itself, so later stages can turn
//    them into FileLineColLoc.
//  - Names are llvm::StringRefs into the SourceMgr buffer: the SourceMgr
//    must outlive the AST.
//  - A comma-separated declaration (`dim N, K, D = 64;`) becomes one Decl
//    per name, in source order.
//
// Annotations written by the checker (valid only when checking succeeded):
//  - `Expr::getShape()`: the symbolic shape of every expression (a vector of
//    dim symbols; empty = scalar).
//  - `NameExpr`: what the name refers to (`getSymbolKind()`, and the Decl,
//    IndexBinding or fn parameter it resolves to).
//  - `CallExpr`: the builtin function or the `fn` it calls.
//  - `IndexBinding::sizeSymbol`: the canonical spelling of the domain size.
//  - `Decl::isUsed()`, `TensorDecl` initialiser source, `UpdateRule` target
//    and optimizer info.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_FRONTEND_AST_H
#define ENERGY_FRONTEND_AST_H

#include "energy/Frontend/Affine.h"
#include "energy/Frontend/Builtins.h"
#include "energy/Frontend/Shape.h"
#include "energy/Runtime/TensorRole.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Casting.h"
#include "llvm/Support/SMLoc.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace energy {
namespace frontend {

class Decl;
class DimDecl;
class FnDecl;
class TensorDecl;
struct IndexBinding;
} // namespace frontend
namespace plugin {
struct OptimizerSignature;
} // namespace plugin
namespace frontend {

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

class Expr {
public:
  enum class Kind {
    Number,    ///< NumberExpr: `3`, `0.5`, `1e-4`
    Name,      ///< NameExpr: a dim, tensor, const, let, fn parameter, index
    Index,     ///< IndexExpr: `base[i, j]`
    Call,      ///< CallExpr: `dot(a, b)`, `f(v)`
    Transpose, ///< TransposeExpr: `base.T`
    Unary,     ///< UnaryExpr: `-e`
    Binary,    ///< BinaryExpr: `a + b`, `a @ b`, `p <= c`, `p and q`, ...
    Reduction, ///< ReductionExpr: `sum(i: N) e`, `lse(p: N; temp = T) e`
    Step,      ///< StepExpr: `step`
  };

  virtual ~Expr();

  Kind getKind() const { return kind; }
  llvm::SMRange getRange() const { return range; }
  llvm::SMLoc getLoc() const { return range.Start; }
  /// Height of this expression tree (1 for a leaf); the parser bounds it.
  unsigned getDepth() const { return depth; }

  /// The symbolic shape the checker computed for this expression.
  bool hasShape() const { return shape.has_value(); }
  const Shape &getShape() const { return *shape; }
  void setShape(Shape newShape) { shape = std::move(newShape); }

protected:
  Expr(Kind kind, llvm::SMRange range, unsigned depth = 1)
      : kind(kind), range(range), depth(depth) {}

private:
  Kind kind;
  llvm::SMRange range;
  unsigned depth;
  std::optional<Shape> shape;
};

using ExprPtr = std::unique_ptr<Expr>;

/// A numeric literal.
class NumberExpr : public Expr {
public:
  NumberExpr(llvm::SMRange range, llvm::StringRef spelling, double value,
             bool isInteger)
      : Expr(Kind::Number, range), spelling(spelling), value(value),
        integer(isInteger) {}

  llvm::StringRef getSpelling() const { return spelling; }
  double getValue() const { return value; }
  /// True for a literal written without `.` or exponent (`3`, not `3.0`).
  bool isInteger() const { return integer; }

  static bool classof(const Expr *e) { return e->getKind() == Kind::Number; }

private:
  llvm::StringRef spelling;
  double value;
  bool integer;
};

/// What a NameExpr refers to, as resolved by the checker.
enum class SymbolKind {
  Unresolved,
  Dim,      ///< getDecl() is a DimDecl; used as an integer number
  Tensor,   ///< getDecl() is a TensorDecl
  Const,    ///< getDecl() is a ConstDecl
  Let,      ///< getDecl() is a LetDecl
  FnParam,  ///< getFn() / getParamIndex()
  IndexVar, ///< getBinding(): a reduction, let or output index
  Grad,     ///< `grad` in an `until` clause
  Output,   ///< getDecl() is an OutputDecl, read in a loss (all its domain
            ///< indices fixed, unless it has none)
};

/// A reference to a named entity.
class NameExpr : public Expr {
public:
  NameExpr(llvm::SMRange range, llvm::StringRef name)
      : Expr(Kind::Name, range), name(name) {}

  llvm::StringRef getName() const { return name; }

  SymbolKind getSymbolKind() const { return symbolKind; }
  Decl *getDecl() const { return decl; }
  const IndexBinding *getBinding() const { return binding; }
  FnDecl *getFn() const { return fn; }
  unsigned getParamIndex() const { return paramIndex; }

  void resolveToDecl(SymbolKind kind, Decl *target) {
    symbolKind = kind;
    decl = target;
  }
  void resolveToIndex(const IndexBinding *target) {
    symbolKind = SymbolKind::IndexVar;
    binding = target;
  }
  void resolveToParam(FnDecl *function, unsigned index) {
    symbolKind = SymbolKind::FnParam;
    fn = function;
    paramIndex = index;
  }
  void resolveToGrad() { symbolKind = SymbolKind::Grad; }

  static bool classof(const Expr *e) { return e->getKind() == Kind::Name; }

private:
  llvm::StringRef name;
  SymbolKind symbolKind = SymbolKind::Unresolved;
  Decl *decl = nullptr;
  const IndexBinding *binding = nullptr;
  FnDecl *fn = nullptr;
  unsigned paramIndex = 0;
};

/// `base[i, j, ...]`: slices the leading axes of `base`.
class IndexExpr : public Expr {
public:
  IndexExpr(llvm::SMRange range, ExprPtr base, std::vector<ExprPtr> indices);

  const Expr &getBase() const { return *base; }
  Expr &getBase() { return *base; }
  const std::vector<ExprPtr> &getIndices() const { return indices; }

  static bool classof(const Expr *e) { return e->getKind() == Kind::Index; }

private:
  ExprPtr base;
  std::vector<ExprPtr> indices;
};

/// `callee(args...)`: a builtin function or a `fn` helper.
class CallExpr : public Expr {
public:
  CallExpr(llvm::SMRange range, llvm::StringRef callee,
           llvm::SMRange calleeRange, std::vector<ExprPtr> args);

  llvm::StringRef getCallee() const { return callee; }
  llvm::SMRange getCalleeRange() const { return calleeRange; }
  const std::vector<ExprPtr> &getArgs() const { return args; }

  /// Set by the checker: exactly one of these is non-null after success.
  const BuiltinFunction *getBuiltin() const { return builtin; }
  FnDecl *getFn() const { return fn; }
  void setBuiltin(const BuiltinFunction *function) { builtin = function; }
  void setFn(FnDecl *function) { fn = function; }

  static bool classof(const Expr *e) { return e->getKind() == Kind::Call; }

private:
  llvm::StringRef callee;
  llvm::SMRange calleeRange;
  std::vector<ExprPtr> args;
  const BuiltinFunction *builtin = nullptr;
  FnDecl *fn = nullptr;
};

/// `base.T`: swaps the last two axes.
class TransposeExpr : public Expr {
public:
  TransposeExpr(llvm::SMRange range, ExprPtr base)
      : Expr(Kind::Transpose, range, base->getDepth() + 1),
        base(std::move(base)) {}

  const Expr &getBase() const { return *base; }
  Expr &getBase() { return *base; }

  static bool classof(const Expr *e) { return e->getKind() == Kind::Transpose; }

private:
  ExprPtr base;
};

/// `-operand` (the only unary operator).
class UnaryExpr : public Expr {
public:
  UnaryExpr(llvm::SMRange range, ExprPtr operand)
      : Expr(Kind::Unary, range, operand->getDepth() + 1),
        operand(std::move(operand)) {}

  const Expr &getOperand() const { return *operand; }
  Expr &getOperand() { return *operand; }

  static bool classof(const Expr *e) { return e->getKind() == Kind::Unary; }

private:
  ExprPtr operand;
};

enum class BinaryOp {
  Add,
  Sub,
  Mul,
  Div,
  Pow,    ///< `^`: the right operand is an integer literal, maybe negated
  MatMul, ///< `@`
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  And,
  Or,
};

/// The source spelling of an operator: "+", "@", "<=", "and", ...
llvm::StringRef getBinaryOpSpelling(BinaryOp op);
/// True for `== != < <= > >=`.
bool isComparison(BinaryOp op);

class BinaryExpr : public Expr {
public:
  BinaryExpr(llvm::SMRange range, BinaryOp op, llvm::SMRange opRange,
             ExprPtr lhs, ExprPtr rhs);

  BinaryOp getOp() const { return op; }
  llvm::SMRange getOpRange() const { return opRange; }
  const Expr &getLhs() const { return *lhs; }
  const Expr &getRhs() const { return *rhs; }
  Expr &getLhs() { return *lhs; }
  Expr &getRhs() { return *rhs; }

  static bool classof(const Expr *e) { return e->getKind() == Kind::Binary; }

private:
  BinaryOp op;
  llvm::SMRange opRange;
  ExprPtr lhs, rhs;
};

/// One index of a domain: `i: N` or `t: T - 1`.
struct IndexBinding {
  llvm::StringRef name;
  llvm::SMRange nameRange;
  /// The domain size: an affine expression of dims and integer literals.
  ExprPtr size;
  /// Set by the checker: the canonical spelling of `size` ("N", "T - 1"),
  /// which is also the axis symbol of lets and outputs indexed by it.
  std::string sizeSymbol;
};

/// An index domain: `i: N, j: N where j <= i`. The predicate, if any,
/// constrains the whole binding.
struct IndexDomain {
  std::vector<IndexBinding> bindings;
  ExprPtr predicate; ///< null when there is no `where`
};

/// Sum, Mean, Max, Lse, or a plugin's aggregation (FunctionTable.h).
using ReductionKind = plugin::AggregationKind;

/// `sum(i: N) body`, `lse(p: N where p <= c; temp = tau) body`, ...
class ReductionExpr : public Expr {
public:
  ReductionExpr(llvm::SMRange range, const plugin::AggregationInfo &aggregation,
                IndexDomain domain, ExprPtr temperature, ExprPtr body);

  ReductionKind getReductionKind() const { return aggregation->kind; }
  /// The aggregation's entry in the aggregation table.
  const plugin::AggregationInfo &getAggregation() const { return *aggregation; }
  const IndexDomain &getDomain() const { return domain; }
  IndexDomain &getDomain() { return domain; }
  /// The `temp = T` operand of an `lse`, or null.
  const Expr *getTemperature() const { return temperature.get(); }
  Expr *getTemperature() { return temperature.get(); }
  const Expr &getBody() const { return *body; }
  Expr &getBody() { return *body; }

  static bool classof(const Expr *e) { return e->getKind() == Kind::Reduction; }

private:
  const plugin::AggregationInfo *aggregation;
  IndexDomain domain;
  ExprPtr temperature;
  ExprPtr body;
};

/// `step`: the current dynamics step, 0-based.
class StepExpr : public Expr {
public:
  explicit StepExpr(llvm::SMRange range) : Expr(Kind::Step, range) {}
  static bool classof(const Expr *e) { return e->getKind() == Kind::Step; }
};

/// Calls `visit` on each direct child expression of `expr` (operands,
/// indices, arguments, domain sizes, predicate, temperature, body), in
/// source order.
void forEachChild(const Expr &expr,
                  llvm::function_ref<void(const Expr &)> visit);

/// An S-expression rendering for tests and debugging, e.g.
/// `(neg (sum i:N (+ (* a b) c)))`.
std::string printExpr(const Expr &expr);

//===----------------------------------------------------------------------===//
// Declarations
//===----------------------------------------------------------------------===//

class Decl {
public:
  enum class Kind { Dim, Tensor, Const, Let, Fn, Energy, Loss, Output };

  virtual ~Decl();

  Kind getKind() const { return kind; }
  llvm::StringRef getName() const { return name; }
  llvm::SMRange getNameRange() const { return nameRange; }
  /// The whole declaration, from its name to the end of its value.
  llvm::SMRange getRange() const { return range; }

  /// Set by the checker: referenced from some expression, shape, rule or
  /// initialiser.
  bool isUsed() const { return used; }
  void markUsed() { used = true; }

protected:
  Decl(Kind kind, llvm::StringRef name, llvm::SMRange nameRange,
       llvm::SMRange range)
      : kind(kind), name(name), nameRange(nameRange), range(range) {}

private:
  Kind kind;
  llvm::StringRef name;
  llvm::SMRange nameRange;
  llvm::SMRange range;
  bool used = false;
};

using DeclPtr = std::unique_ptr<Decl>;

/// `dim N;` (bound at run time), `dim D = 64;` (default), or
/// `dim Dh = D / H;` (derived).
class DimDecl : public Decl {
public:
  DimDecl(llvm::StringRef name, llvm::SMRange nameRange, llvm::SMRange range,
          ExprPtr value)
      : Decl(Kind::Dim, name, nameRange, range), value(std::move(value)) {}

  /// The `= ...` part, or null.
  const Expr *getValue() const { return value.get(); }
  Expr *getValue() { return value.get(); }
  /// A dim with a value that is not a literal: never set directly.
  bool isDerived() const {
    return value && !llvm::isa<NumberExpr>(value.get());
  }
  /// The literal default, if any (validated by the checker).
  std::optional<int64_t> getDefault() const;

  static bool classof(const Decl *d) { return d->getKind() == Kind::Dim; }

private:
  ExprPtr value;
};

/// A dim name written in a shape: `[N, D]`.
struct DimRef {
  llvm::StringRef name;
  llvm::SMRange range;
  DimDecl *decl = nullptr; ///< set by the checker
};

/// `= zeros | ones | eye | normal(m, s) | uniform(a, b) | other`.
struct Initializer {
  enum class Kind { None, Zeros, Ones, Eye, Normal, Uniform, Tensor };
  Kind kind = Kind::None;
  llvm::SMRange range;
  std::vector<ExprPtr> args;    ///< normal / uniform arguments
  llvm::StringRef tensorName;   ///< Kind::Tensor: the source's name
  TensorDecl *source = nullptr; ///< Kind::Tensor: set by the checker
};

/// `input x : [N, D];`, `param W : [D, D] = normal(0, 0.02);`,
/// `state z : [N, D] = x;`
class TensorDecl : public Decl {
public:
  TensorDecl(TensorRole role, llvm::StringRef name, llvm::SMRange nameRange,
             llvm::SMRange range, std::vector<DimRef> dims,
             Initializer initializer)
      : Decl(Kind::Tensor, name, nameRange, range), role(role),
        dims(std::move(dims)), initializer(std::move(initializer)) {}

  TensorRole getRole() const { return role; }
  const std::vector<DimRef> &getDims() const { return dims; }
  std::vector<DimRef> &getDims() { return dims; }
  /// The declared shape, from the dim names.
  Shape getShape() const;
  const Initializer &getInitializer() const { return initializer; }
  Initializer &getInitializer() { return initializer; }

  static bool classof(const Decl *d) { return d->getKind() == Kind::Tensor; }

private:
  TensorRole role;
  std::vector<DimRef> dims;
  Initializer initializer;
};

/// `const tau = 8.0;` a scalar overridable at run time.
class ConstDecl : public Decl {
public:
  ConstDecl(llvm::StringRef name, llvm::SMRange nameRange, llvm::SMRange range,
            ExprPtr value)
      : Decl(Kind::Const, name, nameRange, range), value(std::move(value)) {}

  const Expr &getValue() const { return *value; }
  Expr &getValue() { return *value; }

  static bool classof(const Decl *d) { return d->getKind() == Kind::Const; }

private:
  ExprPtr value;
};

/// A declaration defined by a comprehension over an index domain: a `let`
/// or an `output`. Its shape (set by the checker) is the domain's size
/// symbols followed by the body's shape.
class ComprehensionDecl : public Decl {
public:
  const IndexDomain &getDomain() const { return domain; }
  IndexDomain &getDomain() { return domain; }
  const Expr &getBody() const { return *body; }
  Expr &getBody() { return *body; }

  bool hasShape() const { return shape.has_value(); }
  const Shape &getShape() const { return *shape; }
  void setShape(Shape newShape) { shape = std::move(newShape); }

  static bool classof(const Decl *d) {
    return d->getKind() == Kind::Let || d->getKind() == Kind::Output;
  }

protected:
  ComprehensionDecl(Kind kind, llvm::StringRef name, llvm::SMRange nameRange,
                    llvm::SMRange range, IndexDomain domain, ExprPtr body)
      : Decl(kind, name, nameRange, range), domain(std::move(domain)),
        body(std::move(body)) {}

private:
  IndexDomain domain;
  ExprPtr body;
  std::optional<Shape> shape;
};

/// `let q[c: N, h: H] = body;` or `let s = body;`.
class LetDecl : public ComprehensionDecl {
public:
  LetDecl(llvm::StringRef name, llvm::SMRange nameRange, llvm::SMRange range,
          IndexDomain domain, ExprPtr body)
      : ComprehensionDecl(Kind::Let, name, nameRange, range, std::move(domain),
                          std::move(body)) {}

  static bool classof(const Decl *d) { return d->getKind() == Kind::Let; }
};

/// A parameter of a `fn`: `v: [K]`.
struct FnParam {
  llvm::StringRef name;
  llvm::SMRange nameRange;
  std::vector<DimRef> dims;
  Shape getShape() const;
};

/// `fn f(v: [K]) -> [D] = body;` a pure helper, inlined where called.
class FnDecl : public Decl {
public:
  FnDecl(llvm::StringRef name, llvm::SMRange nameRange, llvm::SMRange range,
         std::vector<FnParam> params, std::vector<DimRef> resultDims,
         ExprPtr body)
      : Decl(Kind::Fn, name, nameRange, range), params(std::move(params)),
        resultDims(std::move(resultDims)), body(std::move(body)) {}

  const std::vector<FnParam> &getParams() const { return params; }
  std::vector<FnParam> &getParams() { return params; }
  const std::vector<DimRef> &getResultDims() const { return resultDims; }
  std::vector<DimRef> &getResultDims() { return resultDims; }
  Shape getResultShape() const;
  const Expr &getBody() const { return *body; }
  Expr &getBody() { return *body; }

  static bool classof(const Decl *d) { return d->getKind() == Kind::Fn; }

private:
  std::vector<FnParam> params;
  std::vector<DimRef> resultDims;
  ExprPtr body;
};

/// A named scalar: an `energy` or a `loss` (a term of the dialect).
class TermDecl : public Decl {
public:
  const Expr &getBody() const { return *body; }
  Expr &getBody() { return *body; }

  static bool classof(const Decl *d) {
    return d->getKind() == Kind::Energy || d->getKind() == Kind::Loss;
  }

protected:
  TermDecl(Kind kind, llvm::StringRef name, llvm::SMRange nameRange,
           llvm::SMRange range, ExprPtr body)
      : Decl(kind, name, nameRange, range), body(std::move(body)) {}

private:
  ExprPtr body;
};

/// `energy NAME = scalar expression;` one term of the global energy.
class EnergyDecl : public TermDecl {
public:
  EnergyDecl(llvm::StringRef name, llvm::SMRange nameRange, llvm::SMRange range,
             ExprPtr body)
      : TermDecl(Kind::Energy, name, nameRange, range, std::move(body)) {}

  static bool classof(const Decl *d) { return d->getKind() == Kind::Energy; }
};

/// `loss NAME = scalar expression;` a training objective, evaluated after the
/// dynamics over the final values; unlike an energy it may read outputs.
class LossDecl : public TermDecl {
public:
  LossDecl(llvm::StringRef name, llvm::SMRange nameRange, llvm::SMRange range,
           ExprPtr body)
      : TermDecl(Kind::Loss, name, nameRange, range, std::move(body)) {}

  static bool classof(const Decl *d) { return d->getKind() == Kind::Loss; }
};

/// `output F[t: N, j: D] = body;` a read-out computed after the dynamics.
class OutputDecl : public ComprehensionDecl {
public:
  OutputDecl(llvm::StringRef name, llvm::SMRange nameRange, llvm::SMRange range,
             IndexDomain domain, ExprPtr body)
      : ComprehensionDecl(Kind::Output, name, nameRange, range,
                          std::move(domain), std::move(body)) {}

  static bool classof(const Decl *d) { return d->getKind() == Kind::Output; }
};

//===----------------------------------------------------------------------===//
// Dynamics
//===----------------------------------------------------------------------===//

/// `name = value` inside an optimizer call: `lr = 0.1`.
struct OptimizerOption {
  llvm::StringRef name;
  llvm::SMRange nameRange;
  ExprPtr value;
};

/// A bare identifier argument of an optimizer: `heun` in `ode(heun, ...)`.
struct PositionalArg {
  llvm::StringRef name;
  llvm::SMRange range;
};

/// One statement `node: optimizer(args);`, `node: stationary;` or
/// `node <- value;`.
struct UpdateRule {
  enum class Kind { Optimizer, Explicit };
  Kind kind = Kind::Optimizer;
  llvm::SMRange range;
  llvm::StringRef node;
  llvm::SMRange nodeRange;
  TensorDecl *target = nullptr; ///< set by the checker

  // Kind::Optimizer.
  llvm::StringRef optimizer;
  llvm::SMRange optimizerRange;
  std::vector<PositionalArg> positional;
  std::vector<OptimizerOption> options;
  /// Set by the checker.
  const plugin::OptimizerSignature *optimizerInfo = nullptr;

  // Kind::Explicit.
  ExprPtr value;

  /// The option named `name`, or null.
  const OptimizerOption *findOption(llvm::StringRef name) const;
};

/// `steps COUNT until CONDITION;` (the `until` part is optional). COUNT is
/// an integer literal or an affine dim expression.
struct StepsClause {
  llvm::SMRange range;
  ExprPtr count;
  ExprPtr until; ///< null when absent
};

/// `backward implicit(cg = 100, tol = 1e-6);` or `backward unrolled;`: how
/// a loss's gradient goes through the dynamics. `backward` is a keyword only
/// where a statement starts with it followed by a name.
struct BackwardClause {
  llvm::SMRange range;
  llvm::StringRef mode;
  llvm::SMRange modeRange;
  std::vector<OptimizerOption> options;
  /// Set by the checker for `implicit`: the most conjugate-gradient rounds
  /// and the residual to stop at, relative to the right-hand side.
  bool implicit = false;
  int64_t iterations = 100;
  double tolerance = 1e-6;
};

/// `dynamics { ... }`.
struct DynamicsBlock {
  llvm::SMRange range;
  std::vector<UpdateRule> rules;
  std::optional<StepsClause> steps;
  bool sequential = false; ///< `order sequential;`
  std::optional<BackwardClause> backward;
};

/// `model NAME { declarations }`: the root of the AST.
/// An index the checker could not prove in range without the dims: the
/// runtime evaluates, for each side, the conditions (inequalities `c ≥ 0`
/// over dims and `step`) under which some index of the read is below 0 or
/// reaches the axis' size, and refuses to run when all of one side's hold.
struct IndexRangeCheck {
  llvm::SMRange read; ///< the indexed read, `bias[i - j + N - 1]`
  unsigned axis = 0;  ///< which index
  AffineExpr size;    ///< the axis' size
  /// Conditions for an index below 0, and for one at `size` or beyond; none
  /// when that side is proven.
  std::optional<std::vector<AffineExpr>> below, above;
};

struct ModelSpec {
  llvm::StringRef name;
  llvm::SMRange nameRange;
  llvm::SMRange range;
  std::vector<DeclPtr> decls;              ///< in source order
  std::unique_ptr<DynamicsBlock> dynamics; ///< null when absent
  /// Set by the checker.
  std::vector<IndexRangeCheck> indexChecks;
};

} // namespace frontend
} // namespace energy

#endif // ENERGY_FRONTEND_AST_H
