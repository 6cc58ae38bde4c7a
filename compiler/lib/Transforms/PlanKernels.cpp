//===- PlanKernels.cpp - The plan's first and last steps ------------------===//
//
// Plugin aggregations as tables of their bodies (the plan's first step),
// and the lets that only the parent side of a contraction read, dropped
// once the plan is made (its last).
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"

#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mlir::energy;

void mlir::energy::tabulateAggregations(ModelOp model) {
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

bool mlir::energy::isGatherLet(StringRef name) {
  StringRef suffix = name.substr(
      name.rfind('.') == StringRef::npos ? name.size() : name.rfind('.'));
  return suffix == ".gather" ||
         (suffix.starts_with(".gather_") &&
          llvm::all_of(suffix.drop_front(8),
                       [](char c) { return c >= '0' && c <= '9'; }) &&
          suffix.size() > 8);
}

void mlir::energy::eraseUnreadGatherLets(ModelOp model) {
  for (LetOp let :
       llvm::make_early_inc_range(model.getBody().front().getOps<LetOp>()))
    if (isGatherLet(let.getSymName()) &&
        SymbolTable::symbolKnownUseEmpty(let, model))
      let.erase();
}
