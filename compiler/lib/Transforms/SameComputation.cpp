//===- SameComputation.cpp - Values that compute the same -----------------===//
//
// computeSame: whether two values compute the same, through the tables and
// products the plan builds, so that a step recognises what another
// computes already (a recomputed projection and a table of them, a head's
// matrix times a row and a batch of every head's products), and across
// layouts the elements of two arrays that hold the same values.
//
//===----------------------------------------------------------------------===//

#include "Slices.h"

#include "mlir/IR/AffineExpr.h"

using namespace mlir;
using namespace mlir::energy;

namespace {
/// `value` as an element of a table, `extract %T[indices]` at all of T's
/// indices: T and the indices.
std::optional<std::pair<TabulateOp, OperandRange>> tableElement(Value value) {
  auto extract = value.getDefiningOp<ExtractOp>();
  if (!extract || !extract.getMap().isIdentity())
    return std::nullopt;
  auto table = extract.getSource().getDefiningOp<TabulateOp>();
  if (!table ||
      table.getBody().front().getNumArguments() != extract.getIndices().size())
    return std::nullopt;
  return std::make_pair(table, extract.getIndices());
}
} // namespace

namespace {
/// Whether `element` computes `array[indices]`, `array` and `indices` on
/// the side `arguments` maps from and `element` on the side it maps to: a
/// table's body at those indices, an
/// extract of the same array or a read of the same tensor at them, or a
/// product of a head's matrix and a row (`extract %P[h, rows…]` of a
/// `batch_matmul` of rows times every head's matrix transposed, against
/// `matmul(W[h], x[rows…])`), or a row times a matrix (`extract %P[b, i]`
/// of a `batch_matmul` of L and R, against `matmul(transpose(R[b]),
/// L[b, i])`).
bool isElementOf(Value element, Value array, ArrayRef<Value> indices,
                 const IRMapping &arguments, bool acrossLayouts);

/// Whether `product`, Xᵀ v, is the row `indices` of `rows`, a product of
/// rows and a matrix per batch position (L[b] R[b], or L R): the row
/// L[b, i] times R[b] is R[b]ᵀ L[b, i], with X = R[b] and v = L[b, i].
bool isRowTimesMatrix(MatmulOp product, BatchMatmulOp rows,
                      ArrayRef<Value> indices, const IRMapping &arguments,
                      bool acrossLayouts) {
  auto transpose = product.getLhs().getDefiningOp<TransposeOp>();
  if (!transpose || rows.getLhsRows() != 1 || rows.getBatchAxes() != 1 ||
      rankOf(rows.getLhs()) != static_cast<int64_t>(indices.size()) + 1 ||
      rankOf(product.getRhs()) != 1)
    return false;
  Value matrix = transpose.getOperand();
  bool batched = rankOf(rows.getRhs()) == 3;
  if (batched != (rankOf(rows.getLhs()) == 3))
    return false;
  bool sameMatrix =
      batched ? isElementOf(matrix, rows.getRhs(), indices.take_front(),
                            arguments, acrossLayouts)
              : computeSame(matrix, rows.getRhs(), arguments, acrossLayouts);
  return sameMatrix && isElementOf(product.getRhs(), rows.getLhs(), indices,
                                   arguments, acrossLayouts);
}

bool isElementOf(Value element, Value array, ArrayRef<Value> indices,
                 const IRMapping &arguments, bool acrossLayouts) {
  SmallVector<Value> mapped;
  for (Value index : indices)
    mapped.push_back(arguments.lookupOrDefault(index));
  if (auto table = array.getDefiningOp<TabulateOp>()) {
    Block &body = table.getBody().front();
    if (body.getNumArguments() != indices.size())
      return false;
    IRMapping inside = arguments;
    for (auto [argument, index] : llvm::zip(body.getArguments(), mapped))
      inside.map(argument, index);
    return computeSame(table.getBodyValue(), element, inside, acrossLayouts);
  }
  if (auto extract = element.getDefiningOp<ExtractOp>())
    return extract.getMap().isIdentity() &&
           llvm::equal(extract.getIndices(), mapped) &&
           computeSame(array, extract.getSource(), arguments, acrossLayouts);
  if (auto read = element.getDefiningOp<ReadOp>()) {
    auto whole = array.getDefiningOp<ReadOp>();
    return whole && whole.getIndices().empty() && read.getMap().isIdentity() &&
           whole.getSourceAttr() == read.getSourceAttr() &&
           llvm::equal(read.getIndices(), mapped);
  }
  auto product = element.getDefiningOp<MatmulOp>();
  auto heads = array.getDefiningOp<BatchMatmulOp>();
  if (!product || !heads || heads.getTransposeLhs() || heads.getSumBatch() ||
      heads.getBatchAxes() != 1)
    return false;
  if (!heads.getTransposeRhs())
    return isRowTimesMatrix(product, heads, indices, arguments, acrossLayouts);
  int64_t rows = heads.getLhsRows();
  if (rankOf(heads.getRhs()) != 3 || rankOf(heads.getLhs()) != rows + 1 ||
      indices.size() != static_cast<size_t>(rows + 1))
    return false;
  return isElementOf(product.getLhs(), heads.getRhs(), indices.take_front(),
                     arguments, acrossLayouts) &&
         isElementOf(product.getRhs(), heads.getLhs(), indices.drop_front(),
                     arguments, acrossLayouts);
}

/// The mapping the other way in `inverse`; false where two values map to
/// one (a table read at a repeated index), which has no inverse (and whose
/// choice of one would follow the map's pointer order).
bool invert(const IRMapping &mapping, IRMapping &inverse) {
  for (auto [from, to] : mapping.getValueMap()) {
    if (Value earlier = inverse.lookupOrNull(to); earlier && earlier != from)
      return false;
    inverse.map(to, from);
  }
  return true;
}

/// A table as one table over all its indices: the tables its body yields,
/// each computed in the body around it, flattened into it.
struct FlatTable {
  SmallVector<Value> indices;
  SmallVector<Attribute> sizes;
  Value element;
};

FlatTable flatten(TabulateOp table) {
  FlatTable flat;
  for (;;) {
    Block &body = table.getBody().front();
    llvm::append_range(flat.indices, body.getArguments());
    llvm::append_range(flat.sizes, table.getSizes());
    flat.element = table.getBodyValue();
    auto inner = flat.element.getDefiningOp<TabulateOp>();
    if (!inner || inner->getBlock() != &body)
      return flat;
    table = inner;
  }
}

/// `value` as `extract %A[indices]` (identity map): A and the indices.
std::optional<std::pair<Value, OperandRange>> arrayElement(Value value) {
  auto extract = value.getDefiningOp<ExtractOp>();
  if (!extract || !extract.getMap().isIdentity())
    return std::nullopt;
  return std::make_pair(extract.getSource(), extract.getIndices());
}

/// An index as an affine expression of values, its dims (each value in
/// order).
struct IndexTerm {
  AffineExpr expr;
  SmallVector<Value> operands;
};

/// The indices of an `extract` or `read` at `map` of `operands` (its dims,
/// then its symbols), each one an expression of them.
SmallVector<IndexTerm> indexTerms(AffineMap map, ValueRange operands) {
  SmallVector<AffineExpr> symbolsAsDims;
  for (unsigned k = 0; k < map.getNumSymbols(); ++k)
    symbolsAsDims.push_back(
        getAffineDimExpr(map.getNumDims() + k, map.getContext()));
  SmallVector<IndexTerm> terms;
  for (AffineExpr result : map.getResults())
    terms.push_back(
        {result.replaceSymbols(symbolsAsDims), SmallVector<Value>(operands)});
  return terms;
}

/// An element of an array: of `array`, or of the tensor `tensor` (a read
/// of its element, or of the whole tensor), at `indices`.
struct ArrayElement {
  Value array;
  SymbolRefAttr tensor;
  SmallVector<IndexTerm> indices;
};

/// `array[indices]` read through slices and through the tables that only
/// rearrange what they read (a table whose body is an element of an array
/// from outside, or a read of a tensor, at its own indices or values from
/// outside): the array or tensor read and the indices there.
ArrayElement rearrangedElement(Value array, SmallVector<IndexTerm> indices) {
  for (int depth = 0; depth < 16; ++depth) {
    if (auto slice = array.getDefiningOp<ExtractOp>()) {
      SmallVector<IndexTerm> outer =
          indexTerms(slice.getMap(), slice.getIndices());
      llvm::append_range(outer, indices);
      array = slice.getSource();
      indices = std::move(outer);
      continue;
    }
    if (auto read = array.getDefiningOp<ReadOp>();
        read && read.getIndices().empty())
      return {Value(), read.getSourceAttr(), indices};
    auto table = array.getDefiningOp<TabulateOp>();
    if (!table)
      break;
    Block &body = table.getBody().front();
    Operation *element = table.getBodyValue().getDefiningOp();
    auto extract = dyn_cast_or_null<ExtractOp>(element);
    auto read = dyn_cast_or_null<ReadOp>(element);
    bool rearranges =
        body.getNumArguments() == indices.size() && (extract || read) &&
        &body.front() == element &&
        element->getNextNode() == body.getTerminator() &&
        (extract ? extract.getMap().isIdentity() &&
                       !table->isAncestor(
                           extract.getSource().getParentRegion()->getParentOp())
                 : read.getMap().isIdentity());
    if (!rearranges)
      break;
    SmallVector<IndexTerm> inner;
    for (Value index : extract ? extract.getIndices() : read.getIndices()) {
      if (auto argument = dyn_cast<BlockArgument>(index);
          argument && argument.getOwner() == &body) {
        inner.push_back(indices[argument.getArgNumber()]);
        continue;
      }
      if (table->isAncestor(index.getParentRegion()->getParentOp()))
        return {array, SymbolRefAttr(), indices};
      inner.push_back({getAffineDimExpr(0, table.getContext()), {index}});
    }
    if (read)
      return {Value(), read.getSourceAttr(), inner};
    array = extract.getSource();
    indices = std::move(inner);
  }
  return {array, SymbolRefAttr(), indices};
}

/// Whether the index `a` (of values on the side `arguments` maps from) is
/// `b` (on the side it maps to): the same expression of corresponding
/// values.
bool sameIndex(const IndexTerm &a, const IndexTerm &b,
               const IRMapping &arguments) {
  SmallVector<Value> values;
  auto dimsOf = [&](const IndexTerm &term, bool mapped) {
    SmallVector<AffineExpr> dims;
    for (Value operand : term.operands) {
      Value value = mapped ? arguments.lookupOrDefault(operand) : operand;
      // (A size or constant computed twice is one value.)
      auto *at = llvm::find_if(values, [&](Value known) {
        return known == value ||
               (!isa<BlockArgument>(known) && !isa<BlockArgument>(value) &&
                computeSame(known, value, IRMapping()));
      });
      if (at == values.end())
        at = values.insert(values.end(), value);
      dims.push_back(
          getAffineDimExpr(at - values.begin(), a.expr.getContext()));
    }
    return dims;
  };
  SmallVector<AffineExpr> aDims = dimsOf(a, true), bDims = dimsOf(b, false);
  unsigned count = values.size();
  return simplifyAffineExpr(a.expr.replaceDims(aDims), count, 0) ==
         simplifyAffineExpr(b.expr.replaceDims(bDims), count, 0);
}

/// Whether `a[aIndices]` (on the side `arguments` maps from) holds what
/// `b[bIndices]` does (on the side it maps to), for arrays in other
/// layouts (computeSame's `acrossLayouts`): read through rearranging
/// tables, the same array or tensor at the same indices, or rows of two
/// products of every head's matrix with rows (`batch_matmul` of rows times
/// matrices transposed) of the same matrices and the same rows.
bool sameElements(Value a, SmallVector<IndexTerm> aIndices, Value b,
                  SmallVector<IndexTerm> bIndices, const IRMapping &arguments,
                  unsigned depth = 0) {
  if (depth > 4)
    return false;
  ArrayElement x = rearrangedElement(a, std::move(aIndices));
  ArrayElement y = rearrangedElement(b, std::move(bIndices));
  auto sameIndices = [&](ArrayRef<IndexTerm> first,
                         ArrayRef<IndexTerm> second) {
    return first.size() == second.size() &&
           llvm::all_of(llvm::zip(first, second), [&](auto pair) {
             return sameIndex(std::get<0>(pair), std::get<1>(pair), arguments);
           });
  };
  if (x.tensor || y.tensor)
    return x.tensor == y.tensor && sameIndices(x.indices, y.indices);
  if (x.array.getType() == y.array.getType() &&
      sameIndices(x.indices, y.indices) &&
      computeSame(x.array, y.array, arguments, /*acrossLayouts=*/true))
    return true;
  auto first = x.array.getDefiningOp<BatchMatmulOp>();
  auto second = y.array.getDefiningOp<BatchMatmulOp>();
  auto perHead = [](BatchMatmulOp product, size_t indexCount) {
    return product && product.getTransposeRhs() && !product.getTransposeLhs() &&
           !product.getSumBatch() &&
           rankOf(product.getLhs()) == product.getLhsRows() + 1 &&
           rankOf(product.getRhs()) == product.getBatchAxes() + 2 &&
           indexCount == static_cast<size_t>(product.getBatchAxes() +
                                             product.getLhsRows());
  };
  if (!perHead(first, x.indices.size()) || !perHead(second, y.indices.size()) ||
      first.getBatchAxes() != second.getBatchAxes() ||
      first.getRhs().getType() != second.getRhs().getType())
    return false;
  size_t heads = first.getBatchAxes();
  ArrayRef<IndexTerm> xAll(x.indices), yAll(y.indices);
  return sameIndices(xAll.take_front(heads), yAll.take_front(heads)) &&
         computeSame(first.getRhs(), second.getRhs(), arguments,
                     /*acrossLayouts=*/true) &&
         sameElements(
             first.getLhs(), SmallVector<IndexTerm>(xAll.drop_front(heads)),
             second.getLhs(), SmallVector<IndexTerm>(yAll.drop_front(heads)),
             arguments, depth + 1);
}

/// Whether result `a` of a contraction computes what result `b` of another
/// does: the same form, domains, predicate, temperature and score (the
/// regions' arguments corresponding), the same normaliser (each its own, or
/// one given what the other computes, or both given the same), and results
/// of one kind (the normaliser, or one side's sum) of values that compute
/// the same.
bool sameContractResult(SoftmaxContractOp x, OpResult a, SoftmaxContractOp y,
                        OpResult b, const IRMapping &arguments,
                        bool acrossLayouts) {
  if (a.getType() != b.getType() || x.getForm() != y.getForm() ||
      x.getRows() != y.getRows() || x.getCols() != y.getCols() ||
      x.hasPredicate() != y.hasPredicate() ||
      static_cast<bool>(x.getTemperature()) !=
          static_cast<bool>(y.getTemperature()))
    return false;
  if (x.getTemperature() && !computeSame(x.getTemperature(), y.getTemperature(),
                                         arguments, acrossLayouts))
    return false;
  IRMapping inside = arguments;
  for (auto [first, second] : llvm::zip(x->getRegions(), y->getRegions())) {
    if (first.empty() != second.empty() ||
        (!first.empty() && first.getNumArguments() != second.getNumArguments()))
      return false;
    if (!first.empty())
      inside.map(first.getArguments(), second.getArguments());
  }
  auto yielded = [](Region &region) {
    return region.front().getTerminator()->getOperand(0);
  };
  if ((x.hasPredicate() &&
       !computeSame(yielded(x.getPredicate()), yielded(y.getPredicate()),
                    inside, acrossLayouts)) ||
      !computeSame(x.getScoreValue(), y.getScoreValue(), inside, acrossLayouts))
    return false;
  Value givenX = x.getGivenLse(), givenY = y.getGivenLse();
  if (givenX && givenY &&
      !computeSame(givenX, givenY, arguments, acrossLayouts))
    return false;
  if (givenX && !givenY &&
      !computeSame(givenX, y.getLse(), arguments, acrossLayouts))
    return false;
  if (!givenX && givenY &&
      !computeSame(x.getLse(), givenY, arguments, acrossLayouts))
    return false;
  if (a == x.getLse())
    return b == y.getLse();
  auto sameSum = [&](ResultRange outputsX, ValueRange valuesX,
                     ResultRange outputsY, ValueRange valuesY) {
    auto at = llvm::find(outputsX, a), other = llvm::find(outputsY, b);
    return at != outputsX.end() && other != outputsY.end() &&
           computeSame(valuesX[at - outputsX.begin()],
                       valuesY[other - outputsY.begin()], inside,
                       acrossLayouts);
  };
  return sameSum(x.getRowOutputs(), x.getRowValues(), y.getRowOutputs(),
                 y.getRowValues()) ||
         sameSum(x.getColOutputs(), x.getColValues(), y.getColOutputs(),
                 y.getColValues());
}
} // namespace

bool mlir::energy::computeSame(Value a, Value b, const IRMapping &arguments,
                               bool acrossLayouts) {
  if (Value mapped = arguments.lookupOrNull(a))
    return mapped == b;
  if (a == b)
    return true;
  // Elements of two arrays in other layouts that hold the same values.
  if (auto x = a.getDefiningOp<ExtractOp>(), y = b.getDefiningOp<ExtractOp>();
      acrossLayouts && x && y && x.getSource() != y.getSource() &&
      sameElements(x.getSource(), indexTerms(x.getMap(), x.getIndices()),
                   y.getSource(), indexTerms(y.getMap(), y.getIndices()),
                   arguments))
    return true;
  // An element of a table computes its body at the element's indices (a
  // recomputed projection and a table of them). Where the other side is in
  // that body itself, its indices stand for the table's own arguments: only
  // an element at those same arguments is the body (not a transposed one).
  auto first = tableElement(a), second = tableElement(b);
  auto inBody = [](TabulateOp table, Value value) {
    if (Operation *definition = value.getDefiningOp())
      return table->isProperAncestor(definition);
    Operation *owner = cast<BlockArgument>(value).getOwner()->getParentOp();
    return owner && table->isAncestor(owner);
  };
  // The mapping `at` with the table's arguments mapped to the element's
  // indices through it; false where `other` is in the body and they differ.
  auto atElement = [&](std::pair<TabulateOp, OperandRange> element, Value other,
                       IRMapping &at) {
    bool inside = inBody(element.first, other);
    for (auto [argument, index] : llvm::zip(
             element.first.getBody().front().getArguments(), element.second)) {
      Value position = at.lookupOrDefault(index);
      if (inside && position != argument)
        return false;
      at.map(argument, position);
    }
    // The element's indices are not in scope in the table's body: mapped
    // still, they would make the mapping lose its inverse where they and the
    // table's arguments stand for the same positions.
    Region *tableRegion = element.first->getParentRegion();
    for (Value index : element.second)
      if (!index.getParentRegion()->isAncestor(tableRegion))
        at.erase(index);
    return true;
  };
  if (first && !second) {
    IRMapping body = arguments;
    return atElement(*first, b, body) &&
           computeSame(first->first.getBodyValue(), b, body, acrossLayouts);
  }
  if (second && !first) {
    IRMapping inverse;
    return invert(arguments, inverse) && atElement(*second, a, inverse) &&
           computeSame(second->first.getBodyValue(), a, inverse, acrossLayouts);
  }
  // An element of an array against what computes it.
  if (auto element = arrayElement(a);
      element && !arrayElement(b) && !isa<BlockArgument>(b))
    return isElementOf(b, element->first, SmallVector<Value>(element->second),
                       arguments, acrossLayouts);
  if (auto element = arrayElement(b);
      element && !arrayElement(a) && !isa<BlockArgument>(a)) {
    IRMapping inverse;
    if (!invert(arguments, inverse))
      return false;
    return isElementOf(a, element->first, SmallVector<Value>(element->second),
                       inverse, acrossLayouts);
  }
  if (isa<BlockArgument>(a))
    return false;
  Operation *x = a.getDefiningOp(), *y = b.getDefiningOp();
  // Two tables of the same values (the plan makes one per loop that needs
  // it, before CSE merges them), nested alike or not.
  if (auto first = dyn_cast_or_null<TabulateOp>(x)) {
    auto second = dyn_cast_or_null<TabulateOp>(y);
    if (!second || first.getType() != second.getType())
      return false;
    FlatTable one = flatten(first), other = flatten(second);
    if (one.sizes != other.sizes)
      return false;
    IRMapping bodies = arguments;
    bodies.map(one.indices, other.indices);
    return computeSame(one.element, other.element, bodies, acrossLayouts);
  }
  // Two plain reductions of the same values (no predicate, no
  // temperature): a row's dot products with every slot, summed as embeds.
  if (auto first = dyn_cast_or_null<ReduceOp>(x)) {
    auto second = dyn_cast_or_null<ReduceOp>(y);
    if (!second || first.getType() != second.getType() ||
        first.getKind() != second.getKind() ||
        first.getSizes() != second.getSizes() || first.hasPredicate() ||
        second.hasPredicate() || first.getTemperature() ||
        second.getTemperature())
      return false;
    IRMapping bodies = arguments;
    bodies.map(first.getBody().front().getArguments(),
               second.getBody().front().getArguments());
    return computeSame(first.getBodyValue(), second.getBodyValue(), bodies,
                       acrossLayouts);
  }
  if (auto first = dyn_cast_or_null<SoftmaxContractOp>(x)) {
    auto second = dyn_cast_or_null<SoftmaxContractOp>(y);
    return second &&
           sameContractResult(first, cast<OpResult>(a), second,
                              cast<OpResult>(b), arguments, acrossLayouts);
  }
  if (!x || !y || x->getName() != y->getName() || x->getNumRegions() != 0 ||
      y->getNumRegions() != 0 || x->getResultTypes() != y->getResultTypes() ||
      cast<OpResult>(a).getResultNumber() !=
          cast<OpResult>(b).getResultNumber() ||
      x->getPropertiesAsAttribute() != y->getPropertiesAsAttribute() ||
      x->getDiscardableAttrDictionary() != y->getDiscardableAttrDictionary() ||
      x->getNumOperands() != y->getNumOperands())
    return false;
  auto sameOperands = [&](bool swapped) {
    for (unsigned i = 0, e = x->getNumOperands(); i < e; ++i) {
      unsigned j = swapped ? e - 1 - i : i;
      if (!computeSame(x->getOperand(i), y->getOperand(j), arguments,
                       acrossLayouts))
        return false;
    }
    return true;
  };
  if (sameOperands(/*swapped=*/false))
    return true;
  return x->getNumOperands() == 2 && x->hasTrait<OpTrait::IsCommutative>() &&
         sameOperands(/*swapped=*/true);
}
