//===- ParseExpressions.cpp - Parsing of expressions ----------------------===//
//
// The expression productions of the recursive-descent parser: precedence
// climbing over the binary operators' table, unary operators, calls,
// indexing, reductions and their domains, each nested form counted against
// the deepest tree accepted.
//
//===----------------------------------------------------------------------===//

#include "energy/Frontend/Diagnostics.h"
#include "energy/Frontend/Parser.h"

#include "llvm/ADT/StringSwitch.h"

#include <cmath>

using namespace energy::frontend;

namespace energy {
namespace frontend {
/// Counts parser recursion through parseUnary, which every nested
/// expression (parentheses, arguments, indices, reduction bodies, unary
/// operators) passes through.
class NestingGuard {
public:
  explicit NestingGuard(Parser &parser) : parser(parser) {
    ++parser.nestingDepth;
  }
  ~NestingGuard() { --parser.nestingDepth; }

private:
  Parser &parser;
};
} // namespace frontend
} // namespace energy

/// The deepest expression tree accepted, so that every later recursive walk
/// (checker, emission, destructors) stays far from the stack limit.
static constexpr unsigned kMaxTreeDepth = 4 * Parser::kMaxNestingDepth;

ExprPtr Parser::parseStandaloneExpression() {
  ExprPtr expr = parseExpression();
  if (expr && token.isNot(TokenKind::eof)) {
    reportUnexpected("end of expression");
    return nullptr;
  }
  return expr;
}

// expression ::= binary expression at the loosest precedence (`or`)
ExprPtr Parser::parseExpression() { return parseBinary(1); }

namespace {
struct BinaryOperatorInfo {
  BinaryOp op;
  int precedence; ///< larger binds tighter
};
} // namespace

/// The precedence table of binary operators, loosest first. Unary `-` (7)
/// and `^` (8) are handled by parseUnary and parsePower.
static std::optional<BinaryOperatorInfo> getBinaryOperator(TokenKind kind) {
  switch (kind) {
  case TokenKind::kw_or:
    return BinaryOperatorInfo{BinaryOp::Or, 1};
  case TokenKind::kw_and:
    return BinaryOperatorInfo{BinaryOp::And, 2};
  case TokenKind::equal_equal:
    return BinaryOperatorInfo{BinaryOp::Eq, 3};
  case TokenKind::not_equal:
    return BinaryOperatorInfo{BinaryOp::Ne, 3};
  case TokenKind::less:
    return BinaryOperatorInfo{BinaryOp::Lt, 3};
  case TokenKind::less_equal:
    return BinaryOperatorInfo{BinaryOp::Le, 3};
  case TokenKind::greater:
    return BinaryOperatorInfo{BinaryOp::Gt, 3};
  case TokenKind::greater_equal:
    return BinaryOperatorInfo{BinaryOp::Ge, 3};
  case TokenKind::plus:
    return BinaryOperatorInfo{BinaryOp::Add, 4};
  case TokenKind::minus:
    return BinaryOperatorInfo{BinaryOp::Sub, 4};
  case TokenKind::star:
    return BinaryOperatorInfo{BinaryOp::Mul, 5};
  case TokenKind::slash:
    return BinaryOperatorInfo{BinaryOp::Div, 5};
  case TokenKind::at:
    return BinaryOperatorInfo{BinaryOp::MatMul, 6};
  default:
    return std::nullopt;
  }
}

bool Parser::checkDepth(unsigned depth, llvm::SMLoc loc) {
  if (depth <= kMaxTreeDepth)
    return true;
  diagnostics.error(loc, "expression is nested too deeply (the limit is " +
                             llvm::Twine(kMaxTreeDepth) + " levels)");
  return false;
}

// binary ::= unary (binaryOperator unary)*      (by precedence climbing;
//            comparisons do not chain)
ExprPtr Parser::parseBinary(int minPrecedence) {
  llvm::SMLoc start = token.getLoc();
  ExprPtr lhs = parseUnary();
  if (!lhs)
    return nullptr;
  bool lhsIsComparison = false;
  while (std::optional<BinaryOperatorInfo> info =
             getBinaryOperator(token.getKind())) {
    if (info->precedence < minPrecedence)
      break;
    bool comparison = isComparison(info->op);
    if (comparison && lhsIsComparison) {
      diagnostics.error(token.getLoc(),
                        "comparisons cannot be chained; join them with "
                        "`and`",
                        {token.getRange()});
      return nullptr;
    }
    llvm::SMRange opRange = token.getRange();
    consumeToken();
    ExprPtr rhs = parseBinary(info->precedence + 1);
    if (!rhs)
      return nullptr;
    lhs = std::make_unique<BinaryExpr>(llvm::SMRange(start, previousEnd()),
                                       info->op, opRange, std::move(lhs),
                                       std::move(rhs));
    if (!checkDepth(lhs->getDepth(), start))
      return nullptr;
    lhsIsComparison = comparison;
  }
  return lhs;
}

// unary ::= `-` unary | power
ExprPtr Parser::parseUnary() {
  NestingGuard guard(*this);
  if (nestingDepth > kMaxNestingDepth) {
    diagnostics.error(token.getLoc(),
                      "expression is nested too deeply (the limit is " +
                          llvm::Twine(kMaxNestingDepth) + " levels)");
    return nullptr;
  }
  if (token.is(TokenKind::minus)) {
    llvm::SMLoc start = token.getLoc();
    consumeToken();
    ExprPtr operand = parseUnary();
    if (!operand)
      return nullptr;
    return std::make_unique<UnaryExpr>(llvm::SMRange(start, previousEnd()),
                                       std::move(operand));
  }
  return parsePower();
}

// power ::= postfix (`^` unary)?      (right-associative; the exponent may
//                                      be negated: `2 ^ -1`)
ExprPtr Parser::parsePower() {
  llvm::SMLoc start = token.getLoc();
  ExprPtr base = parsePostfix();
  if (!base || token.isNot(TokenKind::caret))
    return base;
  llvm::SMRange opRange = token.getRange();
  consumeToken();
  ExprPtr exponent = parseUnary();
  if (!exponent)
    return nullptr;
  return std::make_unique<BinaryExpr>(llvm::SMRange(start, previousEnd()),
                                      BinaryOp::Pow, opRange, std::move(base),
                                      std::move(exponent));
}

// postfix ::= primary (`[` expression (`,` expression)* `]` | `.` `T`)*
ExprPtr Parser::parsePostfix() {
  llvm::SMLoc start = token.getLoc();
  ExprPtr expr = parsePrimary();
  while (expr) {
    if (consumeIf(TokenKind::l_square)) {
      std::vector<ExprPtr> indices;
      if (!parseExpressionList(indices, TokenKind::r_square))
        return nullptr;
      if (indices.empty()) {
        diagnostics.error(previousEnd(), "expected at least one index");
        return nullptr;
      }
      expr = std::make_unique<IndexExpr>(llvm::SMRange(start, previousEnd()),
                                         std::move(expr), std::move(indices));
    } else if (consumeIf(TokenKind::dot)) {
      if (token.isNot(TokenKind::identifier) || token.getSpelling() != "T") {
        reportUnexpected("`T` after `.`");
        return nullptr;
      }
      consumeToken();
      expr = std::make_unique<TransposeExpr>(
          llvm::SMRange(start, previousEnd()), std::move(expr));
    } else {
      break;
    }
    if (!checkDepth(expr->getDepth(), start))
      return nullptr;
  }
  return expr;
}

// expressionList ::= (expression (`,` expression)*)? close
bool Parser::parseExpressionList(std::vector<ExprPtr> &list, TokenKind close) {
  if (consumeIf(close))
    return true;
  do {
    ExprPtr expr = parseExpression();
    if (!expr)
      return false;
    list.push_back(std::move(expr));
  } while (consumeIf(TokenKind::comma));
  return expect(close);
}

// call ::= identifier `(` expressionList
ExprPtr Parser::parseCall(llvm::StringRef callee, llvm::SMRange calleeRange) {
  consumeToken(); // `(`
  std::vector<ExprPtr> args;
  if (!parseExpressionList(args, TokenKind::r_paren))
    return nullptr;
  return std::make_unique<CallExpr>(
      llvm::SMRange(calleeRange.Start, previousEnd()), callee, calleeRange,
      std::move(args));
}

// reduction ::= aggregation `(` indexDomain `)` additiveExpression
// aggregation ::= `sum` | `mean` | `max` | `lse` | a plugin's aggregation
// The body extends as far right as arithmetic goes: it stops at a
// comparison, `and`, `or`, `;`, `,` or a closing bracket.
ExprPtr Parser::parseReduction() {
  llvm::SMLoc start = token.getLoc();
  const plugin::AggregationInfo *aggregation =
      plugin::getAggregationTable().lookup(token.getSpelling());
  assert(aggregation && "a reduction of an aggregation not in the table");
  consumeToken(); // the aggregation's name
  consumeToken(); // `(`
  IndexDomain domain;
  ExprPtr temperature;
  if (!parseIndexDomain(domain, TokenKind::r_paren, &temperature))
    return nullptr;
  ExprPtr body = parseBinary(/*additive*/ 4);
  if (!body)
    return nullptr;
  return std::make_unique<ReductionExpr>(
      llvm::SMRange(start, previousEnd()), *aggregation, std::move(domain),
      std::move(temperature), std::move(body));
}

// primary ::= number | `step` | identifier | call | reduction
//           | `(` expression `)`
//           | (`sum` | `mean` | `max` | `lse`) `(` expressionList
ExprPtr Parser::parsePrimary() {
  switch (token.getKind()) {
  case TokenKind::number: {
    llvm::StringRef spelling = token.getSpelling();
    double value = 0;
    if (spelling.getAsDouble(value))
      value = HUGE_VAL; // out of range for a double
    bool isInteger = spelling.find_first_of(".eE") == llvm::StringRef::npos;
    auto number = std::make_unique<NumberExpr>(token.getRange(), spelling,
                                               value, isInteger);
    consumeToken();
    return number;
  }
  case TokenKind::kw_step: {
    auto step = std::make_unique<StepExpr>(token.getRange());
    consumeToken();
    return step;
  }
  case TokenKind::identifier: {
    llvm::StringRef name = token.getSpelling();
    // A plugin's aggregation: `sparsemax(p: N) e`.
    if (lexer.peekToken(0).is(TokenKind::l_paren) &&
        lexer.peekToken(1).is(TokenKind::identifier) &&
        lexer.peekToken(2).is(TokenKind::colon) &&
        plugin::getAggregationTable().lookup(name))
      return parseReduction();
    llvm::SMRange range = token.getRange();
    consumeToken();
    if (token.is(TokenKind::l_paren))
      return parseCall(name, range);
    return std::make_unique<NameExpr>(range, name);
  }
  case TokenKind::l_paren: {
    consumeToken();
    ExprPtr inner = parseExpression();
    if (!inner)
      return nullptr;
    if (!expect(TokenKind::r_paren, "to close the parenthesis"))
      return nullptr;
    return inner;
  }
  case TokenKind::kw_sum:
  case TokenKind::kw_mean:
  case TokenKind::kw_max:
  case TokenKind::kw_lse: {
    llvm::SMRange keywordRange = token.getRange();
    llvm::StringRef name = token.getSpelling();
    if (lexer.peekToken(0).isNot(TokenKind::l_paren)) {
      consumeToken();
      reportUnexpected("`(` after `" + name + "`");
      return nullptr;
    }
    // `sum(i: N) e` is a reduction; `sum(v)` is a call of the builtin.
    if (lexer.peekToken(1).is(TokenKind::identifier) &&
        lexer.peekToken(2).is(TokenKind::colon))
      return parseReduction();
    consumeToken();
    return parseCall(name, keywordRange);
  }
  default:
    reportUnexpected("an expression");
    return nullptr;
  }
}
