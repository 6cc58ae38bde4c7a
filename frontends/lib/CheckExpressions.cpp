//===- CheckExpressions.cpp - Checking of expressions ---------------------===//
//
// Name resolution, symbolic shapes and the rules of each expression form:
// reads and their indices, calls of built-in and plugin functions,
// reductions and their bodies, arithmetic with scalar broadcasting.
//
//===----------------------------------------------------------------------===//

#include "CheckerImpl.h"

#include "energy/Frontend/Checker.h"
#include "energy/Frontend/Diagnostics.h"

#include "energy/Plugin/FunctionTable.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"

using namespace energy::frontend;
using namespace energy::frontend::detail;
using llvm::cast;
using llvm::dyn_cast;
using llvm::isa;

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
  for (size_t i = 0; i < affines.size(); ++i) {
    unsigned errors = diagnostics.getNumErrors();
    checkIndexInRange(*index.getIndices()[i], *affines[i], base->dims[i]);
    if (diagnostics.getNumErrors() == errors)
      recordIndexCheck(index, i, *affines[i], base->dims[i]);
  }
  return base->dropFront(index.getIndices().size());
}

void Checker::unknownFunction(const CallExpr &call) {
  llvm::StringRef callee = call.getCallee();
  diagnostics.error(call.getCalleeRange().Start,
                    "unknown function " + quote(callee),
                    {call.getCalleeRange()});
  // Names a letter or two away (at most half of them changed), or
  // contained in the callee (`relu` in `leaky_relu`).
  std::vector<std::string> close, all;
  for (const plugin::FunctionInfo &function :
       plugin::getFunctionTable().getFunctions()) {
    llvm::StringRef name = function.name;
    all.push_back(quote(name));
    unsigned distance = callee.edit_distance(name);
    if ((distance <= 2 && 2 * distance <= name.size()) ||
        (name.size() >= 3 && callee.contains(name)))
      close.push_back(quote(name));
  }
  if (close.size() == 1)
    diagnostics.note(call.getCalleeRange().Start,
                     "did you mean " + close.front() + "?");
  else if (!close.empty())
    diagnostics.note(call.getCalleeRange().Start,
                     "did you mean one of " + llvm::join(close, ", ") + "?");
  else
    diagnostics.note(call.getCalleeRange().Start,
                     "the functions are " + llvm::join(all, ", "));
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
    if (callee == "max" || callee == "min")
      diagnostics.error(call.getLoc(),
                        quote(callee) +
                            " is only a reduction over an index domain, "
                            "such as `" +
                            callee + "(i: N) e`",
                        {call.getCalleeRange()});
    else
      unknownFunction(call);
    return std::nullopt;
  }
  call.setBuiltin(builtin);
  if (call.getArgs().size() != builtin->arity) {
    for (const ExprPtr &argument : call.getArgs())
      checkExpr(*argument);
    std::optional<Shape> failure = arityError(builtin->arity);
    if (!builtin->summary.empty())
      diagnostics.note(call.getCalleeRange().Start, builtin->summary);
    return failure;
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
      if (side->getKind() == Expr::Kind::Index)
        diagnostics.note(side->getLoc(),
                         "a condition on values belongs in the body: add a "
                         "mask of 0 (admitted) and a large negative number "
                         "(excluded) to an lse's or max's score, as in "
                         "`lse(j: N) (s + mask[b, j])`; multiply a sum's "
                         "body by a mask of 0 and 1");
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
