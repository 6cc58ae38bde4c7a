//===- ContractTables.cpp - Work ahead of softmax contractions ------------===//
//
// A contraction evaluates its regions at every (row, column) pair; values
// that do not depend on every index of the pair (the row side, the column
// side, a head and the column, ...) are computed once per position of the
// indices they use, ahead of it, into tables: `energy.tabulate`, a
// whole-tensor read when the value is a tensor's row, or a matrix product
// when the table applies one matrix to every row of a tensor (which the
// backends run as a GEMM). Contractions whose score is then a dot product
// of two tables are marked bilinear; where a region reads a table over
// fewer batch indices than the contraction's (a token's value, the same
// for every head), a table over all of them, when that makes it bilinear.
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"
#include "Slices.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"
#include "llvm/ADT/DenseMap.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// The set of a region's index arguments a value depends on, as a bit mask
/// over argument numbers.
using IndexSet = uint64_t;

class TableHoister {
public:
  explicit TableHoister(SoftmaxContractOp contract)
      : contract(contract),
        positions(positionDims(contract->getParentOfType<ModelOp>())) {}

  void run() {
    for (Region *region : contract.getLoopRegions())
      hoistFrom(region->front());
  }

private:
  /// The indices `op` (and what is nested in it) uses, through values of
  /// `block`.
  IndexSet indicesUsed(Operation *op, Block &block) {
    IndexSet used = 0;
    op->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands()) {
        if (auto argument = dyn_cast<BlockArgument>(operand);
            argument && argument.getOwner() == &block)
          used |= IndexSet(1) << argument.getArgNumber();
        else if (Operation *def = operand.getDefiningOp();
                 def && def->getBlock() == &block)
          used |= dependence.lookup(def);
      }
    });
    return used;
  }

  void hoistFrom(Block &block) {
    for (Operation &op : block.without_terminator())
      dependence[&op] = indicesUsed(&op, block);
    SmallVector<Operation *> candidates;
    for (Operation &op : block.without_terminator()) {
      // Anything that does not vary with every index of the pair (the row
      // side, the column side, or fewer: a head and the column) is
      // computed once per position of the indices it uses; not what varies
      // with both the row and the column when both count positions (a
      // bias per pair of tokens), whose table would hold a value per pair.
      IndexSet used = dependence[&op];
      IndexSet pair = pairIndices(block);
      bool partial = used != 0 && used != allIndices(block) &&
                     (pair == 0 || (used & pair) != pair);
      // Arrays only: an index computed from the row's indices (a bound of
      // a predicate) stays where it is.
      if (!partial || op.getNumResults() != 1 ||
          !isa<ArrayType>(op.getResult(0).getType()) ||
          alreadyTable(&op, block))
        continue;
      // Worth a table when something that depends on the other side, or
      // the region's result, uses it.
      bool neededByPairs = llvm::any_of(op.getUsers(), [&](Operation *user) {
        Operation *inBlock = block.findAncestorOpInBlock(*user);
        return !inBlock || isa<YieldOp>(inBlock) ||
               (dependence.lookup(inBlock) & ~used) != 0;
      });
      if (neededByPairs)
        candidates.push_back(&op);
    }
    for (Operation *op : candidates)
      hoist(op, block);
  }

  IndexSet allIndices(Block &block) {
    return (IndexSet(1) << block.getNumArguments()) - 1;
  }

  /// The last row index and the column when both range over positions
  /// (positionDims), or none.
  IndexSet pairIndices(Block &block) {
    unsigned column = block.getNumArguments() - 1;
    if (column == 0 || column != contract.getNumRowIndices())
      return IndexSet(0);
    auto isPosition = [&](Attribute size) {
      std::optional<StringRef> dim = cast<DimExprAttr>(size).getDimName();
      return dim && positions.contains(*dim);
    };
    if (!isPosition(contract.getRows()[column - 1]) ||
        !isPosition(contract.getCols()))
      return IndexSet(0);
    return (IndexSet(1) << column) | (IndexSet(1) << (column - 1));
  }

  /// Whether `op` already reads a table at exactly the indices it uses.
  bool alreadyTable(Operation *op, Block &block) {
    auto extract = dyn_cast<ExtractOp>(op);
    return extract && isDefinedOutside(extract.getSource(), contract) &&
           extract.getMap().isIdentity() &&
           sideIndices(block, dependence[op]) ==
               SmallVector<Value>(extract.getIndices());
  }

  SmallVector<Value> sideIndices(Block &block, IndexSet side) {
    SmallVector<Value> indices;
    for (BlockArgument argument : block.getArguments())
      if (side & (IndexSet(1) << argument.getArgNumber()))
        indices.push_back(argument);
    return indices;
  }

  ArrayAttr sideSizes(IndexSet side) {
    SmallVector<Attribute> sizes;
    unsigned rowCount = contract.getNumRowIndices();
    for (unsigned i = 0; i < rowCount; ++i)
      if (side & (IndexSet(1) << i))
        sizes.push_back(contract.getRows()[i]);
    if (side & (IndexSet(1) << rowCount))
      sizes.push_back(contract.getCols());
    return ArrayAttr::get(contract.getContext(), sizes);
  }

  /// Replaces the value of `op` by a row of a table computed before the
  /// contraction.
  void hoist(Operation *op, Block &block) {
    IndexSet side = dependence[op];
    SmallVector<Value> indices = sideIndices(block, side);
    ArrayAttr sizes = sideSizes(side);
    Value value = op->getResult(0);
    auto elementType = cast<ArrayType>(value.getType());
    SmallVector<StringAttr> dims;
    for (Attribute size : sizes)
      dims.push_back(StringAttr::get(contract.getContext(),
                                     *cast<DimExprAttr>(size).getDimName()));
    llvm::append_range(dims, elementType.getShape());
    auto tableType = ArrayType::get(contract.getContext(), dims);
    Location loc = op->getLoc();
    OpBuilder builder(contract);
    Value table = wholeTensorOf(value, indices, tableType, builder);
    if (!table)
      table = tabulate(op, block, sizes, tableType, builder);
    builder.setInsertionPoint(op);
    auto map =
        AffineMap::getMultiDimIdentityMap(indices.size(), builder.getContext());
    Value row = ExtractOp::create(builder, loc, elementType, table,
                                  AffineMapAttr::get(map), indices);
    value.replaceAllUsesWith(row);
    dependence[row.getDefiningOp()] = side;
    if (op->use_empty())
      op->erase();
  }

  /// A table of `op`'s value at every position of the side, or an equal
  /// one made earlier.
  Value tabulate(Operation *op, Block &block, ArrayAttr sizes,
                 ArrayType tableType, OpBuilder &builder) {
    Location loc = op->getLoc();
    auto table = TabulateOp::create(builder, loc, tableType, sizes);
    Block &body = table.getBody().emplaceBlock();
    IRMapping mapping;
    IndexSet side = dependence[op];
    for (BlockArgument argument : block.getArguments())
      if (side & (IndexSet(1) << argument.getArgNumber()))
        mapping.map(argument,
                    body.addArgument(argument.getType(), argument.getLoc()));
    llvm::SetVector<Operation *> slice;
    addToSlice(op->getResult(0), block, slice);
    OpBuilder inside = OpBuilder::atBlockEnd(&body);
    cloneSlice(block, slice, inside, mapping);
    YieldOp::create(inside, loc, mapping.lookupOrDefault(op->getResult(0)));
    moveLoopInvariantCode(cast<LoopLikeOpInterface>(table.getOperation()));
    // The same table computed for another value of this contraction.
    for (TabulateOp earlier : tables)
      if (sameTable(earlier, table)) {
        table.erase();
        return earlier;
      }
    tables.push_back(table);
    return asMatrixProduct(table, builder);
  }

  static bool sameTable(TabulateOp a, TabulateOp b) {
    if (a.getType() != b.getType() || a.getSizes() != b.getSizes())
      return false;
    IRMapping arguments;
    arguments.map(a.getBody().front().getArguments(),
                  b.getBody().front().getArguments());
    return computeSame(a.getBodyValue(), b.getBodyValue(), arguments);
  }

  /// tabulate (%p) { matmul %M, read @X[%p] } is X Mᵀ: a matrix product
  /// (a GEMM for the backends) instead of one matrix-vector product per
  /// row.
  Value asMatrixProduct(TabulateOp table, OpBuilder &builder) {
    if (table.getSizes().size() != 1)
      return table;
    auto matmul = table.getBodyValue().getDefiningOp<MatmulOp>();
    if (!matmul || !isDefinedOutside(matmul.getLhs(), table))
      return table;
    auto read = matmul.getRhs().getDefiningOp<ReadOp>();
    Block &body = table.getBody().front();
    if (!read || !read.getMap().isIdentity() || read.getIndices().size() != 1 ||
        read.getIndices()[0] != body.getArgument(0))
      return table;
    auto model = contract->getParentOfType<ModelOp>();
    auto tensor =
        dyn_cast_or_null<TensorOp>(model.lookupSymbol(read.getSourceAttr()));
    if (!tensor || tensor.getArrayType().getRank() != 2)
      return table;
    // The rows of the tensor times Mᵀ: one row per position of the table.
    ArrayType matrixType = cast<ArrayType>(matmul.getLhs().getType());
    if (matrixType.getRank() != 2)
      return table;
    SmallVector<StringAttr> productDims = {tensor.getArrayType().getShape()[0],
                                           matrixType.getShape()[0]};
    if (table.getType() != ArrayType::get(table.getContext(), productDims))
      return table;
    Location loc = table.getLoc();
    builder.setInsertionPoint(table);
    Value rows = readWholeTensor(builder, loc, tensor.getArrayType(),
                                 read.getSourceAttr());
    Value product = buildRowProduct(builder, loc, rows, matmul.getLhs(), false,
                                    true, false);
    table.getResult().replaceAllUsesWith(product);
    tables.pop_back();
    table.erase();
    return product;
  }

  SoftmaxContractOp contract;
  llvm::StringSet<> positions;
  llvm::DenseMap<Operation *, IndexSet> dependence;
  SmallVector<TabulateOp> tables;
};

/// A score x / s with s computed outside becomes x · (1 / s), the 1 / s
/// computed ahead of the contraction, which is how the bilinear form
/// states a scale.
void scaleByReciprocal(SoftmaxContractOp contract) {
  auto quotient = contract.getScoreValue().getDefiningOp<DivOp>();
  if (quotient && asReciprocalProduct(contract, quotient))
    quotient.erase();
}

/// Reads rows of tables over fewer batch indices than `contract`'s (a
/// token's value, the same for every head) in its regions as rows of
/// tables over all of them, when `contract` is then bilinear (whose tables
/// a backend reads at every batch index); otherwise leaves it as it was.
} // namespace

bool mlir::energy::broadcastToBilinear(SoftmaxContractOp contract) {
  unsigned rowCount = contract.getNumRowIndices();
  if (rowCount < 2)
    return false;
  auto isPlain = [](Attribute size) {
    return cast<DimExprAttr>(size).getDimName().has_value();
  };
  SmallVector<Attribute> rowSizes(contract.getRows().begin(),
                                  contract.getRows().end());
  SmallVector<Attribute> columnSizes(rowSizes.begin(), rowSizes.end() - 1);
  columnSizes.push_back(contract.getCols());
  if (!llvm::all_of(rowSizes, isPlain) || !isPlain(contract.getCols()))
    return false;
  struct Broadcast {
    ExtractOp original, row;
  };
  SmallVector<Broadcast> broadcasts;
  // One table per source and index list.
  SmallVector<std::tuple<Value, SmallVector<Value>, SmallVector<Value>, Value>>
      tables;
  for (Region *region :
       {&contract.getScore(), &contract.getRowSums(), &contract.getColSums()}) {
    Block &block = region->front();
    SmallVector<Value> rowIndices(block.getArguments().take_front(rowCount));
    SmallVector<Value> columnIndices(rowIndices.begin(), rowIndices.end() - 1);
    columnIndices.push_back(block.getArgument(rowCount));
    auto isStrictSubsequence = [](ArrayRef<Value> part, ArrayRef<Value> all) {
      if (part.size() >= all.size())
        return false;
      const Value *next = all.begin();
      for (Value index : part) {
        next = std::find(next, all.end(), index);
        if (next == all.end())
          return false;
        ++next;
      }
      return true;
    };
    for (ExtractOp extract : llvm::to_vector(block.getOps<ExtractOp>())) {
      if (extract->use_empty() ||
          !isDefinedOutside(extract.getSource(), contract) ||
          !extract.getMap().isIdentity() || extract.getIndices().empty())
        continue;
      SmallVector<Value> indices(extract.getIndices());
      bool ofRow = isStrictSubsequence(indices, rowIndices);
      bool ofColumn = isStrictSubsequence(indices, columnIndices);
      if (ofRow == ofColumn)
        continue;
      ArrayRef<Value> full = ofRow ? rowIndices : columnIndices;
      ArrayRef<Attribute> sizes = ofRow ? rowSizes : columnSizes;
      Value table;
      for (auto &[source, part, whole, made] : tables)
        if (source == extract.getSource() && part == indices &&
            ArrayRef<Value>(whole) == full)
          table = made;
      if (!table) {
        table = arrayOver(extract.getResult(), full, sizes, {&block}, contract);
        tables.emplace_back(extract.getSource(), indices,
                            SmallVector<Value>(full), table);
      }
      OpBuilder builder(extract);
      auto row = ExtractOp::create(
          builder, extract.getLoc(), extract.getType(), table,
          AffineMapAttr::get(AffineMap::getMultiDimIdentityMap(
              full.size(), builder.getContext())),
          full);
      extract.getResult().replaceAllUsesWith(row.getResult());
      broadcasts.push_back({extract, row});
    }
  }
  if (broadcasts.empty())
    return false;
  std::string reason;
  bool bilinear = succeeded(contract.matchBilinear(reason));
  for (auto &[original, row] : broadcasts) {
    if (bilinear) {
      original.erase();
      continue;
    }
    row.getResult().replaceAllUsesWith(original.getResult());
    row.erase();
  }
  if (!bilinear)
    for (auto &entry : llvm::reverse(tables))
      if (Operation *made = std::get<3>(entry).getDefiningOp();
          made && made->use_empty())
        made->erase();
  return bilinear;
}

MulOp mlir::energy::asReciprocalProduct(SoftmaxContractOp contract,
                                        DivOp quotient,
                                        SmallVectorImpl<Operation *> *made) {
  if (!isDefinedOutside(quotient.getRhs(), contract) ||
      !cast<ArrayType>(quotient.getRhs().getType()).isScalar() ||
      !quotient->hasOneUse())
    return MulOp();
  Location loc = quotient.getLoc();
  OpBuilder builder(contract);
  auto one = ConstantOp::create(builder, loc, 1.0);
  auto reciprocal = DivOp::create(builder, loc, one, quotient.getRhs());
  builder.setInsertionPoint(quotient);
  auto product = MulOp::create(builder, loc, quotient.getLhs(), reciprocal);
  quotient.getResult().replaceAllUsesWith(product.getResult());
  if (made)
    made->append({reciprocal, one});
  return product;
}

SmallVector<Value> mlir::energy::scoreTerms(SoftmaxContractOp contract) {
  SmallVector<Value> terms, pending = {contract.getScoreValue()};
  while (!pending.empty()) {
    Value value = pending.pop_back_val();
    auto sum = value.getDefiningOp<AddOp>();
    if (sum && sum->getBlock() == &contract.getScore().front() &&
        sum.getLhs().getType() == sum.getRhs().getType()) {
      pending.push_back(sum.getRhs());
      pending.push_back(sum.getLhs());
    } else {
      terms.push_back(value);
    }
  }
  return terms;
}

void mlir::energy::hoistContractTables(ModelOp model) {
  SmallVector<SoftmaxContractOp> contracts;
  model.walk([&](SoftmaxContractOp op) { contracts.push_back(op); });
  for (SoftmaxContractOp contract : contracts)
    hoistTablesOf(contract);
}

void mlir::energy::forEachGenericContract(
    ModelOp model, function_ref<void(SoftmaxContractOp)> rewrite) {
  SmallVector<SoftmaxContractOp> generic;
  model.walk([&](SoftmaxContractOp contract) {
    if (contract.getForm() == ContractForm::generic)
      generic.push_back(contract);
  });
  for (SoftmaxContractOp contract : generic)
    rewrite(contract);
}

void mlir::energy::hoistTablesOf(SoftmaxContractOp contract) {
  moveLoopInvariantCode(cast<LoopLikeOpInterface>(contract.getOperation()));
  if (contract.getNumRowIndices() > 0)
    TableHoister(contract).run();
  scaleByReciprocal(contract);
  markContractForm(contract);
}

void mlir::energy::markContractForm(SoftmaxContractOp contract) {
  std::string reason;
  if (succeeded(contract.matchBilinear(reason)))
    contract.setForm(ContractForm::bilinear);
  else if (succeeded(contract.matchQuadratic(reason)))
    contract.setForm(ContractForm::quadratic);
  else if (broadcastToBilinear(contract))
    contract.setForm(ContractForm::bilinear);
}
