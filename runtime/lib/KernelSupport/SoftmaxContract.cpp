//===- SoftmaxContract.cpp - Entry points of the softmax contraction ------===//
//
// energy_support_softmax_contract_f32/f64: check the arguments (sizes, the
// pointers that are needed, the temperature, the constraint kinds), then run
// the kernel of the instruction-set path chosen at run time. The kernel
// itself is SoftmaxContractKernel.h.
//
//===----------------------------------------------------------------------===//

#include "IsaKernels.h"

#include "energy/KernelSupport/SoftmaxContract.h"

#include <cmath>

namespace {

/// a · b, false when it does not fit in int64_t.
bool productFits(int64_t a, int64_t b) {
  int64_t product;
  return !__builtin_mul_overflow(a, b, &product);
}

/// A table or output of `count` rows of `width` elements: needed (non-null)
/// when it is not empty.
bool validMatrix(const void *data, int64_t count, int64_t width) {
  if (count < 0 || width < 0 || !productFits(count, width))
    return false;
  return data || count == 0 || width == 0;
}

/// One side's tables and outputs: `tables` have `inner` rows, `outputs`
/// `outer` rows, table and output j both `widths[j]` wide.
bool validSide(int64_t num, const void *const *tables, const int64_t *widths,
               void *const *outputs, int64_t inner, int64_t outer) {
  if (num < 0)
    return false;
  if (num == 0)
    return true;
  if (!tables || !widths || !outputs)
    return false;
  for (int64_t j = 0; j < num; ++j)
    if (!validMatrix(tables[j], inner, widths[j]) ||
        !validMatrix(outputs[j], outer, widths[j]))
      return false;
  return true;
}

bool validArguments(const energy_softmax_contract_args *args) {
  if (!args)
    return false;
  const energy_softmax_contract_args &a = *args;
  if (a.rows < 0 || a.cols < 0 || a.depth < 0)
    return false;
  if (!validMatrix(a.row_features, a.rows, a.depth) ||
      !validMatrix(a.col_features, a.cols, a.depth))
    return false;
  if (!std::isfinite(a.scale) || !std::isfinite(a.temperature) ||
      !(a.temperature > 0))
    return false;
  if (a.num_constraints < 0 || (a.num_constraints > 0 && !a.constraints))
    return false;
  for (int64_t k = 0; k < a.num_constraints; ++k)
    if (a.constraints[k].kind != ENERGY_CONSTRAINT_GE &&
        a.constraints[k].kind != ENERGY_CONSTRAINT_NE)
      return false;
  return validSide(a.num_row_outputs, a.col_values, a.row_output_widths,
                   a.row_outputs, a.cols, a.rows) &&
         validSide(a.num_col_outputs, a.row_values, a.col_output_widths,
                   a.col_outputs, a.rows, a.cols);
}

} // namespace

extern "C" {
int32_t
energy_support_softmax_contract_f32(const energy_softmax_contract_args *args) {
  if (!validArguments(args))
    return ENERGY_CONTRACT_INVALID_ARGUMENT;
  return ENERGY_KERNEL_FOR_ACTIVE_ISA(softmaxContractF32)(*args);
}

int32_t
energy_support_softmax_contract_f64(const energy_softmax_contract_args *args) {
  if (!validArguments(args))
    return ENERGY_CONTRACT_INVALID_ARGUMENT;
  return ENERGY_KERNEL_FOR_ACTIVE_ISA(softmaxContractF64)(*args);
}
}
