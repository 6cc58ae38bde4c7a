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

static llvm::StringRef describeDecl(const Decl &decl) {
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

/// The integer value of `e` when it is an integer literal, maybe negated.
static std::optional<int64_t> getIntegerLiteral(const Expr &e) {
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
  checkDerivedDimExpr(*value, globals, dim.getNameRange().Start.getPointer(),
                      diagnostics);
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

//===----------------------------------------------------------------------===//
// Index domains
//===----------------------------------------------------------------------===//

std::optional<AffineExpr> Checker::checkDomainSize(Expr &size) {
  ExprContext saved = context;
  context = ExprContext::Const;
  std::optional<Shape> shape = checkExpr(size);
  context = saved;
  if (!shape)
    return std::nullopt;
  std::optional<AffineExpr> affine = toAffine(size);
  bool onlyDims = affine.has_value();
  if (affine)
    for (const auto &term : affine->terms)
      onlyDims &= !lookupIndex(term.first) && term.first != "step";
  if (!shape->isScalar() || !onlyDims) {
    diagnostics.error(size.getLoc(),
                      "a domain size must be an affine expression of dims "
                      "and integers, such as `T - 1`",
                      {size.getRange()});
    return std::nullopt;
  }
  return affine;
}

bool Checker::pushDomain(IndexDomain &domain, bool allowPredicate) {
  size_t firstVariable = indexScope.size();
  bool ok = true;
  std::vector<AffineExpr> sizes;
  for (IndexBinding &binding : domain.bindings) {
    std::optional<AffineExpr> size = checkDomainSize(*binding.size);
    if (!size) {
      ok = false;
      continue;
    }
    binding.sizeSymbol = size->str();
    symbolMeaning.emplace(binding.sizeSymbol, *size);
    sizes.push_back(*size);
  }
  if (!ok)
    return false;
  for (size_t i = 0; i < domain.bindings.size(); ++i) {
    IndexBinding &binding = domain.bindings[i];
    if (IndexVariable *outer = lookupIndex(binding.name)) {
      bool sameDomain =
          static_cast<size_t>(outer - indexScope.data()) >= firstVariable;
      diagnostics.error(binding.nameRange.Start,
                        (sameDomain ? "duplicate index " : "index ") +
                            quote(binding.name) +
                            (sameDomain ? "" : " shadows an outer index"),
                        {binding.nameRange});
      diagnostics.note(outer->binding->nameRange.Start,
                       "see previous definition here");
      ok = false;
    } else if (Decl *global = globals.lookup(binding.name)) {
      diagnostics.error(binding.nameRange.Start,
                        "index " + quote(binding.name) + " shadows " +
                            describeDecl(*global) + " " + quote(binding.name),
                        {binding.nameRange});
      diagnostics.note(global->getNameRange().Start,
                       "see previous definition here");
      ok = false;
    } else if (currentFn) {
      for (const FnParam &param : currentFn->getParams())
        if (param.name == binding.name) {
          diagnostics.error(binding.nameRange.Start,
                            "index " + quote(binding.name) +
                                " shadows a parameter",
                            {binding.nameRange});
          ok = false;
        }
    }
    indexScope.push_back({&binding, AffineExpr::getConstant(0),
                          sizes[i] - AffineExpr::getConstant(1), true});
  }
  if (!ok) {
    indexScope.resize(firstVariable);
    return false;
  }
  if (domain.predicate) {
    if (!allowPredicate) {
      diagnostics.error(domain.predicate->getLoc(),
                        "a `where` clause is only allowed in a reduction",
                        {domain.predicate->getRange()});
      indexScope.resize(firstVariable);
      return false;
    }
    if (!checkCondition(*domain.predicate, /*requireAffine=*/true)) {
      indexScope.resize(firstVariable);
      return false;
    }
    applyPredicateBounds(*domain.predicate, firstVariable);
  }
  return true;
}

void Checker::popDomain(const IndexDomain &domain) {
  indexScope.resize(indexScope.size() - domain.bindings.size());
}

/// Tightens the bounds of this domain's variables with the conjuncts of the
/// predicate that have the form `v op e` (or `e op v`), where v is one of
/// the domain's variables with coefficient ±1 and e mentions no variable of
/// this domain other than through its bounds. Anything else (`!=`, `or`, a
/// variable on both sides, a bound through a variable that is itself
/// constrained) marks the variables involved as inexact.
void Checker::applyPredicateBounds(Expr &predicate, size_t firstVariable) {
  std::vector<BinaryExpr *> conjuncts;
  std::vector<Expr *> worklist{&predicate};
  while (!worklist.empty()) {
    Expr *current = worklist.back();
    worklist.pop_back();
    auto *binary = dyn_cast<BinaryExpr>(current);
    if (binary && binary->getOp() == BinaryOp::And) {
      worklist.push_back(&binary->getRhs());
      worklist.push_back(&binary->getLhs());
    } else if (binary) {
      conjuncts.push_back(binary);
    }
  }
  auto domainVariable = [&](const std::string &name) -> IndexVariable * {
    for (size_t i = firstVariable; i < indexScope.size(); ++i)
      if (indexScope[i].binding->name == name)
        return &indexScope[i];
    return nullptr;
  };
  auto markAllInexact = [&](const AffineExpr &affine) {
    for (const auto &term : affine.terms)
      if (IndexVariable *variable = domainVariable(term.first))
        variable->exact = false;
  };
  // How many conjuncts mention each variable of this domain.
  std::map<std::string, unsigned> mentions;
  std::vector<std::optional<AffineExpr>> differences;
  for (BinaryExpr *conjunct : conjuncts) {
    std::optional<AffineExpr> lhs = toAffine(conjunct->getLhs());
    std::optional<AffineExpr> rhs = toAffine(conjunct->getRhs());
    std::optional<AffineExpr> difference;
    if (lhs && rhs && conjunct->getOp() != BinaryOp::Or)
      difference = *lhs - *rhs;
    differences.push_back(difference);
    if (difference)
      for (const auto &term : difference->terms)
        ++mentions[term.first];
  }
  // Bounds of the other symbols, for substitution: the domain's own
  // variables use their size bounds; outer variables their bounds.
  auto boundOf = [&](const std::string &name, bool upper,
                     bool &exact) -> AffineExpr {
    if (name == "step") {
      if (!upper)
        return AffineExpr::getConstant(0);
      if (stepUpper)
        return *stepUpper;
      exact = false;
      return AffineExpr::getSymbol(name);
    }
    if (IndexVariable *variable = lookupIndex(name)) {
      if (!variable->exact || (domainVariable(name) && mentions[name] > 1))
        exact = false;
      return upper ? variable->upper : variable->lower;
    }
    return AffineExpr::getSymbol(name); // a dim
  };

  for (size_t c = 0; c < conjuncts.size(); ++c) {
    BinaryExpr *conjunct = conjuncts[c];
    const std::optional<AffineExpr> &difference = differences[c];
    if (!difference) {
      for (size_t i = firstVariable; i < indexScope.size(); ++i)
        indexScope[i].exact = false;
      continue;
    }
    // Pick the bounded variable: the first domain variable with ±1.
    IndexVariable *target = nullptr;
    int64_t sign = 0;
    for (const auto &[name, coefficient] : difference->terms) {
      IndexVariable *variable = domainVariable(name);
      if (variable && (coefficient == 1 || coefficient == -1)) {
        target = variable;
        sign = coefficient;
        break;
      }
    }
    BinaryOp op = conjunct->getOp();
    if (!target || op == BinaryOp::Ne) {
      markAllInexact(*difference);
      continue;
    }
    // difference = sign * v + rest  (op)  0, so v (op') -sign * rest.
    std::string name = target->binding->name.str();
    AffineExpr rest = *difference - AffineExpr::getSymbol(name).scaled(sign);
    AffineExpr bound = rest.scaled(-sign);
    if (sign < 0) {
      // Flip the comparison: -v + rest op 0  <=>  v op' rest.
      switch (op) {
      case BinaryOp::Lt:
        op = BinaryOp::Gt;
        break;
      case BinaryOp::Le:
        op = BinaryOp::Ge;
        break;
      case BinaryOp::Gt:
        op = BinaryOp::Lt;
        break;
      case BinaryOp::Ge:
        op = BinaryOp::Le;
        break;
      default:
        break;
      }
    }
    bool upperSide = op == BinaryOp::Lt || op == BinaryOp::Le;
    bool lowerSide = op == BinaryOp::Gt || op == BinaryOp::Ge;
    bool exact = true;
    auto substitute = [&](bool upper) {
      AffineExpr result = AffineExpr::getConstant(bound.constant);
      for (const auto &[symbol, coefficient] : bound.terms) {
        if (symbol == name) {
          exact = false;
          continue;
        }
        bool useUpper = coefficient > 0 ? upper : !upper;
        result = result + boundOf(symbol, useUpper, exact).scaled(coefficient);
      }
      return result;
    };
    auto tighten = [&](bool upper, int64_t offset) {
      AffineExpr candidate =
          substitute(upper) + AffineExpr::getConstant(offset);
      AffineExpr &current = upper ? target->upper : target->lower;
      AffineExpr gap = candidate - current;
      if (candidate.overflowed || gap.overflowed || !gap.isConstant()) {
        exact = false;
        return;
      }
      if (upper ? gap.constant < 0 : gap.constant > 0)
        current = candidate;
    };
    if (upperSide || op == BinaryOp::Eq)
      tighten(/*upper=*/true, op == BinaryOp::Lt ? -1 : 0);
    if (lowerSide || op == BinaryOp::Eq)
      tighten(/*upper=*/false, op == BinaryOp::Gt ? 1 : 0);
    if (!exact)
      target->exact = false;
  }
}

void Checker::checkIndexInRange(const Expr &index, const AffineExpr &value,
                                const std::string &axis) {
  AffineExpr lower = AffineExpr::getConstant(value.constant);
  AffineExpr upper = lower;
  for (const auto &[symbol, coefficient] : value.terms) {
    AffineExpr low, high;
    if (symbol == "step") {
      if (!stepUpper)
        return;
      low = AffineExpr::getConstant(0);
      high = *stepUpper;
    } else if (IndexVariable *variable = lookupIndex(symbol)) {
      if (!variable->exact)
        return;
      low = variable->lower;
      high = variable->upper;
    } else {
      low = high = AffineExpr::getSymbol(symbol);
    }
    lower = lower + (coefficient > 0 ? low : high).scaled(coefficient);
    upper = upper + (coefficient > 0 ? high : low).scaled(coefficient);
  }
  auto meaning = symbolMeaning.find(axis);
  AffineExpr size = meaning != symbolMeaning.end()
                        ? meaning->second
                        : AffineExpr::getSymbol(axis);
  AffineExpr excess = upper - size;
  if (lower.overflowed || excess.overflowed)
    return;
  if (lower.isConstant() && lower.constant < 0) {
    diagnostics.error(index.getLoc(),
                      "index may be out of range: it can be " +
                          llvm::Twine(lower.constant) + " on an axis of size " +
                          quote(axis),
                      {index.getRange()});
  } else if (excess.isConstant() && excess.constant >= 0) {
    diagnostics.error(index.getLoc(),
                      "index may be out of range: it can reach " +
                          quote(upper.str()) + " on an axis of size " +
                          quote(axis),
                      {index.getRange()});
  }
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

std::optional<Shape> Checker::checkScalar(Expr &expr, const llvm::Twine &what) {
  std::optional<Shape> shape = checkExpr(expr);
  if (shape && !shape->isScalar()) {
    diagnostics.error(expr.getLoc(),
                      what + " must be a scalar, but it has shape " +
                          shape->str(),
                      {expr.getRange()});
    return std::nullopt;
  }
  return shape;
}

std::optional<Shape> Checker::checkExpr(Expr &expr) {
  std::optional<Shape> shape;
  switch (expr.getKind()) {
  case Expr::Kind::Number:
    shape = Shape();
    break;
  case Expr::Kind::Step:
    if (context == ExprContext::Value || context == ExprContext::Loss) {
      shape = Shape();
    } else {
      diagnostics.error(expr.getLoc(),
                        "`step` cannot be used here: it is only defined "
                        "during the dynamics",
                        {expr.getRange()});
    }
    break;
  case Expr::Kind::Name:
    shape = checkName(cast<NameExpr>(expr));
    break;
  case Expr::Kind::Index:
    shape = checkIndex(cast<IndexExpr>(expr));
    break;
  case Expr::Kind::Call:
    shape = checkCall(cast<CallExpr>(expr));
    break;
  case Expr::Kind::Transpose: {
    auto &transpose = cast<TransposeExpr>(expr);
    std::optional<Shape> base = checkExpr(transpose.getBase());
    if (!base)
      break;
    if (base->getRank() < 2) {
      diagnostics.error(expr.getLoc(),
                        "`.T` needs at least two axes, but the operand has "
                        "shape " +
                            base->str(),
                        {expr.getRange()});
      break;
    }
    std::swap(base->dims[base->getRank() - 1], base->dims[base->getRank() - 2]);
    shape = base;
    break;
  }
  case Expr::Kind::Unary:
    shape = checkExpr(cast<UnaryExpr>(expr).getOperand());
    break;
  case Expr::Kind::Binary:
    shape = checkBinary(cast<BinaryExpr>(expr));
    break;
  case Expr::Kind::Reduction:
    shape = checkReduction(cast<ReductionExpr>(expr));
    break;
  }
  if (shape)
    expr.setShape(*shape);
  return shape;
}

std::optional<Shape> Checker::checkName(NameExpr &name) {
  llvm::StringRef spelling = name.getName();
  if (IndexVariable *variable = lookupIndex(spelling)) {
    name.resolveToIndex(variable->binding);
    return Shape();
  }
  if (currentFn) {
    auto &params = currentFn->getParams();
    for (unsigned i = 0; i < params.size(); ++i) {
      if (params[i].name == spelling) {
        name.resolveToParam(currentFn, i);
        return params[i].getShape();
      }
    }
  }
  if (context == ExprContext::Until && spelling == "grad") {
    name.resolveToGrad();
    return Shape({"grad"});
  }
  Decl *decl = globals.lookup(spelling);
  if (!decl) {
    diagnostics.error(name.getLoc(), "unknown name " + quote(spelling),
                      {name.getRange()});
    return std::nullopt;
  }
  auto notHere = [&](const llvm::Twine &why) -> std::optional<Shape> {
    diagnostics.error(name.getLoc(),
                      llvm::Twine(describeDecl(*decl)) + " " + quote(spelling) +
                          " cannot be used " + why,
                      {name.getRange()});
    return std::nullopt;
  };
  decl->markUsed();
  switch (decl->getKind()) {
  case Decl::Kind::Dim:
    name.resolveToDecl(SymbolKind::Dim, decl);
    return Shape();
  case Decl::Kind::Const: {
    auto &constDecl = cast<ConstDecl>(*decl);
    if (definitionState[decl] == CheckState::InProgress) {
      diagnostics.error(name.getLoc(),
                        "cyclic definition: " + quote(spelling) +
                            " depends on itself",
                        {name.getRange()});
      return std::nullopt;
    }
    checkConst(constDecl);
    name.resolveToDecl(SymbolKind::Const, decl);
    return Shape();
  }
  case Decl::Kind::Tensor: {
    auto &tensor = cast<TensorDecl>(*decl);
    if (context == ExprContext::Const)
      return notHere("here: only numbers, consts and dims are allowed");
    if (context == ExprContext::Option && tensor.getRole() != TensorRole::Param)
      return notHere("in an optimizer option: only consts, params and dims "
                     "are allowed");
    name.resolveToDecl(SymbolKind::Tensor, decl);
    return tensor.getShape();
  }
  case Decl::Kind::Let: {
    if (context == ExprContext::Const || context == ExprContext::Option)
      return notHere("here: only numbers, consts and dims are allowed");
    auto &let = cast<LetDecl>(*decl);
    if (definitionState[decl] == CheckState::InProgress) {
      diagnostics.error(name.getLoc(),
                        "cyclic definition: " + quote(spelling) +
                            " depends on itself",
                        {name.getRange()});
      diagnostics.note(let.getNameRange().Start,
                       quote(spelling) + " is defined here");
      return std::nullopt;
    }
    if (!ensureLetChecked(let))
      return std::nullopt;
    name.resolveToDecl(SymbolKind::Let, decl);
    return let.getShape();
  }
  case Decl::Kind::Fn:
    return notHere("as a value; call it with arguments");
  case Decl::Kind::Output:
    if (context == ExprContext::Loss)
      return checkOutputRead(name, cast<OutputDecl>(*decl));
    return notHere("in an expression");
  case Decl::Kind::Energy:
  case Decl::Kind::Loss:
    return notHere("in an expression");
  }
  return std::nullopt;
}

std::optional<Shape> Checker::checkIndex(IndexExpr &index) {
  currentRead = &index;
  std::optional<Shape> base = checkExpr(index.getBase());
  bool ok = base.has_value();
  std::vector<std::optional<AffineExpr>> affines;
  for (const ExprPtr &argument : index.getIndices()) {
    std::optional<Shape> shape = checkScalar(*argument, "an index");
    if (!shape) {
      ok = false;
      affines.push_back(std::nullopt);
      continue;
    }
    std::optional<AffineExpr> affine = toAffine(*argument);
    if (!affine) {
      diagnostics.error(argument->getLoc(),
                        "an index must be affine in index variables, `step` "
                        "and dims",
                        {argument->getRange()});
      ok = false;
    }
    affines.push_back(affine);
  }
  if (!ok)
    return std::nullopt;
  if (index.getIndices().size() > base->getRank()) {
    diagnostics.error(
        index.getLoc(),
        "too many indices: " + llvm::Twine(index.getIndices().size()) +
            " for a tensor of shape " + base->str(),
        {index.getRange()});
    return std::nullopt;
  }
  for (size_t i = 0; i < affines.size(); ++i)
    checkIndexInRange(*index.getIndices()[i], *affines[i], base->dims[i]);
  return base->dropFront(index.getIndices().size());
}

std::optional<Shape> Checker::checkCall(CallExpr &call) {
  llvm::StringRef callee = call.getCallee();
  auto arityError = [&](unsigned expected) -> std::optional<Shape> {
    diagnostics.error(call.getLoc(),
                      quote(callee) + " expects " + llvm::Twine(expected) +
                          (expected == 1 ? " argument" : " arguments") +
                          ", got " + llvm::Twine(call.getArgs().size()),
                      {call.getRange()});
    return std::nullopt;
  };
  // A user fn.
  if (Decl *decl = globals.lookup(callee)) {
    auto *fn = dyn_cast<FnDecl>(decl);
    if (!fn) {
      diagnostics.error(call.getCalleeRange().Start,
                        llvm::Twine(describeDecl(*decl)) + " " + quote(callee) +
                            " is not a function",
                        {call.getCalleeRange()});
      return std::nullopt;
    }
    fn->markUsed();
    if (definitionState[fn] == CheckState::InProgress) {
      diagnostics.error(call.getCalleeRange().Start,
                        "cyclic definition: fn " + quote(callee) +
                            " calls itself",
                        {call.getCalleeRange()});
      return std::nullopt;
    }
    bool ok = true;
    std::vector<Shape> args;
    for (const ExprPtr &argument : call.getArgs()) {
      std::optional<Shape> shape = checkExpr(*argument);
      ok &= shape.has_value();
      args.push_back(shape.value_or(Shape()));
    }
    if (!ensureFnChecked(*fn) || !ok)
      return std::nullopt;
    call.setFn(fn);
    if (args.size() != fn->getParams().size())
      return arityError(fn->getParams().size());
    for (size_t i = 0; i < args.size(); ++i) {
      const FnParam &param = fn->getParams()[i];
      if (args[i] != param.getShape()) {
        diagnostics.error(call.getArgs()[i]->getLoc(),
                          "argument " + llvm::Twine(i + 1) + " of " +
                              quote(callee) + " has shape " + args[i].str() +
                              " but parameter " + quote(param.name) + " is " +
                              param.getShape().str(),
                          {call.getArgs()[i]->getRange()});
        ok = false;
      }
    }
    if (!ok)
      return std::nullopt;
    return fn->getResultShape();
  }

  const BuiltinFunction *builtin = lookupBuiltin(callee);
  if (!builtin) {
    if (callee == "max")
      diagnostics.error(call.getLoc(),
                        "`max` is only a reduction over an index domain, "
                        "such as `max(i: N) e`",
                        {call.getCalleeRange()});
    else
      diagnostics.error(call.getCalleeRange().Start,
                        "unknown function " + quote(callee),
                        {call.getCalleeRange()});
    return std::nullopt;
  }
  call.setBuiltin(builtin);
  if (call.getArgs().size() != builtin->arity) {
    for (const ExprPtr &argument : call.getArgs())
      checkExpr(*argument);
    return arityError(builtin->arity);
  }
  if (builtin->rule == ShapeRule::Eye) {
    Expr &argument = *call.getArgs()[0];
    std::optional<Shape> shape = checkExpr(argument);
    std::optional<AffineExpr> affine = toAffine(argument);
    auto *name = dyn_cast<NameExpr>(&argument);
    if (!shape || !affine || !name ||
        name->getSymbolKind() != SymbolKind::Dim) {
      if (shape)
        diagnostics.error(argument.getLoc(),
                          "`eye` expects a dim, such as `eye(D)`",
                          {argument.getRange()});
      return std::nullopt;
    }
    return Shape({name->getName().str(), name->getName().str()});
  }
  bool ok = true;
  std::vector<Shape> args;
  for (const ExprPtr &argument : call.getArgs()) {
    std::optional<Shape> shape = checkExpr(*argument);
    ok &= shape.has_value();
    args.push_back(shape.value_or(Shape()));
  }
  if (!ok)
    return std::nullopt;
  std::string error;
  std::optional<Shape> result = inferBuiltinShape(*builtin, args, error);
  if (!result)
    diagnostics.error(call.getLoc(), error, {call.getRange()});
  return result;
}

std::optional<Shape> Checker::checkBinary(BinaryExpr &binary) {
  BinaryOp op = binary.getOp();
  std::string opName = quote(getBinaryOpSpelling(op));
  if (isComparison(op) || op == BinaryOp::And || op == BinaryOp::Or) {
    diagnostics.error(binary.getOpRange().Start,
                      opName + " is only allowed in a `where` or `until` "
                               "condition",
                      {binary.getOpRange()});
    return std::nullopt;
  }
  std::optional<Shape> lhs = checkExpr(binary.getLhs());
  if (op == BinaryOp::Pow) {
    if (!getIntegerLiteral(binary.getRhs())) {
      diagnostics.error(binary.getRhs().getLoc(),
                        "the exponent of `^` must be an integer literal, such "
                        "as `2` or `-1`",
                        {binary.getRhs().getRange()});
      return std::nullopt;
    }
    binary.getRhs().setShape(Shape());
    if (auto *unary = dyn_cast<UnaryExpr>(&binary.getRhs()))
      unary->getOperand().setShape(Shape());
    return lhs;
  }
  std::optional<Shape> rhs = checkExpr(binary.getRhs());
  if (!lhs || !rhs)
    return std::nullopt;
  auto mismatch = [&]() -> std::optional<Shape> {
    diagnostics.error(binary.getOpRange().Start,
                      "shape mismatch in " + opName + ": " + lhs->str() +
                          " vs " + rhs->str(),
                      {binary.getLhs().getRange(), binary.getRhs().getRange()});
    return std::nullopt;
  };
  if (op == BinaryOp::MatMul) {
    if (lhs->getRank() != 2 || (rhs->getRank() != 1 && rhs->getRank() != 2))
      return mismatch();
    if (lhs->dims[1] != rhs->dims[0])
      return mismatch();
    if (rhs->getRank() == 1)
      return Shape({lhs->dims[0]});
    return Shape({lhs->dims[0], rhs->dims[1]});
  }
  // + - * /: equal shapes, or one side scalar.
  if (lhs->isScalar())
    return rhs;
  if (rhs->isScalar() || *lhs == *rhs)
    return lhs;
  return mismatch();
}

bool Checker::checkCondition(Expr &expr, bool requireAffine) {
  auto *binary = dyn_cast<BinaryExpr>(&expr);
  if (binary &&
      (binary->getOp() == BinaryOp::And || binary->getOp() == BinaryOp::Or)) {
    bool lhs = checkCondition(binary->getLhs(), requireAffine);
    bool rhs = checkCondition(binary->getRhs(), requireAffine);
    if (lhs && rhs)
      expr.setShape(Shape());
    return lhs && rhs;
  }
  if (!binary || !isComparison(binary->getOp())) {
    diagnostics.error(expr.getLoc(),
                      "expected a comparison (`==`, `!=`, `<`, `<=`, `>`, "
                      "`>=`) in this condition",
                      {expr.getRange()});
    return false;
  }
  bool ok = true;
  for (Expr *side : {&binary->getLhs(), &binary->getRhs()}) {
    if (!checkScalar(*side, "an operand of a comparison")) {
      ok = false;
      continue;
    }
    if (requireAffine && !toAffine(*side)) {
      diagnostics.error(side->getLoc(),
                        "a `where` condition must compare affine expressions "
                        "of index variables and dims",
                        {side->getRange()});
      ok = false;
    }
  }
  if (ok)
    expr.setShape(Shape());
  return ok;
}

std::optional<Shape> Checker::checkReduction(ReductionExpr &reduction) {
  if (Expr *temperature = reduction.getTemperature()) {
    if (reduction.getReductionKind() != ReductionKind::Lse) {
      diagnostics.error(temperature->getLoc(),
                        "`temp` is accepted by `lse` only",
                        {temperature->getRange()});
      return std::nullopt;
    }
    if (!checkScalar(*temperature, "the temperature"))
      return std::nullopt;
  }
  if (reduction.getReductionKind() == ReductionKind::Plugin) {
    // Its run-time code aggregates a table of the body over the domain.
    std::string name = quote(reduction.getAggregation().name);
    if (const Expr *predicate = reduction.getDomain().predicate.get()) {
      diagnostics.error(predicate->getLoc(),
                        "the plugin aggregation " + name +
                            " takes no `where` condition",
                        {predicate->getRange()});
      return std::nullopt;
    }
    for (const IndexBinding &binding : reduction.getDomain().bindings) {
      auto *dim = dyn_cast<NameExpr>(binding.size.get());
      if (!dim || !globals.lookup(dim->getName()) ||
          !isa<DimDecl>(globals.lookup(dim->getName()))) {
        diagnostics.error(binding.size->getLoc(),
                          "the plugin aggregation " + name +
                              " ranges over dims, such as `p: N`",
                          {binding.size->getRange()});
        return std::nullopt;
      }
    }
  }
  if (!pushDomain(reduction.getDomain(), /*allowPredicate=*/true))
    return std::nullopt;
  std::optional<Shape> body = checkExpr(reduction.getBody());
  popDomain(reduction.getDomain());
  return body;
}

//===----------------------------------------------------------------------===//
// Dynamics
//===----------------------------------------------------------------------===//

void Checker::checkStepsCount(DynamicsBlock &dynamics) {
  if (!dynamics.steps)
    return;
  Expr &count = *dynamics.steps->count;
  if (auto *number = dyn_cast<NumberExpr>(&count)) {
    std::optional<int64_t> value = getIntegerLiteral(count);
    if (!value || *value < 0 || *value > kMaxDimValue) {
      diagnostics.error(count.getLoc(),
                        "the step count must be a non-negative integer or a "
                        "dim expression, not " +
                            quote(number->getSpelling()),
                        {count.getRange()});
      return;
    }
    count.setShape(Shape());
    stepUpper = AffineExpr::getConstant(*value - 1);
    return;
  }
  if (std::optional<AffineExpr> size = checkDomainSize(count))
    stepUpper = *size - AffineExpr::getConstant(1);
}

void Checker::checkDynamics(DynamicsBlock &dynamics) {
  llvm::DenseMap<TensorDecl *, const UpdateRule *> ruleOf;
  for (UpdateRule &rule : dynamics.rules) {
    Decl *decl = globals.lookup(rule.node);
    bool targetOk = false;
    if (!decl) {
      diagnostics.error(rule.nodeRange.Start,
                        "unknown node " + quote(rule.node) + " in rule",
                        {rule.nodeRange});
    } else {
      decl->markUsed();
      auto *tensor = dyn_cast<TensorDecl>(decl);
      if (!tensor || tensor->getRole() != TensorRole::State) {
        diagnostics.error(rule.nodeRange.Start,
                          "a rule can only update a state, but " +
                              quote(rule.node) + " is " +
                              (tensor ? "an " : "a ") + describeDecl(*decl),
                          {rule.nodeRange});
        diagnostics.note(decl->getNameRange().Start,
                         quote(rule.node) + " is declared here");
      } else {
        auto [it, inserted] = ruleOf.try_emplace(tensor, &rule);
        if (!inserted) {
          diagnostics.error(rule.nodeRange.Start,
                            quote(rule.node) + " has two rules",
                            {rule.nodeRange});
          diagnostics.note(it->second->nodeRange.Start,
                           "see previous rule here");
        }
        rule.target = tensor;
        targetOk = true;
      }
    }
    if (rule.kind == UpdateRule::Kind::Optimizer) {
      checkOptimizerRule(rule);
      continue;
    }
    std::optional<Shape> value = checkExpr(*rule.value);
    if (value && targetOk && *value != rule.target->getShape())
      diagnostics.error(rule.value->getLoc(),
                        "the rule for " + quote(rule.node) + " has shape " +
                            value->str() + " but " + quote(rule.node) + " is " +
                            rule.target->getShape().str(),
                        {rule.value->getRange()});
  }
  if (dynamics.steps && dynamics.steps->until) {
    ExprContext saved = context;
    context = ExprContext::Until;
    checkCondition(*dynamics.steps->until, /*requireAffine=*/false);
    context = saved;
  }
}

void Checker::checkOptimizerRule(UpdateRule &rule) {
  const energy::plugin::OptimizerSignature *info =
      optimizers.lookup(rule.optimizer);
  if (!info) {
    diagnostics.error(rule.optimizerRange.Start,
                      "unknown optimizer " + quote(rule.optimizer),
                      {rule.optimizerRange});
    return;
  }
  rule.optimizerInfo = info;
  std::string optimizerName = quote(rule.optimizer);
  // Positional argument.
  for (size_t i = 0; i < rule.positional.size(); ++i) {
    const PositionalArg &argument = rule.positional[i];
    if (info->positionalChoices.empty() || i > 0) {
      diagnostics.error(argument.range.Start,
                        "unexpected argument " + quote(argument.name) +
                            " for optimizer " + optimizerName +
                            "; options are written `name = value`",
                        {argument.range});
      continue;
    }
    if (!llvm::is_contained(info->positionalChoices, argument.name.str())) {
      std::string choices;
      for (size_t c = 0; c < info->positionalChoices.size(); ++c) {
        if (c)
          choices += c + 1 == info->positionalChoices.size() ? " or " : ", ";
        choices += quote(info->positionalChoices[c]);
      }
      diagnostics.error(argument.range.Start,
                        "unknown " + info->positionalName + " " +
                            quote(argument.name) + " for optimizer " +
                            optimizerName + "; expected " + choices,
                        {argument.range});
    }
  }
  // Options.
  llvm::StringMap<const OptimizerOption *> seen;
  for (OptimizerOption &option : rule.options) {
    const energy::plugin::OptimizerOption *optionInfo =
        info->findOption(option.name);
    if (!optionInfo) {
      diagnostics.error(option.nameRange.Start,
                        "unknown option " + quote(option.name) +
                            " for optimizer " + optimizerName,
                        {option.nameRange});
      continue;
    }
    auto [it, inserted] = seen.try_emplace(option.name, &option);
    if (!inserted) {
      diagnostics.error(option.nameRange.Start,
                        "duplicate option " + quote(option.name),
                        {option.nameRange});
      diagnostics.note(it->second->nameRange.Start,
                       "see previous definition here");
      continue;
    }
    Expr &value = *option.value;
    ExprContext saved = context;
    context = ExprContext::Option;
    switch (optionInfo->valueKind) {
    case OptionValueKind::Scalar:
      checkScalar(value, "option " + quote(option.name));
      break;
    case OptionValueKind::Integer: {
      std::optional<int64_t> literal = getIntegerLiteral(value);
      if (!literal || *literal < 0)
        diagnostics.error(value.getLoc(),
                          "option " + quote(option.name) +
                              " must be a non-negative integer literal",
                          {value.getRange()});
      else
        checkExpr(value);
      break;
    }
    case OptionValueKind::LastAxisMatrix: {
      std::optional<Shape> shape = checkExpr(value);
      if (!shape || !rule.target)
        break;
      Shape nodeShape = rule.target->getShape();
      if (nodeShape.isScalar() || nodeShape.getRank() > 2) {
        diagnostics.error(value.getLoc(),
                          "option " + quote(option.name) +
                              " applies along the last axis of a vector or "
                              "of the rows of a matrix, but " +
                              quote(rule.node) + " has shape " +
                              nodeShape.str(),
                          {value.getRange()});
        break;
      }
      std::string axis = nodeShape.back();
      Shape expected({axis, axis});
      if (*shape != expected)
        diagnostics.error(value.getLoc(),
                          "option " + quote(option.name) + " must have shape " +
                              expected.str() + " (the last axis of " +
                              quote(rule.node) + "), but it has shape " +
                              shape->str(),
                          {value.getRange()});
      break;
    }
    }
    context = saved;
  }
  for (const energy::plugin::OptimizerOption &optionInfo : info->options)
    if (optionInfo.required() && !seen.count(optionInfo.name))
      diagnostics.error(rule.optimizerRange.Start,
                        "optimizer " + optimizerName + " requires option " +
                            quote(optionInfo.name),
                        {rule.optimizerRange});
}

/// Collects the tensors referenced inside the body of some `lse`, following
/// lets and fn bodies.
static void collectTensorsInsideLse(const Expr &expr, bool insideLse,
                                    llvm::DenseSet<const Decl *> &visiting,
                                    llvm::DenseSet<const TensorDecl *> &found) {
  if (const auto *name = dyn_cast<NameExpr>(&expr)) {
    Decl *decl = name->getDecl();
    if (name->getSymbolKind() == SymbolKind::Tensor && insideLse)
      found.insert(cast<TensorDecl>(decl));
    if (name->getSymbolKind() == SymbolKind::Let &&
        visiting.insert(decl).second) {
      collectTensorsInsideLse(cast<LetDecl>(decl)->getBody(), insideLse,
                              visiting, found);
      visiting.erase(decl);
    }
    return;
  }
  if (const auto *call = dyn_cast<CallExpr>(&expr)) {
    if (FnDecl *fn = call->getFn(); fn && visiting.insert(fn).second) {
      collectTensorsInsideLse(fn->getBody(), insideLse, visiting, found);
      visiting.erase(fn);
    }
  }
  bool lse = false;
  if (const auto *reduction = dyn_cast<ReductionExpr>(&expr))
    lse = reduction->getReductionKind() == ReductionKind::Lse;
  forEachChild(expr, [&](const Expr &child) {
    collectTensorsInsideLse(child, insideLse || lse, visiting, found);
  });
}

void Checker::checkStationaryRules(ModelSpec &model) {
  llvm::DenseSet<const TensorDecl *> insideLse;
  llvm::DenseSet<const Decl *> visiting;
  for (DeclPtr &decl : model.decls)
    if (auto *energy = dyn_cast<EnergyDecl>(decl.get()))
      collectTensorsInsideLse(energy->getBody(), false, visiting, insideLse);
  for (UpdateRule &rule : model.dynamics->rules) {
    if (!rule.optimizerInfo || !rule.target ||
        rule.optimizerInfo->category != OptimizerCategory::Stationary)
      continue;
    if (!insideLse.count(rule.target))
      diagnostics.error(rule.optimizerRange.Start,
                        "no closed form for `stationary` node " +
                            quote(rule.node) +
                            ": it does not appear inside an `lse` of any "
                            "energy",
                        {rule.optimizerRange});
  }
}

void Checker::reportUnused(ModelSpec &model) {
  for (DeclPtr &decl : model.decls) {
    if (decl->isUsed() || isa<TermDecl>(decl.get()) ||
        isa<OutputDecl>(decl.get()))
      continue;
    diagnostics.warning(decl->getNameRange().Start,
                        llvm::Twine(describeDecl(*decl)) + " " +
                            quote(decl->getName()) + " is never used",
                        {decl->getNameRange()});
  }
}

bool energy::frontend::checkModel(ModelSpec &model,
                                  DiagnosticEngine &diagnostics,
                                  const OptimizerTable &optimizers) {
  Checker checker(diagnostics, optimizers);
  return checker.check(model);
}
