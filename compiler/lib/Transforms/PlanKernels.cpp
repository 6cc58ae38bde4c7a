//===- PlanKernels.cpp - The energy-plan-kernels pass ---------------------===//
//
// Runs the planning steps in order: plugin aggregations as tables, softmax
// contractions, tables ahead of them (and their forms), batched products,
// loop tables and the contractions they allow, contractions merged,
// outputs of contractions that are products of others, products in the
// cheaper order, products with a shared factor as one, elementwise
// expressions as tables, parallel loops;
// then drops the lets that only the parent side of a contraction read.
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"
#include "energy/Transforms/Passes.h"

#include "mlir/IR/SymbolTable.h"

namespace mlir::energy {
#define GEN_PASS_DEF_ENERGYPLANKERNELS
#include "energy/Transforms/Passes.h.inc"
} // namespace mlir::energy

using namespace mlir;
using namespace mlir::energy;

namespace {
struct PlanKernelsPass
    : public energy::impl::EnergyPlanKernelsBase<PlanKernelsPass> {
  void runOnOperation() override {
    ModelOp model = getOperation();
    tabulateAggregations(model);
    formSoftmaxContracts(model);
    hoistContractTables(model);
    formBatchedProducts(model);
    hoistLoopTables(model);
    formSoftmaxContracts(model);
    hoistContractTables(model);
    formBatchedProducts(model);
    // Contractions formed from the loop tables with those formed before,
    // now that their scores read the same products, and the rows of
    // bilinear ones whose columns need the other's results (their forms
    // marked again).
    mergeAllSoftmaxContracts(model, /*rowsOfBilinear=*/true);
    hoistContractTables(model);
    factorContractOutputs(model);
    reassociateProducts(model);
    combineProducts(model);
    fuseElementwise(model);
    markParallelLoops(model);
    eraseUnreadGatherLets(model);
  }

  /// A plugin's aggregation reads every value of its body at once: a table
  /// of them, then `energy.aggregate`.
  static void tabulateAggregations(ModelOp model) {
    SmallVector<ReduceOp> custom;
    model.walk([&](ReduceOp reduce) {
      if (reduce.getKind() == ReduceKind::custom)
        custom.push_back(reduce);
    });
    for (ReduceOp reduce : custom) {
      OpBuilder builder(reduce);
      Value table = reduce.buildValueTable(builder);
      reduce.replaceAllUsesWith(
          AggregateOp::create(builder, reduce.getLoc(), reduce.getType(),
                              *reduce.getAggregation(), table)
              .getResult());
      reduce.erase();
    }
  }

  /// A let energy-gather-gradients made: `@T.gather`, or `@T.gather_N` when
  /// that name was taken.
  static bool isGatherLet(StringRef name) {
    StringRef suffix = name.substr(
        name.rfind('.') == StringRef::npos ? name.size() : name.rfind('.'));
    return suffix == ".gather" ||
           (suffix.starts_with(".gather_") &&
            llvm::all_of(suffix.drop_front(8),
                         [](char c) { return c >= '0' && c <= '9'; }) &&
            suffix.size() > 8);
  }

  /// The lets energy-gather-gradients made for the parent side of an lse
  /// term are read by nothing once that side is a contraction.
  static void eraseUnreadGatherLets(ModelOp model) {
    for (LetOp let :
         llvm::make_early_inc_range(model.getBody().front().getOps<LetOp>()))
      if (isGatherLet(let.getSymName()) &&
          SymbolTable::symbolKnownUseEmpty(let, model))
        let.erase();
  }
};
} // namespace
