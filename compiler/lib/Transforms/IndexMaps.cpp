//===- IndexMaps.cpp - Sums over a vector's elements as linear maps -------===//
//
// Σ_k v[k] a(k) r(k), with v a vector from outside the sum read at its
// index, a(k) scalars and r(k) rows that do not depend on v, is the map
// Rᵀ (v ⊙ A) of v, A and R the tables of a and r over k (R the whole
// array when r is a row of one read at k); a sum of such terms is the sum
// of their maps. Differentiation leaves these sums where a let's elements
// are pulled back (the adjoint of a rotated query per pair of an
// attention). Written as maps, and where the maps are the same at every
// position of a sum around them (v varies with its index, the maps do
// not), energy-plan-linear-maps takes them out of that sum and the sum
// becomes a contraction's.
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"
#include "Slices.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// One term of the sum: ± v[k] times `scalars` times `row` (null for none).
struct IndexTerm {
  SmallVector<Value> scalars;
  Value row;
  bool negated;
};

/// The terms of `value` through additions, subtractions and negations that
/// nothing else reads, with their signs.
void collectSignedTerms(Value value, bool negated,
                        SmallVectorImpl<std::pair<Value, bool>> &terms) {
  Operation *def = value.getDefiningOp();
  if (def && value.hasOneUse()) {
    if (auto add = dyn_cast<AddOp>(def);
        add && add.getLhs().getType() == add.getRhs().getType()) {
      collectSignedTerms(add.getLhs(), negated, terms);
      collectSignedTerms(add.getRhs(), negated, terms);
      return;
    }
    if (auto sub = dyn_cast<SubOp>(def);
        sub && sub.getLhs().getType() == sub.getRhs().getType()) {
      collectSignedTerms(sub.getLhs(), negated, terms);
      collectSignedTerms(sub.getRhs(), !negated, terms);
      return;
    }
    if (auto neg = dyn_cast<NegOp>(def)) {
      collectSignedTerms(neg.getOperand(), !negated, terms);
      return;
    }
  }
  terms.push_back({value, negated});
}

/// The factors of `value` through products and negations that nothing
/// else reads; `negated` flips with each negation.
void collectFactors(Value value, SmallVectorImpl<Value> &factors,
                    bool &negated) {
  if (value.hasOneUse()) {
    if (auto mul = value.getDefiningOp<MulOp>()) {
      collectFactors(mul.getLhs(), factors, negated);
      collectFactors(mul.getRhs(), factors, negated);
      return;
    }
    if (auto neg = value.getDefiningOp<NegOp>()) {
      negated = !negated;
      collectFactors(neg.getOperand(), factors, negated);
      return;
    }
  }
  factors.push_back(value);
}

/// The vector whose element at the sum's index `factor` reads, when it is
/// `extract %v[k]` of a vector defined outside `sum`; null otherwise.
Value elementVector(Value factor, ReduceOp sum) {
  auto extract = factor.getDefiningOp<ExtractOp>();
  Value index = sum.getBody().front().getArgument(0);
  if (!extract || !isScalar(extract) || extract.getIndices().size() != 1 ||
      extract.getIndices()[0] != index || !extract.getMap().isIdentity() ||
      rankOf(extract.getSource()) != 1 ||
      !isDefinedOutside(extract.getSource(), sum))
    return {};
  return extract.getSource();
}

/// A sum over one index k whose terms are each v[k] times scalars and at
/// most one vector that do not depend on v: v and the terms.
struct IndexMap {
  Value vector;
  SmallVector<IndexTerm> terms;
};

std::optional<IndexMap> matchIndexMap(ReduceOp sum) {
  if (sum.getKind() != ReduceKind::sum || sum.hasPredicate() ||
      sum.getTemperature() || sum.getSizes().size() != 1 ||
      !hasPlainDims(sum.getSizes()) || rankOf(sum.getResult()) > 1)
    return std::nullopt;
  SmallVector<std::pair<Value, bool>> signedTerms;
  collectSignedTerms(sum.getBodyValue(), /*negated=*/false, signedTerms);
  IndexMap map;
  for (auto [value, negated] : signedTerms) {
    SmallVector<Value> factors;
    IndexTerm term{{}, Value(), negated};
    collectFactors(value, factors, term.negated);
    Value vector;
    for (Value factor : factors) {
      if (Value element = elementVector(factor, sum);
          element && !vector && (!map.vector || element == map.vector)) {
        vector = element;
        continue;
      }
      if (isScalar(factor)) {
        term.scalars.push_back(factor);
        continue;
      }
      if (term.row || rankOf(factor) != 1)
        return std::nullopt;
      term.row = factor;
    }
    // (Σ_k v[k] alone is no map worth writing.)
    if (!vector || (!term.row && term.scalars.empty()))
      return std::nullopt;
    map.vector = vector;
    map.terms.push_back(std::move(term));
  }
  auto readsVector = [&](Value factor) {
    return dependsOn(factor, map.vector);
  };
  for (const IndexTerm &term : map.terms)
    if (llvm::any_of(term.scalars, readsVector) ||
        (term.row && readsVector(term.row)))
      return std::nullopt;
  return map;
}

/// Whether the maps are the same at every position of a sum around `sum`
/// that the vector varies with: then a sum of them can take them out.
bool mapsInvariantInEnclosingSum(ReduceOp sum, const IndexMap &map) {
  for (auto around = sum->getParentOfType<ReduceOp>(); around;
       around = around->getParentOfType<ReduceOp>()) {
    if (around.getKind() != ReduceKind::sum)
      continue;
    auto indices = around.getBody().front().getArguments();
    auto variesInAround = [&](Value value) {
      llvm::SmallPtrSet<Value, 4> used;
      collectIndices(value, around, used);
      return llvm::any_of(indices,
                          [&](Value index) { return used.contains(index); });
    };
    if (!variesInAround(map.vector))
      continue;
    bool invariant = llvm::all_of(map.terms, [&](const IndexTerm &term) {
      return llvm::none_of(term.scalars, variesInAround) &&
             (!term.row || !variesInAround(term.row));
    });
    if (invariant)
      return true;
  }
  return false;
}

/// The table over `sum`'s index of the product of `factors` (of the
/// sum's body), built at `builder`'s point.
Value tableOfProduct(OpBuilder &builder, ReduceOp sum,
                     ArrayRef<Value> factors) {
  Block &body = sum.getBody().front();
  MLIRContext *context = sum.getContext();
  SmallVector<StringAttr> dims = {StringAttr::get(
      context, *cast<DimExprAttr>(sum.getSizes()[0]).getDimName())};
  llvm::append_range(dims, cast<ArrayType>(factors[0].getType()).getShape());
  auto table = TabulateOp::create(
      builder, sum.getLoc(), ArrayType::get(context, dims), sum.getSizes());
  Block &tableBody = table.getBody().emplaceBlock();
  IRMapping mapping;
  mapping.map(body.getArgument(0),
              tableBody.addArgument(body.getArgument(0).getType(),
                                    body.getArgument(0).getLoc()));
  llvm::SetVector<Operation *> slice;
  for (Value factor : factors)
    addToSlice(factor, body, slice);
  OpBuilder inside = OpBuilder::atBlockEnd(&tableBody);
  cloneSlice(body, slice, inside, mapping);
  Value product = mapping.lookupOrDefault(factors[0]);
  for (Value factor : factors.drop_front())
    product = MulOp::create(inside, sum.getLoc(), product,
                            mapping.lookupOrDefault(factor));
  YieldOp::create(inside, sum.getLoc(), product);
  return table;
}

/// The rows `row` over `sum`'s index as one array: the whole array of a
/// read whose last index is k, read at the others, or a table.
Value rowsOver(OpBuilder &builder, ReduceOp sum, Value row) {
  Value index = sum.getBody().front().getArgument(0);
  auto read = row.getDefiningOp<ReadOp>();
  if (read && read.getMap().isIdentity() && !read.getIndices().empty() &&
      read.getIndices().back() == index &&
      llvm::all_of(read.getIndices().drop_back(),
                   [&](Value other) { return isDefinedOutside(other, sum); })) {
    auto model = sum->getParentOfType<ModelOp>();
    auto tensor =
        dyn_cast_or_null<TensorOp>(model.lookupSymbol(read.getSource()));
    if (tensor) {
      ArrayRef<StringAttr> shape = tensor.getArrayType().getShape();
      size_t leading = read.getIndices().size() - 1;
      auto type = ArrayType::get(sum.getContext(), shape.drop_front(leading));
      return ReadOp::create(
          builder, read.getLoc(), type, read.getSourceAttr(),
          AffineMapAttr::get(
              AffineMap::getMultiDimIdentityMap(leading, builder.getContext())),
          read.getIndices().drop_back());
    }
  }
  return tableOfProduct(builder, sum, {row});
}

/// Replaces `sum` by the sum of its terms' maps of the vector.
void writeAsMaps(ReduceOp sum, const IndexMap &map) {
  OpBuilder builder(sum);
  Location loc = sum.getLoc();
  SmallVector<std::pair<Value, bool>> mapped;
  for (const IndexTerm &term : map.terms) {
    Value scaled = map.vector;
    if (term.row && !term.scalars.empty())
      scaled = MulOp::create(builder, loc, scaled,
                             tableOfProduct(builder, sum, term.scalars));
    Value value;
    if (term.row) {
      Value rows = rowsOver(builder, sum, term.row);
      value = MatmulOp::create(builder, loc,
                               TransposeOp::create(builder, loc, rows), scaled);
    } else {
      value = DotOp::create(builder, loc, map.vector,
                            tableOfProduct(builder, sum, term.scalars));
    }
    mapped.push_back({value, term.negated});
  }
  Value total;
  for (auto [value, negated] : mapped) {
    if (!total)
      total = negated ? NegOp::create(builder, loc, value).getResult() : value;
    else if (negated)
      total = SubOp::create(builder, loc, total, value);
    else
      total = AddOp::create(builder, loc, total, value);
  }
  sum.getResult().replaceAllUsesWith(total);
  sum->erase();
}

} // namespace

void mlir::energy::writeIndexMaps(ModelOp model) {
  SmallVector<ReduceOp> sums;
  model.walk<WalkOrder::PostOrder>([&](ReduceOp sum) {
    if (!sum->getParentOfType<SoftmaxContractOp>() &&
        !sum->getParentOfType<LetOp>())
      sums.push_back(sum);
  });
  for (ReduceOp sum : sums) {
    std::optional<IndexMap> map = matchIndexMap(sum);
    if (map && mapsInvariantInEnclosingSum(sum, *map))
      writeAsMaps(sum, *map);
  }
}
