//===- ExtractCanonicalization.cpp - Slices of slices and of tables -------===//
//
// A slice of a slice is one slice at both sets of indices, and an element
// of a table is what the table's body computes at the element's indices,
// so that element reads left by planning (a row of a row of a table) read
// the array they come from.
//
//===----------------------------------------------------------------------===//

#include "energy/IR/EnergyOps.h"
#include "energy/IR/IndexArithmetic.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace mlir::energy;

namespace {
/// extract (extract %x[i...])[j...] = extract %x[i..., j...].
struct ExtractOfExtract : OpRewritePattern<ExtractOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ExtractOp outer,
                                PatternRewriter &rewriter) const override {
    auto inner = outer.getSource().getDefiningOp<ExtractOp>();
    if (!inner)
      return failure();
    // (Not where a bilinear or quadratic contraction reads a row of the
    // slice: the slice is its table.)
    if (auto contract = outer->getParentOfType<SoftmaxContractOp>();
        contract && contract.getForm() != ContractForm::generic &&
        !contract->isAncestor(inner))
      return failure();
    AffineMap map = concatIndexMaps(inner.getMap(), outer.getMap());
    if (!map)
      return failure();
    SmallVector<Value> indices(inner.getIndices());
    llvm::append_range(indices, outer.getIndices());
    rewriter.replaceOpWithNewOp<ExtractOp>(outer, outer.getType(),
                                           inner.getSource(),
                                           AffineMapAttr::get(map), indices);
    return success();
  }
};

/// Whether every op in `region` is free of effects or reads a tensor.
bool onlyComputesOrReads(Region &region) {
  return !region
              .walk([](Operation *op) {
                return isa<ReadOp, YieldOp>(op) || isMemoryEffectFree(op) ||
                               (op->getNumRegions() != 0 &&
                                op->hasTrait<
                                    OpTrait::HasRecursiveMemoryEffects>())
                           ? WalkResult::advance()
                           : WalkResult::interrupt();
              })
              .wasInterrupted();
}

/// Whether no op between `first` and `last` (one block) writes.
bool noWritesBetween(Operation *first, Operation *last) {
  for (Operation *op = first->getNextNode(); op && op != last;
       op = op->getNextNode())
    if (!isMemoryEffectFree(op) && !isa<ReadOp>(op) &&
        !(op->getNumRegions() != 0 &&
          llvm::all_of(op->getRegions(), onlyComputesOrReads)))
      return false;
  return true;
}

/// extract (tabulate (%i...) { body })[j...], every axis of the domain
/// indexed, = body at %i = j: the element computed where it is read.
struct ExtractOfTabulate : OpRewritePattern<ExtractOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ExtractOp extract,
                                PatternRewriter &rewriter) const override {
    auto table = extract.getSource().getDefiningOp<TabulateOp>();
    if (!table || !extract.getMap().isIdentity() ||
        extract.getIndices().size() != table.getSizes().size())
      return failure();
    // In another block (the body of a loop after the table), only a table
    // that rearranges an array (elements of values, which nothing writes):
    // the element read where it is needed, not a copy of it.
    bool rearranges =
        llvm::all_of(table.getBody().front().without_terminator(),
                     [](Operation &op) { return isa<ExtractOp>(op); });
    // (Not in a softmax contraction, whose forms read tables at their rows.)
    Operation *holder = table->getBlock()->findAncestorOpInBlock(*extract);
    bool inContraction = false;
    for (Operation *op = extract->getParentOp(); op && op != holder;
         op = op->getParentOp())
      inContraction |= isa<SoftmaxContractOp>(op);
    if (holder && isa<SoftmaxContractOp>(holder))
      inContraction = true;
    if (table->getBlock() != extract->getBlock()
            ? !rearranges || !holder || inContraction
            : !onlyComputesOrReads(table.getBody()) ||
                  !noWritesBetween(table, extract))
      return failure();
    Block &body = table.getBody().front();
    IRMapping mapping;
    mapping.map(body.getArguments(), extract.getIndices());
    for (Operation &op : body.without_terminator())
      rewriter.clone(op, mapping);
    rewriter.replaceOp(extract, mapping.lookupOrDefault(table.getBodyValue()));
    return success();
  }
};

/// tabulate (%i...) { extract %t[o..., %i...] }, the o from outside the
/// table, = extract %t[o...]: a table of the rows of a slice is the slice,
/// not a copy of it.
struct TableOfSliceRows : OpRewritePattern<TabulateOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(TabulateOp table,
                                PatternRewriter &rewriter) const override {
    Block &body = table.getBody().front();
    auto extract = table.getBodyValue().getDefiningOp<ExtractOp>();
    if (!extract || extract->getBlock() != &body ||
        !extract.getMap().isIdentity())
      return failure();
    OperandRange indices = extract.getIndices();
    size_t outer = indices.size() -
                   std::min(indices.size(), size_t(body.getNumArguments()));
    if (indices.size() <= body.getNumArguments() ||
        !llvm::equal(indices.drop_front(outer), body.getArguments()) ||
        table->isAncestor(extract.getSource().getParentRegion()->getParentOp()))
      return failure();
    for (Value index : indices.take_front(outer))
      if (table->isAncestor(index.getParentRegion()->getParentOp()))
        return failure();
    auto sourceType = cast<ArrayType>(extract.getSource().getType());
    auto slice = ArrayType::get(table.getContext(),
                                sourceType.getShape().drop_front(outer));
    if (slice != table.getType())
      return failure();
    rewriter.replaceOpWithNewOp<ExtractOp>(
        table, slice, extract.getSource(),
        AffineMapAttr::get(
            AffineMap::getMultiDimIdentityMap(outer, table.getContext())),
        indices.take_front(outer));
    return success();
  }
};
} // namespace

void TabulateOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                             MLIRContext *context) {
  patterns.add<TableOfSliceRows>(context);
}

void ExtractOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                            MLIRContext *context) {
  patterns.add<ExtractOfExtract, ExtractOfTabulate>(context);
}
