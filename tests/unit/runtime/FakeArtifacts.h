//===- FakeArtifacts.h - Where the tests' fake artifacts are ----*- C++ -*-===//
//
// The paths of the libraries built from fake_artifact.c (the build passes
// them as compile definitions) and a helper to bind vectors.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TESTS_UNIT_RUNTIME_FAKEARTIFACTS_H
#define ENERGY_TESTS_UNIT_RUNTIME_FAKEARTIFACTS_H

#include "energy/Runtime/Tensor.h"

#include <vector>

/// The quadratic bowl in f64 (with threads) and in f32.
static const char *const fakeF64 = ENERGY_FAKE_F64;
static const char *const fakeF32 = ENERGY_FAKE_F32;
/// Broken ones: manifest format version 5 (the last release's), a kernel
/// missing, no manifest symbol, kernels that fail (see fake_artifact.c).
static const char *const fakeOtherVersion = ENERGY_FAKE_OTHER_VERSION;
static const char *const fakeMissingKernel = ENERGY_FAKE_MISSING_KERNEL;
static const char *const fakeNotArtifact = ENERGY_FAKE_NOT_ARTIFACT;
static const char *const fakeFaulty = ENERGY_FAKE_FAULTY;

/// A vector tensor of `dtype` holding `values`.
inline energy::Tensor vectorTensor(energy::DType dtype,
                                   const std::vector<double> &values) {
  energy::Tensor tensor(dtype, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i)
    tensor.set(static_cast<int64_t>(i), values[i]);
  return tensor;
}

#endif // ENERGY_TESTS_UNIT_RUNTIME_FAKEARTIFACTS_H
