//===- SafetensorsCorruptTest.cpp - Truncated and corrupt safetensors -----===//
//
// Unit tests of the reader's validation: every kind of truncated or corrupt
// file, crafted byte by byte, gives its own message naming the file and the
// tensor (and the same bytes read from memory give the same message without
// the file's name); and a fuzz-style loop over random mutations of a valid
// file, which must each give tensors or an error (run under the sanitizers, it
// also shows that nothing is read out of bounds).
//
//===----------------------------------------------------------------------===//

#include "SafetensorsTestSupport.h"

#include "energy/Runtime/Random.h"
#include "energy/Runtime/Safetensors.h"

#include <doctest/doctest.h>

using namespace energy;
using namespace energy::test;

namespace {
/// Writes files into a scratch directory and reads them back.
class CorruptFileReader {
public:
  /// The error from reading a file holding `bytes` (empty on success),
  /// checked against reading them from memory.
  std::string errorOf(const std::string &bytes) {
    writeBytes(path(), bytes);
    Expected<SafetensorsContents> read = readSafetensors(path());
    Expected<SafetensorsContents> parsed = parseSafetensors(bytes);
    CHECK(parsed.ok() == read.ok());
    if (!read.ok())
      CHECK(path() + ": " + parsed.message() == read.message());
    return read.message();
  }
  /// The error from reading a file with `header` and `data`, without the
  /// "PATH: " in front.
  std::string headerErrorOf(const std::string &header,
                            const std::string &data = std::string(8, '\0')) {
    std::string message = errorOf(safetensorsBytes(header, data));
    std::string prefix = path() + ": ";
    REQUIRE_MESSAGE(message.compare(0, prefix.size(), prefix) == 0, message);
    return message.substr(prefix.size());
  }
  std::string path() const { return scratch.path("corrupt.safetensors"); }

private:
  ScratchDirectory scratch;
};

/// The header of one tensor "w" with the given fields.
std::string oneTensor(const std::string &fields) {
  return "{\"w\":{" + fields + "}}";
}
} // namespace

TEST_CASE("files that cannot be read are reported by name") {
  ScratchDirectory scratch;
  std::string missing = scratch.path("missing.safetensors");
  CHECK(readSafetensors(missing).message() ==
        missing + ": cannot read: No such file or directory");
  std::string directory = scratch.path("");
  CHECK(readSafetensors(directory).message() ==
        directory + ": not a regular file");
}

TEST_CASE("a header length that is truncated, absurd or beyond the file") {
  CorruptFileReader reader;
  std::string prefix = reader.path() + ": ";
  CHECK(reader.errorOf("") ==
        prefix + "the file is 0 bytes long, too short for the 8-byte header "
                 "length");
  CHECK(reader.errorOf(std::string("\x10\x00\x00", 3)) ==
        prefix + "the file is 3 bytes long, too short for the 8-byte header "
                 "length");
  CHECK(reader.errorOf(littleEndian64(20) + "{}") ==
        prefix + "header length 20 exceeds the 2 bytes after it: the file is "
                 "truncated or corrupt");
  CHECK(reader.errorOf(littleEndian64(~0ull) + "{}") ==
        prefix + "header length 18446744073709551615 exceeds the limit of "
                 "100000000 bytes: the file is corrupt");
  CHECK(reader.errorOf(littleEndian64(100'000'001) + "{}") ==
        prefix + "header length 100000001 exceeds the limit of 100000000 "
                 "bytes: the file is corrupt");
}

TEST_CASE("a header that is not valid JSON") {
  CorruptFileReader reader;
  CHECK(reader.headerErrorOf("") == "at byte 0 (the end): expected an object");
  CHECK(reader.headerErrorOf("[1, 2]") == "at byte 0: expected an object");
  CHECK(reader.headerErrorOf("{\"w\" 1}") == "at byte 5: expected ':'");
  CHECK(reader.headerErrorOf("{\"w\":") ==
        "tensor \"w\": at byte 5 (the end): expected an object");
  CHECK(reader.headerErrorOf("{w:1}") == "at byte 1: expected a string key");
  CHECK(reader.headerErrorOf("{} x") ==
        "at byte 3: unexpected text after the value");
  CHECK(reader.headerErrorOf("{\"a\\q\":1}") ==
        "at byte 4: invalid escape in a string");
  CHECK(reader.headerErrorOf("{\"\\ud800\":1}") ==
        "at byte 8: unpaired high surrogate in a \\u escape");
  CHECK(reader.headerErrorOf("{\"\\udc00\":1}") ==
        "at byte 8: unpaired low surrogate in a \\u escape");
  CHECK(reader.headerErrorOf("{\"\\u12g4\":1}") ==
        "at byte 6: expected a hex digit in a \\u escape");
  CHECK(reader.headerErrorOf("{\"\xC3\x28\":1}") ==
        "at byte 2: invalid UTF-8 in a string");
  CHECK(reader.headerErrorOf("{\"\xED\xA0\x80\":1}") ==
        "at byte 2: invalid UTF-8 in a string"); // An encoded surrogate.
  CHECK(reader.headerErrorOf(std::string("{\"a\nb\":1}")) ==
        "at byte 3: control character in a string");
  CHECK(reader.headerErrorOf("{\"a") ==
        "at byte 3 (the end): unterminated string");
  CHECK(reader.headerErrorOf("{\"w\":{\"x\":1,}}") ==
        "tensor \"w\": at byte 12: expected a string key");
  CHECK(reader.headerErrorOf("{\"w\":{\"x\":tru}}") ==
        "tensor \"w\": at byte 10: unexpected character");
  CHECK(reader.headerErrorOf("{\"w\":{\"x\":01}}") ==
        "tensor \"w\": at byte 11: expected ',' or '}'");
  CHECK(reader.headerErrorOf("{\"w\":{\"x\":1.}}") ==
        "tensor \"w\": at byte 12: expected a digit after '.'");
  std::string deep =
      "{\"w\":{\"x\":" + std::string(100, '[') + std::string(100, ']') + "}}";
  CHECK(reader.headerErrorOf(deep) ==
        "tensor \"w\": at byte 73: nesting deeper than 64");
}

TEST_CASE("a tensor entry with a missing, repeated or mistyped field") {
  CorruptFileReader reader;
  CHECK(reader.headerErrorOf("{\"w\":[]}") ==
        "tensor \"w\": at byte 5: expected an object");
  CHECK(
      reader.headerErrorOf(oneTensor("\"shape\":[2],\"data_offsets\":[0,8]")) ==
      "tensor \"w\": missing field \"dtype\"");
  CHECK(reader.headerErrorOf(
            oneTensor("\"dtype\":\"F32\",\"data_offsets\":[0,8]")) ==
        "tensor \"w\": missing field \"shape\"");
  CHECK(reader.headerErrorOf(oneTensor("\"dtype\":\"F32\",\"shape\":[2]")) ==
        "tensor \"w\": missing field \"data_offsets\"");
  CHECK(
      reader.headerErrorOf(oneTensor("\"dtype\":\"F32\",\"dtype\":\"F32\"")) ==
      "tensor \"w\": duplicate field \"dtype\"");
  CHECK(reader.headerErrorOf(oneTensor("\"dtype\":32")) ==
        "tensor \"w\": dtype: at byte 14: expected a string");
  CHECK(reader.headerErrorOf(oneTensor("\"shape\":[2.0]")) ==
        "tensor \"w\": shape: at byte 16: expected an integer, found a "
        "fractional number");
  CHECK(reader.headerErrorOf(oneTensor("\"shape\":[99999999999999999999]")) ==
        "tensor \"w\": shape: at byte 33: integer out of range");
  CHECK(reader.headerErrorOf(oneTensor("\"data_offsets\":\"0,8\"")) ==
        "tensor \"w\": data_offsets: at byte 21: expected an array");
  std::string entry = "{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}";
  CHECK(reader.headerErrorOf("{\"w\":" + entry + ",\"w\":" + entry + "}") ==
        "tensor \"w\": duplicate tensor name");
  CHECK(reader.headerErrorOf("{\"__metadata__\":{\"k\":1}}") ==
        "__metadata__: \"k\": at byte 21: expected a string");
  CHECK(reader.headerErrorOf("{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}") ==
        "__metadata__: \"k\": duplicate key");
}

TEST_CASE("unsupported dtypes are named") {
  CorruptFileReader reader;
  for (std::string dtype : {"F16", "BF16", "I64", "U8", "BOOL", "f32", ""}) {
    CAPTURE(dtype);
    CHECK(reader.headerErrorOf(oneTensor("\"dtype\":\"" + dtype +
                                         "\",\"shape\":[],"
                                         "\"data_offsets\":[0,4]")) ==
          "tensor \"w\": unsupported dtype \"" + dtype +
              "\" (supported: F32, F64)");
  }
}

TEST_CASE("shapes and offsets that do not fit each other or the file") {
  CorruptFileReader reader;
  auto entry = [](const std::string &dtype, const std::string &shape,
                  const std::string &offsets) {
    return "{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
           ",\"data_offsets\":" + offsets + "}";
  };
  CHECK(
      reader.headerErrorOf("{\"w\":" + entry("F32", "[2,-3]", "[0,0]") + "}") ==
      "tensor \"w\": negative dimension -3 in shape [2, -3]");
  CHECK(
      reader.headerErrorOf(
          "{\"w\":" + entry("F64", "[4294967296,4294967296]", "[0,8]") + "}") ==
      "tensor \"w\": shape [4294967296, 4294967296] is too large");
  CHECK(
      reader.headerErrorOf("{\"w\":" + entry("F32", "[2]", "[0,8,16]") + "}") ==
      "tensor \"w\": data_offsets must have 2 elements, not 3");
  CHECK(reader.headerErrorOf("{\"w\":" + entry("F32", "[2]", "[-8,0]") + "}") ==
        "tensor \"w\": negative data_offsets [-8, 0]");
  CHECK(reader.headerErrorOf("{\"w\":" + entry("F32", "[0]", "[8,0]") + "}") ==
        "tensor \"w\": data_offsets [8, 0] end before they begin");
  CHECK(reader.headerErrorOf("{\"w\":" + entry("F32", "[3]", "[0,8]") + "}") ==
        "tensor \"w\": data_offsets [0, 8] hold 8 bytes but F32 shape [3] "
        "needs 12");
  CHECK(reader.headerErrorOf("{\"w\":" + entry("F64", "[2]", "[0,16]") + "}") ==
        "tensor \"w\": data_offsets [0, 16] extend past the end of the data "
        "section (8 bytes): the file is truncated or the offsets are wrong");
  CHECK(reader.headerErrorOf("{\"w\":" +
                             entry("F32", "[2]",
                                   "[9223372036854775800,"
                                   "9223372036854775807]") +
                             "}") ==
        "tensor \"w\": data_offsets [9223372036854775800, 9223372036854775807] "
        "hold 7 bytes but F32 shape [2] needs 8");
  CHECK(
      reader.headerErrorOf("{\"a\":" + entry("F32", "[2]", "[0,8]") +
                               ",\"b\":" + entry("F32", "[1]", "[4,8]") + "}",
                           std::string(8, '\0')) ==
      "tensor \"a\" and tensor \"b\" overlap: data_offsets [0, 8] and [4, 8]");
}

TEST_CASE("valid but unusual headers are accepted") {
  CorruptFileReader reader;
  // An empty tensor in the middle of another, padding, unknown members of
  // every kind, escapes, and bytes after the last tensor.
  std::string header =
      " \t\r\n{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],"
      "\"extra\":[1.5e-3,-0.0,true,false,null,{\"n\":[[]]},\"s\"]},"
      "\"\\u0062\":{\"dtype\":\"F32\",\"shape\":[1,0],\"data_offsets\":[4,4]},"
      "\"__metadata__\":{\"\\u00e9\\ud83d\\ude00\\n\":\"\\/\\\"\"}}    ";
  writeBytes(reader.path(), safetensorsBytes(header, std::string(12, '\x01')));
  Expected<SafetensorsContents> read = readSafetensors(reader.path());
  REQUIRE_MESSAGE(read.ok(), read.message());
  CHECK(read->tensors.size() == 2);
  CHECK(read->tensors.at("b").shapeString() == "[1, 0]");
  CHECK(read->metadata.at("\xC3\xA9\xF0\x9F\x98\x80\n") == "/\"");
}

TEST_CASE("truncated data is reported with the tensor") {
  ScratchDirectory scratch;
  std::string path = scratch.path("whole.safetensors");
  Tensor w(DType::F64, {3});
  REQUIRE(
      writeSafetensors(path, {{"w", w}, {"a", Tensor(DType::F32, {1})}}).ok());
  std::string whole = readBytes(path);
  CorruptFileReader reader;
  std::string message = reader.errorOf(whole.substr(0, whole.size() - 1));
  CHECK(message == reader.path() +
                       ": tensor \"w\": data_offsets [4, 28] extend past the "
                       "end of the data section (27 bytes): the file is "
                       "truncated or the offsets are wrong");
  // Cut inside the header.
  CHECK(reader.errorOf(whole.substr(0, 20)).find("header length") !=
        std::string::npos);
}

TEST_CASE("random mutations of a valid file give tensors or an error") {
  ScratchDirectory scratch;
  std::string path = scratch.path("seed.safetensors");
  Tensor matrix(DType::F32, {2, 3});
  for (int64_t i = 0; i < matrix.elementCount(); ++i)
    matrix.set(i, 0.5 * static_cast<double>(i));
  REQUIRE(writeSafetensors(path,
                           {{"matrix", matrix},
                            {"scalar", Tensor(DType::F64, {})},
                            {"empty", Tensor(DType::F64, {0, 2})}},
                           {{"format", "pt"}})
              .ok());
  const std::string original = readBytes(path);

  RandomStream random(20240601);
  auto below = [&](uint64_t bound) { return random.nextBits() % bound; };
  // Bytes that matter to the parser, more likely than chance would make them.
  const std::string interesting = "{}[]\",:-0123456789e.\\u \x80\xFF";
  int accepted = 0, rejected = 0;
  for (int iteration = 0; iteration < 4000; ++iteration) {
    std::string bytes = original;
    int mutations = 1 + static_cast<int>(below(4));
    for (int m = 0; m < mutations; ++m) {
      size_t position = below(bytes.size());
      switch (below(5)) {
      case 0: // Any byte.
        bytes[position] = static_cast<char>(below(256));
        break;
      case 1: // A parser-relevant byte.
        bytes[position] = interesting[below(interesting.size())];
        break;
      case 2: // One bit.
        bytes[position] = static_cast<char>(bytes[position] ^ (1 << below(8)));
        break;
      case 3: // Truncation.
        bytes.resize(position);
        break;
      default: // A byte of the header length.
        bytes[below(8) % (bytes.size() ? bytes.size() : 1)] =
            static_cast<char>(below(256));
        break;
      }
      if (bytes.empty())
        break;
    }
    writeBytes(path, bytes);
    Expected<SafetensorsContents> read = readSafetensors(path);
    Expected<SafetensorsContents> parsed = parseSafetensors(bytes);
    CHECK(parsed.ok() == read.ok());
    if (read.ok()) {
      CHECK(parsed->tensors == read->tensors);
      ++accepted;
      for (const auto &[name, tensor] : read->tensors)
        CHECK(tensor.byteSize() == static_cast<size_t>(tensor.elementCount()) *
                                       dtypeSize(tensor.dtype()));
    } else {
      ++rejected;
      CHECK(read.message().compare(0, path.size(), path) == 0);
    }
  }
  // Both outcomes happen, so the loop exercises more than the first check.
  CHECK(accepted > 0);
  CHECK(rejected > 0);
}
