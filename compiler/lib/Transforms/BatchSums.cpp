//===- BatchSums.cpp - Batches of products summed over their batch --------===//
//
// A batch of products P[h] (each head's back-projection) that every reader
// sums over the batch axis, through linear maps whose other operands do not
// vary with the head — Σ_(b,h,c) a[b, c] ⊙ P[h, b, c], the heads' part of
// a layer norm's scale gradient — is the summed product read at the other
// indices, Σ_(b,c) a[b, c] ⊙ (Σ_h P[h])[b, c]: one product over the heads'
// whole inner dim (a GEMM of H·Y, not H of Y), no table of every head's
// rows, and the same product as the heads' summed back-projection the
// gradient may compute already. A table that only a sum over its whole
// domain reads is that sum first.
//
//===----------------------------------------------------------------------===//

#include "BatchedProducts.h"
#include "Linearity.h"
#include "PlanKernels.h"
#include "Slices.h"

#include "energy/Transforms/Dependence.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// Whether `sum` adds its body's value plainly over plain dims.
bool isPlainSum(ReduceOp sum) {
  return sum.getKind() == ReduceKind::sum && !sum.hasPredicate() &&
         !sum.getTemperature() && hasPlainDims(sum.getSizes());
}

/// The sum that `table` is read by alone, over the table's whole domain at
/// its own indices, rewritten as a sum of the table's body (with `inside`,
/// an op of it); else nulls, with the IR unchanged.
std::pair<ReduceOp, Operation *> sumOfTable(TabulateOp table,
                                            Operation *inside) {
  if (!table->hasOneUse() || table.getBody().front().getNumArguments() == 0)
    return {};
  auto extract = dyn_cast<ExtractOp>(*table->getUsers().begin());
  auto sum = extract ? dyn_cast<ReduceOp>(extract->getParentOp()) : ReduceOp();
  if (!sum || !isPlainSum(sum) || sum.getSizes() != table.getSizes() ||
      !extract.getMap().isIdentity() ||
      extract.getIndices() != ValueRange(sum.getBody().front().getArguments()))
    return {};
  Block &sumBody = sum.getBody().front();
  if (sumBody.getOperations().size() != 2 ||
      sumBody.getTerminator()->getOperand(0) != extract.getResult())
    return {};
  OpBuilder builder(sum);
  auto whole = ReduceOp::create(builder, sum.getLoc(), sum.getType(),
                                ReduceKind::sum, sum.getSizes(), Value());
  whole.getBody().takeBody(table.getBody());
  sum.replaceAllUsesWith(whole.getResult());
  sum.erase();
  table.erase();
  return {whole, inside};
}

/// A reader of a batch of products: `extract` of P[h, rest…] in the body
/// of `sum`, whose value is a linear map of it with operands that do not
/// vary with h, h used by nothing else.
struct BatchReader {
  ReduceOp sum;
  ExtractOp extract;
  unsigned head;
};

/// The reader that `user` of a batch of products is, if any; a table it
/// is read in that only a sum reads becomes that sum first.
std::optional<BatchReader> readerOf(Operation *user) {
  auto extract = dyn_cast<ExtractOp>(user);
  if (!extract || !extract.getMap().isIdentity() ||
      extract.getIndices().empty())
    return std::nullopt;
  Operation *parent = extract->getParentOp();
  if (auto table = dyn_cast<TabulateOp>(parent)) {
    auto [sum, copy] = sumOfTable(table, extract);
    if (!sum)
      return std::nullopt;
    parent = sum;
    extract = cast<ExtractOp>(copy);
  }
  auto sum = dyn_cast_or_null<ReduceOp>(parent);
  if (!sum || !isPlainSum(sum))
    return std::nullopt;
  auto head = dyn_cast<BlockArgument>(extract.getIndices().front());
  // A sum over the heads of a sum over the rest is one sum over both.
  auto outer = dyn_cast<ReduceOp>(sum->getParentOp());
  if (head && outer && head.getOwner() == &outer.getBody().front()) {
    ReduceOp flat = flattenNestedSum(outer);
    if (!flat)
      return std::nullopt;
    Value batch = extract.getSource();
    outer.replaceAllUsesWith(flat.getResult());
    outer.erase();
    sum = flat;
    flat.walk([&](ExtractOp copy) {
      if (copy.getSource() == batch)
        extract = copy;
    });
    head = dyn_cast<BlockArgument>(extract.getIndices().front());
  }
  Block &body = sum.getBody().front();
  // What nothing reads (an index's reads left by earlier steps) is no use.
  eraseDeadOps(body);
  if (!head || head.getOwner() != &body ||
      llvm::any_of(head.getUses(), [&](OpOperand &use) {
        return use.getOwner() != extract.getOperation() ||
               use.getOperandNumber() !=
                   extract.getIndices().getBeginOperandIndex();
      }))
    return std::nullopt;
  Value value = cast<YieldOp>(body.getTerminator()).getValues().front();
  LinearDecomposition linear = decomposeLinearly(
      value, body, [&](Value v) { return !dependsOn(v, extract.getResult()); });
  if (linear.atoms.size() != 1 || linear.atoms.front() != extract.getResult())
    return std::nullopt;
  return BatchReader{sum, extract, head.getArgNumber()};
}

/// `reader`'s sum without its head index, reading `summed` at the rest.
void readSummed(BatchReader reader, Value summed) {
  ReduceOp sum = reader.sum;
  Block &body = sum.getBody().front();
  SmallVector<Attribute> sizes;
  for (auto [number, size] : llvm::enumerate(sum.getSizes()))
    if (number != reader.head)
      sizes.push_back(size);
  OpBuilder builder(sum);
  Location loc = sum.getLoc();
  SmallVector<Value> rest(reader.extract.getIndices().drop_front());
  auto map = AffineMap::getMultiDimIdentityMap(rest.size(), sum.getContext());
  if (sizes.empty()) {
    // A sum over the heads alone: its body once, before it.
    Value row = ExtractOp::create(builder, reader.extract.getLoc(),
                                  reader.extract.getType(), summed,
                                  AffineMapAttr::get(map), rest);
    reader.extract.replaceAllUsesWith(row);
    reader.extract.erase();
    Value value = cast<YieldOp>(body.getTerminator()).getValues().front();
    sum->getBlock()->getOperations().splice(Block::iterator(sum),
                                            body.getOperations(), body.begin(),
                                            std::prev(body.end()));
    sum.replaceAllUsesWith(value);
    sum.erase();
    return;
  }
  auto shorter = ReduceOp::create(builder, loc, sum.getType(), ReduceKind::sum,
                                  builder.getArrayAttr(sizes), Value());
  Block &shorterBody = shorter.getBody().emplaceBlock();
  for (BlockArgument index : body.getArguments())
    if (index.getArgNumber() != reader.head)
      index.replaceAllUsesWith(
          shorterBody.addArgument(index.getType(), index.getLoc()));
  shorterBody.getOperations().splice(shorterBody.end(), body.getOperations());
  // The extract's other indices are the shorter sum's now.
  rest.assign(reader.extract.getIndices().begin() + 1,
              reader.extract.getIndices().end());
  OpBuilder inside(reader.extract);
  Value row = ExtractOp::create(inside, reader.extract.getLoc(),
                                reader.extract.getType(), summed,
                                AffineMapAttr::get(map), rest);
  reader.extract.replaceAllUsesWith(row);
  reader.extract.erase();
  sum.replaceAllUsesWith(shorter.getResult());
  sum.erase();
}

} // namespace

bool mlir::energy::sumOverBatch(BatchMatmulOp product) {
  if (product.getSumBatch() || product->use_empty() ||
      !(product.hasLhsBatch() || product.hasRhsBatch()))
    return false;
  std::string reason;
  ArrayType type = BatchMatmulOp::inferType(
      cast<ArrayType>(product.getLhs().getType()),
      cast<ArrayType>(product.getRhs().getType()), product.getTransposeLhs(),
      product.getTransposeRhs(), /*sumBatch=*/true, reason,
      product.getLhsRows());
  if (!type)
    return false;
  SmallVector<BatchReader> readers;
  SmallVector<Operation *> users(product->getUsers());
  // One reader per sum or table (checked before one of them is rewritten).
  llvm::SmallPtrSet<Operation *, 4> parents;
  for (Operation *user : users)
    if (!parents.insert(user->getParentOp()).second)
      return false;
  for (Operation *user : users) {
    std::optional<BatchReader> reader = readerOf(user);
    // Two readers in one sum (two heads' products) would rewrite it twice.
    if (!reader || llvm::any_of(readers, [&](const BatchReader &other) {
          return other.sum == reader->sum;
        }))
      return false;
    readers.push_back(*reader);
  }
  // Past a plain sum over the batch alone, only a batch of matrices (the
  // heads'): Σ_b A[b] W read through other sums is as much work summed, and
  // the batch as one GEMM may be what a twin of the product computes.
  if (!product.hasRhsBatch() && llvm::any_of(readers, [](BatchReader reader) {
        return reader.sum.getSizes().size() != 1 ||
               reader.sum.getBody().front().getOperations().size() != 2;
      }))
    return false;
  OpBuilder builder(product);
  auto summed = BatchMatmulOp::create(
      builder, product.getLoc(), type, product.getLhs(), product.getRhs(),
      product.getTransposeLhs(), product.getTransposeRhs(), /*sum_batch=*/true,
      product.getLhsRows());
  for (BatchReader &reader : readers)
    readSummed(reader, summed.getResult());
  product.erase();
  return true;
}
