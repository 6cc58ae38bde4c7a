//===- PairBiasTables.cpp - A score's bias per pair as a table ------------===//
//
// A softmax contraction whose score adds an element of a tensor at an index
// linear in the pair of positions (T5's bias[h, i − j + N − 1], one learned
// number per head and relative offset) is bilinear but for that term. The
// element is read instead from a table over the contraction's batch
// indices and that one index, [batch rows, L], which the kernels read at
// a·r + b·c + o (the pair bias of SoftmaxContract.h): only where every pair
// the contraction admits provably indexes within the table, and only when
// the contraction is then bilinear; otherwise nothing changes.
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"
#include "Slices.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallBitVector.h"

#include <map>
#include <string>

using namespace mlir;
using namespace mlir::energy;

namespace {

/// A linear form over the model's base dims (those not derived from
/// others).
struct BaseLinear {
  int64_t constant = 0;
  std::map<std::string, int64_t> terms;

  void add(const BaseLinear &other, int64_t factor) {
    constant += factor * other.constant;
    for (const auto &[name, coefficient] : other.terms)
      if ((terms[name] += factor * coefficient) == 0)
        terms.erase(name);
  }
  /// Whether it is at least 0 at every value of the dims from 1 up.
  bool nonNegative() const {
    int64_t least = constant;
    for (const auto &[name, coefficient] : terms) {
      if (coefficient < 0)
        return false;
      least += coefficient;
    }
    return least >= 0;
  }
};

/// Coefficients beyond this are not worth proving anything about (and
/// their products could overflow).
constexpr int64_t kLargestCoefficient = int64_t(1) << 30;

class DimExpander {
public:
  explicit DimExpander(ModelOp model) : model(model) {}

  /// `name` over the base dims, through the definitions of derived dims.
  std::optional<BaseLinear> ofDim(StringRef name, unsigned depth = 0) {
    auto dim = dyn_cast_or_null<DimOp>(model.lookupSymbol(name));
    if (!dim || depth > 16)
      return std::nullopt;
    if (std::optional<DimExprAttr> derived = dim.getDerived())
      return ofExpr(derived->getExpr(), derived->getNames(), depth + 1);
    BaseLinear result;
    result.terms[name.str()] = 1;
    return result;
  }

  std::optional<BaseLinear> ofSize(DimExprAttr size) {
    return ofExpr(size.getExpr(), size.getNames(), 0);
  }

  std::optional<BaseLinear> ofLinear(const DimLinear &value) {
    BaseLinear result;
    result.constant = value.constant;
    for (const auto &[size, coefficient] : value.sizeTerms) {
      std::optional<BaseLinear> term = ofSize(size);
      if (!term || std::abs(coefficient) > kLargestCoefficient)
        return std::nullopt;
      result.add(*term, coefficient);
    }
    return result;
  }

private:
  std::optional<BaseLinear> ofExpr(AffineExpr expr, ArrayRef<StringAttr> names,
                                   unsigned depth) {
    if (auto constant = dyn_cast<AffineConstantExpr>(expr)) {
      BaseLinear result;
      result.constant = constant.getValue();
      return result;
    }
    if (auto symbol = dyn_cast<AffineSymbolExpr>(expr))
      return symbol.getPosition() < names.size()
                 ? ofDim(names[symbol.getPosition()], depth)
                 : std::nullopt;
    auto binary = dyn_cast<AffineBinaryOpExpr>(expr);
    if (!binary || (expr.getKind() != AffineExprKind::Add &&
                    expr.getKind() != AffineExprKind::Mul))
      return std::nullopt;
    std::optional<BaseLinear> lhs = ofExpr(binary.getLHS(), names, depth);
    std::optional<BaseLinear> rhs = ofExpr(binary.getRHS(), names, depth);
    if (!lhs || !rhs)
      return std::nullopt;
    if (expr.getKind() == AffineExprKind::Add) {
      lhs->add(*rhs, 1);
      return lhs;
    }
    const BaseLinear *factor = lhs->terms.empty()   ? &*lhs
                               : rhs->terms.empty() ? &*rhs
                                                    : nullptr;
    if (!factor || std::abs(factor->constant) > kLargestCoefficient)
      return std::nullopt;
    BaseLinear result;
    result.add(factor == &*lhs ? *rhs : *lhs, factor->constant);
    return result;
  }

  ModelOp model;
};

/// A scalar term of a score that reads an element of `source` (a tensor,
/// or a value computed outside the contraction) at `map` over `operands`,
/// whose result `position` alone reads the pair, at `pairIndex`.
struct PairRead {
  Operation *op;
  AffineMap map;
  SmallVector<Value> operands;
  unsigned position;
  LinearIndex pairIndex;
  StringAttr axis; ///< the size of the source's axis `position`
};

/// The pair read among `contract`'s score terms, if any: one index linear
/// in the last row index and the column alone, every other index of the
/// batch indices or computed outside.
std::optional<PairRead> findPairRead(SoftmaxContractOp contract) {
  Block &block = contract.getScore().front();
  const unsigned rowCount = contract.getNumRowIndices();
  auto model = contract->getParentOfType<ModelOp>();
  auto readsPair = [&](const LinearIndex &index) {
    return !index.coefficients[rowCount - 1].isZero() ||
           !index.coefficients[rowCount].isZero();
  };
  for (Value term : scoreTerms(contract)) {
    Operation *op = term.getDefiningOp();
    if (!op || op->getBlock() != &block ||
        !cast<ArrayType>(term.getType()).isScalar())
      continue;
    PairRead read{op, AffineMap(), {}, 0, {}, StringAttr()};
    ArrayType sourceType;
    if (auto tensorRead = dyn_cast<ReadOp>(op)) {
      auto tensor = dyn_cast_or_null<TensorOp>(
          model.lookupSymbol(tensorRead.getSourceAttr()));
      if (!tensor)
        continue;
      sourceType = tensor.getArrayType();
      read.map = tensorRead.getMap();
      read.operands = llvm::to_vector(tensorRead.getIndices());
    } else if (auto extract = dyn_cast<ExtractOp>(op);
               extract && isDefinedOutside(extract.getSource(), contract)) {
      sourceType = cast<ArrayType>(extract.getSource().getType());
      read.map = extract.getMap();
      read.operands = llvm::to_vector(extract.getIndices());
    } else {
      continue;
    }
    if (read.map.getNumResults() != sourceType.getRank())
      continue;
    SmallVector<LinearIndex> indices;
    for (AffineExpr result : read.map.getResults()) {
      std::optional<LinearIndex> index = linearIndexOfExpr(
          result, read.operands, read.map.getNumDims(), block);
      if (!index)
        break;
      indices.push_back(*index);
    }
    if (indices.size() != read.map.getNumResults() ||
        llvm::count_if(indices, readsPair) != 1)
      continue;
    read.position = llvm::find_if(indices, readsPair) - indices.begin();
    read.pairIndex = indices[read.position];
    if (llvm::any_of(ArrayRef<DimLinear>(read.pairIndex.coefficients)
                         .take_front(rowCount - 1),
                     [](const DimLinear &c) { return !c.isZero(); }))
      continue;
    // The other indices' operands are batch indices or computed outside.
    bool available = true;
    for (auto [k, result] : llvm::enumerate(read.map.getResults())) {
      if (k == read.position)
        continue;
      for (auto [i, operand] : llvm::enumerate(read.operands)) {
        bool used = i < read.map.getNumDims()
                        ? result.isFunctionOfDim(i)
                        : result.isFunctionOfSymbol(i - read.map.getNumDims());
        auto argument = dyn_cast<BlockArgument>(operand);
        bool batch = argument && argument.getOwner() == &block &&
                     argument.getArgNumber() + 1 < rowCount;
        if (used && !batch && !isDefinedOutside(operand, contract))
          available = false;
      }
    }
    read.axis = sourceType.getShape()[read.position];
    if (available && isa_and_nonnull<DimOp>(model.lookupSymbol(read.axis)))
      return read;
  }
  return std::nullopt;
}

/// A form a·r + b·c + o over the pair (r the last row index, c the column)
/// with a, b and o linear in dims.
struct PairForm {
  DimLinear row, col, constant;

  PairForm minus(const LinearConstraint &constraint) const {
    PairForm result = *this;
    result.row.add(constraint.rowCoefficient, -1);
    result.col.add(constraint.colCoefficient, -1);
    result.constant.add(constraint.offset, -1);
    return result;
  }
};

/// Whether `form` is at least 0 at every r < Nr and c < Nc, the dims from
/// 1 up: at the four corners, a linear form's extremes.
bool nonNegativeOverRectangle(const PairForm &form, DimExprAttr rows,
                              DimExprAttr cols, DimExpander &expand) {
  auto last = [](DimExprAttr size) {
    DimLinear value = DimLinear::ofSize(size);
    value.add(DimLinear(-1));
    return value;
  };
  for (const DimLinear &r : {DimLinear(0), last(rows)})
    for (const DimLinear &c : {DimLinear(0), last(cols)}) {
      std::optional<DimLinear> alongRows = form.row.times(r);
      std::optional<DimLinear> alongCols = form.col.times(c);
      if (!alongRows || !alongCols)
        return false;
      DimLinear value = form.constant;
      value.add(*alongRows);
      value.add(*alongCols);
      std::optional<BaseLinear> expanded = expand.ofLinear(value);
      if (!expanded || !expanded->nonNegative())
        return false;
    }
  return true;
}

/// Whether the pair index a·r + b·c + o lies in [0, L) at every pair the
/// contraction admits: each bound holds over the whole rectangle of rows
/// and columns, or holds wherever one of the predicate's constraints g ≥ 0
/// does, being g plus what is at least 0 over the rectangle (r − c ≥ 0 of
/// the causal mask bounds r − c from below).
bool provablyWithin(SoftmaxContractOp contract, const PairRead &read) {
  DimExpander expand(contract->getParentOfType<ModelOp>());
  const unsigned rowCount = contract.getNumRowIndices();
  std::optional<SmallVector<LinearConstraint>> constraints =
      contract.getLinearConstraints();
  if (!constraints)
    return false;
  auto rows = cast<DimExprAttr>(contract.getRows().getValue().back());
  DimExprAttr cols = contract.getCols();
  PairForm low{read.pairIndex.coefficients[rowCount - 1],
               read.pairIndex.coefficients[rowCount], read.pairIndex.constant};
  // L − 1 − index.
  PairForm high;
  high.row.add(low.row, -1);
  high.col.add(low.col, -1);
  high.constant = DimLinear::ofSize(
      DimExprAttr::getDim(contract.getContext(), read.axis.getValue()));
  high.constant.add(DimLinear(-1));
  high.constant.add(low.constant, -1);
  auto holds = [&](const PairForm &bound) {
    if (nonNegativeOverRectangle(bound, rows, cols, expand))
      return true;
    return llvm::any_of(*constraints, [&](const LinearConstraint &c) {
      return !c.notEqual &&
             nonNegativeOverRectangle(bound.minus(c), rows, cols, expand);
    });
  };
  return holds(low) && holds(high);
}

/// `map` without the dims and symbols its results do not use, and
/// `operands` without theirs.
AffineMap compressOperands(AffineMap map, SmallVectorImpl<Value> &operands) {
  llvm::SmallBitVector unusedDims(map.getNumDims()),
      unusedSymbols(map.getNumSymbols());
  SmallVector<Value> kept;
  for (unsigned i = 0; i < map.getNumDims(); ++i) {
    unusedDims[i] = !map.isFunctionOfDim(i);
    if (!unusedDims[i])
      kept.push_back(operands[i]);
  }
  for (unsigned i = 0; i < map.getNumSymbols(); ++i) {
    unusedSymbols[i] = !map.isFunctionOfSymbol(i);
    if (!unusedSymbols[i])
      kept.push_back(operands[map.getNumDims() + i]);
  }
  operands.assign(kept.begin(), kept.end());
  return compressSymbols(compressDims(map, unusedDims), unusedSymbols);
}

/// The source element of `read` at every position of the batch indices
/// and of its pair index: tabulate (batch rows, u : L) { source[..., u, ...] }.
TabulateOp tabulatePairRead(SoftmaxContractOp contract, const PairRead &read) {
  MLIRContext *context = contract.getContext();
  Block &block = contract.getScore().front();
  const unsigned rowCount = contract.getNumRowIndices();
  Location loc = read.op->getLoc();
  SmallVector<Attribute> sizes(contract.getRows().getValue().drop_back());
  sizes.push_back(DimExprAttr::getDim(context, read.axis.getValue()));
  SmallVector<StringAttr> shape;
  for (Attribute size : sizes)
    shape.push_back(
        StringAttr::get(context, *cast<DimExprAttr>(size).getDimName()));
  OpBuilder builder(contract);
  auto table = TabulateOp::create(builder, loc, ArrayType::get(context, shape),
                                  ArrayAttr::get(context, sizes));
  Block &body = table.getBody().emplaceBlock();
  IRMapping arguments;
  for (unsigned k = 0; k + 1 < rowCount; ++k)
    arguments.map(block.getArgument(k),
                  body.addArgument(block.getArgument(k).getType(),
                                   block.getArgument(k).getLoc()));
  Value position = addDimIndices(body, {read.axis}).front();
  // The map with one more dim, the position, read at `read.position`.
  const unsigned numDims = read.map.getNumDims();
  SmallVector<AffineExpr> results(read.map.getResults());
  results[read.position] = getAffineDimExpr(numDims, context);
  AffineMap map =
      AffineMap::get(numDims + 1, read.map.getNumSymbols(), results, context);
  SmallVector<Value> operands;
  for (Value operand : ArrayRef<Value>(read.operands).take_front(numDims))
    operands.push_back(arguments.lookupOrDefault(operand));
  operands.push_back(position);
  for (Value operand : ArrayRef<Value>(read.operands).drop_front(numDims))
    operands.push_back(arguments.lookupOrDefault(operand));
  map = compressOperands(map, operands);
  OpBuilder inside = OpBuilder::atBlockEnd(&body);
  Type elementType = read.op->getResult(0).getType();
  Value element;
  if (auto tensorRead = dyn_cast<ReadOp>(read.op))
    element =
        ReadOp::create(inside, loc, elementType, tensorRead.getSourceAttr(),
                       AffineMapAttr::get(map), operands);
  else
    element = ExtractOp::create(inside, loc, elementType,
                                cast<ExtractOp>(read.op).getSource(),
                                AffineMapAttr::get(map), operands);
  YieldOp::create(inside, loc, element);
  return table;
}

/// extract %table[batch rows, the pair index], in place of `read`.
ExtractOp extractPairBias(SoftmaxContractOp contract, const PairRead &read,
                          Value table) {
  MLIRContext *context = contract.getContext();
  Block &block = contract.getScore().front();
  const unsigned rowCount = contract.getNumRowIndices();
  const unsigned numDims = read.map.getNumDims();
  // The read's dims, then one per batch index: the batch indices, then
  // the pair index as the read computed it.
  SmallVector<AffineExpr> results;
  for (unsigned k = 0; k + 1 < rowCount; ++k)
    results.push_back(getAffineDimExpr(numDims + k, context));
  results.push_back(read.map.getResult(read.position));
  AffineMap map = AffineMap::get(numDims + rowCount - 1,
                                 read.map.getNumSymbols(), results, context);
  SmallVector<Value> operands(
      ArrayRef<Value>(read.operands).take_front(numDims));
  for (unsigned k = 0; k + 1 < rowCount; ++k)
    operands.push_back(block.getArgument(k));
  llvm::append_range(operands,
                     ArrayRef<Value>(read.operands).drop_front(numDims));
  map = compressOperands(map, operands);
  OpBuilder builder(read.op);
  return ExtractOp::create(builder, read.op->getLoc(),
                           read.op->getResult(0).getType(), table,
                           AffineMapAttr::get(map), operands);
}

/// The scale x / s of a score term (s computed outside) as x · (1 / s),
/// the bilinear form's scale; `undo` puts the quotients back.
struct Reciprocals {
  SmallVector<std::pair<DivOp, MulOp>> scaled;
  SmallVector<Operation *> made;

  void apply(SoftmaxContractOp contract) {
    for (Value term : scoreTerms(contract))
      if (auto quotient = term.getDefiningOp<DivOp>())
        if (MulOp product = asReciprocalProduct(contract, quotient, &made))
          scaled.push_back({quotient, product});
  }
  void keep() {
    for (auto &[quotient, product] : scaled)
      quotient.erase();
  }
  void undo() {
    for (auto &[quotient, product] : scaled) {
      product.getResult().replaceAllUsesWith(quotient.getResult());
      product.erase();
    }
    for (Operation *op : made)
      op->erase();
  }
};

} // namespace

bool mlir::energy::tablePairBias(SoftmaxContractOp contract) {
  if (contract.getNumRowIndices() == 0 || !hasPlainDims(contract.getRows()) ||
      !cast<DimExprAttr>(contract.getCols()).getDimName())
    return false;
  std::optional<PairRead> read = findPairRead(contract);
  if (!read || !provablyWithin(contract, *read))
    return false;
  TabulateOp table = tabulatePairRead(contract, *read);
  ExtractOp bias = extractPairBias(contract, *read, table);
  Value original = read->op->getResult(0);
  original.replaceAllUsesWith(bias.getResult());
  Reciprocals reciprocals;
  reciprocals.apply(contract);
  std::string reason;
  if (succeeded(contract.matchBilinear(reason)) ||
      broadcastToBilinear(contract)) {
    reciprocals.keep();
    if (original.use_empty())
      read->op->erase();
    contract.setForm(ContractForm::bilinear);
    return true;
  }
  reciprocals.undo();
  bias.getResult().replaceAllUsesWith(original);
  bias.erase();
  table.erase();
  return false;
}

void mlir::energy::tablePairBiases(ModelOp model) {
  forEachGenericContract(
      model, [](SoftmaxContractOp contract) { tablePairBias(contract); });
}
