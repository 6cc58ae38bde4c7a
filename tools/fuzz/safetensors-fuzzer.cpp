//===- safetensors-fuzzer.cpp - libFuzzer target of the safetensors reader ===//
//
// Feeds each input, as the bytes of one safetensors file, to the runtime's
// reader (parseSafetensors, the code readSafetensors runs on a file).
// Findings are crashes, sanitizer reports (a read out of bounds), hangs and
// a broken contract: a tensor whose bytes do not match its shape and dtype,
// or an error without a message.
//
// Build and run: make fuzz (see docs/tools.md).
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/Safetensors.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

using namespace energy;

/// Reports a broken contract and stops, so that libFuzzer keeps the input.
static void fail(const char *what) {
  std::fprintf(stderr, "safetensors-fuzzer: %s\n", what);
  std::abort();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char *>(data), size);
  Expected<SafetensorsContents> contents = parseSafetensors(bytes);
  if (!contents) {
    if (contents.message().empty())
      fail("an error without a message");
    return 0;
  }
  for (const auto &[name, tensor] : contents->tensors) {
    if (tensor.byteSize() != static_cast<size_t>(tensor.elementCount()) *
                                 dtypeSize(tensor.dtype()))
      fail("a tensor whose bytes do not match its shape");
    if (tensor.byteSize() > size)
      fail("a tensor larger than the file");
    // Every element, so that ASan sees each byte read.
    double sum = 0;
    for (int64_t i = 0; i < tensor.elementCount(); ++i)
      sum += tensor.at(i);
    (void)sum;
  }
  return 0;
}
