//===- LexerTest.cpp - Tests of the .energy lexer -------------------------===//
//
// Token kinds and spellings, numbers, the `<-` arrow, comments, and bad
// bytes turned into error tokens.
//
//===----------------------------------------------------------------------===//

#include "TestSupport.h"

#include "energy/Frontend/Lexer.h"

#include "llvm/Support/MemoryBuffer.h"

#include <doctest/doctest.h>

using namespace energy::frontend;
using namespace energy::frontend::testing;

namespace {
/// Lexes `source` to the end and returns "kind:spelling" per token, plus
/// the diagnostics.
struct Lexed {
  std::vector<std::pair<TokenKind, std::string>> tokens;
  std::string firstError;
  unsigned numErrors = 0;
};

Lexed lexAll(llvm::StringRef source) {
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(source, "lex.energy"),
      llvm::SMLoc());
  DiagnosticEngine diagnostics(sourceMgr);
  std::string printed;
  diagnostics.redirectTo(printed);
  Lexer lexer(sourceMgr, 1, diagnostics);
  Lexed result;
  for (Token token = lexer.lexToken(); token.isNot(TokenKind::eof);
       token = lexer.lexToken())
    result.tokens.push_back({token.getKind(), token.getSpelling().str()});
  result.numErrors = diagnostics.getNumErrors();
  for (const Diagnostic &diagnostic : diagnostics.getDiagnostics()) {
    result.firstError = std::to_string(diagnostic.line) + ":" +
                        std::to_string(diagnostic.column) + ": " +
                        diagnostic.message;
    break;
  }
  return result;
}
} // namespace

TEST_CASE("keywords and identifiers") {
  Lexed lexed = lexAll("model dim input param state const let fn energy "
                       "loss output dynamics steps until order sequential sum "
                       "mean lse max where temp and or step models _x1 T");
  REQUIRE(lexed.tokens.size() == 28);
  CHECK(lexed.tokens[0].first == TokenKind::kw_model);
  CHECK(lexed.tokens[9].first == TokenKind::kw_loss);
  CHECK(lexed.tokens[24].first == TokenKind::kw_step);
  CHECK(lexed.tokens[25].first == TokenKind::identifier);
  CHECK(lexed.tokens[26].first == TokenKind::identifier);
  CHECK(lexed.tokens[26].second == "_x1");
  CHECK(lexed.numErrors == 0);
}

TEST_CASE("numbers") {
  Lexed lexed = lexAll("3 0.5 1e-4 2E+3 12.25e2");
  REQUIRE(lexed.tokens.size() == 5);
  for (auto &token : lexed.tokens)
    CHECK(token.first == TokenKind::number);
  CHECK(lexed.tokens[2].second == "1e-4");
  CHECK(lexed.numErrors == 0);
}

TEST_CASE("malformed numbers are error tokens") {
  CHECK(lexAll(".5").firstError ==
        "1:1: a number must start with a digit: write `0.5`");
  CHECK(lexAll("x = 1.;").firstError ==
        "1:5: expected a digit after `.` in number `1.`");
  CHECK(lexAll("1e+").firstError ==
        "1:1: expected digits in the exponent of `1e+`");
  CHECK(lexAll("12abc").firstError == "1:1: invalid number `12abc`");
  CHECK(lexAll("12abc").tokens[0].first == TokenKind::error);
}

TEST_CASE("operators, and `<-` always lexes as the arrow") {
  Lexed lexed = lexAll("p<-1 p < -1 <= >= == != -> @ ^ . ; , : [ ] ( ) { }");
  std::vector<TokenKind> kinds;
  for (auto &token : lexed.tokens)
    kinds.push_back(token.first);
  std::vector<TokenKind> expected = {
      TokenKind::identifier,  TokenKind::left_arrow, TokenKind::number,
      TokenKind::identifier,  TokenKind::less,       TokenKind::minus,
      TokenKind::number,      TokenKind::less_equal, TokenKind::greater_equal,
      TokenKind::equal_equal, TokenKind::not_equal,  TokenKind::right_arrow,
      TokenKind::at,          TokenKind::caret,      TokenKind::dot,
      TokenKind::semicolon,   TokenKind::comma,      TokenKind::colon,
      TokenKind::l_square,    TokenKind::r_square,   TokenKind::l_paren,
      TokenKind::r_paren,     TokenKind::l_brace,    TokenKind::r_brace};
  CHECK(kinds == expected);
}

TEST_CASE("comments run to the end of the line and may hold UTF-8") {
  Lexed lexed = lexAll("a # comment with ∑ and é\nb");
  REQUIRE(lexed.tokens.size() == 2);
  CHECK(lexed.tokens[1].second == "b");
  CHECK(lexed.numErrors == 0);
}

TEST_CASE("bad bytes become error tokens with a diagnostic") {
  CHECK(lexAll("a $ b").firstError == "1:3: unexpected character `$`");
  CHECK(lexAll("a ! b").firstError ==
        "1:3: unexpected character `!`; did you mean `!=`?");
  CHECK(lexAll("\xff").firstError == "1:1: invalid UTF-8 byte 0xff");
  CHECK(lexAll("# \xc3\x28\nx").firstError == "1:3: invalid UTF-8 byte 0xc3");
  CHECK(lexAll("x \xce\xbb").firstError ==
        "1:3: unexpected non-ASCII character `\xce\xbb` outside a comment");
  CHECK(lexAll(llvm::StringRef("a\0b", 3)).firstError ==
        "1:2: unexpected control byte 0x00");
  Lexed lexed = lexAll("a \x80\x80 b");
  CHECK(lexed.numErrors == 2);
  CHECK(lexed.tokens.back().second == "b");
}
