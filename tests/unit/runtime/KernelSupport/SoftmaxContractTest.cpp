//===- SoftmaxContractTest.cpp - The softmax contraction, checked ---------===//
//
// energy_support_softmax_contract_f32/f64 against a plain double-precision
// reference written from the definition in SoftmaxContract.h (a loop over
// every pair with the textbook stable log-sum-exp; SoftmaxContractTestSupport),
// at sizes that are multiples of no tile or vector width, with causal,
// windowed and NE constraints, rows left empty, a given normaliser,
// temperatures other than 1, several outputs of different widths on both
// sides, pair terms with outputs weighted by them, batches, on every
// instruction-set path the CPU runs. The same bits on any thread count,
// batch or kept tiles: SoftmaxContractBitsTest.cpp; refusals of invalid
// arguments: SoftmaxContractArgumentsTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "SoftmaxContractTestSupport.h"

#include <doctest/doctest.h>

#include <cmath>

#include <cstdint>
#include <string>
#include <vector>

using namespace energy::testing::softmax;

TEST_CASE("softmax contract: no constraints, sizes off every tile") {
  uint64_t seed = 1;
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {1, 33}, {7, 1}, {7, 33}, {33, 7}, {33, 1000}, {1000, 7}})
    for (int64_t depth : {1, 5, 16, 64, 67})
      checkEverywhere(
          makeProblem(rows, cols, depth, {1, 5, depth + 3}, {2, 17}, seed++),
          "plain");
  checkEverywhere(makeProblem(1000, 1000, 67, {67, 3}, {67}, seed++), "plain");
}

TEST_CASE("softmax contract: causal, windowed and NE constraints") {
  uint64_t seed = 100;
  struct Case {
    const char *name;
    std::vector<energy_contract_constraint> constraints;
    bool large; ///< also at 1000 × 1000
  };
  std::vector<Case> cases = {
      {"c <= r", {atLeast(1, -1, 0)}, true},
      {"c < r (row 0 empty)", {atLeast(1, -1, -1)}, false},
      {"c <= r + 5", {atLeast(1, -1, 5)}, false},
      {"r - 3 <= c <= r + 40", {atLeast(1, -1, 40), atLeast(-1, 1, 3)}, true},
      {"c != r", {notEqual(1, -1, 0)}, false},
      {"c <= r and c != r", {atLeast(1, -1, 0), notEqual(1, -1, 0)}, true},
      {"c != r, c != 2r - 7", {notEqual(1, -1, 0), notEqual(2, -1, -7)}, false},
      {"c >= r + 10 and r >= 3 (rows empty at both ends)",
       {atLeast(-1, 1, -10), atLeast(1, 0, -3)},
       true},
      {"3c <= 2r + 1", {atLeast(2, -3, 1)}, false},
      {"no pair at all", {atLeast(0, 0, -1)}, false},
  };
  struct Size {
    int64_t rows, cols, depth;
  };
  for (const Case &c : cases)
    for (Size size : std::vector<Size>{{7, 7, 5},
                                       {33, 33, 16},
                                       {33, 1000, 67},
                                       {1000, 33, 64},
                                       {1000, 1000, 67}}) {
      if (size.rows * size.cols > 100000 && !c.large)
        continue;
      Problem p = makeProblem(size.rows, size.cols, size.depth, {size.depth, 5},
                              {1, size.depth}, seed++);
      p.constraints = c.constraints;
      checkEverywhere(p, c.name);
    }
}

TEST_CASE("softmax contract: temperatures, large scores, lse not asked") {
  uint64_t seed = 200;
  // Scores up to ±60/T: without the running maximum, exp would overflow,
  // and row maxima grow from panel to panel, so accumulators are rescaled.
  for (double temperature : {0.37, 2.5}) {
    Problem p = makeProblem(1000, 1000, 64, {64, 7}, {9}, seed++);
    p.scale = 30.0 / 64 * 8;
    p.temperature = temperature;
    p.constraints = {atLeast(1, -1, 0)};
    checkEverywhere(p, "large scores");
  }
  Problem p = makeProblem(33, 1000, 16, {3}, {4}, seed++);
  p.temperature = 0.5;
  p.scale = -2;
  p.wantLse = false;
  checkEverywhere(p, "negative scale, no lse output");
}

TEST_CASE("softmax contract: pair terms weight the outputs") {
  uint64_t seed = 500;
  for (const ConstraintCase &c : constraintCases("pair terms")) {
    for (const std::vector<double> *colWeights :
         {&kMixedWeights, &kSecondTermWeights}) {
      std::vector<Problem> problems =
          pairProblems(3, 70, 131, 19, *colWeights, seed);
      seed += 10;
      for (Problem &p : problems)
        p.constraints = c.constraints;
      checkBatchEverywhere(problems, c.name.c_str());
      // Plain row outputs and pair terms on the col side only.
      for (Problem &p : problems)
        p.rowWeights.clear();
      checkBatchEverywhere(problems, c.name.c_str());
    }
  }
  // Coefficients without pair terms: κ alone, 0 included.
  std::vector<Problem> scaled;
  for (uint64_t b = 0; b < 3; ++b) {
    scaled.push_back(makeProblem(70, 131, 19, {3, 19, 1}, {4, 7}, seed++));
    scaled.back().rowWeights = {1, -0.5, 3};
    scaled.back().colWeights = {0, 2};
    scaled.back().constraints = {atLeast(1, -1, 0)};
  }
  checkBatchEverywhere(scaled, "coefficients without pair terms");
  // Scores up to ±60/T, so that the running maximum grows from panel to
  // panel and the weighted accumulators are rescaled too.
  std::vector<Problem> problems =
      pairProblems(3, 100, 300, 64, kMixedWeights, seed);
  for (Problem &p : problems) {
    p.scale = 30.0 / 64 * 8;
    p.temperature = 0.37;
    p.constraints = {atLeast(1, -1, 0)};
  }
  checkBatchEverywhere(problems, "pair terms, large scores");
}

TEST_CASE("softmax contract: products of pair terms weight the outputs") {
  // Factors of degree 2 in the pair terms (a learned scale's second
  // derivatives): batches, sizes off every tile, constraints, a pair bias,
  // a temperature.
  uint64_t seed = 600;
  std::vector<ConstraintCase> cases = constraintCases("pair products");
  cases.push_back({"pair products and a relative bias", {atLeast(1, -1, 0)}});
  for (const ConstraintCase &c : cases)
    for (int64_t rows : {7, 70}) {
      std::vector<Problem> problems = productProblems(3, rows, 131, 19, seed);
      seed += 10;
      for (Problem &p : problems) {
        p.constraints = c.constraints;
        p.temperature = 0.8;
        if (&c == &cases.back())
          addRelativeBias(p, seed++);
      }
      checkBatchEverywhere(problems, c.name.c_str());
    }
}

TEST_CASE("softmax contract: a pair bias per offset or per pair") {
  uint64_t seed = 700;
  struct Size {
    int64_t rows, cols, depth;
  };
  for (const ConstraintCase &c : constraintCases("relative bias"))
    for (Size size :
         std::vector<Size>{{7, 7, 5}, {70, 131, 19}, {131, 70, 16}}) {
      // A batch of problems with a bias each, at a temperature.
      std::vector<Problem> problems;
      for (int b = 0; b < 3; ++b) {
        problems.push_back(makeProblem(size.rows, size.cols, size.depth,
                                       {3, 19}, {4, 17}, seed++));
        addRelativeBias(problems.back(), seed++);
        problems.back().constraints = c.constraints;
        problems.back().temperature = 0.7;
      }
      checkBatchEverywhere(problems, c.name.c_str());
    }
  // With pair terms weighting both sides (their tiles kept, the bias added
  // to the kept scores on both sides).
  std::vector<Problem> problems =
      pairProblems(3, 70, 131, 19, kMixedWeights, seed);
  seed += 10;
  for (Problem &p : problems) {
    addRelativeBias(p, seed++);
    p.constraints = {atLeast(1, -1, 0)};
  }
  checkBatchEverywhere(problems, "relative bias and pair terms");
  // A causal bias per offset r − c ≥ 0 of rows values: the pairs the mask
  // excludes would read outside it.
  for (Size size : std::vector<Size>{{7, 7, 5}, {131, 70, 16}}) {
    std::vector<Problem> causal;
    for (int b = 0; b < 3; ++b) {
      causal.push_back(makeProblem(size.rows, size.cols, size.depth, {3, 19},
                                   {4, 17}, seed++));
      addRelativeBias(causal.back(), seed++);
      causal.back().pairBias.resize(size.rows);
      causal.back().biasOffset = 0;
      causal.back().constraints = {atLeast(1, -1, 0)};
    }
    checkBatchEverywhere(causal, "causal bias per offset");
  }
  // A bias per pair: index cols · r + c.
  Problem perPair = makeProblem(33, 45, 8, {8}, {8}, seed++);
  addRelativeBias(perPair, seed++);
  perPair.pairBias.resize(33 * 45);
  for (size_t k = 0; k < perPair.pairBias.size(); ++k)
    perPair.pairBias[k] = std::sin(0.37 * static_cast<double>(k));
  perPair.biasRowCoefficient = 45;
  perPair.biasColCoefficient = 1;
  perPair.biasOffset = 0;
  checkEverywhere(perPair, "bias per pair");
}

TEST_CASE("softmax contract: pair sums at the pair bias's indices") {
  // The last column outputs sum each admitted pair's weighted value at
  // the index where the score reads its bias (the bias's gradient): over
  // batches, sizes off every tile and block, constraints, temperatures,
  // plain and weighted by pair terms, a causal table of offsets.
  uint64_t seed = 800;
  struct Size {
    int64_t rows, cols, depth;
  };
  for (const ConstraintCase &c : constraintCases("pair sums"))
    for (Size size :
         std::vector<Size>{{7, 7, 5}, {70, 131, 19}, {131, 70, 16}}) {
      std::vector<Problem> problems;
      for (int b = 0; b < 3; ++b) {
        problems.push_back(makeProblem(size.rows, size.cols, size.depth, {3},
                                       {4, 1, 1}, seed++));
        addRelativeBias(problems.back(), seed++);
        problems.back().numPairSums = 2;
        problems.back().constraints = c.constraints;
        problems.back().temperature = 0.7;
      }
      checkBatchEverywhere(problems, c.name.c_str());
      // Weighted by pair terms: (κ, α_0, α_1) of each col output.
      for (Problem &p : problems) {
        addPairTerms(p, {5, 13}, seed++);
        p.colWeights = {1, 0, 0, 0.5, 1, -2, 0, 0, 1.5};
      }
      checkBatchEverywhere(problems, c.name.c_str());
    }
  // A causal table of rows offsets r − c >= 0.
  std::vector<Problem> causal;
  for (int b = 0; b < 2; ++b) {
    causal.push_back(makeProblem(131, 70, 16, {3}, {1}, seed++));
    addRelativeBias(causal.back(), seed++);
    causal.back().pairBias.resize(131);
    causal.back().biasOffset = 0;
    causal.back().numPairSums = 1;
    causal.back().constraints = {atLeast(1, -1, 0)};
  }
  checkBatchEverywhere(causal, "pair sums of a causal bias");
  // One pair sum per pair (index cols · r + c): the weights themselves
  // times the row values.
  Problem perPair = makeProblem(33, 45, 8, {8}, {1}, seed++);
  addRelativeBias(perPair, seed++);
  perPair.pairBias.resize(33 * 45);
  perPair.biasRowCoefficient = 45;
  perPair.biasColCoefficient = 1;
  perPair.biasOffset = 0;
  perPair.numPairSums = 1;
  checkEverywhere(perPair, "pair sums per pair");
}

TEST_CASE("softmax contract: outputs whose coefficients are multiples") {
  // An output whose coefficients are those of the last weighted one times a
  // number sums that one's weights and scales its sum (the row side's third
  // output, and the col side's second and third); a plain output with κ
  // alone scales W's sum. A first weighted output of width 0 computes no
  // weights, so the next one with its multiples computes its own.
  uint64_t seed = 700;
  for (bool causal : {false, true}) {
    std::vector<Problem> problems;
    for (uint64_t b = 0; b < 3; ++b) {
      problems.push_back(
          makeProblem(70, 131, 19, {3, 19, 17}, {4, 7, 17}, seed++));
      addPairTerms(problems.back(), {5, 13}, seed++);
      problems.back().rowWeights = {0, 2, -2, 3, 0, 0, 0, -0.25, 0.25};
      problems.back().colWeights = {0.7, -1.3,  0.5,  1.4,  -2.6,
                                    1,   -0.35, 0.65, -0.25};
      if (causal)
        problems.back().constraints = {atLeast(1, -1, 0)};
    }
    checkBatchEverywhere(problems, causal ? "multiples, causal" : "multiples");
    std::vector<Problem> emptyFirst;
    for (uint64_t b = 0; b < 3; ++b) {
      emptyFirst.push_back(
          makeProblem(70, 131, 19, {0, 19, 17}, {0, 7, 17}, seed++));
      addPairTerms(emptyFirst.back(), {5, 13}, seed++);
      emptyFirst.back().rowWeights = {0, 1, -1, 0, 0.5, -0.5, 0, -3, 3};
      emptyFirst.back().colWeights = {1, 1, 0, 2, 2, 0, 0, 0, 1};
      if (causal)
        emptyFirst.back().constraints = {atLeast(1, -1, 0)};
    }
    checkBatchEverywhere(emptyFirst, "multiples of an empty output");
  }
}

TEST_CASE("softmax contract: narrow outputs of the same weights together") {
  // Outputs of one or two vectors that sum the same weights are summed in
  // one pass over them, up to four vectors at a time: plain outputs of
  // widths of one and two vectors (of f32 and of f64) in any order, and a
  // chain of outputs whose coefficients are multiples of the first's, cut
  // by an output of another width and by one of width 0. Two widths leave
  // four vectors past the whole tiles of four (30 of f64's 8 lanes, 57 of
  // both), whose last vector was once dropped.
  uint64_t seed = 900;
  for (bool causal : {false, true}) {
    std::vector<Problem> plain;
    for (uint64_t b = 0; b < 2; ++b) {
      plain.push_back(makeProblem(50, 97, 11, {3, 5, 16, 9, 12, 7, 24, 2},
                                  {4, 7, 11, 30, 2, 8, 57, 20}, seed++));
      if (causal)
        plain.back().constraints = {atLeast(1, -1, 0)};
    }
    checkBatchEverywhere(plain,
                         causal ? "narrow plain, causal" : "narrow plain");
    std::vector<Problem> chains;
    for (uint64_t b = 0; b < 2; ++b) {
      chains.push_back(makeProblem(50, 97, 11, {6, 9, 3, 14, 0, 5, 11},
                                   {5, 12, 2, 7, 10}, seed++));
      addPairTerms(chains.back(), {5, 13}, seed++);
      chains.back().rowWeights = {0.5,  1,   -1,  1,    2,    -2,  -0.25,
                                  -0.5, 0.5, 0,   1.5,  -1.5, 0,   3,
                                  -3,   0.1, 0.2, -0.2, 0.3,  0.6, -0.6};
      chains.back().colWeights = {0, 1,   2,   0,   -1, -2, 0, 3,
                                  6, 0.2, 0.1, 0.4, 0,  2,  4};
      if (causal)
        chains.back().constraints = {atLeast(1, -1, 0)};
    }
    checkBatchEverywhere(chains,
                         causal ? "narrow chains, causal" : "narrow chains");
  }
}

TEST_CASE("softmax contract: plain outputs ignore the pair terms") {
  // Outputs with κ = 1 and α = 0 sum the weights themselves: the same bits
  // as without pair terms and coefficients.
  for (bool causal : {false, true}) {
    std::vector<Problem> problems =
        pairProblems(3, 70, 131, 19, kSecondTermWeights, 600 + causal);
    if (causal)
      for (Problem &p : problems)
        p.constraints = {atLeast(1, -1, 0)};
    std::vector<Problem> plain = problems;
    for (Problem &p : plain) {
      dropPairTerms(p);
    }
    for (int32_t isa : supportedPaths()) {
      ForcedPath forced(isa);
      INFO("path " << pathName(isa) << (causal ? ", causal" : ""));
      std::vector<Result> weighted = runBatch<float>(problems, {});
      std::vector<Result> alone = runBatch<float>(plain, {});
      std::vector<Result> weighted64 = runBatch<double>(problems, {});
      std::vector<Result> alone64 = runBatch<double>(plain, {});
      for (size_t b = 0; b < problems.size(); ++b) {
        CHECK(weighted[b].lse == alone[b].lse);
        CHECK(weighted[b].rowOutputs[0] == alone[b].rowOutputs[0]);
        CHECK(weighted[b].colOutputs[1] == alone[b].colOutputs[1]);
        CHECK(weighted64[b].rowOutputs[0] == alone64[b].rowOutputs[0]);
        CHECK(weighted64[b].colOutputs[1] == alone64[b].colOutputs[1]);
      }
    }
  }
}

TEST_CASE("softmax contract: empty sides give zeros") {
  for (auto [rows, cols] :
       std::vector<std::pair<int64_t, int64_t>>{{0, 9}, {9, 0}, {0, 0}}) {
    Problem p = makeProblem(rows, cols, 5, {3}, {2}, 7);
    for (int32_t isa : supportedPaths()) {
      ForcedPath forced(isa);
      Result f32 = runKernel<float>(p, {});
      Result f64 = runKernel<double>(p, {});
      for (const Result *result : {&f32, &f64}) {
        for (double v : result->lse)
          CHECK(v == 0);
        for (const auto &o : result->rowOutputs)
          for (double v : o)
            CHECK(v == 0);
        for (const auto &o : result->colOutputs)
          for (double v : o)
            CHECK(v == 0);
      }
    }
  }
}
