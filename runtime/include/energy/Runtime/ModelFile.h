//===- ModelFile.h - What a file given as a model holds ---------*- C++ -*-===//
//
// The tools take a model as a path: a compiled artifact (an ELF shared
// library, `energyc -o m.so`) or a `.energy` source. identifyModelFile
// looks at the file's first bytes to tell which, so that a file that is
// neither (a safetensors file given by mistake, an empty file, a directory)
// is a one-line error naming it and saying what it is, before a loader or
// the parser sees it and dumps its bytes.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_RUNTIME_MODELFILE_H
#define ENERGY_RUNTIME_MODELFILE_H

#include "energy/Runtime/Status.h"

#include <string>

namespace energy {

/// The two kinds of model files.
enum class ModelFileKind { Source, Artifact };

/// Which kinds a caller takes.
enum class AcceptedModelFiles { Source, Artifact, SourceOrArtifact };

/// What the file at `path` holds, judged by its first bytes:
/// - an ELF file is an artifact;
/// - text (no NUL byte) is a source when the name ends in `.energy` or the
///   text begins with the keyword `model` (after whitespace and `#`
///   comments); "-" (standard input) is a source unread.
/// Anything else, or a kind `accepted` excludes, is an error that starts
/// with the path, says what the file is and what was expected:
/// "w.safetensors: a safetensors file (tensors, not a model): expected a
/// .energy source or a compiled artifact (.so)". The others: "cannot read:
/// <reason>", "a directory", "not a regular file", "an empty file", "binary
/// data", "text that does not begin with `model`", "a compiled artifact",
/// "a .energy source".
Expected<ModelFileKind> identifyModelFile(const std::string &path,
                                          AcceptedModelFiles accepted);

} // namespace energy

#endif // ENERGY_RUNTIME_MODELFILE_H
