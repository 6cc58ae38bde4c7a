//===- SafetensorsTest.cpp - Writing and reading safetensors files --------===//
//
// Unit tests of safetensors round trips (F32 and F64, every rank, empty
// dimensions, metadata), of the exact bytes the writer produces, of a file
// laid out by hand from the format description, of writes that fail
// without leaving a file behind, of a write into a pipe, and of reading a
// tensor's rows alone.
//
//===----------------------------------------------------------------------===//

#include "SafetensorsTestSupport.h"

#include "energy/Runtime/Safetensors.h"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace energy;
using namespace energy::test;

/// A tensor whose elements are `first`, `first + step`, ...
static Tensor rampTensor(DType dtype, std::vector<int64_t> shape, double first,
                         double step) {
  Tensor tensor(dtype, std::move(shape));
  for (int64_t i = 0; i < tensor.elementCount(); ++i)
    tensor.set(i, first + step * static_cast<double>(i));
  return tensor;
}

TEST_CASE("tensors of both dtypes and every rank survive a round trip") {
  ScratchDirectory scratch;
  std::map<std::string, Tensor> tensors;
  for (DType dtype : {DType::F32, DType::F64}) {
    std::string prefix(dtypeName(dtype));
    tensors[prefix + ".scalar"] = rampTensor(dtype, {}, -1.25, 0);
    tensors[prefix + ".vector"] = rampTensor(dtype, {5}, 0.1, 0.3);
    tensors[prefix + ".matrix"] = rampTensor(dtype, {2, 3}, -7, 1.0 / 3.0);
    tensors[prefix + ".cube"] = rampTensor(dtype, {2, 3, 4}, 1e-30, 1e10);
    tensors[prefix + ".empty"] = Tensor(dtype, {0, 3});
    tensors[prefix + ".emptyLast"] = Tensor(dtype, {4, 0});
  }
  Tensor special(DType::F64, {4});
  special.set(0, std::nan(""));
  special.set(1, -0.0);
  special.set(2, HUGE_VAL);
  special.set(3, 4.9e-324); // The smallest subnormal.
  tensors["special"] = special;

  std::string path = scratch.path("round.safetensors");
  Status written = writeSafetensors(path, tensors);
  REQUIRE_MESSAGE(written.ok(), written.message());
  Expected<SafetensorsContents> read = readSafetensors(path);
  REQUIRE_MESSAGE(read.ok(), read.message());
  CHECK(read->metadata.empty());
  REQUIRE(read->tensors.size() == tensors.size());
  for (const auto &entry : tensors) {
    CAPTURE(entry.first);
    REQUIRE(read->tensors.count(entry.first) == 1);
    CHECK(read->tensors.at(entry.first) == entry.second);
  }
}

TEST_CASE("metadata and unusual names survive a round trip") {
  ScratchDirectory scratch;
  std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"quote \" backslash \\ newline \n tab \t", "bell \x07 and caf\xC3\xA9"},
      {"", "empty key"}};
  std::map<std::string, Tensor> tensors;
  tensors["layer.0/w \"x\"\n\xF0\x9F\x98\x80"] =
      rampTensor(DType::F32, {2}, 1, 1);
  tensors[""] = rampTensor(DType::F64, {1}, 2, 0);
  std::string path = scratch.path("meta.safetensors");
  REQUIRE(writeSafetensors(path, tensors, metadata).ok());
  Expected<SafetensorsContents> read = readSafetensors(path);
  REQUIRE_MESSAGE(read.ok(), read.message());
  CHECK(read->metadata == metadata);
  CHECK(read->tensors == tensors);
}

TEST_CASE("an empty set of tensors is a valid file") {
  ScratchDirectory scratch;
  std::string path = scratch.path("empty.safetensors");
  REQUIRE(writeSafetensors(path, {}).ok());
  CHECK(readBytes(path) == safetensorsBytes("{}      ", ""));
  Expected<SafetensorsContents> read = readSafetensors(path);
  REQUIRE(read.ok());
  CHECK(read->tensors.empty());
}

TEST_CASE("the writer's bytes: sorted names, packed data, padded header") {
  ScratchDirectory scratch;
  Tensor b(DType::F64, {});
  b.set(0, 0.5);
  Tensor a(DType::F32, {2});
  a.set(0, 1.0);
  a.set(1, -2.5);
  std::string path = scratch.path("exact.safetensors");
  REQUIRE(writeSafetensors(path, {{"b", b}, {"a", a}}, {{"k", "v"}}).ok());
  // 132 bytes of JSON and 4 spaces make 136, a multiple of 8.
  std::string header = "{\"__metadata__\":{\"k\":\"v\"},"
                       "\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
                       "\"data_offsets\":[0,8]},"
                       "\"b\":{\"dtype\":\"F64\",\"shape\":[],"
                       "\"data_offsets\":[8,16]}}    ";
  REQUIRE(header.size() == 136);
  std::string data("\x00\x00\x80\x3F"                  // 1.0f
                   "\x00\x00\x20\xC0"                  // -2.5f
                   "\x00\x00\x00\x00\x00\x00\xE0\x3F", // 0.5
                   16);
  CHECK(readBytes(path) == safetensorsBytes(header, data));
}

TEST_CASE("a file laid out by hand from the format description is read") {
  // Derived by hand, not by this library: the header is the JSON text below
  // (148 bytes) padded with 4 spaces to 152 = 0x98 bytes, as the reference
  // implementation pads; the name "caf\u00e9" uses a JSON escape (é). The
  // data are IEEE 754 values, little-endian: 1/3 as F64 is
  // 0x3FD5555555555555; 1.0f, -2.5f, 0.5f and 0.1f are 0x3F800000,
  // 0xC0200000, 0x3F000000 and 0x3DCCCCCD.
  const unsigned char file[] = {
      0x98, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // Header length 152.
      '{',  '"',  '_',  '_',  'm',  'e',  't',  'a',  'd',  'a',  't',  'a',
      '_',  '_',  '"',  ':',  '{',  '"',  'f',  'o',  'r',  'm',  'a',  't',
      '"',  ':',  '"',  'p',  't',  '"',  '}',  ',',  '"',  'c',  'a',  'f',
      '\\', 'u',  '0',  '0',  'e',  '9',  '"',  ':',  '{',  '"',  'd',  't',
      'y',  'p',  'e',  '"',  ':',  '"',  'F',  '6',  '4',  '"',  ',',  '"',
      's',  'h',  'a',  'p',  'e',  '"',  ':',  '[',  ']',  ',',  '"',  'd',
      'a',  't',  'a',  '_',  'o',  'f',  'f',  's',  'e',  't',  's',  '"',
      ':',  '[',  '0',  ',',  '8',  ']',  '}',  ',',  '"',  'w',  '"',  ':',
      '{',  '"',  'd',  't',  'y',  'p',  'e',  '"',  ':',  '"',  'F',  '3',
      '2',  '"',  ',',  '"',  's',  'h',  'a',  'p',  'e',  '"',  ':',  '[',
      '2',  ',',  '2',  ']',  ',',  '"',  'd',  'a',  't',  'a',  '_',  'o',
      'f',  'f',  's',  'e',  't',  's',  '"',  ':',  '[',  '8',  ',',  '2',
      '4',  ']',  '}',  '}',  ' ',  ' ',  ' ',  ' ',  0x55, 0x55, 0x55, 0x55,
      0x55, 0x55, 0xD5, 0x3F,                         // 1/3
      0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x20, 0xC0, // 1.0f, -2.5f
      0x00, 0x00, 0x00, 0x3F, 0xCD, 0xCC, 0xCC, 0x3D, // 0.5f, 0.1f
  };
  static_assert(sizeof file == 8 + 152 + 24, "length, header, data");
  ScratchDirectory scratch;
  std::string path = scratch.path("by-hand.safetensors");
  writeBytes(path,
             std::string(reinterpret_cast<const char *>(file), sizeof file));

  Expected<SafetensorsContents> read = readSafetensors(path);
  REQUIRE_MESSAGE(read.ok(), read.message());
  CHECK(read->metadata == std::map<std::string, std::string>{{"format", "pt"}});
  REQUIRE(read->tensors.size() == 2);
  const Tensor &third = read->tensors.at("caf\xC3\xA9");
  CHECK(third.dtype() == DType::F64);
  CHECK(third.shapeString() == "[]");
  CHECK(third.at(0) == 1.0 / 3.0);
  const Tensor &w = read->tensors.at("w");
  CHECK(w.dtype() == DType::F32);
  CHECK(w.shapeString() == "[2, 2]");
  CHECK(w.at(w.flatIndex({0, 0})) == 1.0);
  CHECK(w.at(w.flatIndex({0, 1})) == -2.5);
  CHECK(w.at(w.flatIndex({1, 0})) == 0.5);
  CHECK(w.at(w.flatIndex({1, 1})) == static_cast<double>(0.1f));
}

TEST_CASE("a write into a missing directory fails and leaves no file") {
  ScratchDirectory scratch;
  std::string path = scratch.path("missing/out.safetensors");
  Status status = writeSafetensors(path, {{"x", Tensor(DType::F32, {2})}});
  REQUIRE_FALSE(status.ok());
  CHECK(status.message().find(path) == 0);
  CHECK(status.message().find("No such file or directory") !=
        std::string::npos);
  CHECK_FALSE(std::filesystem::exists(scratch.path("missing")));
  CHECK(scratch.entryCount() == 0);
}

TEST_CASE("a failed write leaves an existing file as it was") {
  ScratchDirectory scratch;
  std::string path = scratch.path("kept.safetensors");
  std::map<std::string, Tensor> original = {
      {"x", rampTensor(DType::F32, {3}, 1, 1)}};
  REQUIRE(writeSafetensors(path, original).ok());
  std::string before = readBytes(path);

  Status reserved = writeSafetensors(path, {{"__metadata__", Tensor()}});
  CHECK(reserved.message() ==
        path + ": a tensor cannot be called \"__metadata__\"");
  Status badName = writeSafetensors(path, {{"\xFF", Tensor()}});
  CHECK(badName.message() == path + ": a tensor name is not valid UTF-8");
  Status badMetadata = writeSafetensors(path, {}, {{"k", "\xC0\x80"}});
  CHECK(badMetadata.message() ==
        path + ": metadata key or value is not valid UTF-8");
  CHECK(readBytes(path) == before);
  CHECK(scratch.entryCount() == 1);
}

TEST_CASE("a write whose final rename fails removes its temporary file") {
  ScratchDirectory scratch;
  std::string path = scratch.path("a-directory");
  std::filesystem::create_directory(path);
  std::filesystem::create_directory(path + "/occupied");
  Status status = writeSafetensors(path, {{"x", Tensor()}});
  REQUIRE_FALSE(status.ok());
  CHECK(status.message().find(path + ": cannot replace the file: ") == 0);
  CHECK(scratch.entryCount() == 1); // Only the directory.
  CHECK(std::filesystem::is_directory(path));
}

TEST_CASE("a write to a pipe goes into the pipe, which stays a pipe") {
  ScratchDirectory scratch;
  std::string path = scratch.path("pipe");
  REQUIRE(mkfifo(path.c_str(), 0600) == 0);
  // Opened for reading first, without waiting for a writer, so that the
  // writer's open does not block; the tensors fit the pipe's buffer.
  int reader = open(path.c_str(), O_RDONLY | O_NONBLOCK);
  REQUIRE(reader >= 0);
  std::map<std::string, Tensor> tensors = {
      {"x", rampTensor(DType::F32, {3}, 1, 1)}};
  REQUIRE(writeSafetensors(path, tensors).ok());
  std::string received;
  char buffer[4096];
  for (ssize_t count; (count = read(reader, buffer, sizeof buffer)) > 0;)
    received.append(buffer, static_cast<size_t>(count));
  close(reader);
  CHECK(std::filesystem::is_fifo(path));
  std::string regular = scratch.path("regular.safetensors");
  REQUIRE(writeSafetensors(regular, tensors).ok());
  CHECK(received == readBytes(regular));
}

TEST_CASE("rows along any axis are read alone, equal to the whole's") {
  ScratchDirectory scratch;
  std::map<std::string, Tensor> tensors = {
      {"cube", rampTensor(DType::F32, {3, 5, 2}, 0.5, 1.0)},
      {"matrix", rampTensor(DType::F64, {6, 4}, -3, 0.25)},
      {"other", rampTensor(DType::F64, {2}, 1, 1)}};
  std::string path = scratch.path("rows.safetensors");
  REQUIRE(writeSafetensors(path, tensors).ok());

  Expected<std::map<std::string, std::vector<int64_t>>> shapes =
      readSafetensorsShapes(path);
  REQUIRE_MESSAGE(shapes.ok(), shapes.message());
  CHECK(shapes->at("cube") == std::vector<int64_t>{3, 5, 2});
  CHECK(shapes->at("matrix") == std::vector<int64_t>{6, 4});

  // Striped rows of the middle axis, a contiguous slice of the first, and
  // a tensor not named read whole.
  std::map<std::string, SafetensorsRows> rows = {
      {"cube", {1, {4, 1, 2}}}, {"matrix", {0, {2, 3}}}, {"absent", {0, {0}}}};
  Expected<SafetensorsContents> read = readSafetensors(path, rows);
  REQUIRE_MESSAGE(read.ok(), read.message());
  const Tensor &cube = read->tensors.at("cube");
  REQUIRE(cube.shape() == std::vector<int64_t>{3, 3, 2});
  for (int64_t a = 0; a < 3; ++a)
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t c = 0; c < 2; ++c)
        CHECK(cube.at((a * 3 + r) * 2 + c) ==
              tensors.at("cube").at((a * 5 + rows.at("cube").indices[r]) * 2 +
                                    c));
  const Tensor &matrix = read->tensors.at("matrix");
  REQUIRE(matrix.shape() == std::vector<int64_t>{2, 4});
  for (int64_t i = 0; i < 8; ++i)
    CHECK(matrix.at(i) == tensors.at("matrix").at(8 + i));
  CHECK(read->tensors.at("other") == tensors.at("other"));

  // A row past the axis, or an axis the tensor lacks: an error naming it.
  for (const SafetensorsRows &bad :
       {SafetensorsRows{0, {6}}, SafetensorsRows{2, {0}}}) {
    Expected<SafetensorsContents> refused =
        readSafetensors(path, {{"matrix", bad}});
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.message().find("matrix") != std::string::npos);
    CHECK(refused.message().find(path) != std::string::npos);
  }
}
