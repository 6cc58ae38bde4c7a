//===- ShareProducts.cpp - What a kernel computes twice, once -------------===//
//
// The gradient of a pair energy between a param's rows and a state's rows
// (a dense associative memory's memories against its patterns) computes
// the pairs' scores twice: in the state's loop as the rows times the
// paramᵀ, and in the param's loop as the param times the rowsᵀ, each side
// with tables of the rows of its own. A table that recomputes at an index
// what an earlier table holds there reads it instead; a product that is
// the transpose of an earlier one is that one read at swapped indices.
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"
#include "Slices.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// The array a table copies, when its body yields the row of an array
/// from outside at its indices, in order: the table is that array.
Value copiedArray(TabulateOp table) {
  Block &body = table.getBody().front();
  auto extract = cast<YieldOp>(body.getTerminator())
                     .getValues()
                     .front()
                     .getDefiningOp<ExtractOp>();
  if (!extract || extract->getBlock() != &body ||
      !extract.getMap().isIdentity() ||
      extract.getSource().getType() != table.getType() ||
      extract.getIndices().size() != body.getNumArguments() ||
      table->isAncestor(extract.getSource().getParentRegion()->getParentOp()))
    return {};
  for (auto [index, argument] :
       llvm::zip(extract.getIndices(), body.getArguments()))
    if (index != argument)
      return {};
  return extract.getSource();
}

bool sameValue(Value a, Value b, IRMapping &inside);

/// Whether `x` and `y` compute the same: the same op, attributes and
/// types, operands the same in the sense of sameValue, and regions whose
/// ops do so in turn (their values paired up in `inside`).
bool sameOp(Operation *x, Operation *y, IRMapping &inside) {
  if (x->getName() != y->getName() ||
      x->getAttrDictionary() != y->getAttrDictionary() ||
      x->getResultTypes() != y->getResultTypes() ||
      x->getNumOperands() != y->getNumOperands() ||
      x->getNumRegions() != y->getNumRegions() || !isMemoryEffectFree(x) ||
      !isMemoryEffectFree(y))
    return false;
  for (auto [a, b] : llvm::zip(x->getOperands(), y->getOperands()))
    if (!sameValue(a, b, inside))
      return false;
  for (auto [first, second] : llvm::zip(x->getRegions(), y->getRegions())) {
    if (!first.hasOneBlock() || !second.hasOneBlock())
      return false;
    Block &one = first.front(), &other = second.front();
    if (one.getArgumentTypes() != other.getArgumentTypes() ||
        one.getOperations().size() != other.getOperations().size())
      return false;
    for (auto [a, b] : llvm::zip(one.getArguments(), other.getArguments()))
      inside.map(a, b);
    for (auto [opA, opB] : llvm::zip(one, other)) {
      if (!sameOp(&opA, &opB, inside))
        return false;
      for (auto [a, b] : llvm::zip(opA.getResults(), opB.getResults()))
        inside.map(a, b);
    }
  }
  return true;
}

/// Whether `a` and `b` are the same value (paired up in `inside`), or the
/// same results of ops that compute the same (two reads of the same
/// tensor, two tables of the same rows).
bool sameValue(Value a, Value b, IRMapping &inside) {
  if (a == b || inside.lookupOrNull(a) == b)
    return true;
  Operation *x = a.getDefiningOp(), *y = b.getDefiningOp();
  return x && y &&
         cast<OpResult>(a).getResultNumber() ==
             cast<OpResult>(b).getResultNumber() &&
         sameOp(x, y, inside);
}

bool sameValue(Value a, Value b) {
  IRMapping inside;
  return sameValue(a, b, inside);
}

/// Whether `other` computes what `value`, a value of the one-index table
/// body `body`, computes at the position `index` (bound at the first read
/// of the body's index): the same pure ops, without regions, on the same
/// values from outside the body.
bool computesAt(Value value, Block *body, Value other, Value &index) {
  if (auto argument = dyn_cast<BlockArgument>(value);
      argument && argument.getOwner() == body) {
    if (!index)
      index = other;
    return index == other;
  }
  Operation *op = value.getDefiningOp();
  if (!op || !body->getParentOp()->isAncestor(op))
    return sameValue(value, other);
  Operation *otherOp = other.getDefiningOp();
  if (!otherOp || otherOp->getName() != op->getName() ||
      otherOp->getNumRegions() != 0 || op->getNumRegions() != 0 ||
      otherOp->getAttrDictionary() != op->getAttrDictionary() ||
      otherOp->getResultTypes() != op->getResultTypes() ||
      otherOp->getNumOperands() != op->getNumOperands() ||
      cast<OpResult>(other).getResultNumber() !=
          cast<OpResult>(value).getResultNumber() ||
      !isMemoryEffectFree(op) || !isMemoryEffectFree(otherOp))
    return false;
  for (auto [operand, otherOperand] :
       llvm::zip(op->getOperands(), otherOp->getOperands()))
    if (!computesAt(operand, body, otherOperand, index))
      return false;
  return true;
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

/// Erases the ops of `worklist` that nothing reads and that have no
/// effects, then the ops that only they read, likewise.
void eraseDeadOps(SmallVector<Operation *> worklist) {
  llvm::SmallPtrSet<Operation *, 16> erased;
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (erased.contains(op) || !op->use_empty() || !isMemoryEffectFree(op) ||
        op->getNumRegions() != 0)
      continue;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp())
        worklist.push_back(def);
    erased.insert(op);
    op->erase();
  }
}

/// Makes the statements after `table` (a table over one index whose rows
/// are computed, not read) read its row where they compute it.
void reuseTable(TabulateOp table) {
  Block *body = &table.getBody().front();
  if (body->getNumArguments() != 1)
    return;
  Value row = cast<YieldOp>(body->getTerminator()).getValues().front();
  Operation *rowOp = row.getDefiningOp();
  if (!rowOp || rowOp->getBlock() != body || isa<ReadOp, ExtractOp>(rowOp) ||
      rowOp->getNumRegions() != 0)
    return;
  SmallVector<std::pair<Operation *, Value>> recomputed;
  for (Operation *statement = table->getNextNode(); statement;
       statement = statement->getNextNode())
    statement->walk([&](Operation *op) {
      if (op == table || op->getName() != rowOp->getName() ||
          op->getNumResults() != 1 ||
          op->getResult(0).getType() != row.getType())
        return;
      Value index;
      if (computesAt(row, body, op->getResult(0), index) && index &&
          sizeOf(index) == table.getSizes()[0])
        recomputed.push_back({op, index});
    });
  auto map = AffineMap::getMultiDimIdentityMap(1, table.getContext());
  SmallVector<Operation *> replaced;
  for (auto [op, index] : recomputed) {
    OpBuilder builder(op);
    Value entry = ExtractOp::create(builder, op->getLoc(), row.getType(),
                                    table.getResult(), AffineMapAttr::get(map),
                                    ValueRange{index});
    op->getResult(0).replaceAllUsesWith(entry);
    replaced.push_back(op);
  }
  eraseDeadOps(replaced);
}

/// A product of two matrices (no batch axis, one row axis).
bool isMatrixProduct(BatchMatmulOp product) {
  return product.getLhsRows() == 1 && !product.hasLhsBatch() &&
         !product.hasRhsBatch() &&
         cast<ArrayType>(product.getType()).getRank() == 2;
}

/// Replaces each product of matrices that is the transpose of an earlier
/// one in the same block, B Aᵀ after A Bᵀ, by the transpose of that one.
void shareTransposedProducts(Block &block) {
  SmallVector<BatchMatmulOp> earlier;
  for (Operation &op : llvm::make_early_inc_range(block)) {
    auto product = dyn_cast<BatchMatmulOp>(op);
    if (!product || !isMatrixProduct(product))
      continue;
    auto twin = llvm::find_if(earlier, [&](BatchMatmulOp first) {
      return first.getSumBatch() == product.getSumBatch() &&
             first.getTransposeLhs() == !product.getTransposeRhs() &&
             first.getTransposeRhs() == !product.getTransposeLhs() &&
             sameValue(first.getLhs(), product.getRhs()) &&
             sameValue(first.getRhs(), product.getLhs());
    });
    if (twin == earlier.end()) {
      earlier.push_back(product);
      continue;
    }
    OpBuilder builder(product);
    Value transposed =
        TransposeOp::create(builder, product.getLoc(), twin->getResult());
    if (transposed.getType() != product.getType()) {
      transposed.getDefiningOp()->erase();
      continue;
    }
    product.replaceAllUsesWith(transposed);
    product.erase();
  }
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
    if (!product || product.getLhsRows() != 1 ||
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

} // namespace

void mlir::energy::shareProducts(ModelOp model) {
  SmallVector<TabulateOp> tables;
  model.walk([&](TabulateOp table) {
    if (isStatement(table) && table.getSizes().size() == 1)
      tables.push_back(table);
  });
  for (TabulateOp table : tables)
    reuseTable(table);
  for (TabulateOp table : tables)
    if (Value array = copiedArray(table)) {
      table.replaceAllUsesWith(array);
      table.erase();
    }
  SmallVector<Block *> blocks;
  model.walk([&](Operation *op) {
    if (isa<GradientOp, TermOp>(op))
      for (Region &region : op->getRegions())
        for (Block &block : region)
          blocks.push_back(&block);
  });
  for (Block *block : blocks)
    shareTransposedProducts(*block);
  SmallVector<TransposeOp> transposes;
  model.walk([&](TransposeOp transpose) { transposes.push_back(transpose); });
  for (TransposeOp transpose : transposes)
    readThroughTranspose(transpose);
}
