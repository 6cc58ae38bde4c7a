//===- ScoreTerms.cpp - A contraction's score and values as sums of terms -===//
//
// energy-plan-separate-scores: writes a generic softmax contraction's score
// as Σ c · dot(a, b) + r + k, where each a and r depend on the row indices
// only, b and k on the batch indices and the column only, and c is
// computed outside (the bilinear form, or a sum of them, with biases:
// rotary attention's q1·k1 + q2·k2), distributing sums, differences
// and products by what does not depend on the pair, and expanding
// ‖a − b‖² = ‖a‖² + ‖b‖² − 2 a·b (an RBF kernel's score); and splits its
// values that are sums into one value per summand, put together after the
// contraction, so that each is a table's row (times a factor). A copy is
// rewritten, and replaces the contraction only when it is then bilinear.
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"
#include "Slices.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// Which side of the pair a scalar depends on: neither (the batch indices
/// at most, or nothing of the contraction), the row, the column, or both.
enum Side : unsigned { kNeither = 0, kRow = 1, kColumn = 2, kBoth = 3 };

/// A product of the score: coefficient · dot(rowVector, columnVector), a
/// null coefficient 1.
struct Product {
  Value rowVector, columnVector, coefficient;
};

/// A score as Σ products + rowPart + columnPart; a null part is 0.
struct Terms {
  SmallVector<Product> products;
  Value rowPart, columnPart;
};

/// At most this many products in a score: the kernel's features are their
/// tables' rows side by side.
constexpr size_t kMaxProducts = 8;

class ScoreSeparator {
public:
  explicit ScoreSeparator(SoftmaxContractOp contract)
      : contract(contract), block(contract.getScore().front()),
        inside(contract.getContext()), outside(contract) {
    unsigned rowCount = contract.getNumRowIndices();
    rowIndex = block.getArgument(rowCount - 1);
    columnIndex = block.getArgument(rowCount);
    inside.setInsertionPoint(block.getTerminator());
  }

  /// Rewrites the score as Σ c · dot(a, b) + r + k when it has dot
  /// products of one side's vector and the other's; false, having changed
  /// nothing, otherwise.
  bool run() {
    Value score = contract.getScoreValue();
    FailureOr<Terms> terms = separate(score);
    if (failed(terms) || terms->products.empty() ||
        terms->products.size() > kMaxProducts) {
      for (Operation *op : llvm::reverse(built))
        op->erase();
      return false;
    }
    Location loc = score.getLoc();
    Value result;
    for (const Product &product : terms->products) {
      Value term =
          DotOp::create(inside, loc, product.rowVector, product.columnVector);
      if (product.coefficient)
        term = MulOp::create(inside, loc, term, product.coefficient);
      result = result ? AddOp::create(inside, loc, result, term) : term;
    }
    if (terms->rowPart)
      result = AddOp::create(inside, loc, result, terms->rowPart);
    if (terms->columnPart)
      result = AddOp::create(inside, loc, result, terms->columnPart);
    block.getTerminator()->setOperand(0, result);
    eraseDeadOps(block);
    return true;
  }

private:
  Side sideOf(Value value) {
    if (isDefinedOutside(value, contract))
      return kNeither;
    auto [known, inserted] = sides.try_emplace(value, kNeither);
    if (!inserted)
      return known->second;
    llvm::SmallPtrSet<Value, 8> indices;
    collectIndices(value, contract, indices);
    unsigned side = (indices.contains(rowIndex) ? kRow : 0) |
                    (indices.contains(columnIndex) ? kColumn : 0);
    return sides[value] = static_cast<Side>(side);
  }

  template <typename Op, typename... Operands>
  Value make(OpBuilder &builder, Location loc, Operands... operands) {
    Op op = Op::create(builder, loc, operands...);
    built.push_back(op);
    return op.getResult();
  }
  Value constant(Location loc, double value) {
    return make<ConstantOp>(outside, loc, value);
  }
  /// x + y or x − y inside (or outside, for coefficients), either null.
  Value combine(OpBuilder &builder, Location loc, Value x, Value y,
                bool subtract) {
    if (!y)
      return x;
    if (!x)
      return subtract ? make<NegOp>(builder, loc, y) : y;
    return subtract ? make<SubOp>(builder, loc, x, y)
                    : make<AddOp>(builder, loc, x, y);
  }
  /// `terms` times `factor` (neither side's); `divide`: over it.
  FailureOr<Terms> scaled(Terms terms, Value factor, Location loc,
                          bool divide) {
    auto apply = [&](OpBuilder &builder, Value x) -> Value {
      if (!x)
        return x;
      return divide ? make<DivOp>(builder, loc, x, factor)
                    : make<MulOp>(builder, loc, x, factor);
    };
    if (!terms.products.empty() && !isDefinedOutside(factor, contract))
      return failure();
    for (Product &product : terms.products)
      product.coefficient =
          product.coefficient
              ? apply(outside, product.coefficient)
              : (divide ? make<DivOp>(outside, loc, constant(loc, 1.0), factor)
                        : factor);
    terms.rowPart = apply(inside, terms.rowPart);
    terms.columnPart = apply(inside, terms.columnPart);
    return terms;
  }
  /// x ± y: the products of both, one per pair of vectors (their
  /// coefficients combined).
  FailureOr<Terms> sum(const Terms &x, const Terms &y, Location loc,
                       bool subtract) {
    Terms result;
    auto coefficientOf = [&](const Product &product) -> Value {
      return product.coefficient ? product.coefficient : constant(loc, 1.0);
    };
    for (Product product : x.products) {
      product.coefficient = coefficientOf(product);
      result.products.push_back(product);
    }
    for (const Product &product : y.products) {
      auto *same = llvm::find_if(result.products, [&](const Product &known) {
        return known.rowVector == product.rowVector &&
               known.columnVector == product.columnVector;
      });
      if (same == result.products.end()) {
        Product added = product;
        added.coefficient =
            combine(outside, loc, Value(), coefficientOf(product), subtract);
        result.products.push_back(added);
        continue;
      }
      same->coefficient = combine(outside, loc, same->coefficient,
                                  coefficientOf(product), subtract);
    }
    result.rowPart = combine(inside, loc, x.rowPart, y.rowPart, subtract);
    result.columnPart =
        combine(inside, loc, x.columnPart, y.columnPart, subtract);
    return result;
  }
  /// The dot product of `a` and `b` when one is the row's vector and the
  /// other the column's.
  FailureOr<Terms> product(Value a, Value b) {
    Side sideA = sideOf(a), sideB = sideOf(b);
    Terms terms;
    if (!(sideA & kColumn) && !(sideB & kRow))
      terms.products.push_back({a, b, Value()});
    else if (!(sideB & kColumn) && !(sideA & kRow))
      terms.products.push_back({b, a, Value()});
    else
      return failure();
    return terms;
  }

  FailureOr<Terms> separate(Value value) {
    Side side = sideOf(value);
    if (side != kBoth) {
      Terms terms;
      (side == kColumn ? terms.columnPart : terms.rowPart) = value;
      return terms;
    }
    Operation *def = value.getDefiningOp();
    if (!def)
      return failure();
    Location loc = def->getLoc();
    if (isa<AddOp, SubOp>(def)) {
      FailureOr<Terms> x = separate(def->getOperand(0));
      FailureOr<Terms> y = separate(def->getOperand(1));
      if (failed(x) || failed(y))
        return failure();
      return sum(*x, *y, loc, isa<SubOp>(def));
    }
    if (auto negation = dyn_cast<NegOp>(def)) {
      FailureOr<Terms> x = separate(negation.getOperand());
      if (failed(x))
        return failure();
      return sum(Terms(), *x, loc, /*subtract=*/true);
    }
    if (isa<MulOp, DivOp>(def)) {
      Value lhs = def->getOperand(0), rhs = def->getOperand(1);
      bool divide = isa<DivOp>(def);
      if (!divide && sideOf(lhs) == kNeither)
        std::swap(lhs, rhs);
      if (sideOf(rhs) != kNeither || !isScalar(rhs))
        return failure();
      FailureOr<Terms> x = separate(lhs);
      if (failed(x))
        return failure();
      return scaled(*x, rhs, loc, divide);
    }
    if (auto dot = dyn_cast<DotOp>(def))
      return product(dot.getLhs(), dot.getRhs());
    // ‖a ∓ b‖² = ‖a‖² + ‖b‖² ∓ 2 a·b, a one side's vector, b the other's.
    if (auto norm = dyn_cast<ReduceElementsOp>(def);
        norm && norm.getKind() == ElementsKind::sqnorm) {
      Operation *inner = norm.getOperand().getDefiningOp();
      if (!isa_and_nonnull<AddOp, SubOp>(inner) ||
          inner->getOperand(0).getType() != inner->getOperand(1).getType())
        return failure();
      Value a = inner->getOperand(0), b = inner->getOperand(1);
      FailureOr<Terms> terms = product(a, b);
      if (failed(terms))
        return failure();
      auto squared = [&](Value vector) {
        return make<ReduceElementsOp>(inside, loc, ElementsKind::sqnorm,
                                      vector);
      };
      Product &only = terms->products.front();
      only.coefficient = constant(loc, isa<SubOp>(inner) ? -2.0 : 2.0);
      terms->rowPart = squared(only.rowVector);
      terms->columnPart = squared(only.columnVector);
      return terms;
    }
    return failure();
  }

  SoftmaxContractOp contract;
  Block &block;
  Value rowIndex, columnIndex;
  OpBuilder inside, outside;
  llvm::DenseMap<Value, Side> sides;
  /// Ops made so far, erased when the score cannot be written so.
  SmallVector<Operation *> built;
};

} // namespace

bool mlir::energy::separateScore(SoftmaxContractOp contract) {
  if (contract.getNumRowIndices() == 0)
    return false;
  return ScoreSeparator(contract).run();
}

namespace {
/// One summand of a value: `term`, negated or not.
struct SignedTerm {
  Value term;
  bool negative;
};

/// The summands of `value` (an op of `block`'s) through sums, differences
/// and negations, and products and dot products of sums multiplied out
/// (the products built before the op they expand); at most `limit` of
/// them, else none.
SmallVector<SignedTerm> summandsOf(Value value, Block &block, unsigned limit) {
  bool overflow = false;
  auto sameTypeAs = [](ArrayRef<SignedTerm> terms, Type type) {
    return llvm::all_of(terms, [&](const SignedTerm &term) {
      return term.term.getType() == type;
    });
  };
  std::function<SmallVector<SignedTerm>(Value)> expand =
      [&](Value v) -> SmallVector<SignedTerm> {
    SmallVector<SignedTerm> whole = {{v, false}};
    Operation *def = v.getDefiningOp();
    if (overflow || !def || def->getBlock() != &block)
      return whole;
    if (isa<AddOp, SubOp>(def)) {
      SmallVector<SignedTerm> terms = expand(def->getOperand(0));
      for (SignedTerm term : expand(def->getOperand(1)))
        terms.push_back({term.term, term.negative != isa<SubOp>(def)});
      overflow |= terms.size() > limit;
      return terms;
    }
    if (auto negation = dyn_cast<NegOp>(def)) {
      SmallVector<SignedTerm> terms = expand(negation.getOperand());
      for (SignedTerm &term : terms)
        term.negative = !term.negative;
      return terms;
    }
    if (auto quotient = dyn_cast<DivOp>(def)) {
      SmallVector<SignedTerm> terms = expand(quotient.getLhs());
      if (terms.size() == 1 || !sameTypeAs(terms, quotient.getLhs().getType()))
        return whole;
      OpBuilder builder(def);
      for (SignedTerm &term : terms)
        term.term =
            DivOp::create(builder, def->getLoc(), term.term, quotient.getRhs());
      return terms;
    }
    if (!isa<MulOp, DotOp>(def))
      return whole;
    Value lhs = def->getOperand(0), rhs = def->getOperand(1);
    SmallVector<SignedTerm> left = expand(lhs), right = expand(rhs);
    if ((left.size() == 1 && right.size() == 1) ||
        !sameTypeAs(left, lhs.getType()) || !sameTypeAs(right, rhs.getType()))
      return whole;
    if (left.size() * right.size() > limit) {
      overflow = true;
      return whole;
    }
    OpBuilder builder(def);
    SmallVector<SignedTerm> terms;
    for (const SignedTerm &a : left)
      for (const SignedTerm &b : right) {
        Value product =
            isa<DotOp>(def)
                ? DotOp::create(builder, def->getLoc(), a.term, b.term)
                      .getResult()
                : MulOp::create(builder, def->getLoc(), a.term, b.term)
                      .getResult();
        terms.push_back({product, a.negative != b.negative});
      }
    return terms;
  };
  SmallVector<SignedTerm> terms = expand(value);
  if (overflow)
    terms.clear();
  return terms;
}

/// How an output of a contraction is rebuilt from a copy whose values are
/// split: Σ ± the copy's results `parts` + (Σ ± `positionTerms`) times the
/// result `ones` (the sum of the weights, 0 or 1), the position terms
/// computed from the side's region at the output's position.
struct SplitOutput {
  SmallVector<std::pair<unsigned, bool>> parts;
  SmallVector<SignedTerm> positionTerms;
};

/// Splits the values of `op`'s sides that are sums (summandsOf) into one
/// value per summand, the summands that depend on the output's position
/// only into one value 1, and rebuilds each split output after the
/// contraction from the sums. Returns the new contraction, or `op` when no
/// value is such a sum.
SoftmaxContractOp splitValueTerms(SoftmaxContractOp op) {
  unsigned rowCount = op.getNumRowIndices();
  if (rowCount == 0)
    return op;
  unsigned firstOutput = op.getGivenLse() ? 0 : 1;
  // Per side: each old value's new values, and the outputs to rebuild.
  struct SideValues {
    Block *block;
    /// The indices of the output's position, and those of the other
    /// side (the batch indices and the index summed over).
    SmallVector<Value> position, summedSide;
    SmallVector<Value> values;
    SmallVector<std::optional<SplitOutput>> splits;
    std::optional<unsigned> ones;
  };
  OpBuilder outside(op);
  Value one;
  bool changed = false;
  SmallVector<SideValues, 2> sides;
  for (bool rowSide : {true, false}) {
    SideValues side;
    side.block = &(rowSide ? op.getRowSums() : op.getColSums()).front();
    side.position.assign(side.block->getArguments().begin(),
                         side.block->getArguments().begin() + rowCount);
    side.summedSide = side.position;
    side.summedSide.back() = side.block->getArgument(rowCount);
    if (!rowSide)
      std::swap(side.position, side.summedSide);
    for (Value value : side.block->getTerminator()->getOperands()) {
      SmallVector<SignedTerm> terms = summandsOf(value, *side.block, 16);
      if (terms.size() < 2) {
        side.values.push_back(value);
        side.splits.push_back(std::nullopt);
        continue;
      }
      changed = true;
      SplitOutput split;
      // The summands that vary, grouped by the array they scale (a scalar
      // factor times it, or it alone), each group one value: the sum of
      // its factors times the array.
      SmallVector<std::pair<Value, SmallVector<SignedTerm>>> groups;
      for (const SignedTerm &term : terms) {
        if (dependsOnlyOn(term.term, op, side.position)) {
          split.positionTerms.push_back(term);
          continue;
        }
        Value factor, scaled = term.term;
        if (auto product = term.term.getDefiningOp<MulOp>();
            product && product->getBlock() == side.block)
          for (auto [a, b] : {std::pair(product.getLhs(), product.getRhs()),
                              std::pair(product.getRhs(), product.getLhs())})
            if (isScalar(a) && !isScalar(b)) {
              factor = a;
              scaled = b;
              break;
            }
        if (isScalar(scaled)) {
          factor = scaled;
          scaled = Value();
        }
        // Only factors that vary with the pair (through products of table
        // rows, which the bilinear form weighs its sums by) add up; one of
        // the position's alone applies after the contraction, and one of
        // the summed index alone goes into a table with its array.
        bool pairFactor = factor && !dependsOnlyOn(factor, op, side.position) &&
                          !dependsOnlyOn(factor, op, side.summedSide);
        auto *group = llvm::find_if(groups, [&](const auto &entry) {
          return pairFactor && entry.second.front().term &&
                 entry.second.size() < 16 &&
                 (entry.first == scaled ||
                  (entry.first && scaled &&
                   computeSame(entry.first, scaled, IRMapping()))) &&
                 !dependsOnlyOn(entry.second.front().term, op, side.position) &&
                 !dependsOnlyOn(entry.second.front().term, op, side.summedSide);
        });
        if (group == groups.end()) {
          groups.push_back({scaled, {}});
          group = std::prev(groups.end());
        }
        group->second.push_back({factor, term.negative});
      }
      OpBuilder inside(side.block->getTerminator());
      for (auto &[scaled, factors] : groups) {
        Value sum;
        bool negative = false;
        if (factors.size() == 1) {
          sum = factors[0].term;
          negative = factors[0].negative;
        } else {
          for (const SignedTerm &factor : factors) {
            Value term = factor.term;
            if (!term) {
              if (!one)
                one = ConstantOp::create(outside, op.getLoc(), 1.0);
              term = one;
            }
            if (!sum)
              sum = factor.negative
                        ? NegOp::create(inside, op.getLoc(), term).getResult()
                        : term;
            else if (factor.negative)
              sum = SubOp::create(inside, op.getLoc(), sum, term);
            else
              sum = AddOp::create(inside, op.getLoc(), sum, term);
          }
        }
        Value value =
            !scaled ? sum
            : !sum
                ? scaled
                : MulOp::create(inside, op.getLoc(), sum, scaled).getResult();
        split.parts.push_back({side.values.size(), negative});
        side.values.push_back(value);
      }
      side.splits.push_back(std::move(split));
    }
    if (llvm::any_of(side.splits, [](const auto &split) {
          return split && !split->positionTerms.empty();
        })) {
      if (!one)
        one = ConstantOp::create(outside, op.getLoc(), 1.0);
      side.ones = side.values.size();
      side.values.push_back(one);
    }
    sides.push_back(std::move(side));
  }
  if (!changed)
    return op;
  // The old outputs' positions among the results, before the split.
  SmallVector<unsigned> oldStart = {
      firstOutput,
      firstOutput + static_cast<unsigned>(op.getRowValues().size())};
  for (SideValues &side : sides)
    side.block->getTerminator()->setOperands(side.values);
  SoftmaxContractOp replacement = withYieldedValues(op);
  OpBuilder builder(op->getContext());
  builder.setInsertionPointAfter(replacement);
  if (!op.getGivenLse())
    op->getResult(0).replaceAllUsesWith(replacement->getResult(0));
  SmallVector<unsigned> newStart = {
      firstOutput, firstOutput + static_cast<unsigned>(sides[0].values.size())};
  for (auto [sideNumber, side] : llvm::enumerate(sides)) {
    unsigned next = 0;
    for (auto [j, split] : llvm::enumerate(side.splits)) {
      Value output = op->getResult(oldStart[sideNumber] + j);
      if (!split) {
        output.replaceAllUsesWith(
            replacement->getResult(newStart[sideNumber] + next++));
        continue;
      }
      next += split->parts.size();
      SmallVector<Attribute> sizes(replacement.getRows().begin(),
                                   replacement.getRows().end());
      if (sideNumber == 1)
        sizes.back() = replacement.getCols();
      auto table = TabulateOp::create(builder, op.getLoc(), output.getType(),
                                      builder.getArrayAttr(sizes));
      Block &body = table.getBody().emplaceBlock();
      IRMapping mapping;
      SmallVector<Value> indices;
      for (Value index : side.position) {
        indices.push_back(body.addArgument(index.getType(), index.getLoc()));
        mapping.map(index, indices.back());
      }
      OpBuilder inside = OpBuilder::atBlockEnd(&body);
      auto identity = AffineMapAttr::get(
          AffineMap::getMultiDimIdentityMap(indices.size(), op.getContext()));
      unsigned sideStart = newStart[sideNumber];
      auto resultAt = [&](unsigned number) {
        Value result = replacement->getResult(sideStart + number);
        auto type = cast<ArrayType>(result.getType());
        auto element = ArrayType::get(
            op.getContext(), type.getShape().drop_front(indices.size()));
        return ExtractOp::create(inside, op.getLoc(), element, result, identity,
                                 indices)
            .getResult();
      };
      Value total;
      auto accumulate = [&](Value term, bool negative) {
        if (!total)
          total = negative ? NegOp::create(inside, op.getLoc(), term) : term;
        else if (negative)
          total = SubOp::create(inside, op.getLoc(), total, term);
        else
          total = AddOp::create(inside, op.getLoc(), total, term);
      };
      for (auto [number, negative] : split->parts)
        accumulate(resultAt(number), negative);
      if (!split->positionTerms.empty()) {
        llvm::SetVector<Operation *> slice;
        for (const SignedTerm &term : split->positionTerms)
          addToSlice(term.term, *side.block, slice);
        cloneSlice(*side.block, slice, inside, mapping);
        Value ones = resultAt(*side.ones);
        for (const SignedTerm &term : split->positionTerms)
          accumulate(MulOp::create(inside, op.getLoc(),
                                   mapping.lookupOrDefault(term.term), ones),
                     term.negative);
      }
      YieldOp::create(inside, op.getLoc(), total);
      output.replaceAllUsesWith(table.getResult());
    }
  }
  op.erase();
  for (Region *region : {&replacement.getRowSums(), &replacement.getColSums()})
    eraseDeadOps(region->front());
  return replacement;
}
} // namespace

namespace {
/// A generic contraction whose score is a dot product of one side's vector
/// and the other's plus terms of one side each becomes the bilinear form
/// with biases, when its values are then bilinear too: a copy is
/// rewritten, and replaces it only then.
void separateToBilinear(SoftmaxContractOp contract) {
  OpBuilder builder(contract);
  Operation *before = contract->getPrevNode();
  auto copy = cast<SoftmaxContractOp>(builder.clone(*contract));
  // Follows the copy's results through the rewrites that replace them.
  auto holder = UnrealizedConversionCastOp::create(
      builder, contract.getLoc(), copy->getResultTypes(), copy->getResults());
  separateScore(copy);
  copy = factorPositionMaps(splitValueTerms(copy));
  hoistTablesOf(copy);
  eraseDeadOps(copy.getScore().front());
  if (copy.getForm() == ContractForm::bilinear) {
    for (auto [result, value] :
         llvm::zip(contract->getResults(), holder.getOperands()))
      result.replaceAllUsesWith(value);
    holder.erase();
    contract.erase();
    return;
  }
  holder.erase();
  // Everything made for the copy lies between `before` and `contract`.
  eraseBuiltBefore(contract, before);
}
} // namespace

void mlir::energy::separateScoresToBilinear(ModelOp model) {
  forEachGenericContract(model, separateToBilinear);
}
