//===- SoftmaxContract.cpp - Entry points of the softmax contraction ------===//
//
// energy_support_softmax_contract_f32/f64: check the arguments (sizes, the
// pointers that are needed, the temperature, the constraint kinds, the
// outputs' coefficients, the mode of kept tiles), then run the kernel of the
// instruction-set path chosen at run time on the whole batch (one parallel
// loop a side over all its problems); and the room for kept tiles. The
// kernel itself is SoftmaxContractKernel.h.
//
//===----------------------------------------------------------------------===//

#include "IsaKernels.h"

#include "energy/KernelSupport/KernelSupport.h"
#include "energy/KernelSupport/SoftmaxContract.h"

#include <cmath>
#include <cstdlib>

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

/// The pair terms: `num` depths, and features of `rows` and `cols` rows of
/// each term's depth.
bool validPairTerms(int64_t num, const int64_t *depths,
                    const void *const *rowFeatures,
                    const void *const *colFeatures, int64_t rows,
                    int64_t cols) {
  if (num < 0)
    return false;
  if (num == 0)
    return true;
  if (!depths || !rowFeatures || !colFeatures)
    return false;
  for (int64_t i = 0; i < num; ++i)
    if (!validMatrix(rowFeatures[i], rows, depths[i]) ||
        !validMatrix(colFeatures[i], cols, depths[i]))
      return false;
  return true;
}

/// One side's coefficients: null, or `outputs` (valid) rows of 1 + `terms`
/// finite numbers (the pair terms and their products).
bool validWeights(const double *weights, int64_t outputs, int64_t terms) {
  if (!weights || outputs == 0)
    return true;
  int64_t stride;
  if (terms < 0 || __builtin_add_overflow(terms, 1, &stride) ||
      !productFits(outputs, stride))
    return false;
  for (int64_t k = 0; k < outputs * stride; ++k)
    if (!std::isfinite(weights[k]))
      return false;
  return true;
}

/// The products of pair terms: `num` pairs of indices of the `terms`.
bool validPairProducts(int64_t num, const int64_t *products, int64_t terms) {
  if (num < 0 || (num > 0 && !products) || !productFits(num, 2))
    return false;
  for (int64_t k = 0; k < 2 * num; ++k)
    if (products[k] < 0 || products[k] >= terms)
      return false;
  return true;
}

/// The pair bias: null, or `batch` problems of `length` elements (which
/// pairs index within the kernel checks: only the admitted ones count).
bool validPairBias(const energy_softmax_contract_args &a) {
  return !a.pair_bias ||
         (a.pair_bias_length > 0 && productFits(a.batch, a.pair_bias_length));
}

/// Pair sums: the last `num_pair_sums` col outputs, of width 1, each of
/// `batch` problems of the pair bias's length (which must be given).
bool validPairSums(const energy_softmax_contract_args &a) {
  if (a.num_pair_sums == 0)
    return true;
  if (a.num_pair_sums < 0 || a.num_pair_sums > a.num_col_outputs ||
      !a.pair_bias)
    return false;
  for (int64_t j = a.num_col_outputs - a.num_pair_sums; j < a.num_col_outputs;
       ++j)
    if (a.col_output_widths[j] != 1 || !a.col_outputs[j])
      return false;
  return true;
}

bool validArguments(const energy_softmax_contract_args *args) {
  if (!args)
    return false;
  const energy_softmax_contract_args &a = *args;
  // Every array holds the batch's problems back to back: its rows are
  // batch · rows (or cols).
  if (a.batch < 1 || a.rows < 0 || a.cols < 0 ||
      !productFits(a.batch, a.rows) || !productFits(a.batch, a.cols))
    return false;
  const int64_t rows = a.batch * a.rows, cols = a.batch * a.cols;
  if (!validMatrix(a.row_features, rows, a.depth) ||
      !validMatrix(a.col_features, cols, a.depth))
    return false;
  if (!std::isfinite(a.scale) || !std::isfinite(a.temperature) ||
      !(a.temperature > 0))
    return false;
  if (a.num_constraints < 0 || (a.num_constraints > 0 && !a.constraints))
    return false;
  if (a.kept_tiles_mode != ENERGY_CONTRACT_TILES_NONE &&
      a.kept_tiles_mode != ENERGY_CONTRACT_TILES_KEEP &&
      a.kept_tiles_mode != ENERGY_CONTRACT_TILES_REUSE)
    return false;
  for (int64_t k = 0; k < a.num_constraints; ++k)
    if (a.constraints[k].kind != ENERGY_CONSTRAINT_GE &&
        a.constraints[k].kind != ENERGY_CONSTRAINT_NE)
      return false;
  int64_t weighted; // the pair terms and their products
  return validPairBias(a) &&
         validSide(a.num_row_outputs, a.col_values, a.row_output_widths,
                   a.row_outputs, cols, rows) &&
         validSide(a.num_col_outputs, a.row_values, a.col_output_widths,
                   a.col_outputs, rows, cols) &&
         validPairSums(a) &&
         // The coefficients first: a count of pair terms whose rows of
         // coefficients overflow is refused before any depth is read.
         a.num_pair_terms >= 0 &&
         validPairProducts(a.num_pair_products, a.pair_products,
                           a.num_pair_terms) &&
         !__builtin_add_overflow(a.num_pair_terms, a.num_pair_products,
                                 &weighted) &&
         validWeights(a.row_output_weights, a.num_row_outputs, weighted) &&
         validWeights(a.col_output_weights, a.num_col_outputs, weighted) &&
         validPairTerms(a.num_pair_terms, a.pair_depths, a.pair_row_features,
                        a.pair_col_features, rows, cols);
}

} // namespace

extern "C" {
void *energy_support_softmax_contract_tiles(int64_t batch, int64_t rows,
                                            int64_t cols, int64_t pair_terms,
                                            int64_t element_bytes) {
  int64_t elements;
  if (batch <= 0 || rows <= 0 || cols <= 0 || pair_terms < 0 ||
      pair_terms >= ENERGY_CONTRACT_MAX_TILE_BYTES ||
      (element_bytes != 4 && element_bytes != 8) ||
      __builtin_mul_overflow(batch, rows, &elements) ||
      __builtin_mul_overflow(elements, cols, &elements) ||
      __builtin_mul_overflow(elements, pair_terms + 1, &elements) ||
      elements > ENERGY_CONTRACT_MAX_TILE_BYTES / element_bytes)
    return nullptr;
  return energy_support_scratch_alloc(elements * element_bytes);
}

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
