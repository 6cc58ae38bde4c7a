//===- Frontend.h - Parse and check a .energy file in one call --*- C++ -*-===//
//
// The entry point tools use: parse one SourceMgr buffer and check it.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_FRONTEND_FRONTEND_H
#define ENERGY_FRONTEND_FRONTEND_H

#include "energy/Frontend/AST.h"
#include "energy/Frontend/Checker.h"
#include "energy/Frontend/Diagnostics.h"
#include "energy/Frontend/Parser.h"

namespace energy {
namespace frontend {

/// Parses and checks buffer `bufferId` of `sourceMgr`. Returns the model
/// (possibly partial, for tools that want to show what they could), or null
/// when not even the model header parsed; success means the result is
/// non-null and `diagnostics.hasErrors()` is false. The AST refers into the
/// SourceMgr's buffer, which must outlive it.
std::unique_ptr<ModelSpec>
parseAndCheck(const llvm::SourceMgr &sourceMgr, unsigned bufferId,
              DiagnosticEngine &diagnostics,
              const OptimizerTable &optimizers = getDefaultOptimizerTable());

/// Reads the file `path` ("-" for standard input) into `sourceMgr` and
/// returns its buffer; none with `readError` set when it cannot be read.
std::optional<unsigned> readSourceFile(llvm::StringRef path,
                                       llvm::SourceMgr &sourceMgr,
                                       std::string &readError);

/// Reads the file `path` ("-" for standard input) into `sourceMgr`, then
/// parses and checks it as `parseAndCheck` does. Returns the model only when
/// there were no errors; a file that cannot be read sets `readError`.
std::unique_ptr<ModelSpec> parseAndCheckFile(llvm::StringRef path,
                                             llvm::SourceMgr &sourceMgr,
                                             DiagnosticEngine &diagnostics,
                                             const OptimizerTable &optimizers,
                                             std::string &readError);

} // namespace frontend
} // namespace energy

#endif // ENERGY_FRONTEND_FRONTEND_H
