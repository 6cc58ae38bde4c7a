//===- TestSupport.cpp - Helpers shared by the front-end tests ------------===//
//
// Implementation of the compile-and-capture helpers.
//
//===----------------------------------------------------------------------===//

#include "TestSupport.h"

#include "llvm/Support/MemoryBuffer.h"

using namespace energy::frontend;
using namespace energy::frontend::testing;

static std::string format(const Diagnostic &diagnostic) {
  return std::to_string(diagnostic.line) + ":" +
         std::to_string(diagnostic.column) + ": " + diagnostic.message;
}

static std::string firstOf(const Compilation &compilation, Severity severity) {
  for (const Diagnostic &diagnostic : compilation.diagnostics.getDiagnostics())
    if (diagnostic.severity == severity)
      return format(diagnostic);
  return "";
}

std::string Compilation::firstError() const {
  return firstOf(*this, Severity::Error);
}

std::string Compilation::firstWarning() const {
  return firstOf(*this, Severity::Warning);
}

std::string Compilation::allErrors() const {
  std::string result;
  for (const Diagnostic &diagnostic : diagnostics.getDiagnostics())
    if (diagnostic.severity == Severity::Error)
      result += format(diagnostic) + "\n";
  return result;
}

static std::unique_ptr<Compilation> load(llvm::StringRef source,
                                         llvm::StringRef name) {
  auto compilation = std::make_unique<Compilation>();
  compilation->sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(source, name), llvm::SMLoc());
  compilation->diagnostics.redirectTo(compilation->printed);
  return compilation;
}

std::unique_ptr<Compilation>
energy::frontend::testing::compile(llvm::StringRef source,
                                   llvm::StringRef name) {
  std::unique_ptr<Compilation> compilation = load(source, name);
  compilation->model =
      parseAndCheck(compilation->sourceMgr, 1, compilation->diagnostics);
  return compilation;
}

std::unique_ptr<Compilation>
energy::frontend::testing::parseOnly(llvm::StringRef source) {
  std::unique_ptr<Compilation> compilation = load(source, "test.energy");
  Parser parser(compilation->sourceMgr, 1, compilation->diagnostics);
  compilation->model = parser.parseModel();
  return compilation;
}

std::string energy::frontend::testing::parseExpression(llvm::StringRef source) {
  std::unique_ptr<Compilation> compilation = load(source, "expr.energy");
  Parser parser(compilation->sourceMgr, 1, compilation->diagnostics);
  ExprPtr expr = parser.parseStandaloneExpression();
  if (!expr)
    return "<error: " + compilation->firstError() + ">";
  return printExpr(*expr);
}

std::string energy::frontend::testing::inModel(llvm::StringRef declarations) {
  return ("model m {\n" + declarations + "\n}\n").str();
}
