//===- Parser.h - Recursive-descent parser of .energy files -----*- C++ -*-===//
//
// Builds a ModelSpec AST from one SourceMgr buffer. Syntax errors are reported
// through the DiagnosticEngine; the parser then skips to the end of the
// declaration or statement (`;` or `}`) and continues, so one run reports
// several errors. Expressions deeper than `kMaxNestingDepth` are rejected
// with an error instead of exhausting the stack.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_FRONTEND_PARSER_H
#define ENERGY_FRONTEND_PARSER_H

#include "energy/Frontend/AST.h"
#include "energy/Frontend/Lexer.h"

#include "llvm/ADT/Twine.h"

#include <memory>

namespace energy {
namespace frontend {

class Parser {
public:
  static constexpr unsigned kMaxNestingDepth = 256;

  Parser(const llvm::SourceMgr &sourceMgr, unsigned bufferId,
         DiagnosticEngine &diagnostics);

  /// Parses the whole buffer. Returns null only when no model header could
  /// be parsed; otherwise returns the (possibly partial) model. Check
  /// `DiagnosticEngine::hasErrors()` for success.
  std::unique_ptr<ModelSpec> parseModel();

  /// Parses a single expression followed by end of file (for tests and
  /// tools); null on error.
  ExprPtr parseStandaloneExpression();

private:
  // Token handling.
  void consumeToken();
  bool consumeIf(TokenKind kind);
  /// Consumes a `kind` token or reports "expected <what>, found <token>".
  bool expect(TokenKind kind, const llvm::Twine &context = "");
  bool expectIdentifier(llvm::StringRef &name, llvm::SMRange &range,
                        const llvm::Twine &what);
  void reportUnexpected(const llvm::Twine &expected);
  /// Skips to just after the next `;`, or to (not past) a `}` closing the
  /// current block, or to end of file.
  void skipToStatementEnd();
  llvm::SMLoc previousEnd() const { return previousTokenEnd; }

  // Declarations.
  bool parseDeclaration(ModelSpec &model);
  bool parseDimDecl(ModelSpec &model);
  bool parseTensorDecl(ModelSpec &model, TensorRole role);
  bool parseConstDecl(ModelSpec &model);
  bool parseLetDecl(ModelSpec &model);
  bool parseFnDecl(ModelSpec &model);
  bool parseTermDecl(ModelSpec &model);
  bool parseOutputDecl(ModelSpec &model);
  bool parseDynamicsBlock(ModelSpec &model);
  bool parseDynamicsStatement(DynamicsBlock &block);
  bool parseUpdateRule(DynamicsBlock &block);
  bool parseStepsClause(DynamicsBlock &block);
  bool parseBackwardClause(DynamicsBlock &block);
  bool parseShape(std::vector<DimRef> &dims);
  bool parseInitializer(Initializer &initializer);
  bool parseIndexDomain(IndexDomain &domain, TokenKind close,
                        ExprPtr *temperature);

  // Expressions.
  ExprPtr parseExpression();
  ExprPtr parseBinary(int minPrecedence);
  ExprPtr parseUnary();
  ExprPtr parsePower();
  ExprPtr parsePostfix();
  ExprPtr parsePrimary();
  ExprPtr parseReduction();
  ExprPtr parseCall(llvm::StringRef callee, llvm::SMRange calleeRange);
  bool parseExpressionList(std::vector<ExprPtr> &list, TokenKind close);
  bool checkDepth(unsigned depth, llvm::SMLoc loc);

  Lexer lexer;
  DiagnosticEngine &diagnostics;
  Token token;
  llvm::SMLoc previousTokenEnd;
  unsigned nestingDepth = 0;

  friend class NestingGuard;
};

} // namespace frontend
} // namespace energy

#endif // ENERGY_FRONTEND_PARSER_H
