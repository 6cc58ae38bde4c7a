//===- CombineProducts.cpp - Sums of products with a shared factor --------===//
//
// What a gradient adds into one tensor is often a sum of products that share
// a factor, up to scalars:
//   Σ_i c_i L R_i,  Σ_i c_i L_i R  (matrices, or batches of them alike:
//                                 rows times one matrix, Σ_b X[b]ᵀ A_i[b],
//                                 a head's X[h]ᵀ A_i[h])
//   Σ_i c_i R_iᵀ = (Σ_i c_i R_i)ᵀ
// whether added by whole-tensor accumulates or by loops that add, position
// by position, elements of such products (a head's parameter gradient).
// Each such sum is one product of the shared factor with Σ_i c_i A_i, an
// elementwise sum (a table over the rows for batches of rows): one product
// in place of several. The scalars c_i include those inside the factors
// (Wkᵀ Wq/√D and Wkᵀ (-Wq)/√D share Wkᵀ Wq), and the sums are built once
// for every product that needs the same one. The backward step's adjoints
// of x, Wq and Wk add 6, 4 and 4 such products; they become 2, 1 and 1.
// With `sums` (after the loops that add linear maps have joined), sums of
// one linear map of rows of different arrays, Σ_k Σ_p L(A_k[p]), are one
// sum of the map of Σ_k A_k, and sums of arrays that loops read combine
// their products alike.
//
//===----------------------------------------------------------------------===//

#include "Linearity.h"
#include "PlanKernels.h"
#include "ProductSums.h"
#include "Slices.h"

#include "energy/Transforms/Dependence.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::product_sums;

namespace {

/// What one op of a gradient's body adds into a tensor, as a whole array.
struct Addition {
  Operation *op;
  FlatSymbolRefAttr tensor;
  Value value;
};

/// The whole-array value that `loop` adds into a tensor when, at each
/// position, it adds elementwise arithmetic of whole arrays' elements at
/// that position (a head's parameter gradient, Σ of per-head products, read
/// per head): that arithmetic on the whole arrays, built ahead of the loop
/// (appended to `built`). Null, building nothing, otherwise.
std::optional<Addition> wholeAddition(ForeachOp loop, ModelOp model,
                                      SmallVectorImpl<Operation *> &built) {
  if (loop.hasPredicate())
    return std::nullopt;
  Block &body = loop.getBody().front();
  auto accumulate =
      dyn_cast_or_null<AccumulateOp>(body.empty() ? nullptr : &body.back());
  if (!accumulate ||
      !atBlockIndices(accumulate.getMap(), accumulate.getIndices(), body))
    return std::nullopt;
  auto tensor = model.lookupSymbol<TensorOp>(accumulate.getTensorAttr());
  Type rowType = accumulate.getValue().getType();
  if (!tensor || isScalar(accumulate.getValue()))
    return std::nullopt;
  auto isRow = [&](Value value) {
    return value.getType() == rowType && value.getParentBlock() == &body;
  };
  auto isOutsideScalar = [&](Value value) {
    return isScalar(value) && isDefinedOutside(value, loop);
  };
  for (Operation &op : body.without_terminator()) {
    if (&op == accumulate.getOperation())
      continue;
    bool plain =
        llvm::TypeSwitch<Operation *, bool>(&op)
            .Case([&](ExtractOp extract) {
              return atBlockIndices(extract.getMap(), extract.getIndices(),
                                    body) &&
                     isDefinedOutside(extract.getSource(), loop) &&
                     extract.getSource().getType() == tensor.getArrayType();
            })
            .Case<AddOp, SubOp>([&](Operation *sum) {
              return isRow(sum->getOperand(0)) && isRow(sum->getOperand(1));
            })
            .Case([&](NegOp neg) { return isRow(neg.getOperand()); })
            .Case([&](DivOp quotient) {
              return isRow(quotient.getLhs()) &&
                     isOutsideScalar(quotient.getRhs());
            })
            .Case([&](MulOp product) {
              return (isRow(product.getLhs()) &&
                      isOutsideScalar(product.getRhs())) ||
                     (isOutsideScalar(product.getLhs()) &&
                      isRow(product.getRhs()));
            })
            .Default(false);
    if (!plain || op.getResult(0).getType() != rowType)
      return std::nullopt;
  }
  OpBuilder builder(loop);
  IRMapping whole;
  for (Operation &op : body.without_terminator()) {
    if (&op == accumulate.getOperation())
      break;
    if (auto extract = dyn_cast<ExtractOp>(op)) {
      whole.map(extract.getResult(), extract.getSource());
      continue;
    }
    Location loc = op.getLoc();
    auto operand = [&](unsigned i) {
      return whole.lookupOrDefault(op.getOperand(i));
    };
    Operation *array =
        llvm::TypeSwitch<Operation *, Operation *>(&op)
            .Case([&](AddOp) {
              return AddOp::create(builder, loc, operand(0), operand(1));
            })
            .Case([&](SubOp) {
              return SubOp::create(builder, loc, operand(0), operand(1));
            })
            .Case(
                [&](NegOp) { return NegOp::create(builder, loc, operand(0)); })
            .Case([&](DivOp) {
              return DivOp::create(builder, loc, operand(0), operand(1));
            })
            .Case([&](MulOp) {
              return MulOp::create(builder, loc, operand(0), operand(1));
            });
    built.push_back(array);
    whole.map(op.getResult(0), array->getResult(0));
  }
  Value value = whole.lookupOrDefault(accumulate.getValue());
  if (value.getType() != tensor.getArrayType()) {
    for (Operation *op : llvm::reverse(built))
      op->erase();
    built.clear();
    return std::nullopt;
  }
  return Addition{loop, accumulate.getTensorAttr(), value};
}

/// A sum over a domain of a linear map of the rows of a whole array at the
/// domain's positions, Σ_p L(A[p]) (a scale's gradient through a row
/// normalisation, Σ_p A[p] ∘ n[p]): the reduction and its read of A.
struct RowReduction {
  ReduceOp reduce;
  ExtractOp row;
};

/// `value` as a row reduction, for each row it is one of (Σ_p A[p] ∘ n[p] is
/// one of A and one of n).
SmallVector<RowReduction> rowReductions(Value value) {
  SmallVector<RowReduction> found;
  auto reduce = value.getDefiningOp<ReduceOp>();
  if (!reduce || reduce.getKind() != ReduceKind::sum || reduce.hasPredicate() ||
      reduce.getTemperature() || reduce.getAggregation())
    return found;
  Block &body = reduce.getBody().front();
  Value element = reduce.getBodyValue();
  for (auto extract : body.getOps<ExtractOp>()) {
    if (!extract.getMap().isIdentity() ||
        !llvm::equal(extract.getIndices(), body.getArguments()) ||
        !isDefinedOutside(extract.getSource(), reduce))
      continue;
    Value row = extract.getResult();
    LinearDecomposition decomposition = decomposeLinearly(
        element, body, [&](Value value) { return !dependsOn(value, row); });
    if (decomposition.atoms.size() == 1 && decomposition.atoms.front() == row)
      found.push_back({reduce, extract});
  }
  return found;
}

/// Whether two row reductions apply the same map to their rows.
bool sameMap(RowReduction a, RowReduction b) {
  if (a.reduce.getType() != b.reduce.getType() ||
      a.reduce.getSizes() != b.reduce.getSizes() ||
      a.row.getSource().getType() != b.row.getSource().getType())
    return false;
  IRMapping mapping;
  mapping.map(a.reduce.getBody().front().getArguments(),
              b.reduce.getBody().front().getArguments());
  mapping.map(a.row.getResult(), b.row.getResult());
  return computeSame(a.reduce.getBodyValue(), b.reduce.getBodyValue(), mapping);
}

/// Replaces the terms that are sums of one map of rows of different arrays,
/// Σ_i c_i Σ_p L(A_i[p]), by one, Σ_p L(S[p]) with S = Σ_i c_i A_i (whose
/// products `sums` combines), built at the builder's point. Whether it did.
bool combineReductions(SmallVectorImpl<Term> &terms, SumBuilder &sums,
                       OpBuilder &builder) {
  bool changed = false;
  for (size_t i = 0; i < terms.size(); ++i) {
    for (RowReduction first : rowReductions(terms[i].value)) {
      SmallVector<size_t> group{i};
      SmallVector<Term> rows;
      expand(first.row.getSource(), terms[i].coefficient, rows);
      for (size_t j = i + 1; j < terms.size(); ++j)
        for (RowReduction other : rowReductions(terms[j].value))
          if (sameMap(first, other)) {
            group.push_back(j);
            expand(other.row.getSource(), terms[j].coefficient, rows);
            break;
          }
      if (group.size() < 2)
        continue;
      Value total = sums.sum(rows, first.row.getSource().getType());
      IRMapping mapping;
      Operation *reduce = builder.clone(*first.reduce, mapping);
      mapping.lookup(first.row.getResult())
          .getDefiningOp<ExtractOp>()
          .getSourceMutable()
          .assign(total);
      for (size_t j : llvm::reverse(group))
        terms.erase(terms.begin() + j);
      terms.insert(terms.begin() + i, {Coefficient(), reduce->getResult(0)});
      changed = true;
      break;
    }
  }
  return changed;
}

/// Erases what computed `values` in `block` that nothing reads any more.
void eraseUnread(ArrayRef<Value> values, Block &block) {
  llvm::SetVector<Operation *> candidates;
  auto visit = [&](Value value) {
    if (Operation *op = value.getDefiningOp(); op && op->getBlock() == &block)
      candidates.insert(op);
  };
  for (Value value : values)
    visit(value);
  // Users before what they use: an op is dead once every later one that
  // read it is gone.
  for (size_t i = 0; i < candidates.size(); ++i)
    for (Value operand : candidates[i]->getOperands())
      visit(operand);
  SmallVector<Operation *> ordered(candidates.begin(), candidates.end());
  llvm::sort(ordered,
             [](Operation *a, Operation *b) { return b->isBeforeInBlock(a); });
  for (Operation *op : ordered)
    if (isOpTriviallyDead(op))
      op->erase();
}

/// Sums of whole arrays that nothing adds into a tensor (the rows a loop
/// applies a row normalisation's backward to), whose products share
/// factors and are read by the sum alone: one product per shared factor.
void combineSummedProducts(Block &block, SumBuilder &sums) {
  SmallVector<Operation *> roots;
  for (Operation &op : block) {
    if (!isa<AddOp, SubOp>(op) || op.use_empty() || isScalar(op.getResult(0)) ||
        cast<ArrayType>(op.getResult(0).getType()).getRank() < 2)
      continue;
    Type type = op.getResult(0).getType();
    if (llvm::any_of(op.getUsers(), [&](Operation *user) {
          return isa<AccumulateOp>(user) ||
                 (isa<AddOp, SubOp>(user) &&
                  user->getResult(0).getType() == type);
        }))
      continue;
    roots.push_back(&op);
  }
  for (Operation *root : roots) {
    SmallVector<Term> terms;
    expand(root->getResult(0), Coefficient(), terms);
    Type type = root->getResult(0).getType();
    // The same sum built already (for a sum of one map of these rows), or
    // products to combine that only this sum reads: they are then
    // computed no more.
    if (!sums.built(terms, type)) {
      Shared form;
      SmallVector<size_t> group = largestGroup(terms, form);
      if (group.size() < 2 || llvm::any_of(group, [&](size_t i) {
            return !terms[i].value.hasOneUse();
          }))
        continue;
    }
    Value total = sums.sum(terms, type);
    if (total == root->getResult(0))
      continue;
    root->getResult(0).replaceAllUsesWith(total);
    eraseUnread(root->getResult(0), block);
  }
}

/// Rewrites what `block` adds into each tensor, with whole-tensor
/// accumulates or with loops that add whole arrays' elements position by
/// position, as sums of combined products, at the last of them, when some
/// products combine.
void combineAccumulatedProducts(Block &block, bool withSums) {
  SmallVector<Addition> additions;
  SmallVector<Operation *> built;
  auto model = block.getParentOp()->getParentOfType<ModelOp>();
  for (Operation &op : block) {
    if (auto accumulate = dyn_cast<AccumulateOp>(op)) {
      auto tensor = model.lookupSymbol<TensorOp>(accumulate.getTensorAttr());
      if (accumulate.getIndices().empty() && tensor &&
          tensor.getArrayType() == accumulate.getValue().getType() &&
          !isScalar(accumulate.getValue()))
        additions.push_back(
            {accumulate, accumulate.getTensorAttr(), accumulate.getValue()});
    } else if (auto loop = dyn_cast<ForeachOp>(op)) {
      SmallVector<Operation *> loopBuilt;
      if (auto addition = wholeAddition(loop, model, loopBuilt)) {
        additions.push_back(*addition);
        llvm::append_range(built, loopBuilt);
      }
    }
  }
  // The terms added into each tensor, in the order of their first add.
  SmallVector<std::pair<FlatSymbolRefAttr, SmallVector<Term>>> targets;
  for (const Addition &addition : additions) {
    auto *target = llvm::find_if(
        targets, [&](auto &entry) { return entry.first == addition.tensor; });
    if (target == targets.end()) {
      targets.push_back({addition.tensor, {}});
      target = &targets.back();
    }
    expand(addition.value, Coefficient(), target->second);
  }
  SmallVector<std::pair<FlatSymbolRefAttr, SmallVector<Term>>> rewritten;
  OpBuilder builder(&block, block.begin());
  SumBuilder sums(builder, block, /*early=*/withSums);
  if (additions.size() >= 2) {
    builder.setInsertionPoint(additions.back().op);
    for (auto &[tensor, terms] : targets) {
      bool combined = withSums && combineReductions(terms, sums, builder);
      SmallVector<Term> remaining = sums.combine(terms, combined);
      if (combined)
        rewritten.push_back({tensor, remaining});
    }
    MLIRContext *context = block.getParentOp()->getContext();
    for (auto &[tensor, terms] : rewritten) {
      for (const Term &term : terms) {
        Location loc = term.value.getLoc();
        Value value = term.coefficient.scale(builder, loc, term.value);
        auto accumulate = AccumulateOp::create(
            builder, loc, value, tensor,
            AffineMapAttr::get(AffineMap::get(0, 0, {}, context)),
            ValueRange());
        // Right after the product, which the backends then compute into the
        // tensor.
        if (Operation *def = value.getDefiningOp();
            def && def->getBlock() == &block && value.hasOneUse())
          accumulate->moveAfter(def);
      }
    }
  }
  SmallVector<Value> replaced;
  for (const Addition &addition : additions)
    if (llvm::any_of(rewritten, [&](auto &entry) {
          return entry.first == addition.tensor;
        })) {
      if (isa<AccumulateOp>(addition.op)) {
        replaced.push_back(addition.value);
      } else {
        llvm::SetVector<Value> read;
        getUsedValuesDefinedAbove(addition.op->getRegions(), read);
        llvm::append_range(replaced, read);
      }
      addition.op->erase();
    }
  // What was built for loops whose tensor kept its additions.
  for (Operation *op : llvm::reverse(built))
    if (op->use_empty())
      op->erase();
  eraseUnread(replaced, block);
  if (withSums)
    combineSummedProducts(block, sums);
}

} // namespace

void mlir::energy::combineProducts(ModelOp model, bool sums) {
  model.walk([&](GradientOp gradient) {
    combineAccumulatedProducts(gradient.getBody().front(), sums);
  });
}
