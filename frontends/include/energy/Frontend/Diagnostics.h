//===- Diagnostics.h - Error and warning reporting --------------*- C++ -*-===//
//
// Every message of the front end goes through one DiagnosticEngine. It
// prints in the clang style (`file:line:col: error: message`, the source
// line, and a caret or range under it) through llvm::SourceMgr, counts errors
// and warnings, keeps a structured record of each diagnostic for tests, and
// can be redirected into a string. Library code never prints otherwise.
//
// Message conventions: lowercase, source tokens in backticks, no trailing
// period; related places are attached as notes ("see previous definition
// here").
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_FRONTEND_DIAGNOSTICS_H
#define ENERGY_FRONTEND_DIAGNOSTICS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/SMLoc.h"

#include <memory>
#include <string>
#include <vector>

namespace llvm {
class SourceMgr;
class raw_ostream;
} // namespace llvm

namespace energy {
namespace frontend {

enum class Severity { Error, Warning, Note };

/// One reported diagnostic, with its position resolved to line and column
/// (both 1-based; 0 when the location is unknown).
struct Diagnostic {
  Severity severity;
  unsigned line;
  unsigned column;
  std::string message;
};

class DiagnosticEngine {
public:
  /// Reports against `sourceMgr`; prints to llvm::errs() until redirected.
  explicit DiagnosticEngine(const llvm::SourceMgr &sourceMgr);
  ~DiagnosticEngine();

  void error(llvm::SMLoc loc, const llvm::Twine &message,
             llvm::ArrayRef<llvm::SMRange> ranges = {});
  void warning(llvm::SMLoc loc, const llvm::Twine &message,
               llvm::ArrayRef<llvm::SMRange> ranges = {});
  /// A note belongs to the preceding error or warning; it is dropped when
  /// that diagnostic was suppressed by the error limit.
  void note(llvm::SMLoc loc, const llvm::Twine &message,
            llvm::ArrayRef<llvm::SMRange> ranges = {});

  /// Drops later warnings (and their notes) while set: for sources a tool
  /// wrote itself (the rank's model of --shard), whose unused declarations
  /// say nothing about the user's model.
  void ignoreWarnings(bool ignore) { warningsIgnored = ignore; }

  unsigned getNumErrors() const { return numErrors; }
  unsigned getNumWarnings() const { return numWarnings; }
  bool hasErrors() const { return numErrors != 0; }

  /// All diagnostics reported so far, in order (notes included).
  const std::vector<Diagnostic> &getDiagnostics() const { return reported; }

  /// Sends the printed form of every later diagnostic to `output` (appended)
  /// instead of stderr.
  void redirectTo(std::string &output);
  /// Sends the printed form of every later diagnostic to `stream`.
  void redirectTo(llvm::raw_ostream &stream);

  /// After this many errors, further errors and their notes are counted but
  /// not printed or recorded; one final "too many errors" line is emitted.
  static constexpr unsigned kErrorLimit = 50;

private:
  void report(Severity severity, llvm::SMLoc loc, const llvm::Twine &message,
              llvm::ArrayRef<llvm::SMRange> ranges);

  const llvm::SourceMgr &sourceMgr;
  llvm::raw_ostream *stream;
  std::unique_ptr<llvm::raw_ostream> ownedStream;
  std::vector<Diagnostic> reported;
  unsigned numErrors = 0;
  unsigned numWarnings = 0;
  bool suppressingNotes = false;
  bool warningsIgnored = false;
};

} // namespace frontend
} // namespace energy

#endif // ENERGY_FRONTEND_DIAGNOSTICS_H
