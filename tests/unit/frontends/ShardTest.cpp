//===- ShardTest.cpp - The rank's model of every model along every dim ----===//
//
// energyc --shard's rewrite over examples/ and the zoo, along each dim of
// each model (run under ASan in make test-sanitized), gathered and on a
// ring: it either reports an error at a construct of the model, or gives a
// rank's model (and a ring's block model) that checks without errors and
// declares the copies it reads.
//
//===----------------------------------------------------------------------===//

#include "energy/Frontend/Shard.h"
#include "energy/Frontend/Frontend.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <doctest/doctest.h>

#include <algorithm>

using namespace energy::frontend;

namespace {
std::vector<std::string> modelsIn(const char *directory) {
  std::vector<std::string> paths;
  std::error_code error;
  for (llvm::sys::fs::directory_iterator it(directory, error), end;
       it != end && !error; it.increment(error))
    if (llvm::sys::path::extension(it->path()) == ".energy")
      paths.push_back(it->path());
  std::sort(paths.begin(), paths.end());
  return paths;
}
} // namespace

TEST_CASE("every model sharded along every dim: a rank's model or an error") {
  std::vector<std::string> paths = modelsIn(ENERGY_EXAMPLES_DIR);
  std::vector<std::string> zoo = modelsIn(ENERGY_ZOO_DIR);
  CHECK(zoo.size() >= 15);
  paths.insert(paths.end(), zoo.begin(), zoo.end());
  int rewritten = 0, refused = 0, ringRewritten = 0, ringRefused = 0;
  for (const std::string &path : paths) {
    // The dims, from the model as written.
    llvm::SourceMgr sourceMgr;
    DiagnosticEngine quiet(sourceMgr);
    std::string printed, readError;
    quiet.redirectTo(printed);
    std::unique_ptr<ModelSpec> model = parseAndCheckFile(
        path, sourceMgr, quiet, getDefaultOptimizerTable(), readError);
    REQUIRE(model);
    for (const DeclPtr &decl : model->decls) {
      if (!llvm::isa<DimDecl>(decl.get()))
        continue;
      std::string dim = decl->getName().str();
      CAPTURE(path);
      CAPTURE(dim);
      for (bool ring : {false, true}) {
        CAPTURE(ring);
        llvm::SourceMgr shardSources;
        DiagnosticEngine diagnostics(shardSources);
        std::string messages;
        diagnostics.redirectTo(messages);
        std::string error;
        std::optional<unsigned> buffer =
            readSourceFile(path, shardSources, error);
        REQUIRE(buffer);
        unsigned rankBuffer = 0, blockBuffer = 0;
        std::optional<ShardedModel> sharded =
            shardSourceBuffer(shardSources, *buffer, dim, /*ranks=*/3,
                              diagnostics, rankBuffer, ring, &blockBuffer);
        INFO(messages);
        int &rewrittenCount = ring ? ringRewritten : rewritten;
        if (!sharded) {
          // Refused at a construct of the model, never in the rank's or
          // the block model (which would be the rewrite's fault).
          CHECK(diagnostics.hasErrors());
          CHECK(messages.find("one rank's") == std::string::npos);
          ++(ring ? ringRefused : refused);
          continue;
        }
        ++rewrittenCount;
        // Warnings only of the model (an output --shard does not evaluate).
        CHECK(messages.find("one rank's") == std::string::npos);
        CHECK(sharded->dim == dim);
        CHECK(sharded->ring.has_value() == ring);
        // A ring's rank model holds no copies; its block model holds them.
        const std::string &declares =
            ring ? sharded->ring->blockSource : sharded->source;
        for (const ShardedTensor &tensor : sharded->tensors)
          if (!tensor.gathered.empty()) {
            CHECK(declares.find("param " + tensor.gathered) !=
                  std::string::npos);
            if (ring)
              CHECK(sharded->source.find("param " + tensor.gathered) ==
                    std::string::npos);
          }
        if (ring)
          for (const RingSite &site : sharded->ring->sites)
            CHECK(sharded->ring->blockSource.find("output " + site.partial) !=
                  std::string::npos);
      }
    }
  }
  MESSAGE(rewritten << " rank models, " << refused << " refused; with a ring "
                    << ringRewritten << ", " << ringRefused << " refused");
  CHECK(rewritten > 50);
  CHECK(ringRewritten > 10);
}
