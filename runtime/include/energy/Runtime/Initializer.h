//===- Initializer.h - The initial values of unbound tensors ----*- C++ -*-===//
//
// What a tensor holds when nobody bound it: the value of its declared
// initialiser (zeros, ones, eye, normal, uniform), or, for a tensor without
// one, the `--init random:SEED` value. The same function serves sessions of
// compiled artifacts and the reference interpreter, so both start a run
// from bit-identical tensors.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_RUNTIME_INITIALIZER_H
#define ENERGY_RUNTIME_INITIALIZER_H

#include "energy/Runtime/Status.h"
#include "energy/Runtime/Tensor.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace energy {

/// The initialisers of the language.
enum class InitKind { Zeros, Ones, Eye, Normal, Uniform, Copy };

/// The language's name of an initialiser ("zeros", "normal", ...).
std::string_view initKindName(InitKind kind);
/// The initialiser called `name`; nothing for any other name.
std::optional<InitKind> initKindFromName(std::string_view name);
/// How many numeric arguments the initialiser takes (2 for normal and
/// uniform, 0 for the others).
size_t initArgumentCount(InitKind kind);

/// A declared initialiser.
struct InitSpec {
  InitKind kind = InitKind::Zeros;
  /// normal: mean and standard deviation; uniform: low and high.
  std::vector<double> args;
  /// copy: the tensor whose value this one starts from.
  std::string source;
};

/// The initial value of tensor `name` of shape `shape`:
/// - zeros, ones;
/// - eye: 1 where the last two indices are equal (element i is 1 when
///   i % n == (i / n) % n, n the last dimension), else 0;
/// - normal(mean, std): mean + std * z, uniform(low, high):
///   low + (high - low) * u, with z and u drawn element by element in
///   row-major order from RandomStream::forTensor(seed or 0, name);
/// - no initialiser: with a seed, normal(0, 1) from the same stream scaled
///   by 1 / sqrt(last dimension) (1 for a scalar); without one, an error.
/// Values are computed in double and rounded to `dtype`. A copy takes the
/// value of another tensor, which only the caller has: it is an error here.
/// A shape whose bytes cannot be allocated is an error naming the tensor
/// (see Tensor::allocate).
Expected<Tensor> initialValue(DType dtype, const std::vector<int64_t> &shape,
                              const std::string &name,
                              const std::optional<InitSpec> &init,
                              std::optional<uint64_t> seed);

} // namespace energy

#endif // ENERGY_RUNTIME_INITIALIZER_H
