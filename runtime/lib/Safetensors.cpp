//===- Safetensors.cpp - Reading and writing safetensors files ------------===//
//
// The reader checks, in order: the file, the header length, the header's
// JSON and every tensor entry in it, the entries against the size of the
// data section and against each other, and only then reads the data, so that
// nothing is allocated for a tensor whose bytes the file does not hold. The
// same reader serves files and bytes in memory (a ByteSource each). The
// writer builds the header in memory, then streams header and data into a
// temporary file that is renamed over the path at the end.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/Safetensors.h"

#include "Json.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

using namespace energy;

namespace fs = std::filesystem;

/// `text` quoted as in JSON for a message, so that control characters in a
/// corrupt name cannot garble the message.
static std::string quotedForMessage(const std::string &text) {
  std::string quoted;
  json::appendQuoted(quoted,
                     json::isValidUtf8(text) ? text : "<invalid UTF-8>");
  return quoted;
}

/// How a tensor is named in messages: `tensor "w"`.
static std::string tensorLabel(const std::string &name) {
  return "tensor " + quotedForMessage(name);
}

static std::string offsetsString(int64_t begin, int64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

namespace {
/// A tensor's entry in the header, checked, before its data is read.
struct TensorEntry {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int64_t begin = 0;
  int64_t end = 0;
};
} // namespace

/// Reads the value of a member that may appear once.
static Status readFieldOnce(bool &seen, const std::string &field,
                            const std::function<Status()> &readValue) {
  if (seen)
    return Status::error("duplicate field \"" + field + "\"");
  seen = true;
  return readValue().withContext(field);
}

/// Reads an array of integers into `values`.
static Status readIntegerArray(json::Reader &reader,
                               std::vector<int64_t> &values) {
  return reader.readArray([&]() -> Status {
    int64_t value;
    if (Status status = reader.readInteger(value); !status)
      return status;
    values.push_back(value);
    return Status::success();
  });
}

/// Checks the fields of a tensor entry against each other.
static Status checkTensorEntry(const std::string &dtypeText,
                               const std::vector<int64_t> &offsets,
                               TensorEntry &entry) {
  std::optional<DType> dtype = dtypeFromName(dtypeText);
  if (!dtype) {
    return Status::error("unsupported dtype " + quotedForMessage(dtypeText) +
                         " (supported: F32, F64)");
  }
  entry.dtype = *dtype;
  for (int64_t dimension : entry.shape)
    if (dimension < 0)
      return Status::error("negative dimension " + std::to_string(dimension) +
                           " in shape " + Tensor::shapeText(entry.shape));
  std::optional<int64_t> elements =
      checkedElementCount(entry.shape, dtypeSize(entry.dtype));
  if (!elements)
    return Status::error("shape " + Tensor::shapeText(entry.shape) +
                         " is too large");
  if (offsets.size() != 2)
    return Status::error("data_offsets must have 2 elements, not " +
                         std::to_string(offsets.size()));
  entry.begin = offsets[0];
  entry.end = offsets[1];
  std::string offsetsText = offsetsString(entry.begin, entry.end);
  if (entry.begin < 0 || entry.end < 0)
    return Status::error("negative data_offsets " + offsetsText);
  if (entry.end < entry.begin)
    return Status::error("data_offsets " + offsetsText +
                         " end before they begin");
  int64_t neededBytes =
      *elements * static_cast<int64_t>(dtypeSize(entry.dtype));
  if (entry.end - entry.begin != neededBytes)
    return Status::error("data_offsets " + offsetsText + " hold " +
                         std::to_string(entry.end - entry.begin) +
                         " bytes but " + std::string(dtypeName(entry.dtype)) +
                         " shape " + Tensor::shapeText(entry.shape) +
                         " needs " + std::to_string(neededBytes));
  return Status::success();
}

/// Reads the entry of one tensor: an object with "dtype", "shape" and
/// "data_offsets" (other members are skipped).
static Status readTensorEntry(json::Reader &reader, TensorEntry &entry) {
  bool hasDtype = false, hasShape = false, hasOffsets = false;
  std::string dtypeText;
  std::vector<int64_t> offsets;
  Status status = reader.readObject([&](std::string field) -> Status {
    if (field == "dtype")
      return readFieldOnce(hasDtype, field,
                           [&] { return reader.readString(dtypeText); });
    if (field == "shape")
      return readFieldOnce(hasShape, field, [&] {
        return readIntegerArray(reader, entry.shape);
      });
    if (field == "data_offsets")
      return readFieldOnce(hasOffsets, field,
                           [&] { return readIntegerArray(reader, offsets); });
    return reader.skipValue();
  });
  if (!status)
    return status;
  for (auto [present, field] : {std::pair{hasDtype, "dtype"},
                                {hasShape, "shape"},
                                {hasOffsets, "data_offsets"}})
    if (!present)
      return Status::error(std::string("missing field \"") + field + "\"");
  return checkTensorEntry(dtypeText, offsets, entry);
}

/// Reads the "__metadata__" object: string keys to string values.
static Status readMetadata(json::Reader &reader,
                           std::map<std::string, std::string> &metadata) {
  return reader.readObject([&](std::string key) -> Status {
    std::string value;
    if (Status status = reader.readString(value); !status)
      return status.withContext(quotedForMessage(key));
    std::string label = quotedForMessage(key);
    if (!metadata.emplace(std::move(key), std::move(value)).second)
      return Status::error(label + ": duplicate key");
    return Status::success();
  });
}

/// Parses the header into tensor entries and metadata.
static Status readHeader(std::string_view headerText,
                         std::vector<TensorEntry> &entries,
                         std::map<std::string, std::string> &metadata) {
  json::Reader reader(headerText);
  bool hasMetadata = false;
  std::set<std::string> names;
  Status status = reader.readObject([&](std::string key) -> Status {
    if (key == "__metadata__")
      return readFieldOnce(hasMetadata, key,
                           [&] { return readMetadata(reader, metadata); });
    std::string label = tensorLabel(key);
    if (!names.insert(key).second)
      return Status::error(label + ": duplicate tensor name");
    TensorEntry entry;
    entry.name = std::move(key);
    if (Status entryStatus = readTensorEntry(reader, entry); !entryStatus)
      return entryStatus.withContext(label);
    entries.push_back(std::move(entry));
    return Status::success();
  });
  if (!status)
    return status;
  return reader.expectEnd();
}

/// Checks that every tensor lies in the data section (`dataBytes` long) and
/// that no two tensors share a byte.
static Status checkLayout(const std::vector<TensorEntry> &entries,
                          uint64_t dataBytes) {
  for (const TensorEntry &entry : entries)
    if (static_cast<uint64_t>(entry.end) > dataBytes)
      return Status::error(
          tensorLabel(entry.name) + ": data_offsets " +
          offsetsString(entry.begin, entry.end) +
          " extend past the end of the data section (" +
          std::to_string(dataBytes) +
          " bytes): the file is truncated or the offsets are wrong");
  std::vector<const TensorEntry *> byBegin;
  for (const TensorEntry &entry : entries)
    if (entry.end > entry.begin) // Empty tensors occupy no bytes.
      byBegin.push_back(&entry);
  std::sort(byBegin.begin(), byBegin.end(),
            [](const TensorEntry *a, const TensorEntry *b) {
              return a->begin < b->begin;
            });
  for (size_t i = 1; i < byBegin.size(); ++i) {
    const TensorEntry &previous = *byBegin[i - 1], &next = *byBegin[i];
    if (next.begin < previous.end)
      return Status::error(tensorLabel(previous.name) + " and " +
                           tensorLabel(next.name) + " overlap: data_offsets " +
                           offsetsString(previous.begin, previous.end) +
                           " and " + offsetsString(next.begin, next.end));
  }
  return Status::success();
}

namespace {
/// Where the bytes of a safetensors file come from: the file, or memory.
class ByteSource {
public:
  virtual ~ByteSource() = default;
  /// The number of bytes.
  virtual uint64_t size() const = 0;
  /// Copies `count` bytes from `offset` (both within size()) to `out`.
  virtual bool read(uint64_t offset, void *out, size_t count) = 0;
};

class FileSource : public ByteSource {
public:
  FileSource(std::ifstream &file, uint64_t bytes) : file(file), bytes(bytes) {}
  uint64_t size() const override { return bytes; }
  bool read(uint64_t offset, void *out, size_t count) override {
    file.seekg(static_cast<std::streamoff>(offset));
    return static_cast<bool>(file.read(static_cast<char *>(out),
                                       static_cast<std::streamsize>(count)));
  }

private:
  std::ifstream &file;
  uint64_t bytes;
};

class MemorySource : public ByteSource {
public:
  explicit MemorySource(std::string_view bytes) : bytes(bytes) {}
  uint64_t size() const override { return bytes.size(); }
  bool read(uint64_t offset, void *out, size_t count) override {
    if (count)
      std::memcpy(out, bytes.data() + offset, count);
    return true;
  }

private:
  std::string_view bytes;
};
} // namespace

using RowSelection = std::map<std::string, SafetensorsRows>;
using Shapes = std::map<std::string, std::vector<int64_t>>;

/// Reads the rows `selected` of tensor `entry` (data from `dataStart`).
static Expected<Tensor> readRows(ByteSource &source, uint64_t dataStart,
                                 const TensorEntry &entry,
                                 const SafetensorsRows &selected) {
  const std::vector<int64_t> &shape = entry.shape;
  if (selected.axis >= shape.size())
    return Status::error("has no axis " + std::to_string(selected.axis) +
                         " to read rows of");
  int64_t length = shape[selected.axis];
  for (int64_t index : selected.indices)
    if (index < 0 || index >= length)
      return Status::error("has no row " + std::to_string(index) +
                           " along axis " + std::to_string(selected.axis) +
                           " of length " + std::to_string(length));
  std::vector<int64_t> rowsShape = shape;
  rowsShape[selected.axis] = static_cast<int64_t>(selected.indices.size());
  Expected<Tensor> rows = Tensor::allocate(entry.dtype, rowsShape);
  if (!rows)
    return rows.status();
  int64_t outer = 1, inner = 1;
  for (size_t axis = 0; axis < selected.axis; ++axis)
    outer *= shape[axis];
  for (size_t axis = selected.axis + 1; axis < shape.size(); ++axis)
    inner *= shape[axis];
  size_t rowBytes = static_cast<size_t>(inner) * dtypeSize(entry.dtype);
  std::byte *out = rows->data();
  const std::vector<int64_t> &indices = selected.indices;
  for (int64_t o = 0; o < outer; ++o)
    for (size_t first = 0, last; first < indices.size(); first = last) {
      // Consecutive rows in one read (a rank's contiguous slice: one).
      for (last = first + 1;
           last < indices.size() && indices[last] == indices[last - 1] + 1;
           ++last)
        ;
      size_t bytes = (last - first) * rowBytes;
      uint64_t from =
          dataStart + static_cast<uint64_t>(entry.begin) +
          static_cast<uint64_t>(o * length + indices[first]) * rowBytes;
      if (!source.read(from, out, bytes))
        return Status::error("reading the data failed");
      out += bytes;
    }
  return rows;
}

/// Reads the tensors (of those `rows` names only the rows selected), or
/// with `shapes` only each tensor's shape.
static Status readContents(ByteSource &source, SafetensorsContents &contents,
                           const RowSelection *rows = nullptr,
                           Shapes *shapes = nullptr) {
  uint64_t fileBytes = source.size();
  if (fileBytes < 8)
    return Status::error("the file is " + std::to_string(fileBytes) +
                         " bytes long, too short for the 8-byte header length");
  unsigned char lengthBytes[8];
  if (!source.read(0, lengthBytes, 8))
    return Status::error("reading the header length failed");
  uint64_t headerBytes = 0;
  for (int i = 0; i < 8; ++i)
    headerBytes |= static_cast<uint64_t>(lengthBytes[i]) << (8 * i);
  if (headerBytes > maxSafetensorsHeaderBytes)
    return Status::error("header length " + std::to_string(headerBytes) +
                         " exceeds the limit of " +
                         std::to_string(maxSafetensorsHeaderBytes) +
                         " bytes: the file is corrupt");
  if (headerBytes > fileBytes - 8)
    return Status::error("header length " + std::to_string(headerBytes) +
                         " exceeds the " + std::to_string(fileBytes - 8) +
                         " bytes after it: the file is truncated or corrupt");
  std::string headerText(headerBytes, '\0');
  if (!source.read(8, headerText.data(), headerBytes))
    return Status::error("reading the header failed");

  std::vector<TensorEntry> entries;
  if (Status status = readHeader(headerText, entries, contents.metadata);
      !status)
    return status;
  uint64_t dataStart = 8 + headerBytes;
  if (Status status = checkLayout(entries, fileBytes - dataStart); !status)
    return status;

  for (TensorEntry &entry : entries) {
    std::string label = tensorLabel(entry.name);
    if (shapes) {
      (*shapes)[entry.name] = entry.shape;
      continue;
    }
    const SafetensorsRows *selected = nullptr;
    if (rows)
      if (auto it = rows->find(entry.name); it != rows->end())
        selected = &it->second;
    if (selected) {
      Expected<Tensor> tensor = readRows(source, dataStart, entry, *selected);
      if (!tensor)
        return tensor.status().withContext(label);
      contents.tensors.emplace(std::move(entry.name), std::move(*tensor));
      continue;
    }
    Expected<Tensor> tensor = Tensor::allocate(entry.dtype, entry.shape);
    if (!tensor)
      return tensor.status().withContext(label);
    if (!source.read(dataStart + entry.begin, tensor->data(),
                     tensor->byteSize()))
      return Status::error(label + ": reading the data failed");
    contents.tensors.emplace(std::move(entry.name), std::move(*tensor));
  }
  return Status::success();
}

/// Opens the file at `path` and reads it.
static Status readFile(const std::string &path, SafetensorsContents &contents,
                       const RowSelection *rows = nullptr,
                       Shapes *shapes = nullptr) {
  std::error_code error;
  fs::file_status fileStatus = fs::status(path, error);
  if (error)
    return Status::error("cannot read: " + error.message());
  if (!fs::is_regular_file(fileStatus))
    return Status::error("not a regular file");
  uint64_t fileBytes = fs::file_size(path, error);
  if (error)
    return Status::error("cannot read: " + error.message());
  std::ifstream file(path, std::ios::binary);
  if (!file)
    return Status::error("cannot open for reading");
  FileSource source(file, fileBytes);
  return readContents(source, contents, rows, shapes);
}

Expected<SafetensorsContents> energy::readSafetensors(const std::string &path) {
  SafetensorsContents contents;
  if (Status status = readFile(path, contents); !status)
    return status.withContext(path);
  return contents;
}

Expected<SafetensorsContents>
energy::readSafetensors(const std::string &path, const RowSelection &rows) {
  SafetensorsContents contents;
  if (Status status = readFile(path, contents, &rows); !status)
    return status.withContext(path);
  return contents;
}

Expected<Shapes> energy::readSafetensorsShapes(const std::string &path) {
  SafetensorsContents contents;
  Shapes shapes;
  if (Status status = readFile(path, contents, nullptr, &shapes); !status)
    return status.withContext(path);
  return shapes;
}

Expected<SafetensorsContents> energy::parseSafetensors(std::string_view bytes) {
  SafetensorsContents contents;
  MemorySource source(bytes);
  if (Status status = readContents(source, contents); !status)
    return status;
  return contents;
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

/// The header of `tensors` and `metadata`, padded with spaces to a multiple
/// of 8 bytes.
static Expected<std::string>
buildHeader(const std::map<std::string, Tensor> &tensors,
            const std::map<std::string, std::string> &metadata) {
  std::string header = "{";
  auto appendKey = [&](const std::string &key) {
    if (header.size() > 1)
      header += ',';
    json::appendQuoted(header, key);
    header += ':';
  };
  if (!metadata.empty()) {
    appendKey("__metadata__");
    header += '{';
    bool first = true;
    for (const auto &[key, value] : metadata) {
      if (!json::isValidUtf8(key) || !json::isValidUtf8(value))
        return Status::error("metadata key or value is not valid UTF-8");
      if (!first)
        header += ',';
      first = false;
      json::appendQuoted(header, key);
      header += ':';
      json::appendQuoted(header, value);
    }
    header += '}';
  }
  int64_t offset = 0;
  for (const auto &[name, tensor] : tensors) {
    if (name == "__metadata__")
      return Status::error("a tensor cannot be called \"__metadata__\"");
    if (!json::isValidUtf8(name))
      return Status::error("a tensor name is not valid UTF-8");
    int64_t end = offset + static_cast<int64_t>(tensor.byteSize());
    appendKey(name);
    header += "{\"dtype\":\"";
    header += dtypeName(tensor.dtype());
    header += "\",\"shape\":[";
    for (int64_t i = 0; i < tensor.rank(); ++i)
      header += (i > 0 ? "," : "") + std::to_string(tensor.shape()[i]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(end) + "]}";
    offset = end;
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');
  return header;
}

/// Creates a new, empty file next to `path` (in the same directory, so that
/// renaming it to `path` is atomic) and stores its name in `temporaryPath`.
static std::FILE *createTemporaryFileFor(const std::string &path,
                                         std::string &temporaryPath) {
  static std::atomic<unsigned> counter{0};
  auto clockTicks = static_cast<unsigned long long>(
      std::chrono::steady_clock::now().time_since_epoch().count());
  for (int attempt = 0; attempt < 100; ++attempt) {
    temporaryPath = path + ".tmp-" + std::to_string(clockTicks % 1000000007) +
                    "-" + std::to_string(counter++);
    // "x": fail if the file exists, rather than write into someone's file.
    if (std::FILE *file = std::fopen(temporaryPath.c_str(), "wbx"))
      return file;
    if (errno != EEXIST)
      return nullptr;
  }
  return nullptr;
}

/// Writes the header length, the header and the tensors' bytes.
static bool writeFileContents(std::FILE *file, const std::string &header,
                              const std::map<std::string, Tensor> &tensors) {
  unsigned char lengthBytes[8];
  for (int i = 0; i < 8; ++i)
    lengthBytes[i] =
        static_cast<unsigned char>(uint64_t(header.size()) >> (8 * i));
  if (std::fwrite(lengthBytes, 1, 8, file) != 8 ||
      std::fwrite(header.data(), 1, header.size(), file) != header.size())
    return false;
  for (const auto &entry : tensors) {
    const Tensor &tensor = entry.second;
    if (std::fwrite(tensor.data(), 1, tensor.byteSize(), file) !=
        tensor.byteSize())
      return false;
  }
  return true;
}

static Status
writeContents(const std::string &path,
              const std::map<std::string, Tensor> &tensors,
              const std::map<std::string, std::string> &metadata) {
  Expected<std::string> header = buildHeader(tensors, metadata);
  if (!header)
    return header.status();
  // A path that is neither a regular file nor a directory (/dev/null, a
  // pipe) is written into: renaming a new file over it would replace it.
  std::error_code statusError;
  fs::file_status status = fs::status(path, statusError);
  if (!statusError && fs::exists(status) && !fs::is_regular_file(status) &&
      !fs::is_directory(status)) {
    std::FILE *file = std::fopen(path.c_str(), "wb");
    if (!file)
      return Status::error("cannot open: " + std::string(std::strerror(errno)));
    bool written = writeFileContents(file, *header, tensors);
    if (std::fclose(file) != 0 || !written)
      return Status::error("writing failed: " +
                           std::string(std::strerror(errno)));
    return Status::success();
  }
  std::string temporaryPath;
  std::FILE *file = createTemporaryFileFor(path, temporaryPath);
  if (!file)
    return Status::error("cannot create a file in its directory: " +
                         std::string(std::strerror(errno)));
  bool written = writeFileContents(file, *header, tensors);
  int writeErrno = errno;
  if (std::fclose(file) != 0 && written) {
    written = false;
    writeErrno = errno;
  }
  std::error_code error;
  if (!written) {
    fs::remove(temporaryPath, error);
    return Status::error("writing failed: " +
                         std::string(std::strerror(writeErrno)));
  }
  fs::rename(temporaryPath, path, error);
  if (error) {
    std::error_code ignored;
    fs::remove(temporaryPath, ignored);
    return Status::error("cannot replace the file: " + error.message());
  }
  return Status::success();
}

Status
energy::writeSafetensors(const std::string &path,
                         const std::map<std::string, Tensor> &tensors,
                         const std::map<std::string, std::string> &metadata) {
  return writeContents(path, tensors, metadata).withContext(path);
}
