//===- Checker.cpp - Name resolution and symbolic shape checking ----------===//
//
// A single pass over the declarations in a fixed order (dims, tensors,
// steps count, consts, fns, lets, energies, losses, outputs, dynamics). Lets,
// fns and outputs are checked on first use as well, so they may be declared
// in any order; a use while one is being checked is a cycle. Expressions are
// checked recursively; the parser bounds their depth. Losses, and the output
// reads only they may make, are in CheckLoss.cpp.
//
//===----------------------------------------------------------------------===//

#include "CheckerImpl.h"

#include "energy/Frontend/Checker.h"
#include "energy/Frontend/Diagnostics.h"

#include "llvm/ADT/DenseSet.h"

using namespace energy::frontend;
using namespace energy::frontend::detail;
using llvm::cast;
using llvm::dyn_cast;
using llvm::isa;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

llvm::StringRef detail::describeDecl(const Decl &decl) {
  switch (decl.getKind()) {
  case Decl::Kind::Dim:
    return "dim";
  case Decl::Kind::Tensor:
    return tensorRoleName(cast<TensorDecl>(decl).getRole());
  case Decl::Kind::Const:
    return "const";
  case Decl::Kind::Let:
    return "let";
  case Decl::Kind::Fn:
    return "fn";
  case Decl::Kind::Energy:
    return "energy";
  case Decl::Kind::Loss:
    return "loss";
  case Decl::Kind::Output:
    return "output";
  }
  return "declaration";
}

std::optional<int64_t> detail::getIntegerLiteral(const Expr &e) {
  if (const auto *unary = dyn_cast<UnaryExpr>(&e)) {
    std::optional<int64_t> inner = getIntegerLiteral(unary->getOperand());
    if (!inner)
      return std::nullopt;
    return -*inner;
  }
  const auto *number = dyn_cast<NumberExpr>(&e);
  if (!number || !number->isInteger())
    return std::nullopt;
  int64_t value;
  if (number->getSpelling().getAsInteger(10, value) ||
      value > kMaxDimValue * 1024)
    return std::nullopt;
  return value;
}

IndexVariable *Checker::lookupIndex(llvm::StringRef name) {
  for (auto it = indexScope.rbegin(); it != indexScope.rend(); ++it)
    if (it->binding->name == name)
      return &*it;
  return nullptr;
}

std::optional<AffineExpr> Checker::toAffine(const Expr &expr) const {
  std::optional<AffineExpr> result;
  switch (expr.getKind()) {
  case Expr::Kind::Number:
    if (std::optional<int64_t> value = getIntegerLiteral(expr))
      result = AffineExpr::getConstant(*value);
    break;
  case Expr::Kind::Step:
    result = AffineExpr::getSymbol("step");
    break;
  case Expr::Kind::Name: {
    const auto &name = cast<NameExpr>(expr);
    if (name.getSymbolKind() == SymbolKind::Dim ||
        name.getSymbolKind() == SymbolKind::IndexVar)
      result = AffineExpr::getSymbol(name.getName().str());
    break;
  }
  case Expr::Kind::Unary:
    if (auto operand = toAffine(cast<UnaryExpr>(expr).getOperand()))
      result = operand->scaled(-1);
    break;
  case Expr::Kind::Binary: {
    const auto &binary = cast<BinaryExpr>(expr);
    BinaryOp op = binary.getOp();
    if (op != BinaryOp::Add && op != BinaryOp::Sub && op != BinaryOp::Mul)
      break;
    std::optional<AffineExpr> lhs = toAffine(binary.getLhs());
    std::optional<AffineExpr> rhs = toAffine(binary.getRhs());
    if (!lhs || !rhs)
      break;
    if (op == BinaryOp::Add)
      result = *lhs + *rhs;
    else if (op == BinaryOp::Sub)
      result = *lhs - *rhs;
    else if (lhs->isConstant())
      result = rhs->scaled(lhs->constant);
    else if (rhs->isConstant())
      result = lhs->scaled(rhs->constant);
    break;
  }
  default:
    break;
  }
  if (result && result->overflowed)
    return std::nullopt;
  return result;
}

//===----------------------------------------------------------------------===//
// ModelSpec
//===----------------------------------------------------------------------===//

bool Checker::check(ModelSpec &model) {
  unsigned errorsBefore = diagnostics.getNumErrors();
  declareGlobals(model);

  for (DeclPtr &decl : model.decls)
    if (auto *dim = dyn_cast<DimDecl>(decl.get()))
      checkDim(*dim);
  for (DeclPtr &decl : model.decls)
    if (auto *tensor = dyn_cast<TensorDecl>(decl.get()))
      checkTensor(*tensor);
  if (model.dynamics)
    checkStepsCount(*model.dynamics);
  for (DeclPtr &decl : model.decls) {
    switch (decl->getKind()) {
    case Decl::Kind::Const:
      checkConst(cast<ConstDecl>(*decl));
      break;
    case Decl::Kind::Fn:
      ensureFnChecked(cast<FnDecl>(*decl));
      break;
    case Decl::Kind::Let:
      ensureLetChecked(cast<LetDecl>(*decl));
      break;
    case Decl::Kind::Energy:
      checkTerm(cast<EnergyDecl>(*decl));
      break;
    case Decl::Kind::Loss:
      checkLoss(cast<LossDecl>(*decl));
      break;
    case Decl::Kind::Output:
      ensureOutputChecked(cast<OutputDecl>(*decl));
      break;
    default:
      break;
    }
  }
  for (DeclPtr &decl : model.decls)
    if (auto *tensor = dyn_cast<TensorDecl>(decl.get()))
      checkInitializer(*tensor);
  if (model.dynamics) {
    checkDynamics(*model.dynamics);
    checkStationaryRules(model);
    if (model.dynamics->backward)
      checkBackward(model);
  }
  // Unused-declaration warnings are noise on top of errors, the parser's
  // included (a declaration it skipped leaves its names unused).
  if (diagnostics.getNumErrors() == 0)
    reportUnused(model);
  model.indexChecks = std::move(indexChecks);
  return diagnostics.getNumErrors() == errorsBefore;
}

void Checker::declareGlobals(ModelSpec &model) {
  for (DeclPtr &decl : model.decls) {
    auto [it, inserted] = globals.try_emplace(decl->getName(), decl.get());
    if (!inserted) {
      diagnostics.error(decl->getNameRange().Start,
                        "redefinition of " + quote(decl->getName()),
                        {decl->getNameRange()});
      diagnostics.note(it->second->getNameRange().Start,
                       "see previous definition here",
                       {it->second->getNameRange()});
      continue;
    }
    if (isa<FnDecl>(decl.get()) && lookupBuiltin(decl->getName()))
      diagnostics.error(decl->getNameRange().Start,
                        "fn " + quote(decl->getName()) +
                            " has the name of a builtin function",
                        {decl->getNameRange()});
  }
}

//===----------------------------------------------------------------------===//
// Dims and tensors
//===----------------------------------------------------------------------===//

/// Checks the value of a derived dim: integer `+ - * /` over dims declared
/// earlier and integer literals.
static bool checkDerivedDimExpr(Expr &expr, llvm::StringMap<Decl *> &globals,
                                const char *declaredBefore,
                                DiagnosticEngine &diagnostics) {
  if (auto *number = dyn_cast<NumberExpr>(&expr)) {
    if (number->isInteger())
      return true;
    diagnostics.error(expr.getLoc(),
                      "a dim expression may only use integer literals, not " +
                          quote(number->getSpelling()),
                      {expr.getRange()});
    return false;
  }
  if (auto *name = dyn_cast<NameExpr>(&expr)) {
    auto it = globals.find(name->getName());
    if (it == globals.end() || !isa<DimDecl>(it->second)) {
      diagnostics.error(expr.getLoc(),
                        (it == globals.end() ? "unknown dim "
                                             : "expected a dim, "
                                               "but found ") +
                            quote(name->getName()),
                        {expr.getRange()});
      return false;
    }
    if (it->second->getNameRange().Start.getPointer() >= declaredBefore) {
      diagnostics.error(expr.getLoc(),
                        "dim " + quote(name->getName()) +
                            " must be declared before it is used in a derived "
                            "dim",
                        {expr.getRange()});
      return false;
    }
    it->second->markUsed();
    name->resolveToDecl(SymbolKind::Dim, it->second);
    name->setShape(Shape());
    return true;
  }
  if (auto *binary = dyn_cast<BinaryExpr>(&expr)) {
    switch (binary->getOp()) {
    case BinaryOp::Add:
    case BinaryOp::Sub:
    case BinaryOp::Mul:
    case BinaryOp::Div: {
      bool lhs = checkDerivedDimExpr(binary->getLhs(), globals, declaredBefore,
                                     diagnostics);
      bool rhs = checkDerivedDimExpr(binary->getRhs(), globals, declaredBefore,
                                     diagnostics);
      if (lhs && rhs)
        expr.setShape(Shape());
      return lhs && rhs;
    }
    default:
      break;
    }
  }
  diagnostics.error(expr.getLoc(),
                    "a dim expression may only use `+`, `-`, `*` and `/` on "
                    "dims and integers",
                    {expr.getRange()});
  return false;
}

void Checker::checkDim(DimDecl &dim) {
  Expr *value = dim.getValue();
  if (!value)
    return;
  if (auto *number = dyn_cast<NumberExpr>(value)) {
    int64_t parsed = 0;
    bool tooLarge = number->isInteger() &&
                    (number->getSpelling().getAsInteger(10, parsed) ||
                     parsed > kMaxDimValue);
    if (tooLarge) {
      diagnostics.error(value->getLoc(),
                        "dim " + quote(dim.getName()) + " = " +
                            number->getSpelling() +
                            " is too large (the limit is 2^31)",
                        {value->getRange()});
    } else if (!number->isInteger() || parsed <= 0) {
      diagnostics.error(value->getLoc(),
                        "dim " + quote(dim.getName()) +
                            " must be a positive integer, not " +
                            quote(number->getSpelling()),
                        {value->getRange()});
    } else {
      value->setShape(Shape());
    }
    return;
  }
  if (checkDerivedDimExpr(*value, globals,
                          dim.getNameRange().Start.getPointer(), diagnostics))
    if (std::optional<AffineExpr> definition = toAffine(*value))
      derivedDims[dim.getName().str()] = expandDerivedDims(*definition);
}

bool Checker::resolveDimRefs(std::vector<DimRef> &dims) {
  bool ok = true;
  for (DimRef &dim : dims) {
    auto it = globals.find(dim.name);
    if (it == globals.end()) {
      diagnostics.error(dim.range.Start, "unknown dim " + quote(dim.name),
                        {dim.range});
      ok = false;
      continue;
    }
    auto *decl = dyn_cast<DimDecl>(it->second);
    if (!decl) {
      diagnostics.error(dim.range.Start,
                        quote(dim.name) + " is a " + describeDecl(*it->second) +
                            ", not a dim",
                        {dim.range});
      diagnostics.note(it->second->getNameRange().Start,
                       quote(dim.name) + " declared here");
      ok = false;
      continue;
    }
    decl->markUsed();
    dim.decl = decl;
  }
  return ok;
}

void Checker::checkTensor(TensorDecl &tensor) {
  resolveDimRefs(tensor.getDims());
  Initializer &initializer = tensor.getInitializer();
  if (initializer.kind != Initializer::Kind::None &&
      tensor.getRole() == TensorRole::Input)
    diagnostics.error(initializer.range.Start,
                      "input " + quote(tensor.getName()) +
                          " cannot have an initialiser: inputs are given at "
                          "run time",
                      {initializer.range});
}

void Checker::checkInitializer(TensorDecl &tensor) {
  Initializer &initializer = tensor.getInitializer();
  Shape shape = tensor.getShape();
  switch (initializer.kind) {
  case Initializer::Kind::None:
  case Initializer::Kind::Zeros:
  case Initializer::Kind::Ones:
    return;
  case Initializer::Kind::Eye:
    if (shape.getRank() < 2 ||
        shape.dims[shape.getRank() - 1] != shape.dims[shape.getRank() - 2])
      diagnostics.error(initializer.range.Start,
                        "`eye` initialiser needs a tensor whose last two axes "
                        "are equal, but " +
                            quote(tensor.getName()) + " is " + shape.str(),
                        {initializer.range});
    return;
  case Initializer::Kind::Normal:
  case Initializer::Kind::Uniform: {
    llvm::StringRef name =
        initializer.kind == Initializer::Kind::Normal ? "normal" : "uniform";
    if (initializer.args.size() != 2) {
      diagnostics.error(initializer.range.Start,
                        quote(name) + " expects 2 arguments, got " +
                            llvm::Twine(initializer.args.size()),
                        {initializer.range});
      return;
    }
    ExprContext saved = context;
    context = ExprContext::Const;
    for (ExprPtr &argument : initializer.args)
      checkScalar(*argument, "an argument of " + quote(name));
    context = saved;
    return;
  }
  case Initializer::Kind::Tensor: {
    auto it = globals.find(initializer.tensorName);
    if (it == globals.end()) {
      diagnostics.error(initializer.range.Start,
                        "unknown initialiser " + quote(initializer.tensorName) +
                            "; expected `zeros`, `ones`, `eye`, `normal`, "
                            "`uniform` or a tensor",
                        {initializer.range});
      return;
    }
    auto *source = dyn_cast<TensorDecl>(it->second);
    if (!source) {
      diagnostics.error(initializer.range.Start,
                        "initialiser " + quote(initializer.tensorName) +
                            " is a " + describeDecl(*it->second) +
                            ", not a tensor",
                        {initializer.range});
      return;
    }
    if (source == &tensor) {
      diagnostics.error(initializer.range.Start,
                        quote(tensor.getName()) +
                            " cannot be initialised from itself",
                        {initializer.range});
      return;
    }
    source->markUsed();
    initializer.source = source;
    if (source->getShape() != shape)
      diagnostics.error(initializer.range.Start,
                        "initialiser " + quote(source->getName()) +
                            " has shape " + source->getShape().str() + " but " +
                            quote(tensor.getName()) + " is " + shape.str(),
                        {initializer.range});
    return;
  }
  }
}

//===----------------------------------------------------------------------===//
// Consts, lets, fns, energies, outputs
//===----------------------------------------------------------------------===//

void Checker::checkConst(ConstDecl &decl) {
  if (definitionState[&decl] != CheckState::Unvisited)
    return;
  definitionState[&decl] = CheckState::InProgress;
  ExprContext saved = context;
  context = ExprContext::Const;
  bool ok = checkScalar(decl.getValue(),
                        "the value of const " + quote(decl.getName()))
                .has_value();
  context = saved;
  definitionState[&decl] = ok ? CheckState::Done : CheckState::Failed;
}

/// Saves and clears the per-expression scope while a definition (let, fn)
/// is checked in its own scope, and restores it afterwards.
namespace {
class DefinitionScope {
public:
  DefinitionScope(std::vector<IndexVariable> &indexScope, FnDecl *&currentFn,
                  ExprContext &context, FnDecl *newFn)
      : indexScope(indexScope), currentFn(currentFn), context(context),
        savedScope(std::move(indexScope)), savedFn(currentFn),
        savedContext(context) {
    indexScope.clear();
    currentFn = newFn;
    context = ExprContext::Value;
  }
  ~DefinitionScope() {
    indexScope = std::move(savedScope);
    currentFn = savedFn;
    context = savedContext;
  }

private:
  std::vector<IndexVariable> &indexScope;
  FnDecl *&currentFn;
  ExprContext &context;
  std::vector<IndexVariable> savedScope;
  FnDecl *savedFn;
  ExprContext savedContext;
};
} // namespace

bool Checker::checkDefinitionOnce(Decl &decl,
                                  llvm::function_ref<bool()> check) {
  CheckState &state = definitionState[&decl];
  if (state == CheckState::Done)
    return true;
  if (state != CheckState::Unvisited)
    return false;
  if (definitionDepth >= 256) {
    diagnostics.error(decl.getNameRange().Start,
                      "definitions are nested too deeply (the limit is 256)",
                      {decl.getNameRange()});
    state = CheckState::Failed;
    return false;
  }
  state = CheckState::InProgress;
  ++definitionDepth;
  bool ok = check();
  --definitionDepth;
  definitionState[&decl] = ok ? CheckState::Done : CheckState::Failed;
  return ok;
}

bool Checker::ensureLetChecked(LetDecl &let) {
  return checkDefinitionOnce(let, [&] {
    DefinitionScope scope(indexScope, currentFn, context, nullptr);
    return checkComprehension(let);
  });
}

bool Checker::ensureFnChecked(FnDecl &fn) {
  return checkDefinitionOnce(fn, [&] { return checkFnDefinition(fn); });
}

bool Checker::ensureOutputChecked(OutputDecl &output) {
  return checkDefinitionOnce(output, [&] {
    DefinitionScope scope(indexScope, currentFn, context, nullptr);
    return checkComprehension(output);
  });
}

bool Checker::checkFnDefinition(FnDecl &fn) {
  bool ok = true;
  llvm::StringMap<const FnParam *> seen;
  for (FnParam &param : fn.getParams()) {
    ok &= resolveDimRefs(param.dims);
    auto [it, inserted] = seen.try_emplace(param.name, &param);
    if (!inserted) {
      diagnostics.error(param.nameRange.Start,
                        "duplicate parameter " + quote(param.name),
                        {param.nameRange});
      diagnostics.note(it->second->nameRange.Start,
                       "see previous definition here");
      ok = false;
    }
  }
  ok &= resolveDimRefs(fn.getResultDims());
  if (ok) {
    DefinitionScope scope(indexScope, currentFn, context, &fn);
    std::optional<Shape> body = checkExpr(fn.getBody());
    if (!body) {
      ok = false;
    } else if (*body != fn.getResultShape()) {
      diagnostics.error(fn.getBody().getLoc(),
                        "the body of fn " + quote(fn.getName()) +
                            " has shape " + body->str() + " but " +
                            quote(fn.getName()) + " returns " +
                            fn.getResultShape().str(),
                        {fn.getBody().getRange()});
      ok = false;
    }
  }
  return ok;
}

void Checker::checkTerm(TermDecl &term) {
  std::optional<Shape> shape = checkExpr(term.getBody());
  if (shape && !shape->isScalar())
    diagnostics.error(
        term.getBody().getLoc(),
        llvm::Twine(describeDecl(term)) + " " + quote(term.getName()) +
            " must be a scalar, but its value has shape " + shape->str(),
        {term.getBody().getRange()});
}

bool Checker::checkComprehension(ComprehensionDecl &decl) {
  if (!pushDomain(decl.getDomain(), /*allowPredicate=*/false))
    return false;
  // The axes of a let or output are named by dims (a value's shape names
  // its axes), so each index ranges over one.
  for (const IndexBinding &binding : decl.getDomain().bindings) {
    const AffineExpr &size = symbolMeaning.at(binding.sizeSymbol);
    if (size.constant == 0 && size.terms.size() == 1 &&
        size.terms.begin()->second == 1)
      continue;
    diagnostics.error(
        binding.size->getLoc(),
        "index " + quote(binding.name) + " of " +
            (decl.getKind() == Decl::Kind::Let ? "let " : "output ") +
            quote(decl.getName()) + " ranges over " +
            quote(binding.sizeSymbol) +
            ", but a let's or output's indices range over dims: declare "
            "one (`dim S = " +
            binding.sizeSymbol + ";`) and write `" + binding.name + ": S`",
        {binding.size->getRange()});
    popDomain(decl.getDomain());
    return false;
  }
  std::optional<Shape> body = checkExpr(decl.getBody());
  if (body) {
    std::vector<std::string> prefix;
    for (const IndexBinding &binding : decl.getDomain().bindings)
      prefix.push_back(binding.sizeSymbol);
    decl.setShape(body->prepend(prefix));
  }
  popDomain(decl.getDomain());
  return body.has_value();
}
