//===- Safetensors.h - Reading and writing safetensors files ----*- C++ -*-===//
//
// Tensors on disk are safetensors files: an unsigned little-endian 64-bit
// header length N, N bytes of UTF-8 JSON mapping each tensor name to
// {"dtype", "shape", "data_offsets": [begin, end]} (plus an optional
// "__metadata__" object of strings), then the tensors' little-endian,
// row-major bytes, offsets counted from the end of the header.
//
// Reading validates the whole file before returning anything, and any
// input, however truncated or corrupt, gives either the tensors or an error
// naming the file and, where there is one, the tensor. Writing goes to a
// temporary file in the same directory that is renamed into place only when
// everything has been written, so a failed write leaves no output file (and
// an existing file at the path unchanged).
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_RUNTIME_SAFETENSORS_H
#define ENERGY_RUNTIME_SAFETENSORS_H

#include "energy/Runtime/Status.h"
#include "energy/Runtime/Tensor.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace energy {

/// The contents of a safetensors file.
struct SafetensorsContents {
  /// The tensors by name.
  std::map<std::string, Tensor> tensors;
  /// The "__metadata__" strings (empty when the file has none).
  std::map<std::string, std::string> metadata;
};

/// A header longer than this (100 MB) is rejected as corrupt before any of
/// it is read.
constexpr uint64_t maxSafetensorsHeaderBytes = 100'000'000;

/// Reads and validates the safetensors file at `path`. Only F32 and F64
/// tensors are supported; a file with any other dtype is an error.
Expected<SafetensorsContents> readSafetensors(const std::string &path);
/// Reads and validates the safetensors file whose bytes are `bytes`, as
/// readSafetensors does; messages have no file name in front.
Expected<SafetensorsContents> parseSafetensors(std::string_view bytes);

/// Rows of a tensor to read: its indices along axis `axis`, in the order
/// given.
struct SafetensorsRows {
  unsigned axis = 0;
  std::vector<int64_t> indices;
};

/// Reads the file as readSafetensors does, but of each tensor `rows` names
/// only the rows selected (its axis as long as the selection), so that a
/// rank of a sharded run holds its own rows of an input, not the whole. An
/// axis the tensor lacks or an index outside it is an error naming the
/// tensor; names the file lacks are ignored.
Expected<SafetensorsContents>
readSafetensors(const std::string &path,
                const std::map<std::string, SafetensorsRows> &rows);

/// The shape of each tensor of the file at `path`, from its header alone
/// (the header and the layout validated; no data read).
Expected<std::map<std::string, std::vector<int64_t>>>
readSafetensorsShapes(const std::string &path);

/// Writes `tensors` (and `metadata`, if not empty) to `path` as a
/// safetensors file: names in sorted order, data laid out in that order
/// without gaps, the header padded with spaces to a multiple of 8 bytes.
/// Names and metadata must be valid UTF-8, and no tensor may be called
/// "__metadata__". On failure nothing is left at `path` that was not there
/// before.
Status
writeSafetensors(const std::string &path,
                 const std::map<std::string, Tensor> &tensors,
                 const std::map<std::string, std::string> &metadata = {});

} // namespace energy

#endif // ENERGY_RUNTIME_SAFETENSORS_H
