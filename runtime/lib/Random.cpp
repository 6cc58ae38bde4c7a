//===- Random.cpp - The documented generator of random initial values -----===//
//
// SplitMix64 (Steele, Lea and Flood 2014) and the Box-Muller transform.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/Random.h"

#include <cmath>

using namespace energy;

RandomStream RandomStream::forTensor(uint64_t seed, std::string_view name) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (char c : name) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ull;
  }
  RandomStream mixer(seed ^ hash);
  return RandomStream(mixer.nextBits());
}

uint64_t RandomStream::nextBits() {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double RandomStream::nextUniform() {
  return static_cast<double>(nextBits() >> 11) * 0x1.0p-53;
}

double RandomStream::nextNormal() {
  // 1 - u lies in (0, 1], so the logarithm is finite.
  double radius = std::sqrt(-2.0 * std::log(1.0 - nextUniform()));
  double angle = 2.0 * M_PI * nextUniform();
  return radius * std::cos(angle);
}
