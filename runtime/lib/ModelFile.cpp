//===- ModelFile.cpp - What a file given as a model holds -----------------===//
//
// Reads at most the first 4096 bytes: enough for the ELF magic, a
// safetensors header length, and the start of a source.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/ModelFile.h"

#include "energy/Runtime/Safetensors.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string_view>
#include <sys/stat.h>

using namespace energy;

/// How many bytes of the file are looked at.
static constexpr size_t headBytes = 4096;

/// What a caller expects, for messages.
static const char *expectation(AcceptedModelFiles accepted) {
  switch (accepted) {
  case AcceptedModelFiles::Source:
    return "a .energy source";
  case AcceptedModelFiles::Artifact:
    return "a compiled artifact (.so)";
  case AcceptedModelFiles::SourceOrArtifact:
    break;
  }
  return "a .energy source or a compiled artifact (.so)";
}

/// Whether `head` starts like a safetensors file: a little-endian header
/// length within the reader's limit, then the header's opening brace.
static bool looksLikeSafetensors(std::string_view head) {
  if (head.size() < 9 || head[8] != '{')
    return false;
  uint64_t headerLength = 0;
  for (int i = 0; i < 8; ++i)
    headerLength |= static_cast<uint64_t>(static_cast<unsigned char>(head[i]))
                    << (8 * i);
  return headerLength >= 2 && headerLength <= maxSafetensorsHeaderBytes;
}

/// Whether `text` (the start of a file) begins with the keyword `model`
/// after whitespace and comments, or is all whitespace and comments up to
/// where it was cut off at `headBytes` (so that only the parser can tell).
static bool beginsWithModel(std::string_view text, bool cutOff) {
  size_t position = 0;
  while (position < text.size()) {
    char c = text[position];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' ||
        c == '\v') {
      ++position;
    } else if (c == '#') {
      size_t end = text.find('\n', position);
      if (end == std::string_view::npos)
        return cutOff;
      position = end + 1;
    } else {
      std::string_view rest = text.substr(position);
      if (rest.substr(0, 5) != "model")
        return false;
      if (rest.size() == 5)
        return true;
      char next = rest[5];
      bool identifier = (next >= 'a' && next <= 'z') ||
                        (next >= 'A' && next <= 'Z') ||
                        (next >= '0' && next <= '9') || next == '_';
      return !identifier;
    }
  }
  return cutOff;
}

/// Whether `name` ends in ".energy".
static bool hasSourceExtension(std::string_view name) {
  std::string_view extension = ".energy";
  return name.size() >= extension.size() &&
         name.substr(name.size() - extension.size()) == extension;
}

/// The kind of a file named `name` whose first bytes are `head` (cut off
/// when the file is longer), or what it is instead.
static Expected<ModelFileKind> identifyHead(std::string_view name,
                                            std::string_view head, bool cutOff,
                                            AcceptedModelFiles accepted) {
  auto refuse = [&](const std::string &what) {
    return Status::error(what + ": expected " + expectation(accepted));
  };
  std::optional<ModelFileKind> kind;
  if (head.empty())
    return refuse("an empty file");
  if (head.substr(0, 4) == "\x7f"
                           "ELF")
    kind = ModelFileKind::Artifact;
  else if (looksLikeSafetensors(head))
    return refuse("a safetensors file (tensors, not a model)");
  else if (head.find('\0') != std::string_view::npos)
    return refuse("binary data");
  else if (hasSourceExtension(name) || beginsWithModel(head, cutOff))
    kind = ModelFileKind::Source;
  else
    return refuse("text that does not begin with `model`");

  if (*kind == ModelFileKind::Artifact &&
      accepted == AcceptedModelFiles::Source)
    return refuse("a compiled artifact");
  if (*kind == ModelFileKind::Source &&
      accepted == AcceptedModelFiles::Artifact)
    return refuse("a .energy source");
  return *kind;
}

Expected<ModelFileKind> energy::identifyModelFile(const std::string &path,
                                                  AcceptedModelFiles accepted) {
  if (path == "-") {
    if (accepted == AcceptedModelFiles::Artifact)
      return Status::error("-: standard input: expected " +
                           std::string(expectation(accepted)));
    return ModelFileKind::Source;
  }
  struct stat info;
  if (stat(path.c_str(), &info) != 0)
    return Status::error(path + ": cannot read: " + std::strerror(errno));
  if (S_ISDIR(info.st_mode))
    return Status::error(path + ": a directory: expected " +
                         expectation(accepted));
  if (!S_ISREG(info.st_mode))
    return Status::error(path + ": not a regular file: expected " +
                         expectation(accepted));
  std::FILE *file = std::fopen(path.c_str(), "rb");
  if (!file)
    return Status::error(path + ": cannot read: " + std::strerror(errno));
  std::string head(headBytes + 1, '\0');
  size_t length = std::fread(head.data(), 1, head.size(), file);
  bool readFailed = std::ferror(file);
  int readErrno = errno;
  std::fclose(file);
  if (readFailed)
    return Status::error(path + ": cannot read: " + std::strerror(readErrno));
  bool cutOff = length > headBytes;
  head.resize(cutOff ? headBytes : length);
  Expected<ModelFileKind> kind = identifyHead(path, head, cutOff, accepted);
  if (!kind)
    return kind.status().withContext(path);
  return kind;
}
