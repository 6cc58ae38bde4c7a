//===- Frontend.cpp - Parse and check a .energy file in one call ----------===//
//
// Glue between the parser and the checker.
//
//===----------------------------------------------------------------------===//

#include "energy/Frontend/Frontend.h"

using namespace energy::frontend;

std::unique_ptr<Model> energy::frontend::parseAndCheck(
    const llvm::SourceMgr &sourceMgr, unsigned bufferId,
    DiagnosticEngine &diagnostics, const OptimizerTable &optimizers) {
  Parser parser(sourceMgr, bufferId, diagnostics);
  std::unique_ptr<Model> model = parser.parseModel();
  // Check a model even after syntax errors: the parser recovered at
  // declaration boundaries, so what it kept is well-formed.
  if (model)
    checkModel(*model, diagnostics, optimizers);
  return model;
}
