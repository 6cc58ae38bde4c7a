//===- IndexMaps.cpp - Sums over a vector's elements as linear maps -------===//
//
// Σ_k v[k] a(k) r(k), with v a vector from outside the sum read at its
// index, a(k) scalars and r(k) rows that do not depend on v, is the map
// Rᵀ (v ⊙ A) of v, A and R the tables of a and r over k (R the whole
// array when r is a row of one read at k); a sum of such terms is the sum
// of their maps, and a loop over k adding v[k] a(k) r into slots [s, k]
// adds (v ⊙ A) ⊗ r into [s]. Differentiation leaves these where a let's
// elements are pulled back (the adjoint of a rotated query per pair of an
// attention, its projection's gradient). Written as maps, and where the
// maps are the same at every position of a sum or loop around them (v
// varies with its index, the maps do not), energy-plan-linear-maps takes
// them out of the sum over the pairs, which becomes a contraction's.
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

/// One term of the sum: ± v[k] times `scalars` times `row` (null for none).
struct IndexTerm {
  Value vector;
  SmallVector<Value> scalars;
  Value row;
  bool negated;
};

/// The factors of `value` through products and negations; `negated` flips
/// with each negation.
void collectFactors(Value value, SmallVectorImpl<Value> &factors,
                    bool &negated) {
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
  factors.push_back(value);
}

/// The block of a one-index domain (a sum's or a loop's) and its index.
Block &bodyOf(Operation *domain) {
  if (auto loop = dyn_cast<ForeachOp>(domain))
    return loop.getBody().front();
  return cast<ReduceOp>(domain).getBody().front();
}
Value indexOf(Operation *domain) { return bodyOf(domain).getArgument(0); }
ArrayAttr sizesOf(Operation *domain) {
  if (auto loop = dyn_cast<ForeachOp>(domain))
    return loop.getSizes();
  return cast<ReduceOp>(domain).getSizes();
}

/// The vector whose element at the domain's index `factor` reads, when it
/// is `extract %v[k]` of a vector defined outside `domain`; null otherwise.
Value elementVector(Value factor, Operation *domain) {
  auto extract = factor.getDefiningOp<ExtractOp>();
  if (!extract || !isScalar(extract) || extract.getIndices().size() != 1 ||
      extract.getIndices()[0] != indexOf(domain) ||
      !extract.getMap().isIdentity() || rankOf(extract.getSource()) != 1 ||
      !isDefinedOutside(extract.getSource(), domain))
    return {};
  return extract.getSource();
}

/// Values over one index k whose terms are each v[k] times scalars and at
/// most one vector that do not depend on v (each term its own v).
struct IndexMap {
  SmallVector<IndexTerm> terms;
};

/// The most terms a product of sums is expanded into.
constexpr size_t kMaxExpandedTerms = 16;

/// The products of `factors` with a sum among them expanded over its terms, (a
/// ± b) c = a c ± b c, into `products` with their signs; false past
/// kMaxExpandedTerms.
bool expandProducts(
    SmallVector<Value> factors, bool negated,
    SmallVectorImpl<std::pair<SmallVector<Value>, bool>> &products) {
  for (auto [position, factor] : llvm::enumerate(factors)) {
    Operation *def = factor.getDefiningOp();
    if (!def || !isa<AddOp, SubOp>(def) ||
        def->getOperand(0).getType() != def->getOperand(1).getType())
      continue;
    for (unsigned side = 0; side < 2; ++side) {
      SmallVector<Value> expanded(factors);
      expanded.erase(expanded.begin() + position);
      bool sign = negated != (side == 1 && isa<SubOp>(def));
      collectFactors(def->getOperand(side), expanded, sign);
      if (!expandProducts(std::move(expanded), sign, products))
        return false;
    }
    return true;
  }
  if (products.size() == kMaxExpandedTerms)
    return false;
  products.push_back({std::move(factors), negated});
  return true;
}

/// `value` (of `domain`'s body) as an IndexMap, adding to `map`; with
/// `fixedRows`, rows that do not vary with the index only. False where it
/// is none.
bool addTerms(Value value, Operation *domain, bool fixedRows, IndexMap &map) {
  SmallVector<SignedTerm> signedTerms;
  collectSignedTerms(value, /*negated=*/false, signedTerms);
  SmallVector<std::pair<SmallVector<Value>, bool>> products;
  for (auto [termValue, negated] : signedTerms) {
    SmallVector<Value> factors;
    bool sign = negated;
    collectFactors(termValue, factors, sign);
    if (!expandProducts(std::move(factors), sign, products))
      return false;
  }
  for (auto &[factors, negated] : products) {
    IndexTerm term{Value(), {}, Value(), negated};
    for (Value factor : factors) {
      if (Value element = elementVector(factor, domain);
          element && !term.vector) {
        term.vector = element;
        continue;
      }
      if (isScalar(factor)) {
        term.scalars.push_back(factor);
        continue;
      }
      if (term.row || rankOf(factor) != 1)
        return false;
      term.row = factor;
    }
    if (!term.vector)
      return false;
    map.terms.push_back(std::move(term));
  }
  for (const IndexTerm &term : map.terms) {
    auto readsVector = [&](Value factor) {
      return dependsOn(factor, term.vector);
    };
    if (llvm::any_of(term.scalars, readsVector) ||
        (term.row && readsVector(term.row)))
      return false;
    if (fixedRows && term.row && dependsOn(term.row, indexOf(domain)))
      return false;
  }
  return true;
}

/// A sum over one index (no predicate, plain dims) as an IndexMap; (Σ_k
/// v[k] alone is no map worth writing).
std::optional<IndexMap> matchSum(ReduceOp sum) {
  if (sum.getKind() != ReduceKind::sum || sum.hasPredicate() ||
      sum.getTemperature() || sum.getSizes().size() != 1 ||
      !hasPlainDims(sum.getSizes()) || rankOf(sum.getResult()) > 1)
    return std::nullopt;
  IndexMap map;
  if (!addTerms(sum.getBodyValue(), sum, /*fixedRows=*/false, map) ||
      llvm::any_of(map.terms, [](const IndexTerm &term) {
        return !term.row && term.scalars.empty();
      }))
    return std::nullopt;
  return map;
}

/// Whether the maps are the same at every position of a sum or loop around
/// `domain` that the vector varies with: then a sum of them can take them
/// out.
bool mapsInvariantAround(Operation *domain, const IndexMap &map) {
  for (Operation *around = domain->getParentOp(); around;
       around = around->getParentOp()) {
    Block *body = nullptr;
    if (auto sum = dyn_cast<ReduceOp>(around);
        sum && sum.getKind() == ReduceKind::sum)
      body = &sum.getBody().front();
    else if (auto loop = dyn_cast<ForeachOp>(around))
      body = &loop.getBody().front();
    if (!body)
      continue;
    auto indices = body->getArguments();
    auto variesInAround = [&](Value value) {
      llvm::SmallPtrSet<Value, 4> used;
      collectIndices(value, around, used);
      return llvm::any_of(indices,
                          [&](Value index) { return used.contains(index); });
    };
    bool invariant = llvm::all_of(map.terms, [&](const IndexTerm &term) {
      return variesInAround(term.vector) &&
             llvm::none_of(term.scalars, variesInAround) &&
             (!term.row || !variesInAround(term.row));
    });
    if (invariant)
      return true;
  }
  return false;
}

/// The table over `domain`'s index of the product of `factors` (of its
/// body), built at `builder`'s point.
Value tableOfProduct(OpBuilder &builder, Operation *domain,
                     ArrayRef<Value> factors) {
  return tableOverIndex(builder, domain->getLoc(), bodyOf(domain),
                        sizesOf(domain), factors);
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

/// v ⊙ A for a term's scalars (v where it has none), at `builder`'s point.
Value scaledVector(OpBuilder &builder, Operation *domain,
                   const IndexTerm &term) {
  if (term.scalars.empty())
    return term.vector;
  return MulOp::create(builder, domain->getLoc(), term.vector,
                       tableOfProduct(builder, domain, term.scalars));
}

/// Replaces `sum` by the sum of its terms' maps of the vector.
void writeSumAsMaps(ReduceOp sum, const IndexMap &map) {
  OpBuilder builder(sum);
  Location loc = sum.getLoc();
  SmallVector<SignedTerm> mapped;
  for (const IndexTerm &term : map.terms) {
    Value value;
    if (term.row) {
      Value rows = rowsOver(builder, sum, term.row);
      value = MatmulOp::create(builder, loc,
                               TransposeOp::create(builder, loc, rows),
                               scaledVector(builder, sum, term));
    } else {
      value = DotOp::create(builder, loc, term.vector,
                            tableOfProduct(builder, sum, term.scalars));
    }
    mapped.push_back({value, term.negated});
  }
  sum.getResult().replaceAllUsesWith(buildSignedSum(builder, loc, mapped));
  sum->erase();
}

/// An accumulation of a loop over k into the slots [s…, k] (s from outside
/// the loop) and the map its value is.
struct SlotMap {
  AccumulateOp accumulate;
  IndexMap map;
};

/// A loop over one index k (no predicate, a plain dim) whose body adds
/// v[k] a(k) r into slots [s…, k], r not varying with k: each as a map.
std::optional<SmallVector<SlotMap>> matchLoop(ForeachOp loop) {
  if (loop.hasPredicate() || loop.getSizes().size() != 1 ||
      !hasPlainDims(loop.getSizes()))
    return std::nullopt;
  Block &body = loop.getBody().front();
  Value index = body.getArgument(0);
  SmallVector<SlotMap> slots;
  for (Operation &op : body) {
    auto accumulate = dyn_cast<AccumulateOp>(op);
    if (!accumulate) {
      if (op.getNumRegions() != 0 ||
          !(isMemoryEffectFree(&op) || isa<ReadOp>(op)))
        return std::nullopt;
      continue;
    }
    OperandRange indices = accumulate.getIndices();
    if (indices.empty() || indices.back() != index ||
        !accumulate.getMap().isIdentity() ||
        llvm::any_of(indices.drop_back(),
                     [&](Value slot) { return !isDefinedOutside(slot, loop); }))
      return std::nullopt;
    SlotMap slot{accumulate, {}};
    if (!addTerms(accumulate.getValue(), loop, /*fixedRows=*/true, slot.map))
      return std::nullopt;
    slots.push_back(std::move(slot));
  }
  if (slots.empty())
    return std::nullopt;
  return slots;
}

/// Replaces the loop by accumulations of its maps, Σ_t (v ⊙ A_t) ⊗ r_t
/// into the slots [s…] (v ⊙ A_t where r_t is a scalar), where each has
/// the slots' type; false, building nothing, otherwise.
bool writeLoopAsMaps(ForeachOp loop, ArrayRef<SlotMap> slots) {
  auto model = loop->getParentOfType<ModelOp>();
  Block &body = loop.getBody().front();
  for (SlotMap slot : slots) {
    auto tensor = dyn_cast_or_null<TensorOp>(
        model.lookupSymbol(slot.accumulate.getTensor()));
    if (!tensor)
      return false;
    size_t leading = slot.accumulate.getIndices().size() - 1;
    ArrayRef<StringAttr> slotShape =
        tensor.getArrayType().getShape().drop_front(leading);
    for (const IndexTerm &term : slot.map.terms) {
      SmallVector<StringAttr> shape = {
          cast<ArrayType>(term.vector.getType()).getShape()[0]};
      if (term.row)
        llvm::append_range(shape,
                           cast<ArrayType>(term.row.getType()).getShape());
      if (!llvm::equal(shape, slotShape))
        return false;
    }
  }
  OpBuilder builder(loop);
  Location loc = loop.getLoc();
  for (SlotMap slot : slots) {
    SmallVector<SignedTerm> mapped;
    for (const IndexTerm &term : slot.map.terms) {
      Value scaled = scaledVector(builder, loop, term);
      if (term.row) {
        llvm::SetVector<Operation *> rowSlice;
        addToSlice(term.row, body, rowSlice);
        IRMapping outside;
        cloneSlice(body, rowSlice, builder, outside);
        scaled = OuterOp::create(builder, loc, scaled,
                                 outside.lookupOrDefault(term.row));
      }
      mapped.push_back({scaled, term.negated});
    }
    SmallVector<Value> indices(slot.accumulate.getIndices().drop_back());
    AccumulateOp::create(builder, slot.accumulate.getLoc(),
                         buildSignedSum(builder, loc, mapped),
                         slot.accumulate.getTensorAttr(),
                         AffineMapAttr::get(AffineMap::getMultiDimIdentityMap(
                             indices.size(), builder.getContext())),
                         indices);
  }
  loop.erase();
  return true;
}

} // namespace

void mlir::energy::writeIndexMaps(ModelOp model) {
  SmallVector<Operation *> domains;
  model.walk<WalkOrder::PostOrder>([&](Operation *op) {
    if (isa<ReduceOp, ForeachOp>(op) &&
        !op->getParentOfType<SoftmaxContractOp>() &&
        !op->getParentOfType<LetOp>())
      domains.push_back(op);
  });
  for (Operation *domain : domains) {
    if (auto sum = dyn_cast<ReduceOp>(domain)) {
      std::optional<IndexMap> map = matchSum(sum);
      if (map && mapsInvariantAround(sum, *map))
        writeSumAsMaps(sum, *map);
      continue;
    }
    auto loop = cast<ForeachOp>(domain);
    std::optional<SmallVector<SlotMap>> slots = matchLoop(loop);
    if (slots && llvm::all_of(*slots, [&](const SlotMap &slot) {
          return mapsInvariantAround(loop, slot.map);
        }))
      (void)writeLoopAsMaps(loop, *slots);
  }
}
