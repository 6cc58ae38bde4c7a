//===- ContractForms.cpp - What a softmax contraction computes ------------===//
//
// The queries passes and backends make of a softmax contraction's regions:
// its predicate as linear constraints, its bilinear and quadratic operands,
// whether it may read another's scores, and whether cuDNN's fused attention
// computes it.
//
//===----------------------------------------------------------------------===//

#include "OpSyntax.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SetVector.h"

#include <functional>

using namespace mlir;
using namespace mlir::energy;

//===----------------------------------------------------------------------===//
// SoftmaxContractOp: the queries backends make
//===----------------------------------------------------------------------===//

DimLinear DimLinear::ofSize(DimExprAttr size) {
  DimLinear result;
  result.sizeTerms.push_back({size, 1});
  return result;
}

void DimLinear::add(const DimLinear &other, int64_t factor) {
  constant += factor * other.constant;
  for (const auto &[size, coefficient] : other.sizeTerms) {
    auto *found = llvm::find_if(sizeTerms, [&, size = size](const auto &term) {
      return term.first == size;
    });
    if (found == sizeTerms.end())
      sizeTerms.push_back({size, factor * coefficient});
    else
      found->second += factor * coefficient;
  }
  llvm::erase_if(sizeTerms, [](const auto &term) { return term.second == 0; });
  llvm::sort(sizeTerms, [](const auto &a, const auto &b) {
    return dimExprText(a.first) < dimExprText(b.first);
  });
}

std::optional<DimLinear> DimLinear::times(const DimLinear &other) const {
  if (!isConstant() && !other.isConstant())
    return std::nullopt;
  const DimLinear &scaled = isConstant() ? other : *this;
  DimLinear result;
  result.add(scaled, isConstant() ? constant : other.constant);
  return result;
}

std::optional<LinearIndex> mlir::energy::linearIndexOf(Value value,
                                                       Block &block) {
  LinearIndex result;
  result.coefficients.assign(block.getNumArguments(), DimLinear());
  if (auto argument = dyn_cast<BlockArgument>(value)) {
    if (argument.getOwner() != &block)
      return std::nullopt;
    result.coefficients[argument.getArgNumber()] = DimLinear(1);
    return result;
  }
  APInt constant;
  if (matchPattern(value, m_ConstantInt(&constant))) {
    result.constant = DimLinear(constant.getSExtValue());
    return result;
  }
  if (auto size = value.getDefiningOp<SizeOp>()) {
    result.constant = DimLinear::ofSize(size.getSize());
    return result;
  }
  Operation *op = value.getDefiningOp();
  if (!op || op->getNumOperands() != 2)
    return std::nullopt;
  std::optional<LinearIndex> lhs = linearIndexOf(op->getOperand(0), block);
  std::optional<LinearIndex> rhs = linearIndexOf(op->getOperand(1), block);
  if (!lhs || !rhs)
    return std::nullopt;
  if (isa<arith::AddIOp, arith::SubIOp>(op)) {
    lhs->add(*rhs, isa<arith::AddIOp>(op) ? 1 : -1);
    return lhs;
  }
  if (isa<arith::MulIOp>(op)) {
    if (!lhs->readsIndices())
      return rhs->times(lhs->constant);
    if (!rhs->readsIndices())
      return lhs->times(rhs->constant);
  }
  return std::nullopt;
}

std::optional<LinearIndex> mlir::energy::linearIndexOfExpr(AffineExpr expr,
                                                           ValueRange operands,
                                                           unsigned numDims,
                                                           Block &block) {
  if (auto dim = dyn_cast<AffineDimExpr>(expr))
    return linearIndexOf(operands[dim.getPosition()], block);
  if (auto symbol = dyn_cast<AffineSymbolExpr>(expr))
    return linearIndexOf(operands[numDims + symbol.getPosition()], block);
  if (auto constant = dyn_cast<AffineConstantExpr>(expr)) {
    LinearIndex result;
    result.coefficients.assign(block.getNumArguments(), DimLinear());
    result.constant = DimLinear(constant.getValue());
    return result;
  }
  auto binary = dyn_cast<AffineBinaryOpExpr>(expr);
  if (!binary || (expr.getKind() != AffineExprKind::Add &&
                  expr.getKind() != AffineExprKind::Mul))
    return std::nullopt;
  std::optional<LinearIndex> lhs =
      linearIndexOfExpr(binary.getLHS(), operands, numDims, block);
  std::optional<LinearIndex> rhs =
      linearIndexOfExpr(binary.getRHS(), operands, numDims, block);
  if (!lhs || !rhs)
    return std::nullopt;
  if (expr.getKind() == AffineExprKind::Add) {
    lhs->add(*rhs, 1);
    return lhs;
  }
  if (!lhs->readsIndices())
    return rhs->times(lhs->constant);
  if (!rhs->readsIndices())
    return lhs->times(rhs->constant);
  return std::nullopt;
}

namespace {
/// Appends the constraints an i1 value of the predicate says hold.
bool appendConstraints(Value condition, Block &block, unsigned rowPosition,
                       SmallVectorImpl<LinearConstraint> &constraints) {
  if (matchPattern(condition, m_One()))
    return true;
  Operation *op = condition.getDefiningOp();
  if (auto both = dyn_cast_or_null<arith::AndIOp>(op))
    return appendConstraints(both.getLhs(), block, rowPosition, constraints) &&
           appendConstraints(both.getRhs(), block, rowPosition, constraints);
  auto compare = dyn_cast_or_null<arith::CmpIOp>(op);
  if (!compare)
    return false;
  std::optional<LinearIndex> lhs = linearIndexOf(compare.getLhs(), block);
  std::optional<LinearIndex> rhs = linearIndexOf(compare.getRhs(), block);
  if (!lhs || !rhs)
    return false;
  // difference = lhs − rhs, over (batch..., row, col).
  lhs->add(*rhs, -1);
  unsigned colPosition = rowPosition + 1;
  LinearConstraint difference;
  for (auto [i, coefficient] : llvm::enumerate(lhs->coefficients)) {
    if (i == rowPosition)
      difference.rowCoefficient = coefficient;
    else if (i == colPosition)
      difference.colCoefficient = coefficient;
    else if (!coefficient.isZero())
      return false; // reads a batch index
  }
  difference.offset = lhs->constant;
  auto negated = [](LinearConstraint c) {
    for (DimLinear *part : {&c.rowCoefficient, &c.colCoefficient, &c.offset})
      *part = *part->times(DimLinear(-1));
    return c;
  };
  auto minusOne = [](LinearConstraint c) {
    c.offset.add(DimLinear(-1));
    return c;
  };
  switch (compare.getPredicate()) {
  case arith::CmpIPredicate::sge: // d ≥ 0
    constraints.push_back(difference);
    return true;
  case arith::CmpIPredicate::sgt: // d − 1 ≥ 0
    constraints.push_back(minusOne(difference));
    return true;
  case arith::CmpIPredicate::sle: // −d ≥ 0
    constraints.push_back(negated(difference));
    return true;
  case arith::CmpIPredicate::slt: // −d − 1 ≥ 0
    constraints.push_back(minusOne(negated(difference)));
    return true;
  case arith::CmpIPredicate::eq:
    constraints.push_back(difference);
    constraints.push_back(negated(difference));
    return true;
  case arith::CmpIPredicate::ne:
    difference.notEqual = true;
    constraints.push_back(difference);
    return true;
  default:
    return false;
  }
}

/// Whether `value` is `extract %table[indices]` of a table computed outside
/// `op` at exactly `indices` (block arguments), returning the table.
Value tableRowAt(Value value, Operation *op, ArrayRef<BlockArgument> indices) {
  auto extract = value.getDefiningOp<ExtractOp>();
  if (!extract ||
      op->isAncestor(extract.getSource().getParentRegion()->getParentOp()) ||
      !extract.getMap().isIdentity() ||
      extract.getIndices().size() != indices.size())
    return Value();
  for (auto [index, expected] : llvm::zip(extract.getIndices(), indices))
    if (index != expected)
      return Value();
  return extract.getSource();
}
/// Whether `value` is `extract %table[b₁, …, b_k, u]` of a scalar table
/// computed outside `op`, at exactly its batch row indices b (the first
/// `rowCount` − 1 arguments of `block`) and an index u linear in the last
/// row index and the column alone: fills the form's pair bias.
bool matchPairBias(Value value, Operation *op, Block &block, unsigned rowCount,
                   BilinearContract &form) {
  auto extract = value.getDefiningOp<ExtractOp>();
  if (!extract || !cast<ArrayType>(value.getType()).isScalar() ||
      op->isAncestor(extract.getSource().getParentRegion()->getParentOp()))
    return false;
  AffineMap map = extract.getMap();
  if (map.getNumResults() != rowCount ||
      cast<ArrayType>(extract.getSource().getType()).getRank() != rowCount)
    return false;
  SmallVector<LinearIndex> indices;
  for (AffineExpr result : map.getResults()) {
    std::optional<LinearIndex> index = linearIndexOfExpr(
        result, extract.getIndices(), map.getNumDims(), block);
    if (!index)
      return false;
    indices.push_back(*index);
  }
  for (unsigned k = 0; k + 1 < rowCount; ++k) {
    LinearIndex batchIndex;
    batchIndex.coefficients.assign(block.getNumArguments(), DimLinear());
    batchIndex.coefficients[k] = DimLinear(1);
    if (!llvm::equal(indices[k].coefficients, batchIndex.coefficients) ||
        !indices[k].constant.isZero())
      return false;
  }
  const LinearIndex &pair = indices.back();
  for (auto [k, coefficient] : llvm::enumerate(pair.coefficients))
    if (k + 1 < rowCount && !coefficient.isZero())
      return false;
  form.pairBias = extract.getSource();
  form.pairBiasRowCoefficient = pair.coefficients[rowCount - 1];
  form.pairBiasColCoefficient = pair.coefficients[rowCount];
  form.pairBiasOffset = pair.constant;
  return true;
}
} // namespace

std::optional<SmallVector<LinearConstraint>>
SoftmaxContractOp::getLinearConstraints() {
  SmallVector<LinearConstraint> constraints;
  if (!hasPredicate())
    return constraints;
  if (getNumRowIndices() == 0)
    return std::nullopt;
  Block &block = getPredicate().front();
  for (Operation &op : block.without_terminator())
    if (!isa<arith::ArithDialect>(op.getDialect()) && !isa<SizeOp>(op))
      return std::nullopt;
  Value admitted = cast<YieldOp>(block.getTerminator()).getValues()[0];
  if (!appendConstraints(admitted, block, getNumRowIndices() - 1, constraints))
    return std::nullopt;
  return constraints;
}

FailureOr<BilinearContract>
SoftmaxContractOp::matchBilinear(std::string &reason) {
  unsigned rowCount = getNumRowIndices();
  if (rowCount == 0) {
    reason = "has no row index";
    return failure();
  }
  auto indicesOf = [&](Region &region, bool column) {
    SmallVector<BlockArgument> indices;
    Block &block = region.front();
    for (unsigned i = 0; i + 1 < rowCount; ++i)
      indices.push_back(block.getArgument(i));
    indices.push_back(block.getArgument(column ? rowCount : rowCount - 1));
    return indices;
  };
  auto allRows = [&](Region &region) {
    return SmallVector<BlockArgument>(
        region.front().getArguments().take_front(rowCount));
  };
  BilinearContract form;
  Value score = getScoreValue();
  // Biases: a row of a scalar table at the row indices, or at the batch
  // indices and the column, or at the batch indices and an index linear in
  // the pair, added to the rest.
  while (auto sum = score.getDefiningOp<AddOp>()) {
    bool peeled = false;
    for (auto [bias, rest] : {std::pair(sum.getRhs(), sum.getLhs()),
                              std::pair(sum.getLhs(), sum.getRhs())}) {
      if (!cast<ArrayType>(bias.getType()).isScalar())
        break;
      if (Value table = tableRowAt(bias, *this, allRows(getScore()));
          table && !form.rowBias) {
        form.rowBias = table;
      } else if (Value table =
                     tableRowAt(bias, *this, indicesOf(getScore(), true));
                 table && !form.colBias) {
        form.colBias = table;
      } else if (form.pairBias ||
                 !matchPairBias(bias, *this, getScore().front(), rowCount,
                                form)) {
        continue;
      }
      score = rest;
      peeled = true;
      break;
    }
    if (!peeled)
      break;
  }
  // The products: a dot product of a row of a table at the row indices and
  // one at the column, times a scale computed outside or not; a sum of them.
  SmallVector<Value> addends;
  std::function<void(Value)> collectAddends = [&](Value term) {
    if (auto sum = term.getDefiningOp<AddOp>();
        sum && cast<ArrayType>(sum.getType()).isScalar()) {
      collectAddends(sum.getLhs());
      collectAddends(sum.getRhs());
      return;
    }
    addends.push_back(term);
  };
  collectAddends(score);
  Operation *self = getOperation();
  auto outside = [&](Value v) {
    return !self->isAncestor(v.getParentRegion()->getParentOp());
  };
  for (Value addend : addends) {
    ScoreProduct product;
    if (auto mul = addend.getDefiningOp<MulOp>()) {
      if (outside(mul.getLhs()) && mul.getRhs().getDefiningOp<DotOp>()) {
        product.scale = mul.getLhs();
        addend = mul.getRhs();
      } else if (outside(mul.getRhs()) && mul.getLhs().getDefiningOp<DotOp>()) {
        product.scale = mul.getRhs();
        addend = mul.getLhs();
      }
      if (product.scale &&
          !cast<ArrayType>(product.scale.getType()).isScalar()) {
        reason = "its scale is not a scalar";
        return failure();
      }
    }
    auto dot = addend.getDefiningOp<DotOp>();
    if (!dot) {
      reason = "its score is not a dot product (times a scale), or a sum of "
               "them";
      return failure();
    }
    for (bool swapped : {false, true}) {
      product.rowTable = tableRowAt(swapped ? dot.getRhs() : dot.getLhs(),
                                    *this, allRows(getScore()));
      product.colTable = tableRowAt(swapped ? dot.getLhs() : dot.getRhs(),
                                    *this, indicesOf(getScore(), true));
      if (product.rowTable && product.colTable)
        break;
    }
    if (!product.rowTable || !product.colTable) {
      reason = "its score is not a dot product of a row of a table at the "
               "row indices and a row of a table at the column";
      return failure();
    }
    if (!form.rowTable) {
      form.rowTable = product.rowTable;
      form.colTable = product.colTable;
      form.scale = product.scale;
    } else {
      form.moreProducts.push_back(product);
    }
  }
  // How a scalar of a value's region depends on the pair: as a polynomial
  // of degree at most 2 in the pair terms, with coefficients computed
  // outside (the terms and the products of two that it may weigh; neither
  // when it is computed outside or a constant), or otherwise.
  struct Dependence {
    bool other = false;
    llvm::SmallSetVector<unsigned, 4> terms;
    llvm::SmallSetVector<std::pair<unsigned, unsigned>, 4> products;
    bool invariant() const {
      return !other && terms.empty() && products.empty();
    }
  };
  auto otherwise = [] {
    Dependence result;
    result.other = true;
    return result;
  };
  // A dot product of a row of a table at the row indices and one at the
  // column: `dot`, or the sum of an element-wise product of two vectors.
  auto pairTermOf = [&](Operation *product, Region &region) -> bool {
    Value lhs, rhs;
    if (auto dot = dyn_cast<DotOp>(product)) {
      lhs = dot.getLhs();
      rhs = dot.getRhs();
    } else if (auto sum = dyn_cast<ReduceElementsOp>(product);
               sum && sum.getKind() == ElementsKind::sum) {
      auto elementwise = sum.getOperand().getDefiningOp<MulOp>();
      if (!elementwise ||
          cast<ArrayType>(sum.getOperand().getType()).getRank() != 1 ||
          elementwise.getLhs().getType() != elementwise.getRhs().getType())
        return false;
      lhs = elementwise.getLhs();
      rhs = elementwise.getRhs();
    } else {
      return false;
    }
    for (bool swapped : {false, true}) {
      Value rowTable = tableRowAt(swapped ? rhs : lhs, *this, allRows(region));
      Value colTable =
          tableRowAt(swapped ? lhs : rhs, *this, indicesOf(region, true));
      if (!rowTable || !colTable)
        continue;
      auto *known = llvm::find_if(form.pairTerms, [&](const PairTerm &term) {
        return term.rowTable == rowTable && term.colTable == colTable;
      });
      form.pairTermOfDot[product] = known - form.pairTerms.begin();
      if (known == form.pairTerms.end())
        form.pairTerms.push_back({rowTable, colTable});
      return true;
    }
    return false;
  };
  std::function<Dependence(Value, Region &)> dependence =
      [&](Value value, Region &region) -> Dependence {
    auto type = dyn_cast<ArrayType>(value.getType());
    if (!type || !type.isScalar())
      return otherwise();
    if (!getOperation()->isAncestor(value.getParentRegion()->getParentOp()))
      return Dependence();
    Operation *def = value.getDefiningOp();
    if (!def)
      return otherwise();
    if (isa<ConstantOp>(def))
      return Dependence();
    if (isa<DotOp, ReduceElementsOp>(def)) {
      if (!pairTermOf(def, region))
        return otherwise();
      Dependence term;
      term.terms.insert(form.pairTermOfDot.lookup(def));
      return term;
    }
    if (!isa<AddOp, SubOp, NegOp, MulOp, DivOp>(def))
      return otherwise();
    SmallVector<Dependence> operands;
    for (Value operand : def->getOperands()) {
      operands.push_back(dependence(operand, region));
      if (operands.back().other)
        return otherwise();
    }
    if (isa<DivOp>(def))
      return operands[1].invariant() ? operands[0] : otherwise();
    if (isa<MulOp>(def) && !operands[0].invariant() &&
        !operands[1].invariant()) {
      // A product of two affine forms: their terms (times the other's
      // constant part) and every product of a term of each.
      if (!operands[0].products.empty() || !operands[1].products.empty())
        return otherwise();
      Dependence product;
      for (unsigned a : operands[0].terms)
        for (unsigned b : operands[1].terms)
          product.products.insert({std::min(a, b), std::max(a, b)});
      product.terms = operands[0].terms;
      product.terms.insert_range(operands[1].terms);
      return product;
    }
    Dependence sum = operands[0];
    for (const Dependence &operand : ArrayRef(operands).drop_front()) {
      sum.terms.insert_range(operand.terms);
      sum.products.insert_range(operand.products);
    }
    return sum;
  };
  auto addProducts = [&](const Dependence &factor) {
    for (std::pair<unsigned, unsigned> product : factor.products)
      if (!llvm::is_contained(form.pairProducts, product))
        form.pairProducts.push_back(product);
  };
  // A value: a table's row, a factor times one, or a factor alone.
  auto matchValue = [&](Value value, Region &region,
                        ArrayRef<BlockArgument> tableIndices, Value &table,
                        Value &factor) {
    table = tableRowAt(value, *this, tableIndices);
    factor = Value();
    if (table)
      return true;
    if (auto product = value.getDefiningOp<MulOp>()) {
      for (auto [row, scalar] : {std::pair(product.getLhs(), product.getRhs()),
                                 std::pair(product.getRhs(), product.getLhs())})
        if (Value found = tableRowAt(row, *this, tableIndices)) {
          Dependence scalarDependence = dependence(scalar, region);
          if (scalarDependence.other)
            continue;
          table = found;
          factor = scalar;
          addProducts(scalarDependence);
          return true;
        }
    }
    Dependence valueDependence = dependence(value, region);
    if (valueDependence.other)
      return false;
    factor = value;
    addProducts(valueDependence);
    return true;
  };
  for (Value value : getRowValues()) {
    Value table, factor;
    if (!matchValue(value, getRowSums(), indicesOf(getRowSums(), true), table,
                    factor)) {
      reason = "a row value is not a row of a table at the column, times a "
               "factor of degree at most 2 in products of table rows at the "
               "pair";
      return failure();
    }
    form.rowValueTables.push_back(table);
    form.rowValueFactors.push_back(factor);
  }
  for (Value value : getColValues()) {
    Value table, factor;
    if (!matchValue(value, getColSums(), allRows(getColSums()), table,
                    factor)) {
      reason = "a column value is not a row of a table at the row indices, "
               "times a factor of degree at most 2 in products of table rows "
               "at the pair";
      return failure();
    }
    form.colValueTables.push_back(table);
    form.colValueFactors.push_back(factor);
  }
  if (!getLinearConstraints()) {
    reason = "its predicate is not a conjunction of linear comparisons of the "
             "row and the column";
    return failure();
  }
  return form;
}

/// Whether `a` and `b` hold the same array: one value, or two whole reads of
/// one tensor in one block with no store into it between them (as they are
/// before CSE merges them).
static bool sameArray(Value a, Value b) {
  if (a == b)
    return true;
  auto first = a.getDefiningOp<ReadOp>(), second = b.getDefiningOp<ReadOp>();
  if (!first || !second || first.getSource() != second.getSource() ||
      !first.getIndices().empty() || !second.getIndices().empty() ||
      first->getBlock() != second->getBlock())
    return false;
  if (second->isBeforeInBlock(first))
    std::swap(first, second);
  for (Operation *op = first->getNextNode(); op != second;
       op = op->getNextNode()) {
    WalkResult stores = op->walk([&](StoreOp store) {
      return store.getTensor() == first.getSource() ? WalkResult::interrupt()
                                                    : WalkResult::advance();
    });
    if (stores.wasInterrupted())
      return false;
  }
  return true;
}

FailureOr<QuadraticContract>
SoftmaxContractOp::matchQuadratic(std::string &reason) {
  auto fail = [&](const char *why) -> FailureOr<QuadraticContract> {
    reason = why;
    return failure();
  };
  if (getNumRowIndices() != 1)
    return fail("it does not have exactly one row index");
  if (hasPredicate() || getTemperature() || getGivenLse())
    return fail("it has a predicate, a temperature or a given normaliser");
  Operation *self = getOperation();
  auto outside = [&](Value v) {
    return !self->isAncestor(v.getParentRegion()->getParentOp());
  };
  QuadraticContract form;
  // Row values: scalars computed outside (Σ_c w(r, c) · v = v where the
  // row's weights sum to 1).
  for (Value value : getRowValues()) {
    if (!outside(value) || !cast<ArrayType>(value.getType()).isScalar())
      return fail("a row value is not a scalar computed outside it");
    form.rowScalars.push_back(value);
  }
  auto rankOf = [](Value v) { return cast<ArrayType>(v.getType()).getRank(); };
  // d = points[r] − means[c], in a region whose arguments are (r, c).
  auto isCentred = [&](Value value, Block &block) {
    auto difference = value.getDefiningOp<SubOp>();
    if (!difference)
      return false;
    Value points =
        tableRowAt(difference.getLhs(), self, {block.getArgument(0)});
    Value means = tableRowAt(difference.getRhs(), self, {block.getArgument(1)});
    if (!points || !means || rankOf(points) != 2 || rankOf(means) != 2)
      return false;
    if (!form.points) {
      form.points = points;
      form.means = means;
    }
    return sameArray(points, form.points) && sameArray(means, form.means);
  };

  // The score: a signed sum of one quadratic form (times a scale) and at
  // most one bias.
  Block &scoreBlock = getScore().front();
  bool failedTerm = false;
  std::function<void(Value, bool)> addTerm = [&](Value value, bool negated) {
    Operation *op = value.getDefiningOp();
    if (auto sum = dyn_cast_or_null<AddOp>(op)) {
      addTerm(sum.getLhs(), negated);
      addTerm(sum.getRhs(), negated);
    } else if (auto difference = dyn_cast_or_null<SubOp>(op)) {
      addTerm(difference.getLhs(), negated);
      addTerm(difference.getRhs(), !negated);
    } else if (auto negation = dyn_cast_or_null<NegOp>(op)) {
      addTerm(negation.getOperand(), !negated);
    } else if (auto product = dyn_cast_or_null<MulOp>(op)) {
      Value scale = product.getLhs(), quad = product.getRhs();
      if (!outside(scale))
        std::swap(scale, quad);
      if (form.scale || !outside(scale) ||
          !cast<ArrayType>(scale.getType()).isScalar() ||
          !quad.getDefiningOp<QuadOp>()) {
        failedTerm = true;
        return;
      }
      form.scale = scale;
      addTerm(quad, negated);
    } else if (auto quad = dyn_cast_or_null<QuadOp>(op)) {
      if (form.precisions || !isCentred(quad.getVector(), scoreBlock)) {
        failedTerm = true;
        return;
      }
      form.precisions =
          tableRowAt(quad.getMatrix(), self, {scoreBlock.getArgument(1)});
      form.negated = negated;
      if (!form.precisions || rankOf(form.precisions) != 3)
        failedTerm = true;
    } else if (Value bias =
                   tableRowAt(value, self, {scoreBlock.getArgument(1)})) {
      if (form.bias || negated || rankOf(bias) != 1)
        failedTerm = true;
      form.bias = bias;
    } else {
      failedTerm = true;
    }
  };
  addTerm(getScoreValue(), false);
  if (failedTerm || !form.precisions)
    return fail("its score is not bias[c] ± scale · quad(X[r] − M[c], P[c])");

  Block &valueBlock = getColSums().front();
  for (Value value : getColValues()) {
    if (auto constant = value.getDefiningOp<ConstantOp>();
        constant && constant.getValue().convertToDouble() == 1.0) {
      form.moments.push_back(QuadraticMoment::Weight);
    } else if (Value points =
                   tableRowAt(value, self, {valueBlock.getArgument(0)});
               points && sameArray(points, form.points)) {
      form.moments.push_back(QuadraticMoment::Point);
    } else if (isCentred(value, valueBlock)) {
      form.moments.push_back(QuadraticMoment::Centred);
    } else if (auto outer = value.getDefiningOp<OuterOp>();
               outer && isCentred(outer.getLhs(), valueBlock) &&
               isCentred(outer.getRhs(), valueBlock)) {
      form.moments.push_back(QuadraticMoment::CentredOuter);
    } else {
      return fail("a column value is not 1, X[r], X[r] − M[c] or the outer "
                  "product of X[r] − M[c] with itself");
    }
  }
  return form;
}

LogicalResult SoftmaxContractOp::checkFusedAttention(std::string &reason,
                                                     bool rowSideOnly) {
  if (getForm() != ContractForm::bilinear) {
    reason = "it is not bilinear";
    return failure();
  }
  FailureOr<BilinearContract> bilinear = matchBilinear(reason);
  if (failed(bilinear))
    return failure();
  if (getGivenLse())
    reason = "its normaliser is given";
  else if (!rowSideOnly && !getColValues().empty())
    reason = "it has column values";
  else if (getRowValues().empty())
    reason = "it has no row values";
  else if (!bilinear->pairTerms.empty() ||
           llvm::any_of(bilinear->rowValueFactors,
                        [](Value factor) { return factor != nullptr; }))
    reason = "a row value has a factor";
  else if (llvm::is_contained(bilinear->rowValueTables, Value()))
    reason = "a row value is not a table's row";
  else if (bilinear->rowBias || bilinear->colBias || bilinear->pairBias)
    reason = "its score has a bias";
  else if (!bilinear->moreProducts.empty())
    reason = "its score is a sum of bilinear forms";
  if (!reason.empty())
    return failure();
  if (!hasPredicate())
    return success();
  // The causal mask: column <= row, as one constraint row − col >= 0.
  std::optional<SmallVector<LinearConstraint>> constraints =
      getLinearConstraints();
  if (constraints && constraints->size() == 1) {
    const LinearConstraint &only = constraints->front();
    if (!only.notEqual && only.rowCoefficient == DimLinear(1) &&
        only.colCoefficient == DimLinear(-1) && only.offset.isZero())
      return success();
  }
  reason = "its predicate is not the causal mask (column <= row)";
  return failure();
}

std::optional<unsigned> mlir::energy::findPairTerm(ArrayRef<PairTerm> terms,
                                                   const PairTerm &term) {
  for (auto [i, other] : llvm::enumerate(terms))
    if (other.rowTable == term.rowTable && other.colTable == term.colTable)
      return i;
  return std::nullopt;
}

SoftmaxContractOp SoftmaxContractOp::getScoresSource() {
  Value given = getGivenLse();
  auto source = given ? given.getDefiningOp<SoftmaxContractOp>() : nullptr;
  if (!source || source.getLse() != given ||
      source->getBlock() != (*this)->getBlock() ||
      !source->isBeforeInBlock(*this))
    return nullptr;
  return source;
}

LogicalResult SoftmaxContractOp::checkReusableScores(std::string &reason) {
  SoftmaxContractOp source = getScoresSource();
  if (!source) {
    reason = "its normaliser is not the first result of a contraction "
             "before it in its block";
    return failure();
  }
  if (getForm() != ContractForm::bilinear ||
      source.getForm() != ContractForm::bilinear) {
    reason = "the two are not both bilinear";
    return failure();
  }
  std::string unused;
  FailureOr<BilinearContract> mine = matchBilinear(unused);
  FailureOr<BilinearContract> theirs = source.matchBilinear(unused);
  if (failed(mine) || failed(theirs)) {
    reason = "the two are not both bilinear";
    return failure();
  }
  std::optional<SmallVector<LinearConstraint>> constraints =
      getLinearConstraints();
  std::optional<SmallVector<LinearConstraint>> sourceConstraints =
      source.getLinearConstraints();
  if (getRows() != source.getRows() || getCols() != source.getCols() ||
      getTemperature() != source.getTemperature() || !constraints ||
      !sourceConstraints || !llvm::equal(*constraints, *sourceConstraints)) {
    reason = "their domains, constraints or temperatures differ";
    return failure();
  }
  if (mine->rowTable != theirs->rowTable ||
      mine->colTable != theirs->colTable || mine->scale != theirs->scale ||
      mine->rowBias != theirs->rowBias || mine->colBias != theirs->colBias ||
      mine->pairBias != theirs->pairBias ||
      mine->pairBiasRowCoefficient != theirs->pairBiasRowCoefficient ||
      mine->pairBiasColCoefficient != theirs->pairBiasColCoefficient ||
      mine->pairBiasOffset != theirs->pairBiasOffset ||
      mine->moreProducts.size() != theirs->moreProducts.size() ||
      !llvm::all_of(llvm::zip(mine->moreProducts, theirs->moreProducts),
                    [](auto pair) {
                      const auto &[x, y] = pair;
                      return x.rowTable == y.rowTable &&
                             x.colTable == y.colTable && x.scale == y.scale;
                    })) {
    reason = "their scores differ";
    return failure();
  }
  if (!llvm::all_of(mine->pairTerms, [&](const PairTerm &term) {
        return findPairTerm(theirs->pairTerms, term).has_value();
      })) {
    reason = "it weighs its sums by a pair term that the other does not";
    return failure();
  }
  return success();
}
