//===- Initializer.cpp - The initial values of unbound tensors ------------===//
//
// The reference for these values is the interpreter's run (energy-run
// --interp): the same streams, the same order of draws, the same formulas.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/Initializer.h"

#include "energy/Runtime/Random.h"

#include <cmath>

using namespace energy;

namespace {
struct InitName {
  InitKind kind;
  std::string_view name;
};
} // namespace

static constexpr InitName initNames[] = {
    {InitKind::Zeros, "zeros"},     {InitKind::Ones, "ones"},
    {InitKind::Eye, "eye"},         {InitKind::Normal, "normal"},
    {InitKind::Uniform, "uniform"}, {InitKind::Copy, "copy"},
};

std::string_view energy::initKindName(InitKind kind) {
  for (const InitName &entry : initNames)
    if (entry.kind == kind)
      return entry.name;
  return "?";
}

std::optional<InitKind> energy::initKindFromName(std::string_view name) {
  for (const InitName &entry : initNames)
    if (entry.name == name)
      return entry.kind;
  return std::nullopt;
}

size_t energy::initArgumentCount(InitKind kind) {
  return kind == InitKind::Normal || kind == InitKind::Uniform ? 2 : 0;
}

Expected<Tensor> energy::initialValue(DType dtype,
                                      const std::vector<int64_t> &shape,
                                      const std::string &name,
                                      const std::optional<InitSpec> &init,
                                      std::optional<uint64_t> seed) {
  if (!init && !seed)
    return Status::error("tensor '" + name +
                         "' has no value: bind it or give an initialiser/"
                         "--init random:SEED");
  if (init && init->args.size() != initArgumentCount(init->kind))
    return Status::error("tensor '" + name + "': initialiser " +
                         std::string(initKindName(init->kind)) + " takes " +
                         std::to_string(initArgumentCount(init->kind)) +
                         " arguments, not " +
                         std::to_string(init->args.size()));
  if (init && init->kind == InitKind::Eye && shape.empty())
    return Status::error("tensor '" + name +
                         "': initialiser eye needs at least one axis");
  if (init && init->kind == InitKind::Copy)
    return Status::error("tensor '" + name + "' is a copy of '" + init->source +
                         "': its value comes from that tensor, not from an "
                         "initialiser");
  Expected<Tensor> allocated = Tensor::allocate(dtype, shape);
  if (!allocated)
    return allocated.status().withContext("tensor '" + name + "'");
  Tensor &value = *allocated;
  int64_t count = value.elementCount();
  RandomStream stream = RandomStream::forTensor(seed.value_or(0), name);
  if (!init) {
    double scale =
        1.0 / std::sqrt(static_cast<double>(shape.empty() ? 1 : shape.back()));
    for (int64_t i = 0; i < count; ++i)
      value.set(i, scale * stream.nextNormal());
    return allocated;
  }
  switch (init->kind) {
  case InitKind::Zeros:
  case InitKind::Copy:
    break;
  case InitKind::Ones:
    for (int64_t i = 0; i < count; ++i)
      value.set(i, 1.0);
    break;
  case InitKind::Eye: {
    int64_t n = shape.back();
    for (int64_t i = 0; i < count; ++i)
      value.set(i, (i % n) == ((i / n) % n) ? 1.0 : 0.0);
    break;
  }
  case InitKind::Normal:
    for (int64_t i = 0; i < count; ++i)
      value.set(i, init->args[0] + init->args[1] * stream.nextNormal());
    break;
  case InitKind::Uniform:
    for (int64_t i = 0; i < count; ++i)
      value.set(i, init->args[0] +
                       (init->args[1] - init->args[0]) * stream.nextUniform());
    break;
  }
  return allocated;
}
