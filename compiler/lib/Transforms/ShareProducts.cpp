//===- ShareProducts.cpp - What a kernel computes twice, once -------------===//
//
// The gradient of a pair energy between a param's rows and a state's rows
// (a dense associative memory's memories against its patterns) computes
// the pairs' scores twice: in the state's loop as the rows times the
// paramᵀ, and in the param's loop as the param times the rowsᵀ, each side
// with tables of the rows of its own. A table that recomputes at an index
// what an earlier table holds there reads it instead; a product that is
// the transpose of an earlier one is that one read at swapped indices; one
// that another computes (of a batch of matrices or of a table of their
// transposes, of an array or of a scalar multiple of it: that product times
// the scalar) is that one.
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"
#include "Slices.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// The array that `row`, a value of `table`'s body, reads at the table's
/// indices in order (`extract A[i, j, …]`, A from outside the table);
/// null otherwise.
Value arrayReadAtIndices(Value row, TabulateOp table) {
  Block &body = table.getBody().front();
  auto extract = row.getDefiningOp<ExtractOp>();
  if (!extract || extract->getBlock() != &body ||
      !extract.getMap().isIdentity() ||
      extract.getIndices() != ValueRange(body.getArguments()) ||
      !isDefinedOutside(extract.getSource(), table))
    return {};
  return extract.getSource();
}

/// The array a table copies, when its body yields the row of an array
/// from outside at its indices, in order: the table is that array.
Value copiedArray(TabulateOp table) {
  Value array = arrayReadAtIndices(table.getBodyValue(), table);
  return array && array.getType() == table.getType() ? array : Value();
}

/// The size an index of a loop, table or reduction runs over.
Attribute sizeOf(Value index) {
  auto argument = dyn_cast<BlockArgument>(index);
  if (!argument)
    return {};
  auto sizes =
      argument.getOwner()->getParentOp()->getAttrOfType<ArrayAttr>("sizes");
  return sizes && argument.getArgNumber() < sizes.size()
             ? sizes[argument.getArgNumber()]
             : Attribute();
}

/// The indices of the loops, tables and reductions around `op` up to
/// `statement` that run over `size`.
SmallVector<Value> indicesOver(Attribute size, Operation *op,
                               Operation *statement) {
  SmallVector<Value> indices;
  for (Region *region = op->getParentRegion();;
       region = region->getParentOp()->getParentRegion()) {
    for (BlockArgument argument : region->front().getArguments())
      if (sizeOf(argument) == size)
        indices.push_back(argument);
    if (region->getParentOp() == statement)
      return indices;
  }
}

/// The ways to place `table`'s indices at indices of the loops, tables and
/// reductions around `op` (up to `statement`) of the same sizes, at most
/// `limit` of them.
SmallVector<IRMapping> placementsOf(Block *table, Operation *op,
                                    Operation *statement, size_t limit) {
  auto sizes = table->getParentOp()->getAttrOfType<ArrayAttr>("sizes");
  SmallVector<IRMapping> placements(1);
  for (BlockArgument argument : table->getArguments()) {
    SmallVector<Value> candidates =
        indicesOver(sizes[argument.getArgNumber()], op, statement);
    SmallVector<IRMapping> extended;
    for (const IRMapping &placement : placements)
      for (Value index : candidates) {
        if (extended.size() == limit)
          break;
        IRMapping next = placement;
        next.map(argument, index);
        extended.push_back(std::move(next));
      }
    placements = std::move(extended);
  }
  return placements;
}

/// Makes the statements after `table` (a table whose rows are computed, not
/// read) read its row where they compute it.
void reuseTable(TabulateOp table) {
  Block *body = &table.getBody().front();
  Value row = cast<YieldOp>(body->getTerminator()).getValues().front();
  Operation *rowOp = row.getDefiningOp();
  if (!rowOp || rowOp->getBlock() != body || isa<ReadOp, ExtractOp>(rowOp) ||
      rowOp->getNumRegions() != 0)
    return;
  constexpr size_t kMostPlacements = 64;
  SmallVector<std::pair<Operation *, SmallVector<Value>>> recomputed;
  for (Operation *statement = table->getNextNode(); statement;
       statement = statement->getNextNode())
    statement->walk([&](Operation *op) {
      if (op == statement || op->getName() != rowOp->getName() ||
          op->getNumResults() != 1 ||
          op->getResult(0).getType() != row.getType())
        return;
      for (const IRMapping &at :
           placementsOf(body, op, statement, kMostPlacements))
        if (computeSame(row, op->getResult(0), at)) {
          SmallVector<Value> indices;
          for (BlockArgument argument : body->getArguments())
            indices.push_back(at.lookup(argument));
          recomputed.push_back({op, indices});
          return;
        }
    });
  auto map = AffineMap::getMultiDimIdentityMap(body->getNumArguments(),
                                               table.getContext());
  llvm::SetVector<Block *> blocks;
  for (auto &[op, indices] : recomputed) {
    OpBuilder builder(op);
    Value entry =
        ExtractOp::create(builder, op->getLoc(), row.getType(),
                          table.getResult(), AffineMapAttr::get(map), indices);
    op->getResult(0).replaceAllUsesWith(entry);
    blocks.insert(op->getBlock());
  }
  for (Block *block : blocks)
    eraseDeadOps(*block);
}

/// Reads the entries of a transposed matrix from the matrix at swapped
/// indices, and takes it into the products that read it as the operand
/// transposed; drops the transpose when nothing reads it then.
void readThroughTranspose(TransposeOp transpose) {
  Value matrix = transpose.getOperand();
  if (cast<ArrayType>(matrix.getType()).getRank() != 2)
    return;
  for (OpOperand &use : llvm::make_early_inc_range(transpose->getUses())) {
    Operation *user = use.getOwner();
    if (auto extract = dyn_cast<ExtractOp>(user)) {
      if (extract.getIndices().size() != 2 || !extract.getMap().isIdentity())
        continue;
      OpBuilder builder(extract);
      Value entry = ExtractOp::create(
          builder, extract.getLoc(), extract.getType(), matrix,
          extract.getMapAttr(),
          ValueRange{extract.getIndices()[1], extract.getIndices()[0]});
      extract.replaceAllUsesWith(entry);
      extract.erase();
      continue;
    }
    auto product = dyn_cast<BatchMatmulOp>(user);
    if (!product || product.getLhsRows() != 1 || product.getBatchAxes() != 1 ||
        product.getLhs() == product.getRhs())
      continue;
    bool isLhs = use.getOperandNumber() == 0;
    OpBuilder builder(product);
    auto replacement = BatchMatmulOp::create(
        builder, product.getLoc(), product.getType(),
        isLhs ? matrix : product.getLhs(), isLhs ? product.getRhs() : matrix,
        isLhs ? !product.getTransposeLhs() : product.getTransposeLhs(),
        isLhs ? product.getTransposeRhs() : !product.getTransposeRhs(),
        product.getSumBatch(), /*lhs_rows=*/1);
    product.replaceAllUsesWith(replacement.getResult());
    product.erase();
  }
  if (transpose->use_empty())
    transpose.erase();
}

/// A table whose rows are `rows` times one scalar `factor` from outside it.
struct ScaledTable {
  TabulateOp table;
  Value rows;
  Value factor;
};

std::optional<ScaledTable> scaledTableOf(Value value) {
  auto table = value.getDefiningOp<TabulateOp>();
  if (!table)
    return std::nullopt;
  Block &body = table.getBody().front();
  auto product = table.getBodyValue().getDefiningOp<MulOp>();
  if (!product || product->getBlock() != &body)
    return std::nullopt;
  for (auto [rows, factor] : {std::pair(product.getLhs(), product.getRhs()),
                              std::pair(product.getRhs(), product.getLhs())})
    if (isScalar(factor) && isDefinedOutside(factor, table) &&
        rows.getType() == product.getType())
      return ScaledTable{table, rows, factor};
  return std::nullopt;
}

/// What `scaled` scales, as a value available at `point` (an op after
/// the table), when `twin` computes it: the array its rows read (x of a
/// table of x[i] · s), or `twin` itself, a table of the same rows (moved
/// ahead of `point` where it came after); null otherwise.
Value unscaledAt(Value twin, ScaledTable scaled, Operation *point) {
  Block &body = scaled.table.getBody().front();
  if (Value array = arrayReadAtIndices(scaled.rows, scaled.table);
      array && computeSame(twin, array, {}))
    return array;
  auto table = twin.getDefiningOp<TabulateOp>();
  if (!table || table.getType() != scaled.table.getType() ||
      table.getSizes() != scaled.table.getSizes())
    return {};
  IRMapping arguments;
  arguments.map(table.getBody().front().getArguments(), body.getArguments());
  if (!computeSame(table.getBodyValue(), scaled.rows, arguments))
    return {};
  if (availableBefore(twin, point))
    return twin;
  // A table of arrays' rows alone (no read a store might change) moves
  // ahead of the point, where all it takes is available.
  auto staysBehind = [&](Operation *op) {
    return isa<ReadOp>(op) || llvm::any_of(op->getOperands(), [&](Value value) {
             return isDefinedOutside(value, table) &&
                    !availableBefore(value, point);
           });
  };
  if (table->getBlock() != point->getBlock() ||
      table
          .walk([&](Operation *op) {
            return staysBehind(op) ? WalkResult::interrupt()
                                   : WalkResult::advance();
          })
          .wasInterrupted())
    return {};
  table->moveBefore(point);
  return twin;
}

/// Whether two products multiply alike (transposes, batch sums, row axes).
bool sameProductKind(BatchMatmulOp a, BatchMatmulOp b) {
  return a.getBatchAxes() == b.getBatchAxes() &&
         a.getTransposeLhs() == b.getTransposeLhs() &&
         a.getTransposeRhs() == b.getTransposeRhs() &&
         a.getSumBatch() == b.getSumBatch() &&
         a.getLhsRows() == b.getLhsRows() && a.getType() == b.getType();
}

/// The array A whose batch of matrices `table` transposes, a table over
/// the batch axis h of A[h]ᵀ (A a tensor or an array from outside the
/// table, read at the builder's point); null otherwise.
Value transposedBatchOf(TabulateOp table, OpBuilder &builder) {
  Block &body = table.getBody().front();
  auto transpose = table.getBodyValue().getDefiningOp<TransposeOp>();
  if (body.getNumArguments() != 1 || !transpose ||
      transpose->getBlock() != &body)
    return {};
  auto type = cast<ArrayType>(table.getType());
  SmallVector<StringAttr> shape(type.getShape());
  std::swap(shape[1], shape[2]);
  auto batch = ArrayType::get(table.getContext(), shape);
  Value matrix = transpose.getOperand();
  if (matrix.getDefiningOp<ExtractOp>()) {
    Value array = arrayReadAtIndices(matrix, table);
    return array && array.getType() == batch ? array : Value();
  }
  return wholeTensorOf(matrix, {body.getArgument(0)}, batch, builder);
}

/// Rewrites `product` that reads a table of the transposes of a batch of
/// matrices (transposedBatchOf) as the product of the batch with the
/// operand's transpose flag flipped; false, with the IR unchanged, when it
/// reads none.
bool readThroughTransposedBatch(BatchMatmulOp product) {
  if (product.getBatchAxes() != 1)
    return false;
  for (unsigned side : {0u, 1u}) {
    auto table = product->getOperand(side).getDefiningOp<TabulateOp>();
    if (!table || cast<ArrayType>(table.getType()).getRank() != 3 ||
        !(side == 0 ? product.hasLhsBatch() : product.hasRhsBatch()))
      continue;
    OpBuilder builder(product);
    Value batch = transposedBatchOf(table, builder);
    if (!batch)
      continue;
    bool transposeLhs = product.getTransposeLhs() != (side == 0);
    bool transposeRhs = product.getTransposeRhs() != (side == 1);
    Value lhs = side == 0 ? batch : product.getLhs();
    Value rhs = side == 1 ? batch : product.getRhs();
    std::string reason;
    ArrayType type = BatchMatmulOp::inferType(
        cast<ArrayType>(lhs.getType()), cast<ArrayType>(rhs.getType()),
        transposeLhs, transposeRhs, product.getSumBatch(), reason,
        product.getLhsRows());
    if (type != product.getType()) {
      if (batch.use_empty() && batch.getDefiningOp<ReadOp>())
        batch.getDefiningOp()->erase();
      continue;
    }
    auto replacement = BatchMatmulOp::create(
        builder, product.getLoc(), type, lhs, rhs, transposeLhs, transposeRhs,
        product.getSumBatch(), product.getLhsRows());
    product.getResult().replaceAllUsesWith(replacement.getResult());
    product.erase();
    if (table->use_empty())
      table.erase();
    return true;
  }
  return false;
}

/// Rewrites `product`, of operands x and r, as another statement of the
/// same block that computes the same product, or the product of r and
/// what x is a scalar multiple of (ScaledTable; times the scalar then):
/// both read one product, computed at the first of them. False, with the
/// IR unchanged, when none does.
bool shareProduct(BatchMatmulOp product) {
  if (product.getBatchAxes() != 1)
    return false;
  for (unsigned side : {0u, 1u}) {
    Value operand = product->getOperand(side);
    Value other = product->getOperand(1 - side);
    std::optional<ScaledTable> scaled = scaledTableOf(operand);
    for (Operation &op : *product->getBlock()) {
      auto twin = dyn_cast<BatchMatmulOp>(&op);
      if (!twin || twin == product || !sameProductKind(twin, product) ||
          !computeSame(twin->getOperand(1 - side), other, {}))
        continue;
      Value factor, same = operand;
      if (Value unscaled =
              scaled ? unscaledAt(twin->getOperand(side), *scaled, product)
                     : Value()) {
        factor = scaled->factor;
        same = unscaled;
      } else if (!computeSame(twin->getOperand(side), operand, {})) {
        continue;
      }
      // The first of the two computes the product, of what the product
      // reads (computing the same as the twin's operands).
      if (product->isBeforeInBlock(twin)) {
        twin->moveBefore(product);
        twin->setOperand(side, same);
        twin->setOperand(1 - side, other);
      }
      OpBuilder builder(product);
      Value shared = twin.getResult();
      if (factor)
        shared = MulOp::create(builder, product.getLoc(), shared, factor);
      product.getResult().replaceAllUsesWith(shared);
      product.erase();
      if (Operation *definition = operand.getDefiningOp();
          definition && definition->use_empty())
        definition->erase();
      return true;
    }
  }
  return false;
}

} // namespace

bool mlir::energy::transposeOfEarlierProduct(BatchMatmulOp product) {
  // In a program a store may come between two reads that compute the same.
  if (product.getLhsRows() != 1 || product.getBatchAxes() != 1 ||
      isInProgram(product))
    return false;
  for (Operation *op = product->getPrevNode(); op; op = op->getPrevNode()) {
    auto earlier = dyn_cast<BatchMatmulOp>(op);
    if (!earlier || earlier.getLhsRows() != 1 || earlier.getBatchAxes() != 1 ||
        earlier.getSumBatch() != product.getSumBatch() ||
        earlier.getTransposeLhs() == product.getTransposeRhs() ||
        earlier.getTransposeRhs() == product.getTransposeLhs() ||
        !computeSame(earlier.getLhs(), product.getRhs(), {}) ||
        !computeSame(earlier.getRhs(), product.getLhs(), {}))
      continue;
    OpBuilder builder(product);
    auto transpose =
        TransposeOp::create(builder, product.getLoc(), earlier.getResult());
    if (transpose.getType() != product.getType()) {
      transpose.erase();
      return false;
    }
    product.getResult().replaceAllUsesWith(transpose.getResult());
    product.erase();
    return true;
  }
  return false;
}

void mlir::energy::shareProducts(ModelOp model) {
  SmallVector<TabulateOp> tables;
  // Not in programs, where a store may come between a table and a later
  // read.
  model.walk([&](TabulateOp table) {
    if (isa<GradientOp, TermOp>(table->getParentOp()))
      tables.push_back(table);
  });
  for (TabulateOp table : tables)
    reuseTable(table);
  for (TabulateOp table : tables)
    if (Value array = copiedArray(table)) {
      table.replaceAllUsesWith(array);
      table.erase();
    }
  SmallVector<BatchMatmulOp> products;
  model.walk([&](BatchMatmulOp product) {
    if (isStatement(product))
      products.push_back(product);
  });
  for (BatchMatmulOp product : products)
    transposeOfEarlierProduct(product);
  // Not in programs either: a store may come between the two products.
  auto declarationProducts = [&] {
    SmallVector<BatchMatmulOp> found;
    model.walk([&](BatchMatmulOp product) {
      if (isStatement(product) &&
          isa<GradientOp, TermOp>(product->getParentOp()))
        found.push_back(product);
    });
    return found;
  };
  for (BatchMatmulOp product : declarationProducts())
    readThroughTransposedBatch(product);
  for (BatchMatmulOp product : declarationProducts())
    shareProduct(product);
  SmallVector<TransposeOp> transposes;
  model.walk([&](TransposeOp transpose) { transposes.push_back(transpose); });
  for (TransposeOp transpose : transposes)
    readThroughTranspose(transpose);
}
