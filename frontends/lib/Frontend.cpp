//===- Frontend.cpp - Parse and check a .energy file in one call ----------===//
//
// Glue between the parser and the checker.
//
//===----------------------------------------------------------------------===//

#include "energy/Frontend/Frontend.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

using namespace energy::frontend;

std::unique_ptr<ModelSpec> energy::frontend::parseAndCheck(
    const llvm::SourceMgr &sourceMgr, unsigned bufferId,
    DiagnosticEngine &diagnostics, const OptimizerTable &optimizers) {
  Parser parser(sourceMgr, bufferId, diagnostics);
  std::unique_ptr<ModelSpec> model = parser.parseModel();
  // Check a model even after syntax errors: the parser recovered at
  // declaration boundaries, so what it kept is well-formed.
  if (model)
    checkModel(*model, diagnostics, optimizers);
  return model;
}

std::optional<unsigned> energy::frontend::readSourceFile(
    llvm::StringRef path, llvm::SourceMgr &sourceMgr, std::string &readError) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFileOrSTDIN(path, /*IsText=*/true);
  if (std::error_code error = file.getError()) {
    readError = "cannot read '" + path.str() + "': " + error.message();
    return std::nullopt;
  }
  return sourceMgr.AddNewSourceBuffer(std::move(*file), llvm::SMLoc());
}

std::unique_ptr<ModelSpec> energy::frontend::parseAndCheckFile(
    llvm::StringRef path, llvm::SourceMgr &sourceMgr,
    DiagnosticEngine &diagnostics, const OptimizerTable &optimizers,
    std::string &readError) {
  std::optional<unsigned> buffer = readSourceFile(path, sourceMgr, readError);
  if (!buffer)
    return nullptr;
  std::unique_ptr<ModelSpec> model =
      parseAndCheck(sourceMgr, *buffer, diagnostics, optimizers);
  if (diagnostics.hasErrors())
    return nullptr;
  return model;
}
