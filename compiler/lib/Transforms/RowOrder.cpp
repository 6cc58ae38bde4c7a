//===- RowOrder.cpp - Rows of a contraction in the order that pays --------===//
//
// A generic contraction whose rows nest in an order that hides its bilinear
// form (rows (h, i, b) where the keys are rows of each sequence b: the
// column table depends on the last row index, so b is no batch index) is
// the contraction over the same rows with another one last, (h, b, i),
// when that one is bilinear once its tables are hoisted and its pair bias
// tabulated: its row outputs, read back in the old order, replace the old
// ones. A table of a pair's bias that the old order hoisted (over (h, i, j)
// in the column's orientation) is read through its element first.
//
//===----------------------------------------------------------------------===//

#include "ContractBuilder.h"
#include "PlanKernels.h"
#include "Slices.h"

#include "energy/Transforms/Dependence.h"
#include "energy/Transforms/ProgramReads.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// Reads in `contract`'s score of a table built outside it whose element is
/// one read of a tensor or an array, read at the score's own indices,
/// replaced by that read: the pair bias step finds what the table hid.
void readThroughPairTables(SoftmaxContractOp contract) {
  Block &score = contract.getScore().front();
  SmallVector<ExtractOp> extracts;
  for (auto extract : score.getOps<ExtractOp>())
    extracts.push_back(extract);
  for (ExtractOp extract : extracts) {
    auto table = extract.getSource().getDefiningOp<TabulateOp>();
    if (!table || !isDefinedOutside(table.getResult(), contract) ||
        !cast<ArrayType>(extract.getType()).isScalar() ||
        !extract.getMap().isIdentity())
      continue;
    Block &body = table.getBody().front();
    if (body.getOperations().size() != 2 ||
        !isa<ReadOp, ExtractOp>(body.front()) ||
        body.getTerminator()->getOperand(0) != body.front().getResult(0) ||
        body.getNumArguments() != extract.getIndices().size())
      continue;
    bool outside = llvm::all_of(body.front().getOperands(), [&](Value v) {
      return isa<BlockArgument>(v) || isDefinedOutside(v, table);
    });
    if (!outside || table->getBlock() != contract->getBlock())
      continue;
    // A tensor read later holds what the table read: nothing between them
    // writes it.
    if (auto read = dyn_cast<ReadOp>(body.front())) {
      bool written = false;
      for (Operation *op = table->getNextNode(); op != contract;
           op = op->getNextNode())
        written = written || mayWriteTensor(op, read.getSource());
      if (written)
        continue;
    }
    IRMapping mapping;
    mapping.map(body.getArguments(), extract.getIndices());
    OpBuilder builder(extract);
    Operation *element = builder.clone(body.front(), mapping);
    extract.getResult().replaceAllUsesWith(element->getResult(0));
    extract.erase();
  }
}

/// `contract` over its rows with row `moved` last, the others in their
/// order, ahead of it (its given normaliser read in that order); its regions
/// are clones. `order` gets, for each new position, the old one.
SoftmaxContractOp reordered(SoftmaxContractOp contract, unsigned moved,
                            SmallVectorImpl<unsigned> &order) {
  const unsigned rowCount = contract.getNumRowIndices();
  for (unsigned k = 0; k < rowCount; ++k)
    if (k != moved)
      order.push_back(k);
  order.push_back(moved);
  SmallVector<Attribute> rows;
  for (unsigned k : order)
    rows.push_back(contract.getRows()[k]);
  MLIRContext *context = contract.getContext();
  ContractBuilder rebuilt(context, ArrayAttr::get(context, rows),
                          contract.getCols());
  Block &score = contract.getScore().front();
  SmallVector<Location> locations;
  for (unsigned k : order)
    locations.push_back(score.getArgument(k).getLoc());
  locations.push_back(score.getArgument(rowCount).getLoc());
  rebuilt.nameIndices(locations);
  auto cloneInto = [&](Region &into, Region &source) {
    Block &target = rebuilt.block(into);
    IRMapping mapping;
    for (auto [position, old] : llvm::enumerate(order))
      mapping.map(source.front().getArgument(old),
                  target.getArgument(position));
    mapping.map(source.front().getArgument(rowCount),
                target.getArgument(rowCount));
    OpBuilder inside = endOf(target);
    for (Operation &op : source.front())
      inside.clone(op, mapping);
  };
  if (contract.hasPredicate())
    cloneInto(rebuilt.predicate, contract.getPredicate());
  cloneInto(rebuilt.score, contract.getScore());
  cloneInto(rebuilt.rowSums, contract.getRowSums());
  cloneInto(rebuilt.colSums, contract.getColSums());
  OpBuilder builder(contract);
  Value given;
  if (Value old = contract.getGivenLse()) {
    auto type = cast<ArrayType>(old.getType());
    SmallVector<StringAttr> shape;
    for (unsigned k : order)
      shape.push_back(type.getShape()[k]);
    auto table = TabulateOp::create(builder, contract.getLoc(),
                                    ArrayType::get(context, shape),
                                    ArrayAttr::get(context, rows));
    Block &body = table.getBody().emplaceBlock();
    SmallVector<Value> indices(rowCount);
    for (auto [position, old] : llvm::enumerate(order))
      indices[old] =
          body.addArgument(IndexType::get(context), locations[position]);
    OpBuilder inside = OpBuilder::atBlockEnd(&body);
    Value element = ExtractOp::create(
        inside, contract.getLoc(), ArrayType::getScalar(context), old,
        AffineMapAttr::get(
            AffineMap::getMultiDimIdentityMap(rowCount, context)),
        indices);
    YieldOp::create(inside, contract.getLoc(), element);
    given = table.getResult();
  }
  return rebuilt.create(builder, contract.getLoc(), contract.getTemperature(),
                        given);
}

/// Replaces `contract` by a reordering that is bilinear, when one is;
/// otherwise leaves it as it was.
void orderRows(SoftmaxContractOp contract) {
  const unsigned rowCount = contract.getNumRowIndices();
  if (contract.getForm() != ContractForm::generic || rowCount < 2 ||
      !contract.getColValues().empty() || contract.getNumPairSums())
    return;
  for (unsigned moved = rowCount - 1; moved-- > 0;) {
    Operation *before = contract->getPrevNode();
    SmallVector<unsigned> order;
    SoftmaxContractOp candidate = reordered(contract, moved, order);
    readThroughPairTables(candidate);
    hoistTablesOf(candidate);
    if (candidate.getForm() == ContractForm::generic)
      tablePairBias(candidate);
    if (candidate.getForm() != ContractForm::bilinear) {
      eraseBuiltBefore(contract, before);
      continue;
    }
    OpBuilder builder(contract);
    builder.setInsertionPointAfter(contract);
    for (auto [old, result] :
         llvm::zip(contract.getResults(), candidate.getResults()))
      old.replaceAllUsesWith(
          readInOrder(builder, result, old, order, contract.getRows()));
    // Tables of the old score that nothing reads now.
    SmallVector<Operation *> read;
    contract.getScore().walk([&](ExtractOp extract) {
      if (Operation *table = extract.getSource().getDefiningOp();
          table && isa<TabulateOp>(table) &&
          isDefinedOutside(extract.getSource(), contract))
        read.push_back(table);
    });
    contract.erase();
    for (Operation *table : read)
      if (table->use_empty())
        table->erase();
    return;
  }
}

} // namespace

void mlir::energy::orderContractRows(ModelOp model) {
  forEachGenericContract(model, orderRows);
}
