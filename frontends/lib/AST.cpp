//===- AST.cpp - Abstract syntax tree of the .energy language -------------===//
//
// Out-of-line parts of the AST: constructors that compute tree depth,
// spellings, declared shapes, and the S-expression printer used by tests.
//
//===----------------------------------------------------------------------===//

#include "energy/Frontend/AST.h"

#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace energy::frontend;

Expr::~Expr() = default;
Decl::~Decl() = default;

static unsigned maxDepth(const std::vector<ExprPtr> &exprs) {
  unsigned depth = 0;
  for (const ExprPtr &expr : exprs)
    depth = std::max(depth, expr->getDepth());
  return depth;
}

IndexExpr::IndexExpr(llvm::SMRange range, ExprPtr base,
                     std::vector<ExprPtr> indices)
    : Expr(Kind::Index, range,
           std::max(base->getDepth(), maxDepth(indices)) + 1),
      base(std::move(base)), indices(std::move(indices)) {}

CallExpr::CallExpr(llvm::SMRange range, llvm::StringRef callee,
                   llvm::SMRange calleeRange, std::vector<ExprPtr> args)
    : Expr(Kind::Call, range, maxDepth(args) + 1), callee(callee),
      calleeRange(calleeRange), args(std::move(args)) {}

BinaryExpr::BinaryExpr(llvm::SMRange range, BinaryOp op, llvm::SMRange opRange,
                       ExprPtr lhs, ExprPtr rhs)
    : Expr(Kind::Binary, range, std::max(lhs->getDepth(), rhs->getDepth()) + 1),
      op(op), opRange(opRange), lhs(std::move(lhs)), rhs(std::move(rhs)) {}

static unsigned domainDepth(const IndexDomain &domain) {
  unsigned depth = domain.predicate ? domain.predicate->getDepth() : 0;
  for (const IndexBinding &binding : domain.bindings)
    depth = std::max(depth, binding.size->getDepth());
  return depth;
}

ReductionExpr::ReductionExpr(llvm::SMRange range,
                             const plugin::AggregationInfo &aggregation,
                             IndexDomain domain, ExprPtr temperature,
                             ExprPtr body)
    : Expr(Kind::Reduction, range,
           std::max({domainDepth(domain),
                     temperature ? temperature->getDepth() : 0u,
                     body->getDepth()}) +
               1),
      aggregation(&aggregation), domain(std::move(domain)),
      temperature(std::move(temperature)), body(std::move(body)) {}

llvm::StringRef energy::frontend::getBinaryOpSpelling(BinaryOp op) {
  switch (op) {
  case BinaryOp::Add:
    return "+";
  case BinaryOp::Sub:
    return "-";
  case BinaryOp::Mul:
    return "*";
  case BinaryOp::Div:
    return "/";
  case BinaryOp::Pow:
    return "^";
  case BinaryOp::MatMul:
    return "@";
  case BinaryOp::Eq:
    return "==";
  case BinaryOp::Ne:
    return "!=";
  case BinaryOp::Lt:
    return "<";
  case BinaryOp::Le:
    return "<=";
  case BinaryOp::Gt:
    return ">";
  case BinaryOp::Ge:
    return ">=";
  case BinaryOp::And:
    return "and";
  case BinaryOp::Or:
    return "or";
  }
  return "?";
}

bool energy::frontend::isComparison(BinaryOp op) {
  return op >= BinaryOp::Eq && op <= BinaryOp::Ge;
}

std::optional<int64_t> DimDecl::getDefault() const {
  const auto *number = llvm::dyn_cast_or_null<NumberExpr>(value.get());
  if (!number || !number->isInteger())
    return std::nullopt;
  int64_t result;
  if (number->getSpelling().getAsInteger(10, result))
    return std::nullopt;
  return result;
}

static Shape shapeOf(const std::vector<DimRef> &dims) {
  std::vector<std::string> names;
  for (const DimRef &dim : dims)
    names.push_back(dim.name.str());
  return Shape(std::move(names));
}

Shape TensorDecl::getShape() const { return shapeOf(dims); }
Shape FnParam::getShape() const { return shapeOf(dims); }
Shape FnDecl::getResultShape() const { return shapeOf(resultDims); }

const OptimizerOption *UpdateRule::findOption(llvm::StringRef name) const {
  for (const OptimizerOption &option : options)
    if (option.name == name)
      return &option;
  return nullptr;
}

void energy::frontend::forEachChild(
    const Expr &expr, llvm::function_ref<void(const Expr &)> visit) {
  switch (expr.getKind()) {
  case Expr::Kind::Number:
  case Expr::Kind::Name:
  case Expr::Kind::Step:
    return;
  case Expr::Kind::Index: {
    const auto &index = llvm::cast<IndexExpr>(expr);
    visit(index.getBase());
    for (const ExprPtr &argument : index.getIndices())
      visit(*argument);
    return;
  }
  case Expr::Kind::Call:
    for (const ExprPtr &argument : llvm::cast<CallExpr>(expr).getArgs())
      visit(*argument);
    return;
  case Expr::Kind::Transpose:
    visit(llvm::cast<TransposeExpr>(expr).getBase());
    return;
  case Expr::Kind::Unary:
    visit(llvm::cast<UnaryExpr>(expr).getOperand());
    return;
  case Expr::Kind::Binary: {
    const auto &binary = llvm::cast<BinaryExpr>(expr);
    visit(binary.getLhs());
    visit(binary.getRhs());
    return;
  }
  case Expr::Kind::Reduction: {
    const auto &reduction = llvm::cast<ReductionExpr>(expr);
    for (const IndexBinding &binding : reduction.getDomain().bindings)
      visit(*binding.size);
    if (reduction.getDomain().predicate)
      visit(*reduction.getDomain().predicate);
    if (const Expr *temperature = reduction.getTemperature())
      visit(*temperature);
    visit(reduction.getBody());
    return;
  }
  }
}

static void printDomain(llvm::raw_ostream &os, const IndexDomain &domain) {
  for (const IndexBinding &binding : domain.bindings)
    os << " " << binding.name << ":" << printExpr(*binding.size);
  if (domain.predicate)
    os << " where " << printExpr(*domain.predicate);
}

std::string energy::frontend::printExpr(const Expr &expr) {
  std::string result;
  llvm::raw_string_ostream os(result);
  switch (expr.getKind()) {
  case Expr::Kind::Number:
    os << llvm::cast<NumberExpr>(expr).getSpelling();
    break;
  case Expr::Kind::Name:
    os << llvm::cast<NameExpr>(expr).getName();
    break;
  case Expr::Kind::Step:
    os << "step";
    break;
  case Expr::Kind::Index: {
    const auto &index = llvm::cast<IndexExpr>(expr);
    os << "(index " << printExpr(index.getBase());
    for (const ExprPtr &argument : index.getIndices())
      os << " " << printExpr(*argument);
    os << ")";
    break;
  }
  case Expr::Kind::Call: {
    const auto &call = llvm::cast<CallExpr>(expr);
    os << "(call " << call.getCallee();
    for (const ExprPtr &argument : call.getArgs())
      os << " " << printExpr(*argument);
    os << ")";
    break;
  }
  case Expr::Kind::Transpose:
    os << "(T " << printExpr(llvm::cast<TransposeExpr>(expr).getBase()) << ")";
    break;
  case Expr::Kind::Unary:
    os << "(neg " << printExpr(llvm::cast<UnaryExpr>(expr).getOperand()) << ")";
    break;
  case Expr::Kind::Binary: {
    const auto &binary = llvm::cast<BinaryExpr>(expr);
    os << "(" << getBinaryOpSpelling(binary.getOp()) << " "
       << printExpr(binary.getLhs()) << " " << printExpr(binary.getRhs())
       << ")";
    break;
  }
  case Expr::Kind::Reduction: {
    const auto &reduction = llvm::cast<ReductionExpr>(expr);
    os << "(" << reduction.getAggregation().name;
    printDomain(os, reduction.getDomain());
    if (const Expr *temperature = reduction.getTemperature())
      os << " temp " << printExpr(*temperature);
    os << " " << printExpr(reduction.getBody()) << ")";
    break;
  }
  }
  return result;
}
