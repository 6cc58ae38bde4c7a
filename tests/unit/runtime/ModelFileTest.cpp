//===- ModelFileTest.cpp - Telling artifacts, sources and the rest apart --===//
//
// Unit tests of identifyModelFile: artifacts and sources are recognised by
// their bytes, and every other file (safetensors, empty, binary, text that
// is no model, a directory, a missing file) is a one-line error naming it.
//
//===----------------------------------------------------------------------===//

#include "FakeArtifacts.h"
#include "SafetensorsTestSupport.h"

#include "energy/Runtime/ModelFile.h"
#include "energy/Runtime/Safetensors.h"

#include <doctest/doctest.h>

using namespace energy;
using namespace energy::test;

namespace {
constexpr AcceptedModelFiles either = AcceptedModelFiles::SourceOrArtifact;
const std::string expectEither =
    ": expected a .energy source or a compiled artifact (.so)";

/// Writes `bytes` to `name` in `scratch` and identifies it.
Expected<ModelFileKind>
identifyBytes(const ScratchDirectory &scratch, const std::string &name,
              const std::string &bytes,
              AcceptedModelFiles accepted = AcceptedModelFiles::SourceOrArtifact) {
  writeBytes(scratch.path(name), bytes);
  return identifyModelFile(scratch.path(name), accepted);
}
} // namespace

TEST_CASE("artifacts and sources are told apart by their bytes") {
  ScratchDirectory scratch;
  Expected<ModelFileKind> artifact = identifyModelFile(fakeF64, either);
  REQUIRE_MESSAGE(artifact.ok(), artifact.message());
  CHECK(*artifact == ModelFileKind::Artifact);

  for (const char *text :
       {"model m { }", "# a comment\n\n  model m {", "model", "",
        "anything: the parser reports it"}) {
    CAPTURE(text);
    Expected<ModelFileKind> source = identifyBytes(scratch, "m.energy", text);
    if (!*text) {
      CHECK(source.message() ==
            scratch.path("m.energy") + ": an empty file" + expectEither);
      continue;
    }
    REQUIRE_MESSAGE(source.ok(), source.message());
    CHECK(*source == ModelFileKind::Source);
  }
  // Without the .energy extension, text is a source when it begins with
  // `model`.
  Expected<ModelFileKind> text =
      identifyBytes(scratch, "m.txt", "# hopfield\nmodel\thopfield {}");
  REQUIRE_MESSAGE(text.ok(), text.message());
  CHECK(*text == ModelFileKind::Source);
  // Comments that fill the first 4096 bytes leave it to the parser.
  Expected<ModelFileKind> longComment =
      identifyBytes(scratch, "m.txt", "#" + std::string(5000, 'x') + "\n");
  REQUIRE_MESSAGE(longComment.ok(), longComment.message());
  CHECK(identifyModelFile("-", either).value() == ModelFileKind::Source);
}

TEST_CASE("files that are no model are one-line errors naming them") {
  ScratchDirectory scratch;
  std::string tensors = scratch.path("w.safetensors");
  REQUIRE(writeSafetensors(tensors, {{"w", Tensor(DType::F32, {2})}}).ok());
  CHECK(identifyModelFile(tensors, either).message() ==
        tensors + ": a safetensors file (tensors, not a model)" + expectEither);

  CHECK(identifyBytes(scratch, "notes.txt", "hello world\n").message() ==
        scratch.path("notes.txt") +
            ": text that does not begin with `model`" + expectEither);
  CHECK(identifyBytes(scratch, "m.so", "modelling\n").message() ==
        scratch.path("m.so") + ": text that does not begin with `model`" +
            expectEither);
  CHECK(identifyBytes(scratch, "blob", std::string("PK\x03\x04\0\0", 6))
            .message() == scratch.path("blob") + ": binary data" + expectEither);
  CHECK(identifyBytes(scratch, "empty", "").message() ==
        scratch.path("empty") + ": an empty file" + expectEither);

  std::string directory = scratch.path("models");
  std::filesystem::create_directory(directory);
  CHECK(identifyModelFile(directory, either).message() ==
        directory + ": a directory" + expectEither);
  CHECK(identifyModelFile(scratch.path("missing.so"), either).message() ==
        scratch.path("missing.so") + ": cannot read: No such file or directory");
  CHECK(identifyModelFile("/dev/null", either).message() ==
        "/dev/null: not a regular file" + expectEither);
}

TEST_CASE("a kind the caller does not take is an error too") {
  ScratchDirectory scratch;
  CHECK(identifyModelFile(fakeF64, AcceptedModelFiles::Source).message() ==
        std::string(fakeF64) + ": a compiled artifact: expected a .energy "
                               "source");
  CHECK(identifyBytes(scratch, "m.energy", "model m {}",
                      AcceptedModelFiles::Artifact)
            .message() == scratch.path("m.energy") +
                              ": a .energy source: expected a compiled "
                              "artifact (.so)");
  CHECK(identifyBytes(scratch, "empty", "", AcceptedModelFiles::Source)
            .message() ==
        scratch.path("empty") + ": an empty file: expected a .energy source");
}
