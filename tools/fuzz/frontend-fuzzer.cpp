//===- frontend-fuzzer.cpp - libFuzzer target of the .energy front end ----===//
//
// Feeds each input, as the bytes of one .energy file, through the lexer,
// parser and checker (parseAndCheck), with the diagnostics printed into a
// string so that their formatting (source line, caret, ranges) runs too.
// Findings are crashes, sanitizer reports, hangs (-timeout) and a broken
// contract of parseAndCheck: a null model without an error.
//
// Build and run: make fuzz (see docs/tools.md).
//
//===----------------------------------------------------------------------===//

#include "energy/Frontend/Frontend.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

using namespace energy::frontend;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef source(reinterpret_cast<const char *>(data), size);
  llvm::SourceMgr sourceMgr;
  unsigned bufferId = sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(source, "fuzz.energy"),
      llvm::SMLoc());

  DiagnosticEngine diagnostics(sourceMgr);
  std::string printed;
  diagnostics.redirectTo(printed);

  std::unique_ptr<ModelSpec> model =
      parseAndCheck(sourceMgr, bufferId, diagnostics);

  // parseAndCheck returns null only when the model header did not parse,
  // which is always reported.
  if (!model && !diagnostics.hasErrors()) {
    std::fprintf(stderr, "frontend-fuzzer: null model without an error\n");
    std::abort();
  }
  return 0;
}
