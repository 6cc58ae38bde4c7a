//===- SoftmaxContractDevice.h - What both GPU contractions share -*- C++
//-*-===//
//
// Device helpers of the two GPU softmax contractions (SoftmaxContract.cu on
// CUDA cores, SoftmaxContractTensorCores.cu on tensor cores): reading the
// ContractSlots' integers as pointers and doubles, the pair constraints, and
// the value tables laid side by side. CUDA only.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTDEVICE_H
#define ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTDEVICE_H

#include "SoftmaxContractSlots.h"

#include <stdint.h>

namespace energy::cuda {

__device__ inline double bitsToDouble(int64_t bits) {
  return __longlong_as_double(bits);
}

template <typename T> __device__ T *pointer(int64_t bits) {
  return reinterpret_cast<T *>(static_cast<uintptr_t>(bits));
}

/// `s` for this block's problem of the batch (batchBase + blockIdx.y): every
/// pointer at that problem's slice of its array, elements of T. On the
/// column side the value tables are the rows' and the outputs the columns'.
template <typename T>
__device__ ContractSlots problemSlots(const ContractSlots &s, bool columnSide) {
  ContractSlots p = s;
  const int64_t problem = s.batchBase + blockIdx.y;
  auto advance = [&](int64_t &bits, int64_t positions, int64_t width) {
    if (bits)
      bits += problem * positions * width * static_cast<int64_t>(sizeof(T));
  };
  advance(p.rowFeatures, s.rows, s.depth);
  advance(p.colFeatures, s.cols, s.depth);
  advance(p.lse, s.rows, 1);
  advance(p.givenLse, s.rows, 1);
  for (int j = 0; j < kContractMaxTables; ++j) {
    if (j >= s.numTables)
      break;
    advance(p.values[j], columnSide ? s.rows : s.cols, s.widths[j]);
    advance(p.outputs[j], columnSide ? s.cols : s.rows, s.widths[j]);
  }
  return p;
}

/// Whether the pair (row, col) satisfies every constraint of `s`.
__device__ inline bool admitted(const ContractSlots &s, int64_t row,
                                int64_t col) {
  for (int k = 0; k < kContractMaxConstraints; ++k) {
    if (k >= s.numConstraints)
      break;
    const int64_t *c = s.constraints + 4 * k;
    int64_t value = c[0] * row + c[1] * col + c[2];
    if (c[3] == 0 ? value < 0 : value == 0)
      return false;
  }
  return true;
}

/// Whether no pair of rows [row0, row1] × cols [col0, col1] is admitted
/// because one `>= 0` constraint fails at every corner (it is linear, so
/// then everywhere in the rectangle).
__device__ inline bool noneAdmitted(const ContractSlots &s, int64_t row0,
                                    int64_t row1, int64_t col0, int64_t col1) {
  for (int k = 0; k < kContractMaxConstraints; ++k) {
    if (k >= s.numConstraints)
      break;
    const int64_t *c = s.constraints + 4 * k;
    if (c[3] != 0)
      continue;
    int64_t a = c[0] * row0 + c[1] * col0, b = c[0] * row1 + c[1] * col0;
    int64_t d = c[0] * row0 + c[1] * col1, e = c[0] * row1 + c[1] * col1;
    int64_t largest = a > b ? a : b;
    largest = largest > d ? largest : d;
    largest = largest > e ? largest : e;
    if (largest + c[2] < 0)
      return true;
  }
  return false;
}

/// The widths of this pass's tables together.
__device__ inline int tableWidth(const ContractSlots &s) {
  int width = 0;
  for (int j = 0; j < s.numTables; ++j)
    width += static_cast<int>(s.widths[j]);
  return width;
}

/// Element `w` (of the tables' widths together) of `position` in this
/// pass's value tables.
template <typename T>
__device__ T tableValue(const ContractSlots &s, int64_t position, int w) {
  for (int j = 0; j < s.numTables; ++j) {
    if (w < s.widths[j])
      return pointer<const T>(s.values[j])[position * s.widths[j] + w];
    w -= static_cast<int>(s.widths[j]);
  }
  return T(0);
}

/// Stores `value` as element `w` (of the widths together) of `position`
/// in this pass's output tables.
template <typename T>
__device__ void storeOutput(const ContractSlots &s, int64_t position, int w,
                            T value) {
  for (int j = 0; j < s.numTables; ++j) {
    if (w < s.widths[j]) {
      pointer<T>(s.outputs[j])[position * s.widths[j] + w] = value;
      return;
    }
    w -= static_cast<int>(s.widths[j]);
  }
}

} // namespace energy::cuda

#endif // ENERGY_KERNELSUPPORT_SOFTMAXCONTRACTDEVICE_H
