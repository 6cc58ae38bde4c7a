//===- RandomTest.cpp - The documented generator of random values ---------===//
//
// Unit tests of the generator behind `--init random:SEED`: its bits match an
// independent implementation of SplitMix64 (splitmix64_reference.py), and
// its uniforms and normals have the right distribution.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/Random.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>

using energy::RandomStream;

TEST_CASE("the bits are SplitMix64's") {
  // From splitmix64_reference.py, an independent Python implementation.
  const uint64_t expected[] = {6457827717110365317ull, 3203168211198807973ull,
                               9817491932198370423ull, 4593380528125082431ull,
                               16408922859458223821ull};
  RandomStream stream(1234567);
  for (uint64_t value : expected)
    CHECK(stream.nextBits() == value);
  RandomStream zero(0);
  CHECK(zero.nextBits() == 16294208416658607535ull);
  CHECK(zero.nextBits() == 7960286522194355700ull);
}

TEST_CASE("uniforms lie in [0, 1) and normals are standard") {
  // Over n samples the sample mean of a standard normal has standard error
  // 1/sqrt(n) and the sample variance sqrt(2/n); 5 standard errors make a
  // false failure (for this fixed seed: never) astronomically unlikely.
  constexpr int n = 200000;
  RandomStream stream(42);
  double sum = 0, squares = 0;
  for (int i = 0; i < n; ++i) {
    double u = stream.nextUniform();
    REQUIRE(u >= 0.0);
    REQUIRE(u < 1.0);
    double x = stream.nextNormal();
    REQUIRE(std::isfinite(x));
    sum += x;
    squares += x * x;
  }
  double mean = sum / n;
  double variance = squares / n - mean * mean;
  CHECK(std::abs(mean) < 5.0 / std::sqrt(double(n)));
  CHECK(std::abs(variance - 1.0) < 5.0 * std::sqrt(2.0 / n));
}

TEST_CASE("each tensor has its own reproducible stream") {
  RandomStream a = RandomStream::forTensor(7, "x");
  RandomStream again = RandomStream::forTensor(7, "x");
  RandomStream other = RandomStream::forTensor(7, "y");
  RandomStream reseeded = RandomStream::forTensor(8, "x");
  uint64_t first = a.nextBits();
  CHECK(first == again.nextBits());
  CHECK(first != other.nextBits());
  CHECK(first != reseeded.nextBits());
}
