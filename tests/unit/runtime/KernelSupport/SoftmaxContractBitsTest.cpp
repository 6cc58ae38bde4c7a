//===- SoftmaxContractBitsTest.cpp - The contraction's same bits ----------===//
//
// energy_support_softmax_contract_f32/f64 give the same bits on 1, 2 and 3
// threads, for a batch in one call as for its problems one call each, and
// with the scores and pair terms the row side kept as with computed ones.
//
//===----------------------------------------------------------------------===//

#include "SoftmaxContractTestSupport.h"

#include "energy/KernelSupport/KernelSupport.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace energy::testing::softmax;

namespace {
/// The bits of results of type T, every output of every problem in turn.
template <class T>
std::vector<char> bytesOf(const std::vector<Result> &results) {
  std::vector<char> bytes;
  auto append = [&](const std::vector<double> &values) {
    for (double v : values) {
      T x = static_cast<T>(v); // exact: the values were of type T
      const char *raw = reinterpret_cast<const char *>(&x);
      bytes.insert(bytes.end(), raw, raw + sizeof x);
    }
  };
  for (const Result &result : results) {
    append(result.lse);
    for (const auto &o : result.rowOutputs)
      append(o);
    for (const auto &o : result.colOutputs)
      append(o);
  }
  return bytes;
}

/// The kernel's outputs for a batch on `threads` threads, as raw bytes.
template <class T>
std::vector<char> bytesOnThreads(const std::vector<Problem> &problems,
                                 int threads) {
  energy_support_set_num_threads(threads);
  std::vector<Result> results = runBatch<T>(problems, {});
  return bytesOf<T>(results);
}

/// On every instruction-set path, the outputs for `problems` on 2 and 3
/// threads have the bits of those on 1, in f32 and f64.
void checkSameBitsOnThreads(const std::vector<Problem> &problems,
                            const std::string &label) {
  for (int32_t isa : supportedPaths()) {
    ForcedPath forced(isa);
    INFO("path " << pathName(isa) << ", " << label);
    std::vector<char> f32 = bytesOnThreads<float>(problems, 1);
    std::vector<char> f64 = bytesOnThreads<double>(problems, 1);
    for (int threads : {2, 3}) {
      INFO(threads << " threads");
      CHECK(bytesOnThreads<float>(problems, threads) == f32);
      CHECK(bytesOnThreads<double>(problems, threads) == f64);
    }
  }
}
} // namespace

TEST_CASE("softmax contract: the same bits on 1, 2 and 3 threads") {
  int32_t initial = energy_support_num_threads();
  for (bool causal : {false, true}) {
    Problem p = makeProblem(1000, 777, 67, {67, 5}, {67, 3}, 300 + causal);
    if (causal)
      p.constraints = {atLeast(1, -1, 0), notEqual(1, -1, -5)};
    checkSameBitsOnThreads({p}, causal ? "causal" : "unconstrained");
  }
  energy_support_set_num_threads(initial);
}

TEST_CASE("softmax contract: pair terms, the same bits on 1, 2 and 3 threads") {
  int32_t initial = energy_support_num_threads();
  for (bool causal : {false, true}) {
    std::vector<Problem> problems =
        pairProblems(3, 300, 257, 67, kMixedWeights, 800 + 10 * causal);
    if (causal)
      for (Problem &p : problems)
        p.constraints = {atLeast(1, -1, 0), notEqual(1, -1, -5)};
    checkSameBitsOnThreads(problems, causal ? "causal" : "unconstrained");
  }
  energy_support_set_num_threads(initial);
}

TEST_CASE("softmax contract: a batch is each of its problems") {
  // Three problems of the same sizes, back to back in every array, in one
  // call: the same bits as three calls (the batch only slices the arrays).
  const int64_t batch = 3, rows = 9, cols = 37, depth = 6;
  std::vector<Problem> problems;
  for (uint64_t seed = 0; seed < batch; ++seed)
    problems.push_back(makeProblem(rows, cols, depth, {4, 1}, {3}, 700 + seed));
  for (Problem &p : problems)
    p.constraints = {{1, -1, 2, ENERGY_CONSTRAINT_GE}};
  auto concatenated = [&](auto member) {
    std::vector<float> all;
    for (const Problem &p : problems) {
      const std::vector<double> &part = member(p);
      all.insert(all.end(), part.begin(), part.end());
    }
    return all;
  };
  std::vector<float> rowFeatures =
      concatenated([](const Problem &p) -> auto & { return p.rowFeatures; });
  std::vector<float> colFeatures =
      concatenated([](const Problem &p) -> auto & { return p.colFeatures; });
  std::vector<float> colValues0 =
      concatenated([](const Problem &p) -> auto & { return p.colValues[0]; });
  std::vector<float> colValues1 =
      concatenated([](const Problem &p) -> auto & { return p.colValues[1]; });
  std::vector<float> rowValues0 =
      concatenated([](const Problem &p) -> auto & { return p.rowValues[0]; });
  std::vector<float> lse(batch * rows), rowOutput0(batch * rows * 4),
      rowOutput1(batch * rows), colOutput0(batch * cols * 3);
  const void *colValues[] = {colValues0.data(), colValues1.data()};
  const void *rowValues[] = {rowValues0.data()};
  void *rowOutputs[] = {rowOutput0.data(), rowOutput1.data()};
  void *colOutputs[] = {colOutput0.data()};
  int64_t rowWidths[] = {4, 1}, colWidths[] = {3};
  energy_softmax_contract_args args{};
  args.batch = batch;
  args.rows = rows;
  args.cols = cols;
  args.depth = depth;
  args.row_features = rowFeatures.data();
  args.col_features = colFeatures.data();
  args.scale = problems[0].scale;
  args.temperature = problems[0].temperature;
  args.num_constraints = 1;
  args.constraints = problems[0].constraints.data();
  args.lse = lse.data();
  args.num_row_outputs = 2;
  args.col_values = colValues;
  args.row_output_widths = rowWidths;
  args.row_outputs = rowOutputs;
  args.num_col_outputs = 1;
  args.row_values = rowValues;
  args.col_output_widths = colWidths;
  args.col_outputs = colOutputs;
  REQUIRE(energy_support_softmax_contract_f32(&args) == ENERGY_CONTRACT_OK);
  for (int64_t b = 0; b < batch; ++b) {
    INFO("problem " << b);
    Problem p = problems[b];
    p.scale = problems[0].scale;
    p.temperature = problems[0].temperature;
    Result alone = runKernel<float>(p, {});
    auto slice = [&](const std::vector<float> &all, int64_t size) {
      return std::vector<double>(all.begin() + b * size,
                                 all.begin() + (b + 1) * size);
    };
    CHECK(slice(lse, rows) == alone.lse);
    CHECK(slice(rowOutput0, rows * 4) == alone.rowOutputs[0]);
    CHECK(slice(rowOutput1, rows) == alone.rowOutputs[1]);
    CHECK(slice(colOutput0, cols * 3) == alone.colOutputs[0]);
  }
}

namespace {
/// The kernel's outputs for `problems` as raw bytes: in one call for the
/// batch, or (`separately`) one call per problem; `given` as runBatch's.
template <class T>
std::vector<char> batchBytes(const std::vector<Problem> &problems,
                             const std::vector<std::vector<double>> &given,
                             bool separately) {
  std::vector<Result> results;
  if (separately) {
    for (size_t b = 0; b < problems.size(); ++b) {
      std::vector<std::vector<double>> one;
      if (!given.empty())
        one.push_back(given[b]);
      results.push_back(runBatch<T>({problems[b]}, one).front());
    }
  } else {
    results = runBatch<T>(problems, given);
  }
  return bytesOf<T>(results);
}
} // namespace

TEST_CASE("softmax contract: a batch in one call, the bits of one call each") {
  // The kernel runs a batch as one loop over (problem, block) tasks a side:
  // every problem must read and write its own slices, with blocks of the
  // height one problem alone gets. Sizes that split into blocks of unequal
  // heights (64 rows: 36 and 28; 70: 36 and 34; 131 cols: 48, 48 and 35),
  // fewer rows than a block and counts that are multiples of no tile height
  // (6 or 4) nor strip; pair terms weighting outputs on both sides, a causal
  // constraint, an NE one, a given normaliser.
  struct Shape {
    int64_t batch, rows, cols, depth;
  };
  uint64_t seed = 900;
  for (Shape shape : std::vector<Shape>{{4, 64, 64, 64},
                                        {3, 70, 131, 19},
                                        {5, 31, 64, 7},
                                        {2, 100, 37, 13},
                                        {6, 13, 9, 5}}) {
    for (int variant = 0; variant < 3; ++variant) {
      std::vector<Problem> problems =
          pairProblems(shape.batch, shape.rows, shape.cols, shape.depth,
                       kSecondTermWeights, seed);
      seed += 2 * shape.batch;
      if (variant == 0) { // plain: no pair terms, no constraints
        for (Problem &p : problems) {
          dropPairTerms(p);
        }
      } else {
        for (Problem &p : problems)
          p.constraints =
              variant == 1
                  ? std::vector<energy_contract_constraint>{atLeast(1, -1, 0)}
                  : std::vector<energy_contract_constraint>{
                        atLeast(1, -1, 0), notEqual(1, -1, -5)};
      }
      // Each problem's own normaliser, as given_lse.
      std::vector<std::vector<double>> given;
      if (variant == 2)
        for (Problem &p : problems) {
          p.givenLse = true;
          given.push_back(reference(p, pairScores(p), {}).lse);
          for (double &v : given.back())
            v = static_cast<float>(v);
        }
      for (int32_t isa : supportedPaths()) {
        ForcedPath forced(isa);
        INFO("path " << pathName(isa) << ", batch " << shape.batch << " of "
                     << shape.rows << " × " << shape.cols
                     << ", D = " << shape.depth << ", variant " << variant);
        CHECK(batchBytes<float>(problems, given, false) ==
              batchBytes<float>(problems, given, true));
        CHECK(batchBytes<double>(problems, given, false) ==
              batchBytes<double>(problems, given, true));
      }
    }
  }
}

namespace {
/// Every output and normaliser of `results`, in order.
std::vector<double> allOf(const std::vector<Result> &results) {
  std::vector<double> all;
  for (const Result &result : results) {
    all.insert(all.end(), result.lse.begin(), result.lse.end());
    for (const auto *side : {&result.rowOutputs, &result.colOutputs})
      for (const std::vector<double> &output : *side)
        all.insert(all.end(), output.begin(), output.end());
  }
  return all;
}

/// How the column side of splitSides gets its scores and pair terms.
enum class ColumnTiles { Computed, Reused, ReusedAfterZeroing };

/// The row side of `problems` in one call that keeps its tiles, then the
/// column side with that normaliser given, reading them or computing them
/// (`how`); the outputs of both, in the order of one call.
template <class T>
std::vector<Result> splitSides(const std::vector<Problem> &problems,
                               ColumnTiles how) {
  const Problem &first = problems.front();
  std::vector<Problem> rowSides = problems, colSides = problems;
  for (Problem &p : rowSides) {
    p.colWidths.clear();
    p.rowValues.clear();
    p.colWeights.clear();
  }
  for (Problem &p : colSides) {
    p.rowWidths.clear();
    p.colValues.clear();
    p.rowWeights.clear();
    p.givenLse = true;
  }
  void *tiles = energy_support_softmax_contract_tiles(
      static_cast<int64_t>(problems.size()), first.rows, first.cols,
      static_cast<int64_t>(first.pairDepths.size()), sizeof(T));
  REQUIRE(tiles);
  std::vector<Result> rows =
      runBatch<T>(rowSides, {}, nullptr, tiles, ENERGY_CONTRACT_TILES_KEEP);
  std::vector<std::vector<double>> given;
  for (const Result &result : rows)
    given.push_back(result.lse);
  const bool reuse = how != ColumnTiles::Computed;
  if (how == ColumnTiles::ReusedAfterZeroing)
    memset(tiles, 0,
           sizeof(T) * problems.size() * (1 + first.pairDepths.size()) *
               first.rows * first.cols);
  std::vector<Result> cols = runBatch<T>(
      colSides, given, nullptr, reuse ? tiles : nullptr,
      reuse ? ENERGY_CONTRACT_TILES_REUSE : ENERGY_CONTRACT_TILES_NONE);
  free(tiles);
  for (size_t b = 0; b < rows.size(); ++b)
    rows[b].colOutputs = cols[b].colOutputs;
  return rows;
}
} // namespace

TEST_CASE("softmax contract: kept tiles give the bits of computed ones") {
  // The column side reads the scores and pair terms that the row side kept
  // (in one call, or across two) where it would compute them: the same
  // products in the same order, so the same bits. Pair terms weighting both
  // sides, constraints that leave pairs the row side never computes, sizes
  // off every tile and block, a batch.
  uint64_t seed = 1300;
  for (int variant = 0; variant < 4; ++variant) {
    // Variant 3: products of the pair terms too.
    std::vector<Problem> problems =
        variant == 3 ? productProblems(3, 70, 131, 19, seed)
                     : pairProblems(3, 70, 131, 19, kMixedWeights, seed);
    seed += 10;
    for (Problem &p : problems) {
      if (variant == 0) {
        dropPairTerms(p);
      } else if (variant == 2) {
        p.constraints = {atLeast(1, -1, 40), atLeast(-1, 1, 3),
                         notEqual(1, -1, 0)};
      }
    }
    for (int32_t isa : supportedPaths()) {
      ForcedPath forced(isa);
      INFO("path " << pathName(isa) << ", variant " << variant);
      std::vector<double> oneCall = allOf(runBatch<float>(problems, {}));
      CHECK(allOf(splitSides<float>(problems, ColumnTiles::Reused)) == oneCall);
      CHECK(allOf(splitSides<float>(problems, ColumnTiles::Computed)) ==
            oneCall);
      // The column side does read them.
      CHECK(allOf(splitSides<float>(
                problems, ColumnTiles::ReusedAfterZeroing)) != oneCall);
      std::vector<double> oneCall64 = allOf(runBatch<double>(problems, {}));
      CHECK(allOf(splitSides<double>(problems, ColumnTiles::Reused)) ==
            oneCall64);
      CHECK(allOf(splitSides<double>(problems, ColumnTiles::Computed)) ==
            oneCall64);
    }
    // And within the bounds of the double-precision reference.
    checkBatchEverywhere(problems, "kept tiles");
  }
  // Too many elements, or counts that make no sense: no tiles.
  // 16 MiB: 2^22 floats, 2^21 doubles.
  CHECK(energy_support_softmax_contract_tiles(1, 4096, 1025, 0, 4) == nullptr);
  CHECK(energy_support_softmax_contract_tiles(1, 2048, 1025, 0, 8) == nullptr);
  for (int64_t bytes : {4, 8}) {
    void *largest = energy_support_softmax_contract_tiles(
        1, 2048, 2048 * 4 / bytes, 0, bytes);
    CHECK(largest != nullptr);
    free(largest);
  }
  CHECK(energy_support_softmax_contract_tiles(0, 8, 8, 0, 4) == nullptr);
  CHECK(energy_support_softmax_contract_tiles(1, 8, 8, -1, 4) == nullptr);
  CHECK(energy_support_softmax_contract_tiles(1, 8, 8, 0, 2) == nullptr);
  CHECK(energy_support_softmax_contract_tiles(INT64_MAX, 2, 2, 0, 4) ==
        nullptr);
}

TEST_CASE("softmax contract: tiles past a core's cache are kept only when "
          "deep") {
  // 1 × 600 × 600 floats, 1.4 MiB: read back at depth 64 (computing them
  // costs more), computed again at depth 8 by both calls of a split, whose
  // results then do not depend on what the tiles hold.
  static_assert(600 * 600 * 4 > ENERGY_CONTRACT_CACHED_TILE_BYTES);
  for (int64_t depth : {8, 64}) {
    std::vector<Problem> problems =
        pairProblems(1, 600, 600, depth, kMixedWeights, 1400 + depth);
    for (Problem &p : problems) {
      dropPairTerms(p);
    }
    INFO("depth " << depth);
    std::vector<double> oneCall = allOf(runBatch<float>(problems, {}));
    CHECK(allOf(splitSides<float>(problems, ColumnTiles::Reused)) == oneCall);
    bool read =
        allOf(splitSides<float>(problems, ColumnTiles::ReusedAfterZeroing)) !=
        oneCall;
    CHECK(read == (depth == 64));
  }
}

TEST_CASE("softmax contract: a batch of 8 problems of 64 rows, the same bits "
          "on 1, 2 and 3 threads") {
  // A training step's shape: more (problem, block) tasks than threads,
  // blocks of 36 and 28 rows.
  int32_t initial = energy_support_num_threads();
  for (bool causal : {false, true}) {
    std::vector<Problem> problems =
        pairProblems(8, 64, 64, 64, kMixedWeights, 1000 + 20 * causal);
    if (causal)
      for (Problem &p : problems)
        p.constraints = {atLeast(1, -1, 0)};
    energy_support_set_num_threads(2);
    checkBatchEverywhere(problems,
                         causal ? "batch of 8, causal" : "batch of 8");
    checkSameBitsOnThreads(problems, causal ? "causal" : "unconstrained");
  }
  energy_support_set_num_threads(initial);
}
