//===- ExamplesTest.cpp - Every example model parses and checks -----------===//
//
// Iterates over examples/*.energy (one model per file, the models of the
// language reference) and requires zero errors and zero warnings.
//
//===----------------------------------------------------------------------===//

#include "TestSupport.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <doctest/doctest.h>

#include <algorithm>

using namespace energy::frontend;
using namespace energy::frontend::testing;

TEST_CASE("every example model parses and checks without diagnostics") {
  std::vector<std::string> paths;
  std::error_code error;
  for (llvm::sys::fs::directory_iterator it(ENERGY_EXAMPLES_DIR, error), end;
       it != end && !error; it.increment(error))
    if (llvm::sys::path::extension(it->path()) == ".energy")
      paths.push_back(it->path());
  REQUIRE(!error);
  std::sort(paths.begin(), paths.end());
  CHECK(paths.size() >= 14);
  for (const std::string &path : paths) {
    CAPTURE(path);
    auto buffer = llvm::MemoryBuffer::getFile(path);
    REQUIRE(buffer);
    std::unique_ptr<Compilation> compilation =
        compile((*buffer)->getBuffer(), llvm::sys::path::filename(path));
    INFO(compilation->printed);
    REQUIRE(compilation->model);
    CHECK(compilation->diagnostics.getNumErrors() == 0);
    CHECK(compilation->diagnostics.getNumWarnings() == 0);
    // The model is named after its file.
    CHECK(compilation->model->name.str() == llvm::sys::path::stem(path).str());
  }
}
