//===- TestSupport.h - Helpers shared by the front-end tests ----*- C++ -*-===//
//
// Compiles a source string with the front end and captures its
// diagnostics, so tests can assert on exact messages and positions.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TESTS_UNIT_FRONTEND_TESTSUPPORT_H
#define ENERGY_TESTS_UNIT_FRONTEND_TESTSUPPORT_H

#include "energy/Frontend/Frontend.h"

#include "llvm/Support/SourceMgr.h"

#include <memory>
#include <string>

namespace energy {
namespace frontend {
namespace testing {

/// A source buffer, its diagnostics and the model built from it.
struct Compilation {
  llvm::SourceMgr sourceMgr;
  DiagnosticEngine diagnostics{sourceMgr};
  std::string printed; ///< everything the DiagnosticEngine printed
  std::unique_ptr<ModelSpec> model;

  /// "line:col: message" of the first error, or "" when there is none.
  std::string firstError() const;
  /// "line:col: message" of the first warning, or "".
  std::string firstWarning() const;
  /// All errors, one "line:col: message" per line.
  std::string allErrors() const;
};

/// Parses and checks `source` as file `name`.
std::unique_ptr<Compilation> compile(llvm::StringRef source,
                                     llvm::StringRef name = "test.energy");

/// Parses only (no checking).
std::unique_ptr<Compilation> parseOnly(llvm::StringRef source);

/// Parses `source` as a standalone expression and prints it as an
/// S-expression, or returns "<error: first message>".
std::string parseExpression(llvm::StringRef source);

/// Wraps declarations into `model m { ... }`.
std::string inModel(llvm::StringRef declarations);

} // namespace testing
} // namespace frontend
} // namespace energy

#endif // ENERGY_TESTS_UNIT_FRONTEND_TESTSUPPORT_H
