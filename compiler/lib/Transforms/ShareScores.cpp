//===- ShareScores.cpp - Column sums that reuse another's scores ----------===//
//
// Marks `reuses_scores` on each contraction whose normaliser is given by an
// earlier one with the same scores, and whose pair terms are among that
// one's (the column sums that merging kept apart), so that backends need
// not compute them twice.
//
//===----------------------------------------------------------------------===//

#include "energy/Transforms/Passes.h"

namespace mlir::energy {
#define GEN_PASS_DEF_ENERGYSHARESCORES
#include "energy/Transforms/Passes.h.inc"
} // namespace mlir::energy

using namespace mlir;
using namespace mlir::energy;

namespace {
struct ShareScoresPass
    : public mlir::energy::impl::EnergyShareScoresBase<ShareScoresPass> {
  void runOnOperation() override {
    getOperation().walk([](SoftmaxContractOp contract) {
      std::string reason;
      if (contract.getGivenLse() && !contract.getReusesScores() &&
          succeeded(contract.checkReusableScores(reason)))
        contract.setReusesScores(true);
    });
  }
};
} // namespace
