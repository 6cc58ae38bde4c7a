//===- InitializerTest.cpp - The initial values of unbound tensors --------===//
//
// Unit tests of energy::initialValue: each initialiser's values, drawn from
// the documented streams in the documented order, in both element types.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/Initializer.h"
#include "energy/Runtime/Random.h"

#include <doctest/doctest.h>

#include <cmath>

using energy::DType;
using energy::Expected;
using energy::initialValue;
using energy::InitKind;
using energy::InitSpec;
using energy::RandomStream;
using energy::Tensor;

TEST_CASE("zeros, ones and eye") {
  Expected<Tensor> zeros = initialValue(DType::F64, {2, 3}, "z",
                                        InitSpec{InitKind::Zeros, {}, ""}, {});
  REQUIRE(zeros.ok());
  CHECK(*zeros == Tensor(DType::F64, {2, 3}));

  Expected<Tensor> ones =
      initialValue(DType::F32, {4}, "o", InitSpec{InitKind::Ones, {}, ""}, {});
  REQUIRE(ones.ok());
  CHECK(ones->dtype() == DType::F32);
  for (int64_t i = 0; i < 4; ++i)
    CHECK(ones->at(i) == 1.0);

  // A stack of two 3x3 identities.
  Expected<Tensor> eye = initialValue(DType::F64, {2, 3, 3}, "e",
                                      InitSpec{InitKind::Eye, {}, ""}, {});
  REQUIRE(eye.ok());
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 3; ++j)
        CHECK(eye->at(eye->flatIndex({b, i, j})) == (i == j ? 1.0 : 0.0));
  CHECK_FALSE(
      initialValue(DType::F64, {}, "e", InitSpec{InitKind::Eye, {}, ""}, {}));
}

TEST_CASE("normal and uniform draw from the tensor's stream in row-major "
          "order") {
  InitSpec normal{InitKind::Normal, {0.5, 2.0}, ""};
  InitSpec uniform{InitKind::Uniform, {-1.0, 3.0}, ""};
  for (std::optional<uint64_t> seed :
       {std::optional<uint64_t>(), std::optional<uint64_t>(17)}) {
    Expected<Tensor> n = initialValue(DType::F64, {2, 2}, "w", normal, seed);
    Expected<Tensor> u = initialValue(DType::F32, {5}, "u", uniform, seed);
    REQUIRE(n.ok());
    REQUIRE(u.ok());
    RandomStream normalStream = RandomStream::forTensor(seed.value_or(0), "w");
    for (int64_t i = 0; i < 4; ++i)
      CHECK(n->at(i) == 0.5 + 2.0 * normalStream.nextNormal());
    RandomStream uniformStream = RandomStream::forTensor(seed.value_or(0), "u");
    for (int64_t i = 0; i < 5; ++i)
      CHECK(u->at(i) == static_cast<double>(static_cast<float>(
                            -1.0 + 4.0 * uniformStream.nextUniform())));
  }
  CHECK(initialValue(DType::F64, {3}, "w", InitSpec{InitKind::Normal, {1}, ""},
                     {})
            .message() == "tensor 'w': initialiser normal takes 2 arguments, "
                          "not 1");
}

TEST_CASE("a tensor without an initialiser is random with a seed, an error "
          "without") {
  Expected<Tensor> value = initialValue(DType::F64, {3, 4}, "x", {}, 5);
  REQUIRE(value.ok());
  RandomStream stream = RandomStream::forTensor(5, "x");
  for (int64_t i = 0; i < 12; ++i)
    CHECK(value->at(i) == 0.5 * stream.nextNormal()); // 1 / sqrt(4)
  Expected<Tensor> scalar = initialValue(DType::F64, {}, "s", {}, 5);
  REQUIRE(scalar.ok());
  CHECK(scalar->at(0) == RandomStream::forTensor(5, "s").nextNormal());

  CHECK(initialValue(DType::F64, {3}, "x", {}, {}).message() ==
        "tensor 'x' has no value: bind it or give an initialiser/--init "
        "random:SEED");
  CHECK_FALSE(
      initialValue(DType::F64, {3}, "x", InitSpec{InitKind::Copy, {}, "y"}, 5));
}

TEST_CASE("initialiser names") {
  CHECK(energy::initKindFromName("uniform") == InitKind::Uniform);
  CHECK_FALSE(energy::initKindFromName("gauss"));
  CHECK(energy::initKindName(InitKind::Eye) == "eye");
  CHECK(energy::initArgumentCount(InitKind::Normal) == 2);
  CHECK(energy::initArgumentCount(InitKind::Copy) == 0);
}
