//===- SoftmaxContractSlots.h - The GPU contraction's arguments -*- C++ -*-===//
//
// What one pass of the GPU softmax contraction (SoftmaxContract.cu) takes
// by value, as CudaContract.cpp fills it: sizes, pointers and doubles as
// 8-byte values. Plain C++, read by nvcc and the host compiler alike.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTSLOTS_H
#define ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTSLOTS_H

#include <stdint.h>

namespace energy::cuda {

/// The most value tables a side and constraints the GPU kernels take.
constexpr int kContractMaxTables = 4;
constexpr int kContractMaxConstraints = 4;

struct ContractSlots {
  /// One problem's sizes; the launch's problems are batchBase +
  /// blockIdx.y (SoftmaxContract.h's batch), back to back in every array.
  int64_t rows, cols, depth, batchBase;
  /// Pointers, as integers.
  int64_t rowFeatures, colFeatures;
  /// Doubles, as their bits.
  int64_t scaleBits, temperatureBits;
  int64_t numConstraints;
  /// Per constraint: row coefficient, column coefficient, offset, kind.
  int64_t constraints[kContractMaxConstraints * 4];
  /// The rows' normalisers: written by the row side (or null), or given.
  int64_t lse, givenLse;
  /// This pass's tables: the values it sums, their widths, its outputs.
  int64_t numTables;
  int64_t values[kContractMaxTables];
  int64_t widths[kContractMaxTables];
  int64_t outputs[kContractMaxTables];
};

static_assert(sizeof(ContractSlots) == (24 + 4 * kContractMaxConstraints) * 8,
              "every field is one 8-byte value, without padding");

} // namespace energy::cuda

#endif // ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTSLOTS_H
