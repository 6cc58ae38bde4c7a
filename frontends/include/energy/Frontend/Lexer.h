//===- Lexer.h - Tokeniser of the .energy language --------------*- C++ -*-===//
//
// The lexer turns one llvm::SourceMgr buffer into tokens on demand. It never
// fails: bad bytes (stray punctuation, non-ASCII characters, invalid UTF-8,
// NUL bytes) and malformed numbers become `error` tokens, each reported once
// through the DiagnosticEngine.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_FRONTEND_LEXER_H
#define ENERGY_FRONTEND_LEXER_H

#include "energy/Frontend/Token.h"

#include "llvm/ADT/Twine.h"

namespace llvm {
class SourceMgr;
} // namespace llvm

namespace energy {
namespace frontend {

class DiagnosticEngine;

class Lexer {
public:
  /// Lexes buffer `bufferId` of `sourceMgr`.
  Lexer(const llvm::SourceMgr &sourceMgr, unsigned bufferId,
        DiagnosticEngine &diagnostics);

  /// Returns the next token; after the end of the buffer, always `eof`.
  Token lexToken();

  /// Returns the token `ahead` tokens after the next one (0 = the next
  /// token) without consuming anything or reporting errors.
  Token peekToken(unsigned ahead = 0) const;

private:
  Token makeToken(TokenKind kind, const char *tokenStart) const;
  Token makeError(const char *tokenStart, const llvm::Twine &message);
  Token lexIdentifierOrKeyword(const char *tokenStart);
  Token lexNumber(const char *tokenStart);
  Token lexNonAscii(const char *tokenStart);
  void skipComment();

  const char *current;
  const char *bufferEnd;
  DiagnosticEngine &diagnostics;
  bool muted = false;
};

} // namespace frontend
} // namespace energy

#endif // ENERGY_FRONTEND_LEXER_H
