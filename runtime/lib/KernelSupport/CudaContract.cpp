//===- CudaContract.cpp - The softmax contraction of CUDA artifacts -------===//
//
// energy_support_cuda_softmax_contract_*: SoftmaxContract.h's contraction
// on the GPU (SoftmaxContract.cu, whose PTX the build embeds) when its sizes
// fit the GPU kernels, else on the host; CUDA artifacts call it where CPU
// artifacts call energy_support_softmax_contract_*. Every pointer must be
// memory the GPU reaches (as in CUDA artifacts).
//
//===----------------------------------------------------------------------===//

#include "CudaLaunch.h"
#include "SoftmaxContractSlots.h"
#include "energy/KernelSupport/KernelSupport.h"
#include "energy/KernelSupport/SoftmaxContract.h"
#include "energy/Runtime/ArtifactABI.h"

#include <cmath>
#include <cstring>
#include <string>

#if ENERGY_HAS_CUDA_KERNELS
/// The PTX of SoftmaxContract.cu (SoftmaxContractPtx.cpp, generated).
extern const char energySoftmaxContractPtx[];
#endif

namespace {
using energy::cuda::ContractSlots;
using energy::cuda::kContractMaxConstraints;
using energy::cuda::kContractMaxTables;

int64_t bits(const void *pointer) {
  return static_cast<int64_t>(reinterpret_cast<uintptr_t>(pointer));
}
int64_t bits(double value) {
  int64_t result;
  std::memcpy(&result, &value, sizeof(result));
  return result;
}

/// The smallest kernel bound (32, 64, 128; up to `largest`) that holds
/// every one of `sizes`, or 0.
int boundFor(std::initializer_list<int64_t> sizes, int largest) {
  int64_t needed = 0;
  for (int64_t size : sizes)
    needed = std::max(needed, size);
  for (int bound = 32; bound <= largest; bound *= 2)
    if (needed <= bound)
      return bound;
  return 0;
}

int64_t widthSum(int64_t count, const int64_t *widths) {
  int64_t sum = 0;
  for (int64_t j = 0; j < count; ++j)
    sum += widths[j];
  return sum;
}

/// Whether the GPU kernels take these arguments (else the host computes
/// them, which also reports invalid ones).
bool fitsKernels(const energy_softmax_contract_args &a) {
  if (a.rows < 0 || a.cols < 0 || a.depth < 0 || !std::isfinite(a.scale) ||
      !std::isfinite(a.temperature) || a.temperature <= 0 ||
      a.num_constraints < 0 || a.num_constraints > kContractMaxConstraints ||
      a.num_row_outputs < 0 || a.num_row_outputs > kContractMaxTables ||
      a.num_col_outputs < 0 || a.num_col_outputs > kContractMaxTables)
    return false;
  for (int64_t k = 0; k < a.num_constraints; ++k)
    if (a.constraints[k].kind != ENERGY_CONSTRAINT_GE &&
        a.constraints[k].kind != ENERGY_CONSTRAINT_NE)
      return false;
  for (int64_t j = 0; j < a.num_row_outputs; ++j)
    if (a.row_output_widths[j] < 0)
      return false;
  for (int64_t j = 0; j < a.num_col_outputs; ++j)
    if (a.col_output_widths[j] < 0)
      return false;
  return a.rows > 0 && a.cols > 0 && a.depth > 0 &&
         (a.depth == 0 || (a.row_features && a.col_features));
}

#if ENERGY_HAS_CUDA_KERNELS
/// Runs one pass, `side` ("rows" or "cols") of the kernels `suffix` names,
/// on `count` positions: `slots` with this side's `tables` value tables of
/// `widths`, summed into `outputs`. `function` caches the kernel.
int32_t runPass(const std::string &images, const char *side,
                const std::string &suffix, void **function, ContractSlots slots,
                int64_t tables, const void *const *values,
                const int64_t *widths, void *const *outputs, int64_t count) {
  slots.numTables = tables;
  for (int64_t j = 0; j < tables; ++j) {
    slots.values[j] = bits(values[j]);
    slots.widths[j] = widths[j];
    slots.outputs[j] = bits(outputs[j]);
  }
  std::string name = "energy_contract_" + std::string(side) + "_" + suffix;
  void *kernel = nullptr;
  if (int32_t code = energy::cuda::loadKernel(images.c_str(), name.c_str(),
                                              function, kernel))
    return code;
  void *parameters[] = {&slots, &count};
  return energy::cuda::launchKernel(kernel, name.c_str(), parameters, count);
}
#endif

template <typename T>
int32_t contract(const energy_softmax_contract_args *args, const char *type,
                 int largest,
                 int32_t (*onHost)(const energy_softmax_contract_args *)) {
#if ENERGY_HAS_CUDA_KERNELS
  if (!args || !fitsKernels(*args))
    return onHost(args);
  const energy_softmax_contract_args &a = *args;
  int64_t rowWidth = widthSum(a.num_row_outputs, a.row_output_widths);
  int64_t colWidth = widthSum(a.num_col_outputs, a.col_output_widths);
  int bound = boundFor({a.depth, rowWidth, colWidth}, largest);
  if (!bound)
    return onHost(args);
  static const std::string images =
      std::string("sm_80") + '\0' + energySoftmaxContractPtx + '\0' + '\0';

  ContractSlots slots{};
  slots.rows = a.rows;
  slots.cols = a.cols;
  slots.depth = a.depth;
  slots.rowFeatures = bits(a.row_features);
  slots.colFeatures = bits(a.col_features);
  slots.scaleBits = bits(a.scale);
  slots.temperatureBits = bits(a.temperature);
  slots.numConstraints = a.num_constraints;
  for (int64_t k = 0; k < a.num_constraints; ++k) {
    slots.constraints[4 * k] = a.constraints[k].row_coefficient;
    slots.constraints[4 * k + 1] = a.constraints[k].col_coefficient;
    slots.constraints[4 * k + 2] = a.constraints[k].offset;
    slots.constraints[4 * k + 3] = a.constraints[k].kind;
  }
  slots.givenLse = bits(a.given_lse);
  // The column side needs the rows' normalisers: the lse output, or
  // scratch when nobody asked for it.
  void *normalisers = a.lse;
  bool scratch = false;
  if (!normalisers && !a.given_lse && a.num_col_outputs > 0) {
    normalisers = energy_support_cuda_alloc(a.rows * sizeof(T));
    if (!normalisers)
      return ENERGY_CONTRACT_OUT_OF_MEMORY;
    scratch = true;
  }
  slots.lse = bits(normalisers);

  std::string suffix = std::string(type) + "_" + std::to_string(bound) + "_" +
                       std::to_string(bound);
  // One cached kernel per bound (32, 64, 128) and side.
  static void *rowKernels[3], *colKernels[3];
  int32_t code = ENERGY_KERNEL_OK;
  if (a.num_row_outputs > 0 || a.lse || scratch)
    code = runPass(images, "rows", suffix, &rowKernels[bound / 64], slots,
                   a.num_row_outputs, a.col_values, a.row_output_widths,
                   a.row_outputs, a.rows);
  if (code == ENERGY_KERNEL_OK && a.num_col_outputs > 0)
    code = runPass(images, "cols", suffix, &colKernels[bound / 64], slots,
                   a.num_col_outputs, a.row_values, a.col_output_widths,
                   a.col_outputs, a.cols);
  if (scratch)
    energy_support_cuda_free(normalisers);
  return code == ENERGY_KERNEL_OK ? ENERGY_CONTRACT_OK
                                  : ENERGY_CONTRACT_DEVICE_ERROR;
#else
  (void)type;
  (void)largest;
  return onHost(args);
#endif
}
} // namespace

extern "C" int32_t energy_support_cuda_softmax_contract_f32(
    const energy_softmax_contract_args *args) {
  return contract<float>(args, "f32", 128,
                         energy_support_softmax_contract_f32);
}

extern "C" int32_t energy_support_cuda_softmax_contract_f64(
    const energy_softmax_contract_args *args) {
  return contract<double>(args, "f64", 64,
                          energy_support_softmax_contract_f64);
}
