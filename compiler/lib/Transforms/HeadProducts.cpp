//===- HeadProducts.cpp - Per-head products over several row indices ------===//
//
// Multi-head terms of a batch apply a head's matrix to every token of every
// sequence: products M[h] v[b, c] in tables over (b, h, c), and sums over
// heads Σ_h M[h] v[h, b, c] in loops over (b, c), and the heads' parameter
// gradients Σ_(b, c) u[h, b, c] ⊗ v[b, c] in loops over h. Each is one
// batch_matmul per direction whose lhs has two row axes (the batch and the
// tokens), so that every head is one GEMM of all the batch's tokens.
//
//===----------------------------------------------------------------------===//

#include "BatchedProducts.h"
#include "PlanKernels.h"
#include "Slices.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// The indices of loop-like ops around `op` that `value` depends on
/// (besides those of `skip`), outermost loop first, with their sizes and the
/// outermost of those loops; none when an index is of another kind of
/// block or of a domain that is not plain dims.
struct RowIndices {
  SmallVector<Value> indices;
  SmallVector<Attribute> sizes;
  Operation *outermost = nullptr;
};
std::optional<RowIndices> rowIndicesOf(Value value, Operation *scope,
                                       ArrayRef<Value> skip) {
  llvm::SmallPtrSet<Value, 4> used;
  collectIndices(value, scope, used);
  for (Value index : skip)
    used.erase(index);
  RowIndices rows;
  for (Operation *op = scope; op; op = op->getParentOp()) {
    std::optional<std::pair<ArrayAttr, Block *>> domain;
    if (auto loop = dyn_cast<ForeachOp>(op))
      domain = {loop.getSizes(), &loop.getBody().front()};
    else if (auto table = dyn_cast<TabulateOp>(op))
      domain = {table.getSizes(), &table.getBody().front()};
    else if (auto sum = dyn_cast<ReduceOp>(op))
      domain = {sum.getSizes(), &sum.getBody().front()};
    if (!domain)
      break;
    SmallVector<Value> here;
    SmallVector<Attribute> sizes;
    for (BlockArgument argument : domain->second->getArguments())
      if (used.erase(argument)) {
        if (!hasPlainDims(domain->first))
          return std::nullopt;
        here.push_back(argument);
        sizes.push_back(domain->first[argument.getArgNumber()]);
      }
    if (!here.empty())
      rows.outermost = op;
    rows.indices.insert(rows.indices.begin(), here.begin(), here.end());
    rows.sizes.insert(rows.sizes.begin(), sizes.begin(), sizes.end());
  }
  if (!used.empty() || rows.indices.size() < 2 || !isStatement(rows.outermost))
    return std::nullopt;
  return rows;
}

/// The bodies from `outermost` down to `inner`'s, outermost first.
SmallVector<Block *> bodiesDownTo(Operation *outermost, Block *inner) {
  SmallVector<Block *> blocks;
  for (Block *block = inner; block; block = block->getParentOp()->getBlock()) {
    blocks.insert(blocks.begin(), block);
    if (block->getParentOp() == outermost)
      break;
  }
  return blocks;
}

} // namespace

/// Σ_h M[h] v[h, i₁, …, i_r] in loops over i₁ … i_r (r ≥ 2: the tokens of
/// every sequence of a batch), M[h] a head's matrix (h one index, or the
/// indices of grouped heads (g, r), every one of which M varies with): one
/// summed batch_matmul of the rows V over (h, i₁, …, i_r) with r row axes,
/// ahead of the loops, read at (i₁, …, i_r). Returns whether it rewrote
/// `sum`.
bool mlir::energy::batchHeadSum(ReduceOp sum) {
  ArrayAttr sizes = sum.getSizes();
  if (sum.getKind() != ReduceKind::sum || sum.hasPredicate() ||
      !hasPlainDims(sizes) || isStatement(sum))
    return false;
  Block &body = sum.getBody().front();
  SmallVector<Value> heads(body.getArguments());
  ScalarFactors scales;
  auto product = scales.peel(sum.getBodyValue(), sum).getDefiningOp<MatmulOp>();
  if (!product || cast<ArrayType>(product.getLhs().getType()).getRank() != 2 ||
      cast<ArrayType>(product.getRhs().getType()).getRank() != 1 ||
      !dependsOnlyOn(product.getLhs(), sum, heads))
    return false;
  llvm::SmallPtrSet<Value, 4> matrixIndices;
  collectIndices(product.getLhs(), sum, matrixIndices);
  if (heads.size() > 1 && !llvm::all_of(heads, [&](Value head) {
        return matrixIndices.contains(head);
      }))
    return false;
  std::optional<RowIndices> rows =
      rowIndicesOf(product.getRhs(), sum->getParentOp(), heads);
  // The matrices are a table over the heads ahead of the loops: a matrix
  // that also varies with a row index (one per token and head) is not one.
  if (!rows || !dependsOnlyOn(product.getLhs(), rows->outermost, heads))
    return false;
  SmallVector<Value> indices(heads);
  llvm::append_range(indices, rows->indices);
  SmallVector<Attribute> headSizes(sizes.begin(), sizes.end());
  SmallVector<Attribute> dims(headSizes);
  llvm::append_range(dims, rows->sizes);
  SmallVector<Block *> blocks = bodiesDownTo(rows->outermost, &body);
  ScalarFactors rowScales;
  Value rowValue = rowScales.peel(product.getRhs(), sum);
  Value array = arrayOver(rowValue, indices, dims, blocks, rows->outermost);
  auto [matrices, transposed] = matricesOver(product.getLhs(), heads, headSizes,
                                             blocks, rows->outermost, true);
  std::string reason;
  int64_t rowCount = rows->indices.size();
  int64_t batchAxes = heads.size();
  ArrayType type = BatchMatmulOp::inferType(
      cast<ArrayType>(array.getType()), cast<ArrayType>(matrices.getType()),
      false, transposed, true, reason, rowCount, batchAxes);
  if (!type)
    return false;
  OpBuilder builder(rows->outermost);
  Location loc = sum.getLoc();
  Value total =
      BatchMatmulOp::create(builder, loc, type, array, matrices, false,
                            transposed, true, rowCount, batchAxes);
  total = rowScales.apply(builder, loc, total);
  builder.setInsertionPoint(sum);
  MLIRContext *context = sum.getContext();
  Value row =
      ExtractOp::create(builder, loc, cast<ArrayType>(product.getType()), total,
                        AffineMapAttr::get(AffineMap::getMultiDimIdentityMap(
                            rows->indices.size(), context)),
                        rows->indices);
  row = scales.apply(builder, loc, row);
  sum.getResult().replaceAllUsesWith(row);
  sum.erase();
  return true;
}

bool mlir::energy::batchNestedHeadSum(ReduceOp sum) {
  if (isStatement(sum) || !nestedSumOf(sum))
    return false;
  ReduceOp flat = flattenNestedSum(sum);
  if (!flat)
    return false;
  sum.getResult().replaceAllUsesWith(flat.getResult());
  // batchHeadSum replaces and erases `flat` when it applies.
  if (batchHeadSum(flat)) {
    sum.erase();
    return true;
  }
  flat.getResult().replaceAllUsesWith(sum.getResult());
  flat.erase();
  return false;
}

bool mlir::energy::batchHeadOuterSum(ReduceOp sum) {
  ArrayAttr sizes = sum.getSizes();
  auto loop = dyn_cast<ForeachOp>(sum->getParentOp());
  if (sum.getKind() != ReduceKind::sum || sum.hasPredicate() ||
      sizes.size() < 2 || !hasPlainDims(sizes) || !loop ||
      loop.hasPredicate() || !hasPlainDims(loop.getSizes()) ||
      !isStatement(loop))
    return false;
  Block &body = sum.getBody().front();
  SmallVector<Value> heads(loop.getBody().front().getArguments());
  SmallVector<Value> rows(body.getArguments());
  SmallVector<Value> headRows(heads);
  llvm::append_range(headRows, rows);
  // The outer products the summand adds, each maybe scaled by scalars
  // from outside, each side of the rows and maybe the head.
  struct Term {
    ScalarFactors scales;
    OuterOp outer;
    bool lhsOfHead, rhsOfHead;
  };
  SmallVector<Term> terms;
  SmallVector<Value> pending = {sum.getBodyValue()};
  while (!pending.empty()) {
    Value value = pending.pop_back_val();
    if (auto add = value.getDefiningOp<AddOp>();
        add && add->getBlock() == &body &&
        add.getLhs().getType() == add.getType() &&
        add.getRhs().getType() == add.getType()) {
      pending.push_back(add.getLhs());
      pending.push_back(add.getRhs());
      continue;
    }
    Term term;
    term.outer = term.scales.peel(value, sum).getDefiningOp<OuterOp>();
    if (!term.outer || term.outer->getBlock() != &body)
      return false;
    for (auto [side, ofHead] :
         {std::pair(term.outer.getLhs(), &term.lhsOfHead),
          std::pair(term.outer.getRhs(), &term.rhsOfHead)}) {
      if (cast<ArrayType>(side.getType()).getRank() != 1 ||
          !dependsOnlyOn(side, loop, headRows))
        return false;
      *ofHead = !dependsOnlyOn(side, loop, rows);
    }
    if (!term.lhsOfHead && !term.rhsOfHead)
      return false;
    terms.push_back(std::move(term));
  }
  SmallVector<Block *> blocks = {&loop.getBody().front(), &body};
  SmallVector<Attribute> rowSizes(sizes.begin(), sizes.end());
  SmallVector<Attribute> headRowSizes(loop.getSizes().begin(),
                                      loop.getSizes().end());
  llvm::append_range(headRowSizes, rowSizes);
  auto table = [&](Value side, bool ofHead) {
    return arrayOver(side, ofHead ? headRows : rows,
                     ofHead ? headRowSizes : rowSizes, blocks, loop);
  };
  // Every term's tables and product type first: a term whose tables do not
  // fit (the product's verifier would refuse it) leaves the sum as it is.
  Location loc = sum.getLoc();
  int64_t rowCount = rows.size();
  int64_t batchAxes = heads.size();
  SmallVector<std::tuple<Value, Value, ArrayType>> products;
  for (Term &term : terms) {
    Value lhs = table(term.outer.getLhs(), term.lhsOfHead);
    Value rhs = table(term.outer.getRhs(), term.rhsOfHead);
    std::string reason;
    ArrayType type = BatchMatmulOp::inferType(
        cast<ArrayType>(lhs.getType()), cast<ArrayType>(rhs.getType()), true,
        false, false, reason, rowCount, batchAxes);
    products.emplace_back(lhs, rhs, type);
  }
  if (llvm::any_of(products,
                   [](auto &product) { return !std::get<2>(product); })) {
    for (auto &[lhs, rhs, type] : llvm::reverse(products))
      for (Value made : {rhs, lhs})
        if (Operation *def = made.getDefiningOp();
            def && isa<TabulateOp>(def) && def->use_empty())
          def->erase();
    return false;
  }
  OpBuilder before(loop), inside(sum);
  Value total;
  for (auto [term, product] : llvm::zip(terms, products)) {
    auto [lhs, rhs, type] = product;
    Value all = BatchMatmulOp::create(before, loc, type, lhs, rhs, true, false,
                                      false, rowCount, batchAxes);
    Value matrix = ExtractOp::create(
        inside, loc, cast<ArrayType>(term.outer.getType()), all,
        AffineMapAttr::get(
            AffineMap::getMultiDimIdentityMap(batchAxes, sum.getContext())),
        heads);
    matrix = term.scales.apply(inside, loc, matrix);
    total =
        total ? AddOp::create(inside, loc, total, matrix).getResult() : matrix;
  }
  sum.getResult().replaceAllUsesWith(total);
  sum.erase();
  return true;
}

/// In the body of a loop over three or more indices or a table over two
/// or more (a statement), each product M[h] v of a head's matrix (h one of the
/// indices) and a vector v of other indices i₁ … i_r, and of h or not: per
/// head, the rows V over (i₁, …, i_r) (of h too) times M[h]ᵀ, one
/// batch_matmul with r row axes ([H, I₁, …, I_r, m]) ahead of the loop,
/// whose body reads its element. Chains of such products (Wkᵀ[h] Wq[h] u)
/// are one batch_matmul each.
bool mlir::energy::batchHeadProducts(Operation *loop) {
  ArrayAttr sizes;
  Block *block = nullptr;
  if (auto table = dyn_cast<TabulateOp>(loop)) {
    sizes = table.getSizes();
    block = &table.getBody().front();
  } else if (auto sum = dyn_cast<ReduceOp>(loop); sum && !sum.hasPredicate()) {
    sizes = sum.getSizes();
    block = &sum.getBody().front();
  } else if (auto each = dyn_cast<ForeachOp>(loop);
             each && !each.hasPredicate()) {
    sizes = each.getSizes();
    block = &each.getBody().front();
  }
  // Tables over a head and one other index are batchTable's, unless the
  // head is not first.
  size_t least = isa<TabulateOp>(loop) ? 2 : 3;
  if (!block || sizes.size() < least || !hasPlainDims(sizes) ||
      !isStatement(loop))
    return false;
  Block &body = *block;
  bool rewrote = false;
  for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
    auto product = dyn_cast<MatmulOp>(op);
    if (!product ||
        cast<ArrayType>(product.getLhs().getType()).getRank() != 2 ||
        cast<ArrayType>(product.getRhs().getType()).getRank() != 1)
      continue;
    // The heads: the indices the matrix varies with (one, or the group and
    // the head within it of grouped heads M[g, r]), in the loop's order.
    SmallVector<Value> heads;
    SmallVector<Attribute> headSizes;
    llvm::SmallPtrSet<Value, 4> matrixIndices;
    collectIndices(product.getLhs(), loop, matrixIndices);
    for (BlockArgument index : body.getArguments())
      if (matrixIndices.contains(index)) {
        heads.push_back(index);
        headSizes.push_back(sizes[index.getArgNumber()]);
      }
    if (heads.empty() || !dependsOnlyOn(product.getLhs(), loop, heads) ||
        (sizes.size() == 2 && heads.size() == 1 &&
         heads.front() == body.getArgument(0)) ||
        summedBeforeMatrix(product, loop))
      continue;
    llvm::SmallPtrSet<Value, 4> used;
    collectIndices(product.getRhs(), loop, used);
    // The rows, with the heads first when v depends on them (a batch): on
    // all of them, or on none.
    int64_t headsUsed =
        llvm::count_if(heads, [&](Value head) { return used.contains(head); });
    if (headsUsed != 0 && headsUsed != static_cast<int64_t>(heads.size()))
      continue;
    bool batched = headsUsed != 0;
    SmallVector<Value> rowIndices;
    SmallVector<Attribute> rowSizes;
    if (batched) {
      rowIndices.append(heads);
      rowSizes.append(headSizes);
    }
    for (BlockArgument index : body.getArguments())
      if (!llvm::is_contained(heads, index) && used.contains(index)) {
        rowIndices.push_back(index);
        rowSizes.push_back(sizes[index.getArgNumber()]);
      }
    int64_t batchAxes = heads.size();
    int64_t rowCount = rowIndices.size() - (batched ? batchAxes : 0);
    if (rowCount == 0)
      continue;
    Value rows =
        arrayOver(product.getRhs(), rowIndices, rowSizes, {&body}, loop);
    auto [matrices, transposed] =
        matricesOver(product.getLhs(), heads, headSizes, {&body}, loop, true);
    std::string reason;
    ArrayType type = BatchMatmulOp::inferType(
        cast<ArrayType>(rows.getType()), cast<ArrayType>(matrices.getType()),
        false, transposed, false, reason, rowCount, batchAxes);
    if (!type)
      continue;
    OpBuilder builder(loop);
    Value batch =
        BatchMatmulOp::create(builder, loop->getLoc(), type, rows, matrices,
                              false, transposed, false, rowCount, batchAxes);
    builder.setInsertionPoint(product);
    SmallVector<Value> at(heads);
    llvm::append_range(
        at, ArrayRef<Value>(rowIndices).drop_front(batched ? batchAxes : 0));
    Value element = ExtractOp::create(
        builder, product.getLoc(), cast<ArrayType>(product.getType()), batch,
        AffineMapAttr::get(
            AffineMap::getMultiDimIdentityMap(at.size(), loop->getContext())),
        at);
    product.getResult().replaceAllUsesWith(element);
    product.erase();
    rewrote = true;
  }
  return rewrote;
}
