//===- Token.cpp - Tokens of the .energy language -------------------------===//
//
// Descriptions of token kinds for diagnostics.
//
//===----------------------------------------------------------------------===//

#include "energy/Frontend/Token.h"

using namespace energy::frontend;

bool Token::isKeyword() const {
  return kind >= TokenKind::kw_model && kind <= TokenKind::kw_step;
}

llvm::StringRef energy::frontend::getTokenKindDescription(TokenKind kind) {
  switch (kind) {
  case TokenKind::eof:
    return "end of file";
  case TokenKind::error:
    return "invalid token";
  case TokenKind::identifier:
    return "identifier";
  case TokenKind::number:
    return "number";
#define KEYWORD(NAME)                                                          \
  case TokenKind::kw_##NAME:                                                   \
    return "`" #NAME "`";
    KEYWORD(model)
    KEYWORD(dim)
    KEYWORD(input)
    KEYWORD(param)
    KEYWORD(state)
    KEYWORD(const)
    KEYWORD(let)
    KEYWORD(fn)
    KEYWORD(energy)
    KEYWORD(loss)
    KEYWORD(output)
    KEYWORD(dynamics)
    KEYWORD(steps)
    KEYWORD(until)
    KEYWORD(order)
    KEYWORD(sequential)
    KEYWORD(sum)
    KEYWORD(mean)
    KEYWORD(lse)
    KEYWORD(max)
    KEYWORD(where)
    KEYWORD(temp)
    KEYWORD(and)
    KEYWORD(or)
    KEYWORD(step)
#undef KEYWORD
  case TokenKind::l_paren:
    return "`(`";
  case TokenKind::r_paren:
    return "`)`";
  case TokenKind::l_brace:
    return "`{`";
  case TokenKind::r_brace:
    return "`}`";
  case TokenKind::l_square:
    return "`[`";
  case TokenKind::r_square:
    return "`]`";
  case TokenKind::comma:
    return "`,`";
  case TokenKind::colon:
    return "`:`";
  case TokenKind::semicolon:
    return "`;`";
  case TokenKind::dot:
    return "`.`";
  case TokenKind::equal:
    return "`=`";
  case TokenKind::left_arrow:
    return "`<-`";
  case TokenKind::right_arrow:
    return "`->`";
  case TokenKind::plus:
    return "`+`";
  case TokenKind::minus:
    return "`-`";
  case TokenKind::star:
    return "`*`";
  case TokenKind::slash:
    return "`/`";
  case TokenKind::caret:
    return "`^`";
  case TokenKind::at:
    return "`@`";
  case TokenKind::equal_equal:
    return "`==`";
  case TokenKind::not_equal:
    return "`!=`";
  case TokenKind::less:
    return "`<`";
  case TokenKind::less_equal:
    return "`<=`";
  case TokenKind::greater:
    return "`>`";
  case TokenKind::greater_equal:
    return "`>=`";
  }
  return "token";
}
