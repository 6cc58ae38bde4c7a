//===- TableOrder.cpp - Tables in the order of the arrays they read -------===//
//
// A table over (i, j) whose body reads arrays at [j, i] walks them across
// their rows, an element from each: a parameter's adjoint Σ_b f(s[b, μ]) ⊗
// σ[b] tabulates f over (μ, b) from the scores s[b, μ] that the forward
// tabulated over (b, μ). Read only by matrix products, the table is the
// transpose of the one over (j, i), which reads those arrays along their
// rows: the products take that table with their operand marked transposed,
// and CSE then finds the same table where the program already has it. A
// table that an earlier one computes in another nesting is that one.
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"
#include "Slices.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// The last two indices of a scalar element the op reads (an extract from an
/// array or a read of a tensor, at plain indices), if it reads one.
std::optional<std::pair<Value, Value>> lastTwoIndices(Operation *op) {
  AffineMap map;
  ValueRange indices;
  if (auto extract = dyn_cast<ExtractOp>(op)) {
    map = extract.getMap();
    indices = extract.getIndices();
  } else if (auto read = dyn_cast<ReadOp>(op)) {
    map = read.getMap();
    indices = read.getIndices();
  } else {
    return std::nullopt;
  }
  auto type = dyn_cast<ArrayType>(op->getResult(0).getType());
  if (!type || !type.isScalar() || !map.isIdentity() || indices.size() < 2)
    return std::nullopt;
  return std::make_pair(indices[indices.size() - 2], indices.back());
}

/// Whether the table's body reads more arrays across their rows, at
/// [.., j, i], than along them, at [.., i, j].
bool readsAcrossRows(const ScalarTable &table) {
  int across = 0, along = 0;
  table.body->walk([&](Operation *op) {
    auto last = lastTwoIndices(op);
    if (!last)
      return;
    if (last->first == table.innerIndex && last->second == table.outerIndex)
      ++across;
    else if (last->first == table.outerIndex &&
             last->second == table.innerIndex)
      ++along;
  });
  return across > along;
}

/// Whether every user of `table` is a matrix product taking it as a whole
/// matrix, so that the product can take its transpose instead.
bool readOnlyByProducts(TabulateOp table) {
  return llvm::all_of(table->getUses(), [](OpOperand &use) {
    auto product = dyn_cast<BatchMatmulOp>(use.getOwner());
    if (!product || product.getLhsRows() != 1 || product.getBatchAxes() != 1)
      return false;
    // A matrix operand (rank 2) is the same matrix at every position of the
    // other operand's batch, transposed or not.
    return product.getLhs() != product.getRhs();
  });
}

/// The table over (j, i) with the body of `table` over (i, j), built ahead
/// of it, in the same form (one tabulate, or nested ones).
TabulateOp buildTransposedTable(ScalarTable table) {
  auto type = cast<ArrayType>(table.table.getType());
  MLIRContext *context = type.getContext();
  auto transposedType = ArrayType::get(
      context, ArrayRef<StringAttr>{type.getShape()[1], type.getShape()[0]});
  Location loc = table.table.getLoc();
  OpBuilder builder(table.table);
  IRMapping mapping;
  Block *newBody;
  TabulateOp result;
  if (table.body == &table.table.getBody().front()) {
    result = TabulateOp::create(
        builder, loc, transposedType,
        ArrayAttr::get(context, {table.innerSize, table.outerSize}));
    newBody = &result.getBody().emplaceBlock();
    Value inner = newBody->addArgument(table.innerIndex.getType(),
                                       table.innerIndex.getLoc());
    Value outer = newBody->addArgument(table.outerIndex.getType(),
                                       table.outerIndex.getLoc());
    mapping.map(table.innerIndex, inner);
    mapping.map(table.outerIndex, outer);
  } else {
    result = TabulateOp::create(builder, loc, transposedType,
                                ArrayAttr::get(context, {table.innerSize}));
    Block &outerBody = result.getBody().emplaceBlock();
    mapping.map(table.innerIndex,
                outerBody.addArgument(table.innerIndex.getType(),
                                      table.innerIndex.getLoc()));
    OpBuilder outerBuilder = OpBuilder::atBlockEnd(&outerBody);
    auto row = TabulateOp::create(
        outerBuilder, loc,
        ArrayType::get(context, ArrayRef<StringAttr>{type.getShape()[0]}),
        ArrayAttr::get(context, {table.outerSize}));
    YieldOp::create(outerBuilder, loc, row.getResult());
    newBody = &row.getBody().emplaceBlock();
    mapping.map(table.outerIndex,
                newBody->addArgument(table.outerIndex.getType(),
                                     table.outerIndex.getLoc()));
  }
  OpBuilder inside = OpBuilder::atBlockEnd(newBody);
  for (Operation &op : *table.body)
    inside.clone(op, mapping);
  return result;
}

/// Reads `table` through its transpose where it pays: true if it did.
bool orderTable(TabulateOp op) {
  std::optional<ScalarTable> table = scalarTableOf(op);
  if (!table || !readsAcrossRows(*table) || !readOnlyByProducts(op))
    return false;
  // Nested, the rows' body is cloned alone: nothing else may be beside it.
  Block &outer = op.getBody().front();
  if (table->body != &outer && outer.getOperations().size() > 2)
    return false;
  TabulateOp transposed = buildTransposedTable(*table);
  for (OpOperand &use : llvm::make_early_inc_range(op->getUses())) {
    auto product = cast<BatchMatmulOp>(use.getOwner());
    if (use.getOperandNumber() == 0)
      product.setTransposeLhs(!product.getTransposeLhs());
    else
      product.setTransposeRhs(!product.getTransposeRhs());
    use.set(transposed.getResult());
  }
  op->erase();
  return true;
}

/// Reads, in place of each table of `block`, an earlier one of the block
/// that computes the same values in another nesting (over (b, a, μ) and
/// over (b, a) of rows over μ), where no store between them changes what
/// they read.
void shareEqualTables(Block &block) {
  SmallVector<TabulateOp> earlier;
  for (Operation &op : llvm::make_early_inc_range(block)) {
    if (isa<StoreOp>(op)) {
      earlier.clear();
      continue;
    }
    auto table = dyn_cast<TabulateOp>(op);
    if (!table)
      continue;
    auto same = llvm::find_if(earlier, [&](TabulateOp candidate) {
      return computeSame(candidate.getResult(), table.getResult(), IRMapping());
    });
    if (same == earlier.end()) {
      earlier.push_back(table);
      continue;
    }
    table.getResult().replaceAllUsesWith(same->getResult());
    table->erase();
  }
}

} // namespace

void mlir::energy::orderTablesAsTheirReads(ModelOp model) {
  SmallVector<TabulateOp> tables;
  model.walk([&](TabulateOp table) { tables.push_back(table); });
  for (TabulateOp table : tables)
    orderTable(table);
  SmallVector<Block *> blocks;
  model.walk([&](GradientOp gradient) {
    blocks.push_back(&gradient.getBody().front());
  });
  for (Block *block : blocks)
    shareEqualTables(*block);
}
