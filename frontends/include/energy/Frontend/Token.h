//===- Token.h - Tokens of the .energy language -----------------*- C++ -*-===//
//
// A token is a kind plus a range into the llvm::SourceMgr buffer it was lexed
// from, so that every diagnostic can point at the exact source text. Tokens
// own no memory: the SourceMgr must outlive them.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_FRONTEND_TOKEN_H
#define ENERGY_FRONTEND_TOKEN_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SMLoc.h"

namespace energy {
namespace frontend {

/// Every kind of token. Keywords are spelled `kw_<keyword>`.
enum class TokenKind {
  eof,
  error, ///< A bad byte or malformed number; the lexer already reported it.
  identifier,
  number,

  // Keywords.
  kw_model,
  kw_dim,
  kw_input,
  kw_param,
  kw_state,
  kw_const,
  kw_let,
  kw_fn,
  kw_energy,
  kw_loss,
  kw_output,
  kw_dynamics,
  kw_steps,
  kw_until,
  kw_order,
  kw_sequential,
  kw_sum,
  kw_mean,
  kw_lse,
  kw_max,
  kw_where,
  kw_temp,
  kw_and,
  kw_or,
  kw_step,

  // Punctuation.
  l_paren,
  r_paren,
  l_brace,
  r_brace,
  l_square,
  r_square,
  comma,
  colon,
  semicolon,
  dot,
  equal,       ///< `=`
  left_arrow,  ///< `<-`
  right_arrow, ///< `->`
  plus,
  minus,
  star,
  slash,
  caret,
  at,
  equal_equal,
  not_equal,
  less,
  less_equal,
  greater,
  greater_equal,
};

/// A lexed token: its kind and the source text it covers.
class Token {
public:
  Token() = default;
  Token(TokenKind kind, llvm::StringRef spelling)
      : kind(kind), spelling(spelling) {}

  TokenKind getKind() const { return kind; }
  bool is(TokenKind k) const { return kind == k; }
  bool isNot(TokenKind k) const { return kind != k; }
  bool isKeyword() const;

  /// The exact source text of the token (empty at end of file).
  llvm::StringRef getSpelling() const { return spelling; }
  llvm::SMLoc getLoc() const {
    return llvm::SMLoc::getFromPointer(spelling.data());
  }
  llvm::SMLoc getEndLoc() const {
    return llvm::SMLoc::getFromPointer(spelling.data() + spelling.size());
  }
  llvm::SMRange getRange() const { return {getLoc(), getEndLoc()}; }

private:
  TokenKind kind = TokenKind::eof;
  llvm::StringRef spelling;
};

/// How a token kind is written in diagnostics: "`model`", "`<-`",
/// "identifier", "end of file".
llvm::StringRef getTokenKindDescription(TokenKind kind);

} // namespace frontend
} // namespace energy

#endif // ENERGY_FRONTEND_TOKEN_H
