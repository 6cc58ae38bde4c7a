//===- Lexer.cpp - Tokeniser of the .energy language ----------------------===//
//
// A hand-written lexer over a null-terminated SourceMgr buffer. Every bad
// byte becomes an `error` token with a diagnostic, so the parser sees a
// well-formed token stream whatever the input.
//
//===----------------------------------------------------------------------===//

#include "energy/Frontend/Lexer.h"
#include "energy/Frontend/Diagnostics.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/ConvertUTF.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

using namespace energy::frontend;

Lexer::Lexer(const llvm::SourceMgr &sourceMgr, unsigned bufferId,
             DiagnosticEngine &diagnostics)
    : diagnostics(diagnostics) {
  const llvm::MemoryBuffer *buffer = sourceMgr.getMemoryBuffer(bufferId);
  current = buffer->getBufferStart();
  bufferEnd = buffer->getBufferEnd();
}

Token Lexer::makeToken(TokenKind kind, const char *tokenStart) const {
  return Token(kind, llvm::StringRef(tokenStart, current - tokenStart));
}

Token Lexer::makeError(const char *tokenStart, const llvm::Twine &message) {
  Token token = makeToken(TokenKind::error, tokenStart);
  if (!muted)
    diagnostics.error(token.getLoc(), message, {token.getRange()});
  return token;
}

Token Lexer::peekToken(unsigned ahead) const {
  Lexer copy = *this;
  copy.muted = true;
  Token result = copy.lexToken();
  for (unsigned i = 0; i < ahead; ++i)
    result = copy.lexToken();
  return result;
}

static bool isIdentifierStart(char c) { return llvm::isAlpha(c) || c == '_'; }

static bool isIdentifierBody(char c) { return llvm::isAlnum(c) || c == '_'; }

Token Lexer::lexToken() {
  while (true) {
    if (current >= bufferEnd)
      return Token(TokenKind::eof, llvm::StringRef(bufferEnd, 0));
    const char *tokenStart = current;
    char c = *current++;
    switch (c) {
    case ' ':
    case '\t':
    case '\n':
    case '\r':
      continue;
    case '#':
      skipComment();
      continue;
    case '(':
      return makeToken(TokenKind::l_paren, tokenStart);
    case ')':
      return makeToken(TokenKind::r_paren, tokenStart);
    case '{':
      return makeToken(TokenKind::l_brace, tokenStart);
    case '}':
      return makeToken(TokenKind::r_brace, tokenStart);
    case '[':
      return makeToken(TokenKind::l_square, tokenStart);
    case ']':
      return makeToken(TokenKind::r_square, tokenStart);
    case ',':
      return makeToken(TokenKind::comma, tokenStart);
    case ':':
      return makeToken(TokenKind::colon, tokenStart);
    case ';':
      return makeToken(TokenKind::semicolon, tokenStart);
    case '+':
      return makeToken(TokenKind::plus, tokenStart);
    case '*':
      return makeToken(TokenKind::star, tokenStart);
    case '/':
      return makeToken(TokenKind::slash, tokenStart);
    case '^':
      return makeToken(TokenKind::caret, tokenStart);
    case '@':
      return makeToken(TokenKind::at, tokenStart);
    case '.':
      if (llvm::isDigit(*current)) {
        while (current < bufferEnd && llvm::isDigit(*current))
          ++current;
        return makeError(tokenStart,
                         "a number must start with a digit: write `0" +
                             llvm::StringRef(tokenStart, current - tokenStart) +
                             "`");
      }
      return makeToken(TokenKind::dot, tokenStart);
    case '-':
      if (*current == '>') {
        ++current;
        return makeToken(TokenKind::right_arrow, tokenStart);
      }
      return makeToken(TokenKind::minus, tokenStart);
    case '=':
      if (*current == '=') {
        ++current;
        return makeToken(TokenKind::equal_equal, tokenStart);
      }
      return makeToken(TokenKind::equal, tokenStart);
    case '!':
      if (*current == '=') {
        ++current;
        return makeToken(TokenKind::not_equal, tokenStart);
      }
      return makeError(tokenStart, "unexpected character `!`; did you mean "
                                   "`!=`?");
    case '<':
      if (*current == '-') {
        ++current;
        return makeToken(TokenKind::left_arrow, tokenStart);
      }
      if (*current == '=') {
        ++current;
        return makeToken(TokenKind::less_equal, tokenStart);
      }
      return makeToken(TokenKind::less, tokenStart);
    case '>':
      if (*current == '=') {
        ++current;
        return makeToken(TokenKind::greater_equal, tokenStart);
      }
      return makeToken(TokenKind::greater, tokenStart);
    default:
      break;
    }
    if (isIdentifierStart(c))
      return lexIdentifierOrKeyword(tokenStart);
    if (llvm::isDigit(c))
      return lexNumber(tokenStart);
    if (static_cast<unsigned char>(c) >= 0x80)
      return lexNonAscii(tokenStart);
    if (llvm::isPrint(c))
      return makeError(tokenStart,
                       "unexpected character `" + llvm::Twine(c) + "`");
    std::string hex;
    llvm::raw_string_ostream(hex)
        << llvm::format_hex(static_cast<unsigned char>(c), 4);
    return makeError(tokenStart, "unexpected control byte " + hex);
  }
}

void Lexer::skipComment() {
  // Comments may hold any valid UTF-8; invalid UTF-8 is still reported,
  // because a tool reading the file as text could mangle it.
  while (current < bufferEnd && *current != '\n') {
    unsigned char byte = static_cast<unsigned char>(*current);
    if (byte < 0x80) {
      ++current;
      continue;
    }
    const char *sequenceStart = current;
    unsigned length = llvm::getNumBytesForUTF8(byte);
    if (length <= 1 || current + length > bufferEnd ||
        !llvm::isLegalUTF8Sequence(
            reinterpret_cast<const llvm::UTF8 *>(current),
            reinterpret_cast<const llvm::UTF8 *>(current + length))) {
      ++current;
      std::string hex;
      llvm::raw_string_ostream(hex) << llvm::format_hex(byte, 4);
      Token token = makeToken(TokenKind::error, sequenceStart);
      if (!muted)
        diagnostics.error(token.getLoc(), "invalid UTF-8 byte " + hex);
      continue;
    }
    current += length;
  }
}

Token Lexer::lexNonAscii(const char *tokenStart) {
  unsigned char byte = static_cast<unsigned char>(*tokenStart);
  unsigned length = llvm::getNumBytesForUTF8(byte);
  if (length > 1 && tokenStart + length <= bufferEnd &&
      llvm::isLegalUTF8Sequence(
          reinterpret_cast<const llvm::UTF8 *>(tokenStart),
          reinterpret_cast<const llvm::UTF8 *>(tokenStart + length))) {
    current = tokenStart + length;
    return makeError(tokenStart, "unexpected non-ASCII character `" +
                                     llvm::StringRef(tokenStart, length) +
                                     "` outside a comment");
  }
  std::string hex;
  llvm::raw_string_ostream(hex) << llvm::format_hex(byte, 4);
  // Keep the token one byte long: the caret line must not split a sequence.
  current = tokenStart + 1;
  Token token = makeToken(TokenKind::error, tokenStart);
  if (!muted)
    diagnostics.error(token.getLoc(), "invalid UTF-8 byte " + hex);
  return token;
}

Token Lexer::lexIdentifierOrKeyword(const char *tokenStart) {
  while (current < bufferEnd && isIdentifierBody(*current))
    ++current;
  llvm::StringRef spelling(tokenStart, current - tokenStart);
  TokenKind kind = llvm::StringSwitch<TokenKind>(spelling)
                       .Case("model", TokenKind::kw_model)
                       .Case("dim", TokenKind::kw_dim)
                       .Case("input", TokenKind::kw_input)
                       .Case("param", TokenKind::kw_param)
                       .Case("state", TokenKind::kw_state)
                       .Case("const", TokenKind::kw_const)
                       .Case("let", TokenKind::kw_let)
                       .Case("fn", TokenKind::kw_fn)
                       .Case("energy", TokenKind::kw_energy)
                       .Case("loss", TokenKind::kw_loss)
                       .Case("output", TokenKind::kw_output)
                       .Case("dynamics", TokenKind::kw_dynamics)
                       .Case("steps", TokenKind::kw_steps)
                       .Case("until", TokenKind::kw_until)
                       .Case("order", TokenKind::kw_order)
                       .Case("sequential", TokenKind::kw_sequential)
                       .Case("sum", TokenKind::kw_sum)
                       .Case("mean", TokenKind::kw_mean)
                       .Case("lse", TokenKind::kw_lse)
                       .Case("max", TokenKind::kw_max)
                       .Case("where", TokenKind::kw_where)
                       .Case("temp", TokenKind::kw_temp)
                       .Case("and", TokenKind::kw_and)
                       .Case("or", TokenKind::kw_or)
                       .Case("step", TokenKind::kw_step)
                       .Default(TokenKind::identifier);
  return Token(kind, spelling);
}

// number ::= digit+ (`.` digit+)? ([eE] [+-]? digit+)?
Token Lexer::lexNumber(const char *tokenStart) {
  auto skipDigits = [&] {
    while (current < bufferEnd && llvm::isDigit(*current))
      ++current;
  };
  skipDigits();
  if (*current == '.' && current < bufferEnd) {
    if (!llvm::isDigit(current[1])) {
      ++current;
      return makeError(tokenStart,
                       "expected a digit after `.` in number `" +
                           llvm::StringRef(tokenStart, current - tokenStart) +
                           "`");
    }
    ++current;
    skipDigits();
  }
  if (current < bufferEnd && (*current == 'e' || *current == 'E')) {
    const char *exponent = current + 1;
    if (*exponent == '+' || *exponent == '-')
      ++exponent;
    if (!llvm::isDigit(*exponent)) {
      current = exponent;
      return makeError(tokenStart,
                       "expected digits in the exponent of `" +
                           llvm::StringRef(tokenStart, current - tokenStart) +
                           "`");
    }
    current = exponent;
    skipDigits();
  }
  if (current < bufferEnd && isIdentifierStart(*current)) {
    while (current < bufferEnd && isIdentifierBody(*current))
      ++current;
    return makeError(tokenStart,
                     "invalid number `" +
                         llvm::StringRef(tokenStart, current - tokenStart) +
                         "`");
  }
  return makeToken(TokenKind::number, tokenStart);
}
