//===- Random.h - The documented generator of random initial values -*- C++
//-*-===//
//
// Random tensors for `--init random:SEED` and the `normal`/`uniform`
// initialisers, identical across runs, compilers and machines: SplitMix64
// for bits, the top 53 bits as a uniform double, Box-Muller for normals,
// one stream per tensor seeded from (seed, tensor name).
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_RUNTIME_RANDOM_H
#define ENERGY_RUNTIME_RANDOM_H

#include <cstdint>
#include <string_view>

namespace energy {

/// A stream of uniform and normal doubles. Every value is a deterministic
/// function of the seed: no library distribution (whose algorithms differ
/// between standard libraries) is involved.
class RandomStream {
public:
  explicit RandomStream(uint64_t seed) : state(seed) {}

  /// The stream of tensor `name` under run seed `seed`: the seed mixed with
  /// the FNV-1a hash of the name.
  static RandomStream forTensor(uint64_t seed, std::string_view name);

  /// The next 64 random bits (SplitMix64).
  uint64_t nextBits();
  /// Uniform in [0, 1), from the top 53 bits.
  double nextUniform();
  /// Standard normal, by the Box-Muller transform of two uniforms (the
  /// second of each pair is discarded, so that every value consumes exactly
  /// two uniforms).
  double nextNormal();

private:
  uint64_t state;
};

} // namespace energy

#endif // ENERGY_RUNTIME_RANDOM_H
