//===- ReassociateProducts.cpp - Matrix products in the cheaper order -----===//
//
// A product of rows with a matrix, P = A op(M) (A [B, N, K], M a K × D
// matrix), that is only multiplied further by matrices, need not be
// computed: the products of its uses are reassociated so that the small
// matrices meet first,
//   P op(M₂)            = A (op(M) op(M₂))
//   Σ_b P[b]ᵀ C[b]      = op(M)ᵀ (Σ_b A[b]ᵀ C[b])
//   Σ_b C[b]ᵀ P[b]      = (Σ_b C[b]ᵀ A[b]) op(M)
// one product of K × D matrices (K·D·D' work) in place of one over every
// row (B·N·K·D), when that is less work at the estimated sizes
// (SizeEstimates.h): with a dictionary of P × K and a batch of B codes, the
// rows' order is the cheaper one. The backward step's adjoints apply Wk and Wq
// to outputs of contractions before summing them into the parameters' adjoints.
// A table of s · P[b, i] (s scalars) is the table of s · A[b, i] times op(M)
// first, so that it is a use of that form too. And of Σ_b A[b]ᵀ C[b] and Σ_b
// C[b]ᵀ A[b] (Wq's and Wk's adjoints both sum the same outer products,
// transposed), the second is the first's transpose. Last, a table of
// s · A[b, i] (s a number per row) times op(M), after A op(M) was computed,
// is the table of s · (A op(M))[b, i]: the second derivatives scale the
// rows of X by a number per row before applying Wqᵀ, and X Wqᵀ is there.
//
// A batch of products with a matrix each, P[b] = A[b] op(V[b]) (weights
// over a few slots times the slots' rows), summed against rows meets them
// first: Σ_b C[b]ᵀ P[b] = Σ_b (C[b]ᵀ A[b]) op(V[b]) and Σ_b P[b]ᵀ C[b] =
// Σ_b op(V[b])ᵀ (A[b]ᵀ C[b]) (a slot reconstruction's decoder gradient:
// sums over the S slots in place of the N tokens). A table that only copies
// a product, read by products alone, is that product.
//
// And a product's lhs that is a table of Aᵀ (a table over k of rows over i
// reading A[i, k], the responsibilities of an M-step) is A read transposed:
// Σ_i A[i]ᵀ ⊗ X[i], without copying A.
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"
#include "SizeEstimates.h"
#include "Slices.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// op(M) of a product's rhs as a matrix value (a transpose when the product
/// takes it transposed, or, with `transposeAgain`, when it does not).
Value matrixOf(OpBuilder &builder, BatchMatmulOp product,
               bool transposeAgain = false) {
  Value matrix = product.getRhs();
  if (product.getTransposeRhs() != transposeAgain)
    matrix = TransposeOp::create(builder, product.getLoc(), matrix);
  return matrix;
}

/// How a use of P = A op(M) is rewritten without P, or std::nullopt.
enum class UseForm { TimesMatrix, SummedLhs, SummedRhs };

std::optional<UseForm> formOf(BatchMatmulOp use, Value rows) {
  if (use.getLhs() == rows && isRowsTimesMatrix(use))
    return UseForm::TimesMatrix;
  if (!isSummedRowProduct(use) || use.getLhs() == use.getRhs())
    return std::nullopt;
  return use.getLhs() == rows ? UseForm::SummedLhs : UseForm::SummedRhs;
}

/// The ops a builder inserts, so that a rewrite that does not pay can be
/// taken back.
struct InsertedOps : OpBuilder::Listener {
  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    ops.push_back(op);
  }
  SmallVector<Operation *> ops;
};

/// The products of `rows`'s block that compute what it computes (itself
/// among them), in block order: what the share step later computes once.
SmallVector<BatchMatmulOp> copiesOf(BatchMatmulOp rows) {
  if (isInProgram(rows))
    return {rows};
  SmallVector<BatchMatmulOp> copies;
  for (Operation &op : *rows->getBlock())
    if (auto other = dyn_cast<BatchMatmulOp>(op))
      if (other == rows ||
          (other.getType() == rows.getType() &&
           computeSame(other.getResult(), rows.getResult(), {})))
        copies.push_back(other);
  return copies;
}

/// Every use of `copies` (in their block) with its form, or std::nullopt
/// where one is of none of the forms above.
std::optional<SmallVector<std::pair<BatchMatmulOp, UseForm>>>
usesOf(ArrayRef<BatchMatmulOp> copies) {
  SmallVector<std::pair<BatchMatmulOp, UseForm>> uses;
  Block *block = copies.front()->getBlock();
  for (BatchMatmulOp copy : copies)
    for (Operation *user : copy->getUsers()) {
      // (A read left unused by the steps before is no use.)
      if (isOpTriviallyDead(user))
        continue;
      auto use = dyn_cast<BatchMatmulOp>(user);
      std::optional<UseForm> form =
          use && use->getBlock() == block && use.getBatchAxes() == 1
              ? formOf(use, copy)
              : std::nullopt;
      // (A product of two of them is no product by a matrix.)
      if (!form || llvm::is_contained(llvm::make_first_range(uses), use))
        return std::nullopt;
      uses.push_back({use, *form});
    }
  return uses;
}

/// Whether `product` is a batch of products of rows with a matrix each,
/// P[b] = A[b] op(V[b]) (A [B, N, K] not transposed, V [B, K, D] or
/// [B, D, K], not summed).
bool isBatchOfRowProducts(BatchMatmulOp product) {
  auto rank = [](Value value) {
    return cast<ArrayType>(value.getType()).getRank();
  };
  return product.getLhsRows() == 1 && product.getBatchAxes() == 1 &&
         !product.getTransposeLhs() && !product.getSumBatch() &&
         rank(product.getLhs()) == 3 && rank(product.getRhs()) == 3 &&
         rank(product.getResult()) == 3;
}

/// The summed use `use` of a batch P[b] = A[b] op(V[b]), with the rows'
/// products first: Σ_b C[b]ᵀ P[b] = Σ_b (C[b]ᵀ A[b]) op(V[b]) and
/// Σ_b P[b]ᵀ C[b] = Σ_b op(V[b])ᵀ (A[b]ᵀ C[b]).
Value reassociateBatch(OpBuilder &builder, Location loc, BatchMatmulOp rows,
                       BatchMatmulOp use, UseForm form) {
  Value a = rows.getLhs(), v = rows.getRhs();
  if (form == UseForm::SummedRhs) {
    Value rowsFirst = buildRowProduct(builder, loc, use.getLhs(), a,
                                      /*transposeLhs=*/true,
                                      /*transposeRhs=*/false,
                                      /*summed=*/false);
    return buildRowProduct(builder, loc, rowsFirst, v, false,
                           rows.getTransposeRhs(), /*summed=*/true);
  }
  Value rowsFirst = buildRowProduct(builder, loc, a, use.getRhs(),
                                    /*transposeLhs=*/true,
                                    /*transposeRhs=*/false, /*summed=*/false);
  return buildRowProduct(builder, loc, v, rowsFirst, !rows.getTransposeRhs(),
                         false, /*summed=*/true);
}

/// Rewrites every use of `rows` (= A op(M)) and erases it, when every use
/// is one of the forms above and the products that replace them do no more
/// work, at the estimated sizes, than `rows` and its uses. Where products
/// of the same block compute the same (which the share step computes
/// once), they count as one: when every use of every copy is of a form
/// above, they are weighed and rewritten together, the product once; when
/// some copy has other uses, so that the product stays, `rows` is weighed
/// alone, as if its uses were all (their reassociated sums, which share a
/// matrix, then combine into one product: a query projection's uses in
/// the three sums of Wq's adjoint).
bool reassociate(BatchMatmulOp rows) {
  bool batched = isBatchOfRowProducts(rows);
  if ((!batched && !isRowsTimesMatrix(rows)) || rows->use_empty())
    return false;
  SmallVector<BatchMatmulOp> copies = copiesOf(rows);
  auto uses = usesOf(copies);
  if (uses) {
    // The first computes it ahead of every use: its operands serve them all.
    if (copies.front() != rows)
      return false;
  } else {
    copies = {rows};
    uses = usesOf(copies);
    if (!uses)
      return false;
  }
  if (batched && llvm::any_of(*uses, [](const auto &use) {
        return use.second == UseForm::TimesMatrix;
      }))
    return false;
  auto model = rows->getParentOfType<ModelOp>();
  double workBefore = estimatedProductWork(model, rows);
  for (auto [use, form] : *uses)
    workBefore += estimatedProductWork(model, use);
  Value a = rows.getLhs();
  InsertedOps inserted;
  SmallVector<Value> results;
  for (auto [use, form] : *uses) {
    OpBuilder builder(use, &inserted);
    Location loc = use.getLoc();
    Value result;
    if (batched) {
      results.push_back(reassociateBatch(builder, loc, rows, use, form));
      continue;
    }
    switch (form) {
    case UseForm::TimesMatrix: {
      Value matrices = MatmulOp::create(builder, loc, matrixOf(builder, rows),
                                        matrixOf(builder, use));
      result = BatchMatmulOp::create(builder, loc, use.getType(), a, matrices,
                                     false, false, false);
      break;
    }
    case UseForm::SummedLhs: {
      std::string reason;
      ArrayType type = BatchMatmulOp::inferType(
          cast<ArrayType>(a.getType()), cast<ArrayType>(use.getRhs().getType()),
          true, false, true, reason);
      Value sum = BatchMatmulOp::create(builder, loc, type, a, use.getRhs(),
                                        true, false, true);
      result = MatmulOp::create(
          builder, loc, matrixOf(builder, rows, /*transposeAgain=*/true), sum);
      break;
    }
    case UseForm::SummedRhs: {
      std::string reason;
      ArrayType type = BatchMatmulOp::inferType(
          cast<ArrayType>(use.getLhs().getType()), cast<ArrayType>(a.getType()),
          true, false, true, reason);
      Value sum = BatchMatmulOp::create(builder, loc, type, use.getLhs(), a,
                                        true, false, true);
      result = MatmulOp::create(builder, loc, sum, matrixOf(builder, rows));
      break;
    }
    }
    assert(result.getType() == use.getType() && "the same product");
    results.push_back(result);
  }
  double workAfter = 0;
  for (Operation *op : inserted.ops)
    workAfter += estimatedProductWork(model, op);
  if (workAfter > workBefore) {
    for (Operation *op : llvm::reverse(inserted.ops))
      op->erase();
    return false;
  }
  for (auto [use, result] : llvm::zip(*uses, results)) {
    use.first.getResult().replaceAllUsesWith(result);
    use.first.erase();
  }
  for (BatchMatmulOp copy : copies) {
    for (Operation *unused : llvm::make_early_inc_range(copy->getUsers()))
      unused->erase();
    copy.erase();
  }
  return true;
}

/// The op of `table`'s body that gives the row its value scales
/// (scaledLeaf), when that row is read at the table's own indices: an
/// extract of an array from outside the table, or a read of a tensor's row.
Operation *scaledRowAtOwnIndices(TabulateOp table, bool linear) {
  Operation *row = scaledLeaf(table.getBodyValue(), linear);
  Block &body = table.getBody().front();
  auto atOwnIndices = [&](AffineMap map, ValueRange indices) {
    return map.isIdentity() && llvm::equal(indices, body.getArguments());
  };
  if (auto extract = dyn_cast_or_null<ExtractOp>(row))
    return atOwnIndices(extract.getMap(), extract.getIndices()) &&
                   isDefinedOutside(extract.getSource(), table)
               ? row
               : nullptr;
  if (auto read = dyn_cast_or_null<ReadOp>(row))
    return atOwnIndices(read.getMap(), read.getIndices()) ? row : nullptr;
  return nullptr;
}

/// A copy of `table`, at the builder's point, whose body reads the row of
/// `array` at its indices where it read `row` (scaledRowAtOwnIndices).
TabulateOp tableReadingRowsOf(OpBuilder &builder, TabulateOp table,
                              Operation *row, Value array) {
  IRMapping mapping;
  auto copy = cast<TabulateOp>(builder.clone(*table, mapping));
  Operation *copiedRow = mapping.lookup(row);
  Block &body = copy.getBody().front();
  OpBuilder inside(copiedRow);
  Value arrayRow = ExtractOp::create(
      inside, copiedRow->getLoc(), copiedRow->getResult(0).getType(), array,
      AffineMapAttr::get(AffineMap::getMultiDimIdentityMap(
          body.getNumArguments(), builder.getContext())),
      body.getArguments());
  copiedRow->getResult(0).replaceAllUsesWith(arrayRow);
  copiedRow->erase();
  return copy;
}

/// A table of s · P[b, i] (scalar factors s, linear in the row) with
/// P = A op(M) and M square is the table of s · A[b, i] times op(M): the
/// product leaves the table, so that P's other uses may be reassociated.
bool productOutOfTable(TabulateOp table) {
  auto row = dyn_cast_or_null<ExtractOp>(
      scaledRowAtOwnIndices(table, /*linear=*/true));
  auto rows =
      row ? row.getSource().getDefiningOp<BatchMatmulOp>() : BatchMatmulOp();
  if (!rows || !isRowsTimesMatrix(rows) ||
      rows.getLhs().getType() != rows.getType() ||
      rows.getType() != table.getType())
    return false;
  OpBuilder builder(table);
  TabulateOp scaledRows =
      tableReadingRowsOf(builder, table, row, rows.getLhs());
  Value product = BatchMatmulOp::create(
      builder, table.getLoc(), table.getType(), scaledRows, rows.getRhs(),
      false, rows.getTransposeRhs(), false);
  table.getResult().replaceAllUsesWith(product);
  table.erase();
  return true;
}

/// Whether `rows` is the array whose row `row` reads
/// (scaledRowAtOwnIndices).
bool isArrayOfRow(Value rows, Operation *row) {
  if (auto extract = dyn_cast<ExtractOp>(row))
    return computeSame(extract.getSource(), rows, {});
  auto read = dyn_cast<ReadOp>(row);
  auto whole = rows.getDefiningOp<ReadOp>();
  return whole && whole.getSourceAttr() == read.getSourceAttr() &&
         whole.getIndices().empty();
}

/// Replaces `product`, a table of s · A[b, i] (s a scalar per row) times
/// op(M), by the table of s · P[b, i] when P = A op(M) was computed before
/// it (M square): the rows' product is not computed twice.
bool productOfEarlierRows(BatchMatmulOp product) {
  auto table = product.getLhs().getDefiningOp<TabulateOp>();
  if (!table || !isRowsTimesMatrix(product) ||
      table.getType() != product.getType())
    return false;
  Operation *row = scaledRowAtOwnIndices(table, /*linear=*/false);
  if (!row || isInProgram(product))
    return false;
  for (Operation *op = product->getPrevNode(); op; op = op->getPrevNode()) {
    auto earlier = dyn_cast<BatchMatmulOp>(op);
    if (!earlier || !isRowsTimesMatrix(earlier) ||
        earlier.getType() != product.getType() ||
        earlier.getTransposeRhs() != product.getTransposeRhs() ||
        !computeSame(earlier.getRhs(), product.getRhs(), {}) ||
        !isArrayOfRow(earlier.getLhs(), row))
      continue;
    OpBuilder builder(product);
    TabulateOp scaled =
        tableReadingRowsOf(builder, table, row, earlier.getResult());
    product.getResult().replaceAllUsesWith(scaled.getResult());
    product.erase();
    return true;
  }
  return false;
}

/// The array A [N, K] that `table`, of type [K, N], transposes: a table
/// over k whose rows are tables over i of A[i, k], or a table over (k, i)
/// of A[i, k], A a tensor or an array from outside the table (read ahead
/// at the builder's point); null otherwise.
Value transposedArrayOf(TabulateOp table, OpBuilder &builder) {
  std::optional<ScalarTable> scalars = scalarTableOf(table);
  if (!scalars)
    return Value();
  auto type = cast<ArrayType>(table.getType());
  Value element = scalars->element;
  SmallVector<Value> indices = {scalars->innerIndex, scalars->outerIndex};
  auto transposed =
      ArrayType::get(table.getContext(), {type.getShape()[1].getValue(),
                                          type.getShape()[0].getValue()});
  if (auto extract = element.getDefiningOp<ExtractOp>())
    return extract.getMap().isIdentity() &&
                   llvm::equal(extract.getIndices(), indices) &&
                   isDefinedOutside(extract.getSource(), table) &&
                   extract.getSource().getType() == transposed
               ? extract.getSource()
               : Value();
  return wholeTensorOf(element, indices, transposed, builder);
}

/// Replaces `product`, T X with T a table of Aᵀ (transposedArrayOf) and X
/// the rows of an unbatched array, by Σ_i A[i]ᵀ ⊗ X[i].
bool transposedTableOperand(BatchMatmulOp product) {
  auto table = product.getLhs().getDefiningOp<TabulateOp>();
  if (!table || product.getTransposeLhs() || product.getTransposeRhs() ||
      product.getSumBatch() || product.getLhsRows() != 1 ||
      product.hasLhsBatch() || product.hasRhsBatch())
    return false;
  // A tensor is read where the table read it.
  OpBuilder atTable(table);
  Value array = transposedArrayOf(table, atTable);
  if (!array)
    return false;
  std::string reason;
  ArrayType type = BatchMatmulOp::inferType(
      cast<ArrayType>(array.getType()),
      cast<ArrayType>(product.getRhs().getType()), true, false, true, reason);
  if (type != product.getType()) {
    if (array.use_empty() && array.getDefiningOp<ReadOp>() &&
        array.getDefiningOp()->getNextNode() == table)
      array.getDefiningOp()->erase();
    return false;
  }
  OpBuilder builder(product);
  Value sum = BatchMatmulOp::create(builder, product.getLoc(), type, array,
                                    product.getRhs(), true, false, true);
  product.getResult().replaceAllUsesWith(sum);
  product.erase();
  if (table->use_empty())
    table.erase();
  return true;
}

/// Replaces `table` by the product it copies as it is (its element of a
/// batch_matmul's result at the table's own indices), where only products
/// read it: those then read the product, which may be reassociated.
bool readProductForCopy(TabulateOp table) {
  Block &body = table.getBody().front();
  auto extract = table.getBodyValue().getDefiningOp<ExtractOp>();
  if (!extract ||
      !atBlockIndices(extract.getMap(), extract.getIndices(), body) ||
      !extract.getSource().getDefiningOp<BatchMatmulOp>() ||
      !isDefinedOutside(extract.getSource(), table) ||
      extract.getSource().getType() != table.getType() ||
      !llvm::all_of(table->getUsers(), llvm::IsaPred<BatchMatmulOp>))
    return false;
  table.getResult().replaceAllUsesWith(extract.getSource());
  table.erase();
  return true;
}

} // namespace

void mlir::energy::reassociateProducts(ModelOp model) {
  SmallVector<TabulateOp> tables;
  model.walk([&](TabulateOp table) {
    if (isStatement(table))
      tables.push_back(table);
  });
  for (TabulateOp table : tables)
    if (!readProductForCopy(table))
      productOutOfTable(table);
  bool changed = true;
  while (changed) {
    changed = false;
    SmallVector<BatchMatmulOp> products;
    model.walk([&](BatchMatmulOp product) { products.push_back(product); });
    for (BatchMatmulOp product : products)
      if (reassociate(product)) {
        changed = true;
        break;
      }
  }
  SmallVector<BatchMatmulOp> products;
  model.walk([&](BatchMatmulOp product) { products.push_back(product); });
  for (BatchMatmulOp product : products)
    if (!transposeOfEarlierProduct(product) && !productOfEarlierRows(product))
      transposedTableOperand(product);
}
