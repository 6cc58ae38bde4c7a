//===- SafetensorsTestSupport.h - Safetensors test files --------*- C++ -*-===//
//
// A scratch directory that removes itself, and helpers that build, write and
// read files byte by byte, shared by the safetensors unit tests.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TESTS_UNIT_RUNTIME_SAFETENSORSTESTSUPPORT_H
#define ENERGY_TESTS_UNIT_RUNTIME_SAFETENSORSTESTSUPPORT_H

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace energy::test {

/// A fresh directory under the system's temporary directory, removed with
/// everything in it at the end of the scope.
class ScratchDirectory {
public:
  ScratchDirectory() {
    static std::atomic<unsigned> counter{0};
    auto ticks = std::chrono::steady_clock::now().time_since_epoch().count();
    root = std::filesystem::temp_directory_path() /
           ("energy-safetensors-test-" + std::to_string(ticks) + "-" +
            std::to_string(counter++));
    std::filesystem::create_directories(root);
  }
  ~ScratchDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(root, ignored);
  }
  ScratchDirectory(const ScratchDirectory &) = delete;
  ScratchDirectory &operator=(const ScratchDirectory &) = delete;

  /// The path of `name` inside the directory.
  std::string path(const std::string &name) const {
    return (root / name).string();
  }
  /// The number of entries in the directory.
  size_t entryCount() const {
    return std::distance(std::filesystem::directory_iterator(root),
                         std::filesystem::directory_iterator());
  }

private:
  std::filesystem::path root;
};

/// `value` as 8 little-endian bytes.
inline std::string littleEndian64(uint64_t value) {
  std::string bytes;
  for (int i = 0; i < 8; ++i)
    bytes += static_cast<char>((value >> (8 * i)) & 0xFF);
  return bytes;
}

/// A safetensors file: the header's length, the header, the data.
inline std::string safetensorsBytes(const std::string &header,
                                    const std::string &data) {
  return littleEndian64(header.size()) + header + data;
}

inline void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

inline std::string readBytes(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file),
                     std::istreambuf_iterator<char>());
}

} // namespace energy::test

#endif // ENERGY_TESTS_UNIT_RUNTIME_SAFETENSORSTESTSUPPORT_H
