//===- SoftmaxContractArgumentsTest.cpp - The contraction's refusals ------===//
//
// energy_support_softmax_contract_f32/f64 refuse invalid arguments without
// writing anything, accept null where nothing is read, and report running
// out of memory.
//
//===----------------------------------------------------------------------===//

#include "SoftmaxContractTestSupport.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

using namespace energy::testing::softmax;

namespace {
/// Room for any pair bias of the tests below, which read none of it.
const double kBiasValues[32] = {};

/// A bias per relative offset, a[r − c + offset] over `length` values.
void setRelativeBias(energy_softmax_contract_args &a, int64_t offset,
                     int64_t length) {
  a.pair_bias = kBiasValues;
  a.pair_bias_length = length;
  a.pair_bias_row_coefficient = 1;
  a.pair_bias_col_coefficient = -1;
  a.pair_bias_offset = offset;
}
} // namespace

TEST_CASE("softmax contract: invalid arguments are refused") {
  Problem good = makeProblem(9, 11, 4, {3}, {2}, 5);
  std::vector<float> rowFeatures = cast<float>(good.rowFeatures);
  std::vector<float> colFeatures = cast<float>(good.colFeatures);
  std::vector<float> colValues = cast<float>(good.colValues[0]);
  std::vector<float> rowValues = cast<float>(good.rowValues[0]);
  std::vector<float> rowOutput(9 * 3, -1.0f), colOutput(11 * 2, -1.0f);
  std::vector<float> lse(9, -1.0f);
  const void *colValuePointers[] = {colValues.data()};
  const void *rowValuePointers[] = {rowValues.data()};
  void *rowOutputPointers[] = {rowOutput.data()};
  void *colOutputPointers[] = {colOutput.data()};
  int64_t rowWidths[] = {3}, colWidths[] = {2};
  energy_contract_constraint constraint = atLeast(1, -1, 0);
  energy_softmax_contract_args valid{};
  valid.batch = 1;
  valid.rows = 9;
  valid.cols = 11;
  valid.depth = 4;
  valid.row_features = rowFeatures.data();
  valid.col_features = colFeatures.data();
  valid.scale = 1;
  valid.temperature = 1;
  valid.num_constraints = 1;
  valid.constraints = &constraint;
  valid.lse = lse.data();
  valid.num_row_outputs = 1;
  valid.col_values = colValuePointers;
  valid.row_output_widths = rowWidths;
  valid.row_outputs = rowOutputPointers;
  valid.num_col_outputs = 1;
  valid.row_values = rowValuePointers;
  valid.col_output_widths = colWidths;
  valid.col_outputs = colOutputPointers;

  energy_contract_constraint badKind = {1, -1, 0, 7};
  int64_t negativeWidth[] = {-1};
  const void *nullTable[] = {nullptr};
  void *nullOutput[] = {nullptr};
  std::vector<std::pair<const char *, void (*)(energy_softmax_contract_args &)>>
      breakers = {
          {"zero batch", [](auto &a) { a.batch = 0; }},
          {"batch times rows overflowing",
           [](auto &a) { a.batch = int64_t(1) << 62; }},
          {"a batch of features overflowing",
           [](auto &a) { a.batch = int64_t(1) << 59; }},
          {"a batch of value tables overflowing",
           [](auto &a) {
             a.batch = int64_t(1) << 59;
             a.depth = 0;
           }},
          {"negative rows", [](auto &a) { a.rows = -1; }},
          {"negative cols", [](auto &a) { a.cols = -1; }},
          {"negative depth", [](auto &a) { a.depth = -1; }},
          {"null row features", [](auto &a) { a.row_features = nullptr; }},
          {"null col features", [](auto &a) { a.col_features = nullptr; }},
          {"zero temperature", [](auto &a) { a.temperature = 0; }},
          {"negative temperature", [](auto &a) { a.temperature = -1; }},
          {"NaN temperature", [](auto &a) { a.temperature = NAN; }},
          {"infinite temperature", [](auto &a) { a.temperature = INFINITY; }},
          {"NaN scale", [](auto &a) { a.scale = NAN; }},
          {"negative constraint count",
           [](auto &a) { a.num_constraints = -1; }},
          {"null constraints", [](auto &a) { a.constraints = nullptr; }},
          {"negative output count", [](auto &a) { a.num_row_outputs = -2; }},
          {"null output array", [](auto &a) { a.row_outputs = nullptr; }},
          {"null widths", [](auto &a) { a.col_output_widths = nullptr; }},
          {"null table array", [](auto &a) { a.col_values = nullptr; }},
          {"unknown mode of kept tiles",
           [](auto &a) { a.kept_tiles_mode = 3; }},
          // A bias per offset r − c of 9 + 11 − 1 values read at r − c + o
          // (the valid arguments admit c <= r: offsets 0 to 8).
          {"a pair bias read past its end (o = 11)",
           [](auto &a) {
             setRelativeBias(a, 11, 19);
             a.num_constraints = 0;
           }},
          {"a pair bias read before its start (o = 9)",
           [](auto &a) {
             setRelativeBias(a, 9, 19);
             a.num_constraints = 0;
           }},
          {"a pair bias an admitted pair reads past (r − c of 8 values)",
           [](auto &a) { setRelativeBias(a, 0, 8); }},
          {"a pair bias of no elements",
           [](auto &a) { setRelativeBias(a, 10, 0); }},
          {"pair sums without a pair bias",
           [](auto &a) { a.num_pair_sums = 1; }},
          {"more pair sums than col outputs",
           [](auto &a) {
             setRelativeBias(a, 10, 19);
             a.num_pair_sums = 2;
           }},
          {"negative pair sum count",
           [](auto &a) {
             setRelativeBias(a, 10, 19);
             a.num_pair_sums = -1;
           }},
          // The col output of the valid arguments is 2 wide.
          {"a pair sum wider than 1",
           [](auto &a) {
             setRelativeBias(a, 10, 19);
             a.num_pair_sums = 1;
           }},
      };
  auto expectRefused = [&](const char *what,
                           const energy_softmax_contract_args &args) {
    INFO(std::string(what));
    std::vector<float> before = rowOutput;
    CHECK(energy_support_softmax_contract_f32(&args) ==
          ENERGY_CONTRACT_INVALID_ARGUMENT);
    CHECK(energy_support_softmax_contract_f64(&args) ==
          ENERGY_CONTRACT_INVALID_ARGUMENT);
    CHECK(rowOutput == before);
    CHECK(lse == std::vector<float>(9, -1.0f));
  };
  for (auto &[what, breaker] : breakers) {
    energy_softmax_contract_args args = valid;
    breaker(args);
    expectRefused(what, args);
  }
  energy_softmax_contract_args args = valid;
  args.constraints = &badKind;
  expectRefused("unknown constraint kind", args);
  args = valid;
  args.row_output_widths = negativeWidth;
  expectRefused("negative width", args);
  args = valid;
  args.col_values = nullTable;
  expectRefused("null value table", args);
  args = valid;
  args.col_outputs = nullOutput;
  expectRefused("null output", args);
  CHECK(energy_support_softmax_contract_f32(nullptr) ==
        ENERGY_CONTRACT_INVALID_ARGUMENT);

  // Pair terms: two, of depths 2 and 3, weighting both sides.
  std::vector<float> pairRow0(9 * 2, 0.5f), pairCol0(11 * 2, 0.25f),
      pairRow1(9 * 3, -0.5f), pairCol1(11 * 3, 1.0f);
  const void *pairRowPointers[] = {pairRow0.data(), pairRow1.data()};
  const void *pairColPointers[] = {pairCol0.data(), pairCol1.data()};
  const void *nullPairRowFeatures[] = {pairRow0.data(), nullptr};
  const void *nullPairColFeatures[] = {pairCol0.data(), nullptr};
  int64_t pairDepths[] = {2, 3}, negativePairDepth[] = {2, -1};
  double rowWeights[] = {0.5, 1, -2}, colWeights[] = {1, 0, 0.7};
  double nanWeights[] = {0.5, NAN, -2}, infiniteWeights[] = {1, 0, INFINITY};
  energy_softmax_contract_args paired = valid;
  paired.num_pair_terms = 2;
  paired.pair_depths = pairDepths;
  paired.pair_row_features = pairRowPointers;
  paired.pair_col_features = pairColPointers;
  paired.row_output_weights = rowWeights;
  paired.col_output_weights = colWeights;
  std::vector<std::pair<const char *, void (*)(energy_softmax_contract_args &)>>
      pairBreakers = {
          {"negative pair term count", [](auto &a) { a.num_pair_terms = -1; }},
          {"null pair depths", [](auto &a) { a.pair_depths = nullptr; }},
          {"null pair row feature array",
           [](auto &a) { a.pair_row_features = nullptr; }},
          {"null pair col feature array",
           [](auto &a) { a.pair_col_features = nullptr; }},
          {"pair term count overflowing the coefficients",
           [](auto &a) { a.num_pair_terms = INT64_MAX; }},
      };
  for (auto &[what, breaker] : pairBreakers) {
    args = paired;
    breaker(args);
    expectRefused(what, args);
  }
  args = paired;
  args.pair_depths = negativePairDepth;
  expectRefused("negative pair depth", args);
  args = paired;
  args.pair_row_features = nullPairRowFeatures;
  expectRefused("null pair row features", args);
  args = paired;
  args.pair_col_features = nullPairColFeatures;
  expectRefused("null pair col features", args);
  args = paired;
  args.row_output_weights = nanWeights;
  expectRefused("NaN row coefficient", args);
  args = paired;
  args.col_output_weights = infiniteWeights;
  expectRefused("infinite col coefficient", args);
  args = paired;
  args.num_pair_terms = 0;
  args.col_output_weights = nanWeights + 1;
  expectRefused("NaN coefficient without pair terms", args);
  // Products of pair terms: the coefficients grow by one per product.
  int64_t products[] = {0, 1}, productOfNoTerm[] = {0, 2},
          negativeProduct[] = {-1, 1};
  double productRowWeights[] = {0.5, 1, -2, 0.25},
         productColWeights[] = {1, 0, 0.7, NAN};
  energy_softmax_contract_args multiplied = paired;
  multiplied.num_pair_products = 1;
  multiplied.pair_products = products;
  multiplied.row_output_weights = productRowWeights;
  multiplied.col_output_weights = nullptr;
  args = multiplied;
  args.pair_products = productOfNoTerm;
  expectRefused("a product of a pair term that does not exist", args);
  args = multiplied;
  args.pair_products = negativeProduct;
  expectRefused("a product of pair term -1", args);
  args = multiplied;
  args.pair_products = nullptr;
  expectRefused("null pair products", args);
  args = multiplied;
  args.num_pair_products = -1;
  expectRefused("negative pair product count", args);
  args = multiplied;
  args.num_pair_products = INT64_MAX;
  expectRefused("pair product count overflowing the coefficients", args);
  args = multiplied;
  args.col_output_weights = productColWeights;
  expectRefused("NaN product coefficient", args);
  args = multiplied;
  args.num_pair_terms = 0;
  expectRefused("products without pair terms", args);
  // (Calls that succeed write the outputs the refusals check.)
  CHECK(energy_support_softmax_contract_f32(&paired) == ENERGY_CONTRACT_OK);
  CHECK(energy_support_softmax_contract_f32(&multiplied) == ENERGY_CONTRACT_OK);
  // Pair features are not needed when a term is empty, nor anything but
  // the counts when there are no pair terms.
  args = paired;
  int64_t emptyTerm[] = {2, 0};
  args.pair_depths = emptyTerm;
  args.pair_row_features = nullPairRowFeatures;
  args.pair_col_features = nullPairColFeatures;
  CHECK(energy_support_softmax_contract_f32(&args) == ENERGY_CONTRACT_OK);
  args = valid;
  args.pair_depths = nullptr;
  args.pair_row_features = nullptr;
  args.pair_col_features = nullptr;
  args.row_output_weights = nullptr;
  CHECK(energy_support_softmax_contract_f32(&args) == ENERGY_CONTRACT_OK);

  // Null is fine where nothing is read or written.
  args = valid;
  args.depth = 0;
  args.row_features = nullptr;
  args.col_features = nullptr;
  CHECK(energy_support_softmax_contract_f32(&args) == ENERGY_CONTRACT_OK);
  args = valid;
  args.num_row_outputs = 0;
  args.col_values = nullptr;
  args.row_outputs = nullptr;
  args.row_output_widths = nullptr;
  args.lse = nullptr;
  CHECK(energy_support_softmax_contract_f32(&args) == ENERGY_CONTRACT_OK);
#if defined(__has_feature)
#if !__has_feature(address_sanitizer)
#define ENERGY_TEST_HUGE_ALLOCATIONS 1
#endif
#endif
#ifdef ENERGY_TEST_HUGE_ALLOCATIONS
  // 2^42 rows: the normaliser alone would take 16 TiB, so the kernel reports
  // that it is out of memory (reading nothing) instead of aborting.
  {
    float value = 1, output = -1;
    const void *table[] = {&value};
    void *outputs[] = {&output};
    int64_t width[] = {1};
    energy_softmax_contract_args huge{};
    huge.batch = 1;
    huge.rows = int64_t(1) << 42;
    huge.cols = 1;
    huge.depth = 0;
    huge.temperature = 1;
    huge.num_col_outputs = 1;
    huge.row_values = table;
    huge.col_output_widths = width;
    huge.col_outputs = outputs;
    CHECK(energy_support_softmax_contract_f32(&huge) ==
          ENERGY_CONTRACT_OUT_OF_MEMORY);
  }
#endif
  // Finally the valid arguments themselves.
  CHECK(energy_support_softmax_contract_f32(&valid) == ENERGY_CONTRACT_OK);
  CHECK(rowOutput != std::vector<float>(9 * 3, -1.0f));
}
