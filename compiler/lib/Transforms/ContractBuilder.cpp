//===- ContractBuilder.cpp - Contractions rebuilt from others' sums -------===//
//
// rebuildContract (ContractBuilder.h): a contraction with another's
// predicate, score and temperature, summing chosen sides of others, for
// the steps that merge contractions and split one between engines.
//
//===----------------------------------------------------------------------===//

#include "ContractBuilder.h"
#include "PlanKernels.h"
#include "Slices.h"

using namespace mlir;
using namespace mlir::energy;

SoftmaxContractOp
mlir::energy::rebuildContract(OpBuilder &builder, SoftmaxContractOp from,
                              ArrayRef<SoftmaxContractOp> rowSides,
                              ArrayRef<SoftmaxContractOp> colSides,
                              Value givenLse) {
  ContractBuilder contract(from.getContext(), from.getRows(), from.getCols());
  contract.nameIndices(llvm::to_vector(llvm::map_range(
      from.getScore().front().getArguments(),
      [](BlockArgument argument) { return argument.getLoc(); })));
  auto cloneInto = [&](Region &into, Region &source,
                       SmallVectorImpl<Value> &values) {
    Block &target = contract.block(into);
    IRMapping mapping;
    mapping.map(source.front().getArguments(), target.getArguments());
    OpBuilder inside = endOf(target);
    for (Operation &op : source.front().without_terminator())
      inside.clone(op, mapping);
    for (Value value :
         cast<YieldOp>(source.front().getTerminator()).getValues())
      values.push_back(mapping.lookupOrDefault(value));
  };
  SmallVector<Value> predicateValues, scoreValues, rowValues, colValues;
  SmallVector<Value> oldRows, oldCols;
  if (from.hasPredicate())
    cloneInto(contract.predicate, from.getPredicate(), predicateValues);
  cloneInto(contract.score, from.getScore(), scoreValues);
  for (SoftmaxContractOp side : rowSides) {
    cloneInto(contract.rowSums, side.getRowSums(), rowValues);
    llvm::append_range(oldRows, side.getRowOutputs());
  }
  for (SoftmaxContractOp side : colSides) {
    cloneInto(contract.colSums, side.getColSums(), colValues);
    llvm::append_range(oldCols, side.getColOutputs());
  }
  // Each old output maps to its value's position among the distinct ones.
  auto distinct = [](ArrayRef<Value> values, SmallVectorImpl<unsigned> &at) {
    SmallVector<Value> unique;
    for (Value value : values) {
      auto same = llvm::find_if(unique, [&](Value other) {
        return other == value || computeSame(other, value, IRMapping());
      });
      at.push_back(same - unique.begin());
      if (same == unique.end())
        unique.push_back(value);
    }
    return unique;
  };
  SmallVector<unsigned> rowAt, colAt;
  SmallVector<Value> uniqueRows = distinct(rowValues, rowAt);
  SmallVector<Value> uniqueCols = distinct(colValues, colAt);
  Location loc = from.getLoc();
  auto yield = [&](Region &region, ValueRange values) {
    OpBuilder inside = endOf(contract.block(region));
    YieldOp::create(inside, loc, values);
  };
  if (from.hasPredicate())
    yield(contract.predicate, predicateValues);
  yield(contract.score, scoreValues);
  yield(contract.rowSums, uniqueRows);
  yield(contract.colSums, uniqueCols);
  SoftmaxContractOp rebuilt =
      contract.create(builder, loc, from.getTemperature(), givenLse);
  for (auto [old, position] : llvm::zip_equal(oldRows, rowAt))
    old.replaceAllUsesWith(rebuilt.getRowOutputs()[position]);
  for (auto [old, position] : llvm::zip_equal(oldCols, colAt))
    old.replaceAllUsesWith(rebuilt.getColOutputs()[position]);
  markContractForm(rebuilt);
  return rebuilt;
}

Value mlir::energy::readInOrder(OpBuilder &builder, Value result, Value like,
                                ArrayRef<unsigned> order, ArrayAttr rows) {
  MLIRContext *context = builder.getContext();
  auto type = cast<ArrayType>(like.getType());
  Location loc = like.getLoc();
  auto table = TabulateOp::create(builder, loc, type, rows);
  Block &body = table.getBody().emplaceBlock();
  SmallVector<Value> own;
  for (unsigned k = 0; k < order.size(); ++k)
    own.push_back(body.addArgument(IndexType::get(context), loc));
  SmallVector<Value> indices;
  for (unsigned k : order)
    indices.push_back(own[k]);
  OpBuilder inside = OpBuilder::atBlockEnd(&body);
  auto element =
      ArrayType::get(context, type.getShape().drop_front(order.size()));
  Value value =
      ExtractOp::create(inside, loc, element, result,
                        AffineMapAttr::get(AffineMap::getMultiDimIdentityMap(
                            order.size(), context)),
                        indices);
  YieldOp::create(inside, loc, value);
  return table.getResult();
}
