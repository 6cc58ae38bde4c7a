//===- Slices.cpp - Copying the ops a value needs between bodies ----------===//
//
// Slices of one block, cloned into another, tables of values over indices,
// and what values and products of the plan's steps are.
//
//===----------------------------------------------------------------------===//

#include "Slices.h"

#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"

using namespace mlir;
using namespace mlir::energy;

void mlir::energy::addToSlice(Value value, Block &block,
                              llvm::SetVector<Operation *> &slice) {
  Operation *def = value.getDefiningOp();
  if (!def || def->getBlock() != &block || slice.contains(def))
    return;
  addOperandsToSlice(def, block, slice);
  slice.insert(def);
}

void mlir::energy::addOperandsToSlice(Operation *op, Block &block,
                                      llvm::SetVector<Operation *> &slice) {
  op->walk([&](Operation *nested) {
    for (Value operand : nested->getOperands())
      addToSlice(operand, block, slice);
  });
}

void mlir::energy::cloneSlice(Block &block,
                              const llvm::SetVector<Operation *> &slice,
                              OpBuilder &builder, IRMapping &mapping) {
  for (Operation &op : block)
    if (slice.contains(&op))
      builder.clone(op, mapping);
}

void mlir::energy::addIndexArguments(Block &block, Block &like,
                                     IRMapping &mapping) {
  for (BlockArgument argument : like.getArguments())
    mapping.map(argument,
                block.addArgument(argument.getType(), argument.getLoc()));
}

bool mlir::energy::atBlockIndices(AffineMap map, ValueRange indices,
                                  Block &block) {
  return map.isIdentity() && map.getNumDims() == block.getNumArguments() &&
         llvm::equal(indices, block.getArguments());
}

Value mlir::energy::readWholeTensor(OpBuilder &builder, Location loc,
                                    ArrayType type, FlatSymbolRefAttr tensor) {
  return ReadOp::create(
      builder, loc, type, tensor,
      AffineMapAttr::get(AffineMap::get(0, 0, {}, builder.getContext())),
      ValueRange());
}

Value mlir::energy::wholeTensorOf(Value value, ArrayRef<Value> indices,
                                  ArrayType type, OpBuilder &builder) {
  auto read = value.getDefiningOp<ReadOp>();
  if (!read || !read.getMap().isIdentity() ||
      !llvm::equal(read.getIndices(), indices))
    return Value();
  auto model = read->getParentOfType<ModelOp>();
  auto tensor =
      dyn_cast_or_null<TensorOp>(model.lookupSymbol(read.getSourceAttr()));
  if (!tensor || tensor.getArrayType() != type)
    return Value();
  return readWholeTensor(builder, read.getLoc(), type, read.getSourceAttr());
}

bool mlir::energy::hasPlainDims(ArrayAttr sizes) {
  return llvm::all_of(sizes, [](Attribute size) {
    return cast<DimExprAttr>(size).getDimName().has_value();
  });
}

bool mlir::energy::isScalar(Value value) {
  auto type = dyn_cast<ArrayType>(value.getType());
  return type && type.isScalar();
}

Value mlir::energy::sumOfRows(OpBuilder &builder, Location loc, Value array,
                              ValueRange leading, ArrayRef<StringAttr> axes) {
  auto type = cast<ArrayType>(array.getType());
  MLIRContext *context = builder.getContext();
  auto row = ArrayType::get(context, type.getShape().take_back());
  auto sum = ReduceOp::create(builder, loc, row, ReduceKind::sum,
                              sizesOfDims(context, axes), Value());
  Block &body = sum.getBody().emplaceBlock();
  SmallVector<Value> indices(leading);
  llvm::append_range(indices, addDimIndices(body, axes));
  OpBuilder inside = OpBuilder::atBlockEnd(&body);
  auto map = AffineMap::getMultiDimIdentityMap(indices.size(), context);
  Value element = ExtractOp::create(inside, loc, row, array,
                                    AffineMapAttr::get(map), indices);
  YieldOp::create(inside, loc, ValueRange{element});
  return sum.getResult();
}

ArrayAttr mlir::energy::sizesOfDims(MLIRContext *context,
                                    ArrayRef<StringAttr> dims) {
  SmallVector<Attribute> sizes;
  for (StringAttr dim : dims)
    sizes.push_back(DimExprAttr::getDim(context, dim.getValue()));
  return ArrayAttr::get(context, sizes);
}

SmallVector<Value> mlir::energy::addDimIndices(Block &body,
                                               ArrayRef<StringAttr> dims) {
  SmallVector<Value> indices;
  for (StringAttr dim : dims) {
    MLIRContext *context = dim.getContext();
    indices.push_back(body.addArgument(
        IndexType::get(context),
        NameLoc::get(StringAttr::get(context, dim.getValue().lower()))));
  }
  return indices;
}

RowTable::RowTable(OpBuilder &builder, Location loc, ArrayType type)
    : inside(builder.getContext()) {
  MLIRContext *context = type.getContext();
  ArrayRef<StringAttr> shape = type.getShape();
  table = TabulateOp::create(builder, loc, type,
                             sizesOfDims(context, shape.drop_back()));
  Block &body = table.getBody().emplaceBlock();
  indices = addDimIndices(body, shape.drop_back());
  inside.setInsertionPointToEnd(&body);
  rowType = ArrayType::get(context, shape.take_back());
  map = AffineMapAttr::get(
      AffineMap::getMultiDimIdentityMap(indices.size(), context));
}

Value RowTable::rowOf(Value array, Location loc) {
  return ExtractOp::create(inside, loc, rowType, array, map, indices);
}

TabulateOp RowTable::finish(Value row, Location loc) {
  YieldOp::create(inside, loc, row);
  return table;
}

bool mlir::energy::isMatrix(Value value) {
  return cast<ArrayType>(value.getType()).getRank() == 2;
}

bool mlir::energy::isSummedRowProduct(BatchMatmulOp product) {
  return product && product.getLhsRows() == 1 && product.getBatchAxes() == 1 &&
         product.getSumBatch() && product.getTransposeLhs() &&
         !product.getTransposeRhs() &&
         isMatrix(product.getLhs()) == isMatrix(product.getRhs());
}

Value mlir::energy::buildRowProduct(OpBuilder &builder, Location loc, Value lhs,
                                    Value rhs, bool transposeLhs,
                                    bool transposeRhs, bool summed) {
  bool inLoop = false;
  for (Operation *op = builder.getInsertionBlock()->getParentOp(); op;
       op = op->getParentOp())
    inLoop |= isa<LoopLikeOpInterface>(op);
  if (inLoop && isMatrix(lhs) && isMatrix(rhs)) {
    if (transposeLhs)
      lhs = TransposeOp::create(builder, loc, lhs);
    if (transposeRhs)
      rhs = TransposeOp::create(builder, loc, rhs);
    return MatmulOp::create(builder, loc, lhs, rhs);
  }
  std::string reason;
  ArrayType type = BatchMatmulOp::inferType(
      cast<ArrayType>(lhs.getType()), cast<ArrayType>(rhs.getType()),
      transposeLhs, transposeRhs, summed, reason);
  assert(type && "operands of a matrix product");
  return BatchMatmulOp::create(builder, loc, type, lhs, rhs, transposeLhs,
                               transposeRhs, summed);
}

int64_t mlir::energy::rankOf(Value value) {
  return cast<ArrayType>(value.getType()).getRank();
}

bool mlir::energy::isRowsTimesMatrix(BatchMatmulOp product) {
  return product.getLhsRows() == 1 && product.getBatchAxes() == 1 &&
         !product.getTransposeLhs() && !product.getSumBatch() &&
         rankOf(product.getRhs()) == 2 &&
         rankOf(product.getLhs()) == rankOf(product.getResult());
}

bool mlir::energy::isScaledCopy(Value value, Value other, Operation *scope,
                                SmallVectorImpl<Value> &factors,
                                OpBuilder &builder,
                                SmallVectorImpl<Operation *> &built,
                                unsigned depth) {
  if (computeSame(value, other, IRMapping()))
    return true;
  if (depth > 8)
    return false;
  auto fixedScalar = [&](Value v) {
    return isScalar(v) && isDefinedOutside(v, scope);
  };
  Operation *def = value.getDefiningOp();
  if (auto neg = dyn_cast_or_null<NegOp>(def)) {
    if (!isScaledCopy(neg.getOperand(), other, scope, factors, builder, built,
                      depth + 1))
      return false;
    auto minusOne = ConstantOp::create(builder, neg.getLoc(), -1.0);
    built.push_back(minusOne);
    factors.push_back(minusOne);
    return true;
  }
  if (auto mul = dyn_cast_or_null<MulOp>(def)) {
    for (auto [scalar, scaled] : {std::pair(mul.getRhs(), mul.getLhs()),
                                  std::pair(mul.getLhs(), mul.getRhs())})
      if (fixedScalar(scalar) && scaled.getType() == value.getType() &&
          isScaledCopy(scaled, other, scope, factors, builder, built,
                       depth + 1)) {
        factors.push_back(scalar);
        return true;
      }
    return false;
  }
  auto extract = dyn_cast_or_null<ExtractOp>(def);
  if (!extract)
    return false;
  Operation *source = extract.getSource().getDefiningOp();
  // A row of a scaled array is the scaled row of the array.
  if (auto scaled = dyn_cast_or_null<MulOp>(source)) {
    for (auto [scalar, array] : {std::pair(scaled.getRhs(), scaled.getLhs()),
                                 std::pair(scaled.getLhs(), scaled.getRhs())})
      if (fixedScalar(scalar) && !isScalar(array)) {
        IRMapping mapping;
        mapping.map(extract.getSource(), array);
        Operation *row = builder.clone(*extract, mapping);
        built.push_back(row);
        if (isScaledCopy(row->getResult(0), other, scope, factors, builder,
                         built, depth + 1)) {
          factors.push_back(scalar);
          return true;
        }
        return false;
      }
    return false;
  }
  // A row of a table, computed at the read's indices.
  auto table = dyn_cast_or_null<TabulateOp>(source);
  Block &body = table ? table.getBody().front() : *extract->getBlock();
  if (!table || !extract.getMap().isIdentity() ||
      extract.getIndices().size() != body.getNumArguments() ||
      llvm::any_of(body.without_terminator(),
                   [](Operation &op) { return op.getNumRegions() != 0; }))
    return false;
  IRMapping mapping;
  mapping.map(body.getArguments(), extract.getIndices());
  for (Operation &op : body.without_terminator())
    built.push_back(builder.clone(op, mapping));
  return isScaledCopy(mapping.lookupOrDefault(table.getBodyValue()), other,
                      scope, factors, builder, built, depth + 1);
}

Operation *mlir::energy::scaledLeaf(Value value, bool linear) {
  Operation *def = value.getDefiningOp();
  if (isa_and_nonnull<ExtractOp, ReadOp>(def))
    return isScalar(value) ? nullptr : def;
  if (auto neg = dyn_cast_or_null<NegOp>(def))
    return scaledLeaf(neg.getOperand(), linear);
  auto scaled = [&](Value vector, Value factor) -> Operation * {
    if (!isScalar(factor) || isScalar(vector))
      return nullptr;
    Operation *row = scaledLeaf(vector, linear);
    return row && !(linear && dependsOn(factor, row)) ? row : nullptr;
  };
  if (auto mul = dyn_cast_or_null<MulOp>(def)) {
    if (Operation *source = scaled(mul.getLhs(), mul.getRhs()))
      return source;
    return scaled(mul.getRhs(), mul.getLhs());
  }
  if (auto div = dyn_cast_or_null<DivOp>(def))
    return scaled(div.getLhs(), div.getRhs());
  return nullptr;
}

ExtractOp mlir::energy::scaledRow(Value value, bool linear) {
  return dyn_cast_or_null<ExtractOp>(scaledLeaf(value, linear));
}

Operation *mlir::energy::declarationOf(Operation *op) {
  while (op->getParentOp() && !isa<ModelOp>(op->getParentOp()))
    op = op->getParentOp();
  return op;
}

bool mlir::energy::availableBefore(Value value, Operation *point) {
  Region *region = value.getParentRegion();
  if (!region->isAncestor(point->getParentRegion()))
    return false;
  Operation *def = value.getDefiningOp();
  if (!def)
    return true;
  Operation *ancestor = def->getBlock()->findAncestorOpInBlock(*point);
  return ancestor && def->isBeforeInBlock(ancestor);
}

bool mlir::energy::isInProgram(Operation *op) {
  return op->getParentOfType<UpdateProgramOp>() ||
         op->getParentOfType<BackwardProgramOp>();
}

bool mlir::energy::readsPlainly(Operation *op) {
  auto plain = [](AffineMap map) {
    return llvm::all_of(map.getResults(), [](AffineExpr expr) {
      return isa<AffineDimExpr>(expr);
    });
  };
  return !op->walk([&](Operation *nested) {
              auto read = dyn_cast<ReadOp>(nested);
              auto extract = dyn_cast<ExtractOp>(nested);
              if ((read && !plain(read.getMap())) ||
                  (extract && !plain(extract.getMap())))
                return WalkResult::interrupt();
              return WalkResult::advance();
            }).wasInterrupted();
}

/// The array of `value` at every position of `indices` (sizes `sizes`),
/// computed before `anchor`: the array `value` reads a slice of when it is
/// a read or extract at exactly those indices, otherwise a table of it.
/// `blocks` are the bodies, outermost first, whose ops `value` may need.
SmallVector<llvm::SetVector<Operation *>>
mlir::energy::slicesAcross(Value value, ArrayRef<Block *> blocks) {
  // Innermost first: an inner body's ops need the outer bodies' ops.
  SmallVector<llvm::SetVector<Operation *>> slices(blocks.size());
  for (int i = static_cast<int>(blocks.size()) - 1; i >= 0; --i) {
    addToSlice(value, *blocks[i], slices[i]);
    for (size_t inner = i + 1; inner < blocks.size(); ++inner)
      for (Operation *op : slices[inner])
        addOperandsToSlice(op, *blocks[i], slices[i]);
  }
  return slices;
}

Value mlir::energy::arrayOver(Value value, ArrayRef<Value> indices,
                              ArrayRef<Attribute> sizes,
                              ArrayRef<Block *> blocks, Operation *anchor) {
  MLIRContext *context = value.getContext();
  SmallVector<StringAttr> dims;
  for (Attribute size : sizes)
    dims.push_back(
        StringAttr::get(context, *cast<DimExprAttr>(size).getDimName()));
  llvm::append_range(dims, cast<ArrayType>(value.getType()).getShape());
  auto type = ArrayType::get(context, dims);
  OpBuilder builder(anchor);
  Location loc = value.getLoc();
  if (auto extract = value.getDefiningOp<ExtractOp>();
      extract && extract.getMap().isIdentity() &&
      llvm::equal(extract.getIndices(), indices) &&
      isDefinedOutside(extract.getSource(), anchor) &&
      extract.getSource().getType() == type)
    return extract.getSource();
  if (Value whole = wholeTensorOf(value, indices, type, builder))
    return whole;
  auto table =
      TabulateOp::create(builder, loc, type, ArrayAttr::get(context, sizes));
  Block &body = table.getBody().emplaceBlock();
  IRMapping mapping;
  for (Value index : indices)
    mapping.map(index, body.addArgument(index.getType(), index.getLoc()));
  SmallVector<llvm::SetVector<Operation *>> slices =
      slicesAcross(value, blocks);
  OpBuilder inside = OpBuilder::atBlockEnd(&body);
  for (size_t i = 0; i < blocks.size(); ++i)
    cloneSlice(*blocks[i], slices[i], inside, mapping);
  YieldOp::create(inside, loc, mapping.lookupOrDefault(value));
  moveLoopInvariantCode(cast<LoopLikeOpInterface>(table.getOperation()));
  return table;
}

bool mlir::energy::onlyReads(Operation *op) {
  WalkResult result = op->walk([](Operation *nested) {
    return isa<ReadOp, YieldOp>(nested) || isMemoryEffectFree(nested) ||
                   (isa<ReduceOp, TabulateOp>(nested) &&
                    nested->getNumRegions() > 0)
               ? WalkResult::advance()
               : WalkResult::interrupt();
  });
  return !result.wasInterrupted();
}

llvm::StringSet<> mlir::energy::positionDims(ModelOp model) {
  llvm::StringSet<> dims;
  for (auto tensor : model.getBody().front().getOps<TensorOp>()) {
    if (tensor.getRole() == Role::param || tensor.getAdjointOf() ||
        tensor.getCotangentOf() || tensor.getCacheFlag() || tensor.getFlagOf())
      continue;
    ArrayRef<Attribute> shape = tensor.getShape().getValue();
    if (shape.empty())
      continue;
    for (Attribute dim : shape.drop_back())
      dims.insert(cast<FlatSymbolRefAttr>(dim).getValue());
  }
  return dims;
}

void mlir::energy::eraseDeadOps(Block &block) {
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
    if (isOpTriviallyDead(&op))
      op.erase();
}

void mlir::energy::eraseBuiltBefore(Operation *op, Operation *since) {
  while (Operation *previous = op->getPrevNode()) {
    if (previous == since)
      break;
    previous->erase();
  }
}

bool mlir::energy::isPlainSum(ReduceOp sum) {
  return sum.getKind() == ReduceKind::sum && !sum.hasPredicate() &&
         !sum.getTemperature() && !sum.getAggregation() &&
         hasPlainDims(sum.getSizes());
}

ReduceOp mlir::energy::nestedSumOf(ReduceOp outer) {
  if (!isPlainSum(outer))
    return {};
  Block &outerBody = outer.getBody().front();
  auto inner = outer.getBodyValue().getDefiningOp<ReduceOp>();
  if (!inner || inner->getBlock() != &outerBody || !inner->hasOneUse() ||
      !isPlainSum(inner) || inner.getType() != outer.getType())
    return {};
  // What the outer body computes besides the inner sum is per position of
  // its indices, for the inner sum: it may run at every position of both.
  for (Operation &op : outerBody.without_terminator())
    if (&op != inner.getOperation() && !isMemoryEffectFree(&op))
      return {};
  return inner;
}

ReduceOp mlir::energy::flattenNestedSum(ReduceOp outer) {
  ReduceOp inner = nestedSumOf(outer);
  if (!inner)
    return {};
  Block &outerBody = outer.getBody().front();
  OpBuilder builder(outer);
  SmallVector<Attribute> sizes(outer.getSizes().getValue());
  llvm::append_range(sizes, inner.getSizes().getValue());
  auto flat =
      ReduceOp::create(builder, outer.getLoc(), outer.getType(),
                       ReduceKind::sum, builder.getArrayAttr(sizes), Value());
  Block &body = flat.getBody().emplaceBlock();
  IRMapping mapping;
  Block &innerBody = inner.getBody().front();
  for (Block *level : {&outerBody, &innerBody})
    for (BlockArgument index : level->getArguments())
      mapping.map(index, body.addArgument(index.getType(), index.getLoc()));
  OpBuilder inside = OpBuilder::atBlockEnd(&body);
  for (Operation &op : outerBody.without_terminator())
    if (&op != inner.getOperation())
      inside.clone(op, mapping);
  for (Operation &op : innerBody)
    inside.clone(op, mapping);
  return flat;
}

std::optional<ScalarTable> mlir::energy::scalarTableOf(TabulateOp table) {
  auto type = dyn_cast<ArrayType>(table.getType());
  if (!type || type.getRank() != 2)
    return std::nullopt;
  Block &outer = table.getBody().front();
  Value element = table.getBodyValue();
  ScalarTable result{table,       outer.getArgument(0),
                     Value(),     table.getSizes()[0],
                     Attribute(), element,
                     &outer};
  if (outer.getNumArguments() == 2) {
    result.innerIndex = outer.getArgument(1);
    result.innerSize = table.getSizes()[1];
  } else if (auto row = element.getDefiningOp<TabulateOp>();
             row && outer.getNumArguments() == 1 && row->getBlock() == &outer &&
             row.getBody().front().getNumArguments() == 1) {
    result.body = &row.getBody().front();
    result.innerIndex = result.body->getArgument(0);
    result.innerSize = row.getSizes()[0];
    result.element = row.getBodyValue();
  } else {
    return std::nullopt;
  }
  auto value = dyn_cast<ArrayType>(result.element.getType());
  if (!value || !value.isScalar())
    return std::nullopt;
  return result;
}

void mlir::energy::collectSignedTerms(Value value, bool negated,
                                      SmallVectorImpl<SignedTerm> &terms) {
  Operation *def = value.getDefiningOp();
  if (def && (value.use_empty() || value.hasOneUse())) {
    if (isa<AddOp, SubOp>(def) &&
        def->getOperand(0).getType() == def->getOperand(1).getType()) {
      collectSignedTerms(def->getOperand(0), negated, terms);
      collectSignedTerms(def->getOperand(1), negated != isa<SubOp>(def), terms);
      return;
    }
    if (auto neg = dyn_cast<NegOp>(def)) {
      collectSignedTerms(neg.getOperand(), !negated, terms);
      return;
    }
  }
  terms.push_back({value, negated});
}

Value mlir::energy::buildSignedSum(OpBuilder &builder, Location loc,
                                   ArrayRef<SignedTerm> terms) {
  Value total;
  for (const SignedTerm &term : terms) {
    if (!total)
      total = term.negated ? NegOp::create(builder, loc, term.value).getResult()
                           : term.value;
    else if (term.negated)
      total = SubOp::create(builder, loc, total, term.value);
    else
      total = AddOp::create(builder, loc, total, term.value);
  }
  return total;
}

Value mlir::energy::tableOverIndex(OpBuilder &builder, Location loc,
                                   Block &body, ArrayAttr sizes,
                                   ArrayRef<Value> factors) {
  MLIRContext *context = builder.getContext();
  SmallVector<StringAttr> dims = {
      StringAttr::get(context, *cast<DimExprAttr>(sizes[0]).getDimName())};
  llvm::append_range(dims, cast<ArrayType>(factors[0].getType()).getShape());
  auto table =
      TabulateOp::create(builder, loc, ArrayType::get(context, dims), sizes);
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
    product =
        MulOp::create(inside, loc, product, mapping.lookupOrDefault(factor));
  YieldOp::create(inside, loc, product);
  return table;
}

bool mlir::energy::isReadingTable(Operation *op) {
  return isa<TabulateOp>(op) && onlyReads(op);
}
