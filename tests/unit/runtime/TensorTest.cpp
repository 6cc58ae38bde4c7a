//===- TensorTest.cpp - Dense fp32 and fp64 tensors and Status ------------===//
//
// Unit tests of energy::Tensor (shapes, element access, conversion,
// equality, allocation that fails with a message) and of the Status and
// Expected error values.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/Tensor.h"
#include "energy/Runtime/Status.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>

using energy::DType;
using energy::Expected;
using energy::Status;
using energy::Tensor;
using energy::TensorMemory;

TEST_CASE("a tensor starts as zeros of its shape") {
  Tensor matrix(DType::F32, {2, 3});
  CHECK(matrix.dtype() == DType::F32);
  CHECK(matrix.rank() == 2);
  CHECK(matrix.elementCount() == 6);
  CHECK(matrix.byteSize() == 24);
  CHECK(matrix.shapeString() == "[2, 3]");
  for (int64_t i = 0; i < matrix.elementCount(); ++i)
    CHECK(matrix.at(i) == 0.0);

  Tensor scalar(DType::F64, {});
  CHECK(scalar.elementCount() == 1);
  CHECK(scalar.byteSize() == 8);
  CHECK(scalar.shapeString() == "[]");

  Tensor empty(DType::F64, {0, 3});
  CHECK(empty.elementCount() == 0);
  CHECK(empty.byteSize() == 0);
  CHECK(empty.shapeString() == "[0, 3]");

  Tensor byDefault;
  CHECK(byDefault.dtype() == DType::F64);
  CHECK(byDefault.elementCount() == 1);
}

TEST_CASE("elements are stored row-major and little-endian") {
  Tensor matrix(DType::F32, {2, 3});
  matrix.set(matrix.flatIndex({1, 2}), 1.0);
  CHECK(matrix.flatIndex({1, 2}) == 5);
  CHECK(matrix.flatIndex({0, 1}) == 1);
  CHECK(matrix.at(5) == 1.0);
  // 1.0f is 0x3F800000.
  const std::byte *bytes = matrix.data() + 5 * 4;
  CHECK(bytes[0] == std::byte{0x00});
  CHECK(bytes[1] == std::byte{0x00});
  CHECK(bytes[2] == std::byte{0x80});
  CHECK(bytes[3] == std::byte{0x3F});

  Tensor vector(DType::F64, {2});
  vector.set(1, -2.0); // 0xC000000000000000
  CHECK(vector.data()[15] == std::byte{0xC0});
  CHECK(vector.data()[8] == std::byte{0x00});
}

TEST_CASE(
    "F32 elements round to nearest; conversion is exact where it can be") {
  Tensor narrow(DType::F32, {3});
  narrow.set(0, 0.1);
  CHECK(narrow.at(0) == static_cast<double>(0.1f));
  narrow.set(1, -1e300); // Beyond float's range.
  CHECK(std::isinf(narrow.at(1)));
  narrow.set(2, 3.5);

  Tensor wide = narrow.converted(DType::F64);
  CHECK(wide.dtype() == DType::F64);
  CHECK(wide.shape() == narrow.shape());
  for (int64_t i = 0; i < 3; ++i)
    CHECK(wide.at(i) == narrow.at(i));
  CHECK(wide.converted(DType::F32) == narrow);
  CHECK(narrow.converted(DType::F32) == narrow);

  Tensor precise(DType::F64, {});
  precise.set(0, 1.0 / 3.0);
  CHECK(precise.converted(DType::F32).at(0) ==
        static_cast<double>(static_cast<float>(1.0 / 3.0)));
}

TEST_CASE("tensors are equal when dtype, shape and bits are") {
  Tensor a(DType::F64, {2}), b(DType::F64, {2});
  CHECK(a == b);
  b.set(1, -0.0);
  CHECK(a != b); // The sign bit differs.
  CHECK(a != Tensor(DType::F64, {1, 2}));
  CHECK(a != Tensor(DType::F32, {2}));
  a.set(0, std::nan(""));
  Tensor c = a;
  CHECK(a == c); // Bitwise, so a NaN equals its copy.
}

TEST_CASE("element counts that overflow are detected") {
  using energy::checkedElementCount;
  CHECK(checkedElementCount({}, 4) == 1);
  CHECK(checkedElementCount({2, 3, 4}, 8) == 24);
  CHECK(checkedElementCount({0, -1}, 4) == std::nullopt);
  CHECK(checkedElementCount({-1}, 4) == std::nullopt);
  CHECK(checkedElementCount({1ll << 62, 0}, 4) == 0);
  CHECK(checkedElementCount({1ll << 61}, 4) == std::nullopt);
  CHECK(checkedElementCount({1ll << 60}, 4) == (1ll << 60));
  CHECK(checkedElementCount({1ll << 32, 1ll << 32}, 4) == std::nullopt);
}

TEST_CASE("a copy owns its own bytes") {
  Tensor original(DType::F32, {3});
  original.set(1, 2.5);
  Tensor copy = original;
  CHECK(copy == original);
  copy.set(1, -1.0);
  CHECK(original.at(1) == 2.5);
  Tensor assigned(DType::F64, {7});
  assigned = original;
  CHECK(assigned == original);
  CHECK(assigned.data() != original.data());
  Tensor moved = std::move(copy);
  CHECK(moved.at(1) == -1.0);
}

TEST_CASE("allocate gives zeros, or an error naming the shape and bytes") {
  Expected<Tensor> matrix = Tensor::allocate(DType::F32, {2, 3});
  REQUIRE_MESSAGE(matrix.ok(), matrix.message());
  CHECK(*matrix == Tensor(DType::F32, {2, 3}));
  Expected<Tensor> empty = Tensor::allocate(DType::F64, {0, 1ll << 62});
  REQUIRE_MESSAGE(empty.ok(), empty.message());
  CHECK(empty->byteSize() == 0);
  CHECK(empty->data() != nullptr);

  CHECK(Tensor::allocate(DType::F32, {2, -1}).message() ==
        "cannot allocate F32 [2, -1]: negative dimension -1");
  CHECK(Tensor::allocate(DType::F64, {1ll << 32, 1ll << 32}).message() ==
        "cannot allocate F64 [4294967296, 4294967296]: its size in bytes "
        "overflows 64 bits");
  // 2^62 bytes: representable, and more than any machine has. The check
  // comes before calloc, so that no system's overcommitting matters.
  CHECK(Tensor::allocate(DType::F32, {1ll << 60}).message() ==
        "cannot allocate 4611686018427387904 bytes (4.6 EB) for F32 "
        "[1152921504606846976]: more than the memory this machine has, " +
            energy::byteCountText(energy::machineMemoryBytes()));
  CHECK(energy::machineMemoryBytes() > (1ull << 20));
}

TEST_CASE("byte counts read in bytes and decimal units") {
  using energy::byteCountText;
  CHECK(byteCountText(0) == "0 bytes");
  CHECK(byteCountText(999) == "999 bytes");
  CHECK(byteCountText(1000) == "1000 bytes (1.0 kB)");
  CHECK(byteCountText(999949) == "999949 bytes (999.9 kB)");
  CHECK(byteCountText(999950) == "999950 bytes (1.0 MB)");
  CHECK(byteCountText(64'000'000'000'000) == "64000000000000 bytes (64.0 TB)");
  CHECK(byteCountText(UINT64_MAX) == "18446744073709551615 bytes (18.4 EB)");
  CHECK(energy::cannotAllocateText(DType::F32, {2, 3}, 24) ==
        "cannot allocate 24 bytes for F32 [2, 3]");
}

TEST_CASE("Status and Expected carry a value or a message") {
  Status fine = Status::success();
  CHECK(fine.ok());
  CHECK(fine.message().empty());
  CHECK(fine.withContext("file").ok());

  Status failed = Status::error("bad dtype");
  CHECK_FALSE(failed.ok());
  CHECK(failed.withContext("tensor \"w\"")
            .withContext("m.safetensors")
            .message() == "m.safetensors: tensor \"w\": bad dtype");

  Expected<int> value = 42;
  REQUIRE(value.ok());
  CHECK(*value == 42);
  Expected<int> error = Status::error("no value");
  CHECK_FALSE(error.ok());
  CHECK(error.message() == "no value");
}

namespace {
/// A TensorMemory that counts what it hands out and takes back, and fills
/// new blocks with a pattern, so that zeroing is visible.
int liveBlocks = 0;
void *allocateCounted(size_t bytes) {
  ++liveBlocks;
  void *pointer = std::malloc(bytes);
  if (pointer)
    std::memset(pointer, 0xAB, bytes);
  return pointer;
}
void releaseCounted(void *pointer) {
  --liveBlocks;
  std::free(pointer);
}
void *refuse(size_t) { return nullptr; }
} // namespace

TEST_CASE("tensors live in the memory a device runtime gives") {
  const TensorMemory counted{allocateCounted, releaseCounted};
  {
    Expected<Tensor> zeros = Tensor::allocate(DType::F32, {2, 3}, counted);
    REQUIRE(zeros.ok());
    CHECK(liveBlocks == 1);
    for (int64_t i = 0; i < 6; ++i)
      CHECK(zeros->at(i) == 0.0);

    Tensor host(DType::F64, {3});
    host.set(0, 1.5);
    host.set(2, -2.0);
    Expected<Tensor> copy = host.copyTo(counted);
    REQUIRE(copy.ok());
    CHECK(liveBlocks == 2);
    CHECK(*copy == host);
    // A copy made with the copy constructor is in host memory.
    Tensor back = *copy;
    CHECK(liveBlocks == 2);
    CHECK(back == host);
  }
  CHECK(liveBlocks == 0);

  Expected<Tensor> none =
      Tensor::allocate(DType::F32, {4}, TensorMemory{refuse, releaseCounted});
  REQUIRE(!none.ok());
  CHECK(none.message() ==
        "cannot allocate 16 bytes for F32 [4]: out of device memory");
}

TEST_CASE("a borrowed tensor is a view that holds its lender") {
  std::vector<float> elements = {1, 2, 3, 4, 5, 6};
  auto lender = std::make_shared<int>(0);
  std::weak_ptr<int> watched = lender;
  std::optional<Tensor> view =
      Tensor::borrow(DType::F32, {2, 3}, elements.data(), std::move(lender));
  CHECK(view->borrowed());
  CHECK(view->at(4) == 5);
  elements[4] = 50;
  CHECK(view->at(4) == 50);
  Tensor second = view->view();
  CHECK(second.data() == view->data());
  Tensor copy = *view;
  CHECK(!copy.borrowed());
  CHECK(copy.data() != view->data());
  view.reset();
  CHECK(!watched.expired());
  second = Tensor(DType::F32, {1});
  CHECK(watched.expired());
  CHECK(copy.at(4) == 50);
}
