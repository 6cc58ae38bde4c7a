//===- Diagnostics.cpp - Error and warning reporting ----------------------===//
//
// Implements DiagnosticEngine on top of llvm::SourceMgr::PrintMessage.
//
//===----------------------------------------------------------------------===//

#include "energy/Frontend/Diagnostics.h"

#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

using namespace energy::frontend;

DiagnosticEngine::DiagnosticEngine(const llvm::SourceMgr &sourceMgr)
    : sourceMgr(sourceMgr), stream(&llvm::errs()) {}

DiagnosticEngine::~DiagnosticEngine() = default;

void DiagnosticEngine::redirectTo(std::string &output) {
  ownedStream = std::make_unique<llvm::raw_string_ostream>(output);
  stream = ownedStream.get();
}

void DiagnosticEngine::redirectTo(llvm::raw_ostream &newStream) {
  ownedStream.reset();
  stream = &newStream;
}

void DiagnosticEngine::error(llvm::SMLoc loc, const llvm::Twine &message,
                             llvm::ArrayRef<llvm::SMRange> ranges) {
  report(Severity::Error, loc, message, ranges);
}

void DiagnosticEngine::warning(llvm::SMLoc loc, const llvm::Twine &message,
                               llvm::ArrayRef<llvm::SMRange> ranges) {
  report(Severity::Warning, loc, message, ranges);
}

void DiagnosticEngine::note(llvm::SMLoc loc, const llvm::Twine &message,
                            llvm::ArrayRef<llvm::SMRange> ranges) {
  report(Severity::Note, loc, message, ranges);
}

static llvm::SourceMgr::DiagKind toDiagKind(Severity severity) {
  switch (severity) {
  case Severity::Error:
    return llvm::SourceMgr::DK_Error;
  case Severity::Warning:
    return llvm::SourceMgr::DK_Warning;
  case Severity::Note:
    return llvm::SourceMgr::DK_Note;
  }
  return llvm::SourceMgr::DK_Error;
}

void DiagnosticEngine::report(Severity severity, llvm::SMLoc loc,
                              const llvm::Twine &message,
                              llvm::ArrayRef<llvm::SMRange> ranges) {
  if (severity == Severity::Error) {
    ++numErrors;
    suppressingNotes = numErrors > kErrorLimit;
    if (numErrors == kErrorLimit + 1) {
      *stream << "error: too many errors, stopping here\n";
      stream->flush();
    }
  } else if (severity == Severity::Warning) {
    if (warningsIgnored) {
      suppressingNotes = true;
      return;
    }
    ++numWarnings;
    suppressingNotes = numErrors > kErrorLimit;
  }
  if (suppressingNotes)
    return;

  std::string text = message.str();
  Diagnostic diagnostic{severity, 0, 0, text};
  if (loc.isValid() && sourceMgr.FindBufferContainingLoc(loc) != 0) {
    auto [line, column] = sourceMgr.getLineAndColumn(loc);
    diagnostic.line = line;
    diagnostic.column = column;
    // Only keep ranges inside the same buffer; SourceMgr asserts otherwise.
    llvm::SmallVector<llvm::SMRange, 2> validRanges;
    for (llvm::SMRange range : ranges)
      if (range.isValid() && sourceMgr.FindBufferContainingLoc(range.Start) ==
                                 sourceMgr.FindBufferContainingLoc(loc))
        validRanges.push_back(range);
    sourceMgr.PrintMessage(*stream, loc, toDiagKind(severity), text,
                           validRanges, {}, /*ShowColors=*/false);
  } else {
    sourceMgr.PrintMessage(*stream, llvm::SMLoc(), toDiagKind(severity), text,
                           {}, {}, /*ShowColors=*/false);
  }
  stream->flush();
  reported.push_back(std::move(diagnostic));
}
