//===- ContractBuilder.h - Building energy.softmax_contract ops -*- C++ -*-===//
//
// The regions of a new softmax contraction, filled before the op exists
// (its result types follow from what they yield), for the steps that form
// contractions and the ones that merge and split them. Private to
// compiler/lib/Transforms.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_LIB_TRANSFORMS_CONTRACTBUILDER_H
#define ENERGY_LIB_TRANSFORMS_CONTRACTBUILDER_H

#include "energy/IR/EnergyOps.h"

#include "mlir/IR/Builders.h"

namespace mlir::energy {

/// A builder at the end of `block`, which may belong to a region that no op
/// holds yet.
inline OpBuilder endOf(Block &block) {
  OpBuilder builder(block.getArgument(0).getContext());
  builder.setInsertionPointToEnd(&block);
  return builder;
}

/// The pieces of a new contraction, whose regions are filled before the op
/// exists (its result types follow from what they yield).
struct ContractBuilder {
  ContractBuilder(MLIRContext *context, ArrayAttr rows, DimExprAttr cols)
      : rows(rows), cols(cols) {
    for (Region *region : {&predicate, &score, &rowSums, &colSums}) {
      Block *block = new Block();
      region->push_back(block);
      for (unsigned i = 0; i <= rows.size(); ++i)
        block->addArgument(IndexType::get(context), UnknownLoc::get(context));
    }
  }

  /// Regions never handed to an op are dropped with their ops.
  ~ContractBuilder() {
    for (Region *region : {&predicate, &score, &rowSums, &colSums})
      for (Block &block : *region) {
        for (Operation &op : block)
          op.dropAllReferences();
        block.dropAllDefinedValueUses();
      }
  }

  Block &block(Region &region) { return region.front(); }

  /// Gives the index arguments of every region the locations (and so the
  /// printed names) of the indices they stand for.
  void nameIndices(ArrayRef<Location> locations) {
    for (Region *region : {&predicate, &score, &rowSums, &colSums})
      for (auto [argument, location] :
           llvm::zip(region->front().getArguments(), locations))
        argument.setLoc(location);
  }

  /// Creates the op at the builder's position; `predicate` is dropped when
  /// it was left empty.
  SoftmaxContractOp create(OpBuilder &builder, Location loc, Value temperature,
                           Value givenLse) {
    OperationState state(loc, SoftmaxContractOp::getOperationName());
    if (temperature)
      state.addOperands(temperature);
    if (givenLse)
      state.addOperands(givenLse);
    MLIRContext *context = builder.getContext();
    auto &properties =
        state.getOrAddProperties<SoftmaxContractOp::Properties>();
    properties.operandSegmentSizes = {temperature ? 1 : 0, givenLse ? 1 : 0};
    properties.form = ContractFormAttr::get(context, ContractForm::generic);
    properties.rows = rows;
    properties.cols = cols;
    if (block(predicate).empty())
      predicate.getBlocks().clear();
    for (Region *region : {&predicate, &score, &rowSums, &colSums}) {
      Region *owned = state.addRegion();
      owned->takeBody(*region);
    }
    // Result types, from the domains and the yields.
    SmallVector<StringAttr> rowDims, columnDims;
    for (Attribute size : rows)
      rowDims.push_back(
          StringAttr::get(context, *cast<DimExprAttr>(size).getDimName()));
    if (!rowDims.empty())
      columnDims.assign(rowDims.begin(), rowDims.end() - 1);
    columnDims.push_back(StringAttr::get(context, *cols.getDimName()));
    auto withAxes = [&](ArrayRef<StringAttr> prefix, Type element) {
      SmallVector<StringAttr> dims(prefix);
      llvm::append_range(dims, cast<ArrayType>(element).getShape());
      return ArrayType::get(context, dims);
    };
    if (!givenLse)
      state.addTypes(ArrayType::get(context, rowDims));
    auto yielded = [](Region &region) {
      return cast<YieldOp>(region.front().getTerminator()).getValues();
    };
    for (Value value : yielded(*state.regions[2]))
      state.addTypes(withAxes(rowDims, value.getType()));
    for (Value value : yielded(*state.regions[3]))
      state.addTypes(withAxes(columnDims, value.getType()));
    return cast<SoftmaxContractOp>(builder.create(state));
  }

  ArrayAttr rows;
  DimExprAttr cols;
  Region predicate, score, rowSums, colSums;
};

/// A contraction like `from` (its predicate, score and temperature) at
/// `builder`'s position, given `givenLse` (or none), summing the row values
/// of `rowSides` and the column values of `colSides`, in order; a value
/// summed twice (the counts of two statistics) is summed once. The row
/// outputs of `rowSides` and the column outputs of `colSides` are replaced
/// by the new contraction's.
SoftmaxContractOp rebuildContract(OpBuilder &builder, SoftmaxContractOp from,
                                  ArrayRef<SoftmaxContractOp> rowSides,
                                  ArrayRef<SoftmaxContractOp> colSides,
                                  Value givenLse);

/// A table like `like` over `rows` (the domain of its leading axes), whose
/// element at (i₀, …) is `result`'s row at (i_order[0], i_order[1], …): a
/// contraction's result over its rows in another order, read back in the
/// order of `like`.
Value readInOrder(OpBuilder &builder, Value result, Value like,
                  ArrayRef<unsigned> order, ArrayAttr rows);

} // namespace mlir::energy

#endif // ENERGY_LIB_TRANSFORMS_CONTRACTBUILDER_H
