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
// domain reads is that sum first. A product that a sum reads over every
// row, Σ_r (A B)[r] (a bias's gradient through a back-projection), is the
// product of the summed rows, (Σ_r A[r]) B: a matrix-vector product.
//
//===----------------------------------------------------------------------===//

#include "BatchedProducts.h"
#include "Linearity.h"
#include "PlanKernels.h"
#include "Slices.h"

#include "energy/Transforms/Dependence.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// The sum that reads `table` alone, over the table's whole domain at its
/// own indices; null otherwise.
ReduceOp onlySumOf(TabulateOp table) {
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
  return sum;
}

/// A reader of a batch of products: `extract` of P[h, rest…], whose
/// container's value (a sum's or a table's body) is a linear map of it with
/// operands that do not vary with h, h used by nothing else, in a sum over
/// h: the container itself, the sum that alone reads the table, or a sum
/// around the container whose body yields it (`outer`).
struct BatchReader {
  ExtractOp extract;
  BlockArgument head;
  Operation *container;
  ReduceOp outer;
};

/// The reader that `user` of a batch of products is, if any.
std::optional<BatchReader> readerOf(Operation *user) {
  auto extract = dyn_cast<ExtractOp>(user);
  if (!extract || !extract.getMap().isIdentity() ||
      extract.getIndices().empty())
    return std::nullopt;
  Operation *container = extract->getParentOp();
  auto head = dyn_cast<BlockArgument>(extract.getIndices().front());
  if (!head || !isa<TabulateOp, ReduceOp>(container))
    return std::nullopt;
  Block &body = isa<TabulateOp>(container)
                    ? cast<TabulateOp>(container).getBody().front()
                    : cast<ReduceOp>(container).getBody().front();
  ReduceOp outer;
  if (auto table = dyn_cast<TabulateOp>(container)) {
    if (head.getOwner() != &body || !onlySumOf(table))
      return std::nullopt;
  } else if (!isPlainSum(cast<ReduceOp>(container))) {
    return std::nullopt;
  } else if (head.getOwner() != &body) {
    // A sum over the heads of a sum over the rest is one sum over both.
    outer = dyn_cast<ReduceOp>(container->getParentOp());
    if (!outer || head.getOwner() != &outer.getBody().front())
      return std::nullopt;
    if (nestedSumOf(outer) != container)
      return std::nullopt;
  }
  if (llvm::any_of(head.getUses(), [&](OpOperand &use) {
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
  return BatchReader{extract, head, container, outer};
}

/// Whether `reader` is a sum over the heads alone that yields the product.
bool isPlainHeadSum(const BatchReader &reader) {
  auto sum = dyn_cast<ReduceOp>(reader.container);
  return sum && !reader.outer && sum.getSizes().size() == 1 &&
         sum.getBody().front().getOperations().size() == 2;
}

/// `reader` as one sum over h and the rest (the table's sum, or the nest
/// flattened), the extract in it and h's position among its indices.
std::tuple<ReduceOp, ExtractOp, unsigned> wholeSumOf(BatchReader reader) {
  ExtractOp extract = reader.extract;
  unsigned head = reader.head.getArgNumber();
  if (auto table = dyn_cast<TabulateOp>(reader.container)) {
    ReduceOp sum = onlySumOf(table);
    OpBuilder builder(sum);
    auto whole = ReduceOp::create(builder, sum.getLoc(), sum.getType(),
                                  ReduceKind::sum, sum.getSizes(), Value());
    whole.getBody().takeBody(table.getBody());
    sum.replaceAllUsesWith(whole.getResult());
    sum.erase();
    table.erase();
    return {whole, extract, head};
  }
  if (!reader.outer)
    return {cast<ReduceOp>(reader.container), extract, head};
  // flattenNestedSum puts the outer sum's indices first.
  ReduceOp flat = flattenNestedSum(reader.outer);
  Value batch = extract.getSource();
  reader.outer.replaceAllUsesWith(flat.getResult());
  reader.outer.erase();
  flat.walk([&](ExtractOp copy) {
    if (copy.getSource() == batch)
      extract = copy;
  });
  return {flat, extract, head};
}

/// `sum` without its index number `head`, its extract of the batch of
/// products reading `summed` at the rest.
void readSummed(ReduceOp sum, ExtractOp extract, unsigned head, Value summed) {
  Block &body = sum.getBody().front();
  SmallVector<Attribute> sizes;
  for (auto [number, size] : llvm::enumerate(sum.getSizes()))
    if (number != head)
      sizes.push_back(size);
  OpBuilder builder(sum);
  Location loc = sum.getLoc();
  SmallVector<Value> rest(extract.getIndices().drop_front());
  auto map = AffineMap::getMultiDimIdentityMap(rest.size(), sum.getContext());
  if (sizes.empty()) {
    // A sum over the heads alone: its body once, before it.
    Value row = ExtractOp::create(builder, extract.getLoc(), extract.getType(),
                                  summed, AffineMapAttr::get(map), rest);
    extract.replaceAllUsesWith(row);
    extract.erase();
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
    if (index.getArgNumber() != head)
      index.replaceAllUsesWith(
          shorterBody.addArgument(index.getType(), index.getLoc()));
  shorterBody.getOperations().splice(shorterBody.end(), body.getOperations());
  // The extract's other indices are the shorter sum's now.
  rest.assign(extract.getIndices().begin() + 1, extract.getIndices().end());
  OpBuilder inside(extract);
  Value row = ExtractOp::create(inside, extract.getLoc(), extract.getType(),
                                summed, AffineMapAttr::get(map), rest);
  extract.replaceAllUsesWith(row);
  extract.erase();
  sum.replaceAllUsesWith(shorter.getResult());
  sum.erase();
}

/// The plain sum that reads `product` alone, over every axis of its result
/// but the last, at its own indices in order, yielding the row; null
/// otherwise.
ReduceOp onlyWholeSumOf(BatchMatmulOp product) {
  if (!product->hasOneUse())
    return {};
  auto extract = dyn_cast<ExtractOp>(*product->getUsers().begin());
  auto sum = extract ? dyn_cast<ReduceOp>(extract->getParentOp()) : ReduceOp();
  if (!sum || !isPlainSum(sum) || !extract.getMap().isIdentity())
    return {};
  Block &body = sum.getBody().front();
  auto type = cast<ArrayType>(product.getType());
  if (body.getOperations().size() != 2 ||
      body.getTerminator()->getOperand(0) != extract.getResult() ||
      extract.getIndices() != ValueRange(body.getArguments()) ||
      body.getNumArguments() + 1 != type.getRank())
    return {};
  // Over the product's rows, not a part of them.
  for (auto [size, dim] : llvm::zip(sum.getSizes(), type.getShape()))
    if (size != DimExprAttr::getDim(product.getContext(), dim.getValue()))
      return {};
  return sum;
}

/// op(matrix)ᵀ · vector: the vector times op(matrix), op transposing it
/// when `transposed`.
Value vectorTimes(OpBuilder &builder, Location loc, Value vector, Value matrix,
                  bool transposed) {
  if (!transposed)
    matrix = TransposeOp::create(builder, loc, matrix);
  return MatmulOp::create(builder, loc, matrix, vector);
}

} // namespace

bool mlir::energy::sumRowsFirst(BatchMatmulOp product) {
  if (product.getBatchAxes() != 1)
    return false;
  ReduceOp sum = onlyWholeSumOf(product);
  // A lhs without a batch axis against a batch of rhs matrices would sum
  // the rhs too; a transposed lhs makes the rows the inner dim.
  if (!sum || product.getTransposeLhs() ||
      (!product.hasLhsBatch() && product.hasRhsBatch()))
    return false;
  // A twin that stays computes the product anyway.
  for (Operation &op : *product->getBlock())
    if (auto other = dyn_cast<BatchMatmulOp>(op))
      if (other != product &&
          computeSame(other.getResult(), product.getResult(), IRMapping()))
        return false;
  auto lhs = cast<ArrayType>(product.getLhs().getType());
  ArrayRef<StringAttr> lhsShape = lhs.getShape();
  auto type = cast<ArrayType>(product.getType());
  if (sum.getType() !=
      ArrayType::get(product.getContext(), type.getShape().take_back()))
    return false;
  OpBuilder builder(sum);
  Location loc = sum.getLoc();
  Value rhs = product.getRhs();
  bool transposed = product.getTransposeRhs();
  Value result;
  if (!product.hasRhsBatch()) {
    // Σ_(b, r) A[b, r] op(B): every row of every batch position summed.
    Value rows = sumOfRows(builder, loc, product.getLhs(), ValueRange(),
                           lhsShape.drop_back());
    result = vectorTimes(builder, loc, rows, rhs, transposed);
  } else {
    // Σ_b (Σ_r A[b, r]) op(B[b]).
    MLIRContext *context = builder.getContext();
    auto outer =
        ReduceOp::create(builder, loc, sum.getType(), ReduceKind::sum,
                         sizesOfDims(context, lhsShape.take_front()), Value());
    Block &body = outer.getBody().emplaceBlock();
    Value batch = addDimIndices(body, lhsShape.take_front()).front();
    OpBuilder inside = OpBuilder::atBlockEnd(&body);
    Value rows = sumOfRows(inside, loc, product.getLhs(), batch,
                           lhsShape.drop_front().drop_back());
    auto rhsType = cast<ArrayType>(rhs.getType());
    auto matrixType = ArrayType::get(context, rhsType.getShape().drop_front());
    auto map = AffineMap::getMultiDimIdentityMap(1, context);
    Value matrix = ExtractOp::create(inside, loc, matrixType, rhs,
                                     AffineMapAttr::get(map), batch);
    Value row = vectorTimes(inside, loc, rows, matrix, transposed);
    YieldOp::create(inside, loc, ValueRange{row});
    result = outer.getResult();
  }
  sum.replaceAllUsesWith(result);
  sum.erase();
  product.erase();
  return true;
}

namespace {

/// The type of `product` summed over its batch, or null.
ArrayType summedType(BatchMatmulOp product) {
  std::string reason;
  return BatchMatmulOp::inferType(
      cast<ArrayType>(product.getLhs().getType()),
      cast<ArrayType>(product.getRhs().getType()), product.getTransposeLhs(),
      product.getTransposeRhs(), /*sumBatch=*/true, reason,
      product.getLhsRows(), product.getBatchAxes());
}

/// `product` summed over its batch (of type `type`), built before it.
BatchMatmulOp buildSummed(BatchMatmulOp product, ArrayType type) {
  OpBuilder builder(product);
  return BatchMatmulOp::create(
      builder, product.getLoc(), type, product.getLhs(), product.getRhs(),
      product.getTransposeLhs(), product.getTransposeRhs(), /*sum_batch=*/true,
      product.getLhsRows(), product.getBatchAxes());
}

/// A batch of products over several batch axes (grouped heads (g, r)) that
/// every reader sums over them alone, Σ_(g,r) P[g, r, rest…], as the summed
/// product read at the rest.
bool sumOverBatchAxes(BatchMatmulOp product) {
  int64_t batchAxes = product.getBatchAxes();
  auto headSumOf = [&](Operation *user) -> ReduceOp {
    auto extract = dyn_cast<ExtractOp>(user);
    auto sum =
        extract ? dyn_cast<ReduceOp>(extract->getParentOp()) : ReduceOp();
    if (!sum || !isPlainSum(sum) || !extract.getMap().isIdentity() ||
        static_cast<int64_t>(sum.getSizes().size()) != batchAxes)
      return {};
    Block &body = sum.getBody().front();
    if (body.getOperations().size() != 2 ||
        body.getTerminator()->getOperand(0) != extract.getResult() ||
        extract.getIndices().take_front(batchAxes) !=
            ValueRange(body.getArguments()) ||
        llvm::any_of(extract.getIndices().drop_front(batchAxes),
                     [&](Value index) {
                       auto argument = dyn_cast<BlockArgument>(index);
                       return argument && argument.getOwner() == &body;
                     }))
      return {};
    return sum;
  };
  if (!llvm::all_of(product->getUsers(), headSumOf))
    return false;
  ArrayType type = summedType(product);
  if (!type)
    return false;
  BatchMatmulOp summed = buildSummed(product, type);
  for (Operation *user : llvm::to_vector(product->getUsers())) {
    auto extract = cast<ExtractOp>(user);
    ReduceOp sum = headSumOf(user);
    SmallVector<Value> rest(extract.getIndices().drop_front(batchAxes));
    OpBuilder before(sum);
    Value row =
        ExtractOp::create(before, extract.getLoc(), extract.getType(), summed,
                          AffineMapAttr::get(AffineMap::getMultiDimIdentityMap(
                              rest.size(), sum.getContext())),
                          rest);
    sum.replaceAllUsesWith(row);
    sum.erase();
  }
  product.erase();
  return true;
}

} // namespace

bool mlir::energy::sumOverBatch(BatchMatmulOp product) {
  if (product.getBatchAxes() != 1)
    return product.hasLhsBatch() && !product.getSumBatch() &&
           !product->use_empty() && sumOverBatchAxes(product);
  if (product.getSumBatch() || product->use_empty() ||
      !(product.hasLhsBatch() || product.hasRhsBatch()))
    return false;
  ArrayType type = summedType(product);
  if (!type)
    return false;
  // What nothing reads in the readers' bodies and around them (an index's
  // reads left by earlier steps), innermost blocks first: an erased op
  // takes its blocks with it.
  llvm::SetVector<Block *> blocks;
  for (Operation *user : product->getUsers())
    for (Operation *op = user; op && blocks.size() < 64;
         op = op->getParentOp()) {
      if (isStatement(op))
        break;
      blocks.insert(op->getBlock());
    }
  SmallVector<std::pair<int, Block *>> byDepth;
  for (Block *block : blocks) {
    int depth = 0;
    for (Operation *op = block->getParentOp(); op; op = op->getParentOp())
      ++depth;
    byDepth.push_back({-depth, block});
  }
  llvm::sort(byDepth, [](auto a, auto b) { return a.first < b.first; });
  for (auto [depth, block] : byDepth)
    eraseDeadOps(*block);
  SmallVector<BatchReader> readers;
  SmallVector<Operation *> users(product->getUsers());
  // One reader per sum or table (checked before one of them is rewritten).
  llvm::SmallPtrSet<Operation *, 4> parents;
  for (Operation *user : users)
    if (!parents.insert(user->getParentOp()).second)
      return false;
  for (Operation *user : users) {
    std::optional<BatchReader> reader = readerOf(user);
    // Two readers in one nest would rewrite it twice.
    if (!reader || llvm::any_of(readers, [&](const BatchReader &other) {
          return other.outer && other.outer == reader->outer;
        }))
      return false;
    readers.push_back(*reader);
  }
  // Past a plain sum over the batch alone, only a batch of matrices (the
  // heads'): Σ_b A[b] W read through other sums is as much work summed, and
  // the batch as one GEMM may be what a twin of the product computes.
  if (!product.hasRhsBatch() &&
      !llvm::all_of(readers, [](const BatchReader &reader) {
        return isPlainHeadSum(reader);
      }))
    return false;
  BatchMatmulOp summed = buildSummed(product, type);
  // One reader at a time, each found again: flattening a nest copies what
  // it holds, another reader's extract among it.
  while (!product->use_empty()) {
    std::optional<BatchReader> reader = readerOf(*product->getUsers().begin());
    if (!reader)
      break;
    auto [sum, extract, head] = wholeSumOf(*reader);
    readSummed(sum, extract, head, summed.getResult());
  }
  if (product->use_empty())
    product.erase();
  return true;
}
