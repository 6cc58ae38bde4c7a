//===- OutputTables.cpp - An output over a domain as one table ------------===//
//
// An output over a domain (a value per token) is the table of its body over
// the domain, which the later plan steps see whole: a per-row lse becomes
// the rows of a contraction, products of rows become GEMMs.
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::energy;

void mlir::energy::tabulateOutputs(ModelOp model) {
  for (OutputOp output : llvm::to_vector(model.getOps<OutputOp>())) {
    if (output.getDomain().empty())
      continue;
    ArrayType type = output.getArrayType();
    OpBuilder builder(output.getContext());
    auto *whole = new Block();
    builder.setInsertionPointToStart(whole);
    auto table =
        TabulateOp::create(builder, output.getLoc(), type, output.getDomain());
    table.getBody().takeBody(output.getBody());
    YieldOp::create(builder, output.getLoc(), table.getResult());
    output.getBody().push_back(whole);
    output.setDomainAttr(builder.getArrayAttr({}));
    output.setElementType(type);
  }
}
