//===- LetReads.cpp - How terms read tensors through lets -----------------===//
//
// The lets between a model's params and its energy, as the backward step
// sees them (LetReads.h).
//
//===----------------------------------------------------------------------===//

#include "LetReads.h"
#include "energy/Transforms/Gradients.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// The tensors that `region` reads, directly or through lets.
void collectReadTensors(Region &region, ModelOp model,
                        llvm::SetVector<StringRef> &tensors,
                        llvm::StringSet<> &visitedLets) {
  region.walk([&](ReadOp read) {
    Operation *source = SymbolTable::lookupSymbolIn(model, read.getSource());
    if (auto let = dyn_cast_or_null<LetOp>(source)) {
      if (visitedLets.insert(let.getSymName()).second)
        collectReadTensors(let.getBody(), model, tensors, visitedLets);
    } else if (isa_and_nonnull<TensorOp>(source)) {
      tensors.insert(read.getSource());
    }
  });
}

} // namespace

llvm::SetVector<StringRef> mlir::energy::readTensors(Region &region,
                                                     ModelOp model) {
  llvm::SetVector<StringRef> tensors;
  llvm::StringSet<> visitedLets;
  collectReadTensors(region, model, tensors, visitedLets);
  return tensors;
}

bool mlir::energy::readsBeside(Region &region, StringRef tensor,
                               StringRef through, ModelOp model) {
  llvm::SetVector<StringRef> reached;
  llvm::StringSet<> visitedLets;
  visitedLets.insert(through);
  collectReadTensors(region, model, reached, visitedLets);
  return reached.contains(tensor);
}

bool mlir::energy::isResidualOf(LetOp let, StringRef tensor, ModelOp model) {
  Block &body = let.getBody().front();
  Value element = cast<YieldOp>(body.getTerminator()).getValues().front();
  auto isTheRead = [&](Value value) {
    auto read = value.getDefiningOp<ReadOp>();
    return read && read.getSource() == tensor && read.getMap().isIdentity() &&
           read.getMap().getNumDims() == body.getNumArguments() &&
           llvm::equal(read.getIndices(), body.getArguments());
  };
  // Whether `value` depends on a read of the tensor (directly, or through
  // another let that reads it).
  auto readsTensor = [&](Value value) {
    SmallVector<Value> pending{value};
    llvm::SmallPtrSet<Operation *, 16> seen;
    while (!pending.empty()) {
      Operation *op = pending.pop_back_val().getDefiningOp();
      if (!op || !seen.insert(op).second)
        continue;
      bool reads = false;
      op->walk([&](ReadOp read) {
        Operation *source =
            SymbolTable::lookupSymbolIn(model, read.getSource());
        if (read.getSource() == tensor)
          reads = true;
        else if (auto inner = dyn_cast_or_null<LetOp>(source))
          reads |= readTensors(inner.getBody(), model).contains(tensor);
      });
      if (reads)
        return true;
      op->walk([&](Operation *nested) {
        llvm::append_range(pending, nested->getOperands());
      });
    }
    return false;
  };
  // The element as a sum: exactly one addend is the read, none of the
  // others reads the tensor.
  SmallVector<Value> addends{element}, others;
  unsigned reads = 0;
  while (!addends.empty()) {
    Value value = addends.pop_back_val();
    if (auto add = value.getDefiningOp<AddOp>();
        add && add.getLhs().getType() == add.getRhs().getType() &&
        add.getLhs().getType() == add.getType()) {
      addends.push_back(add.getLhs());
      addends.push_back(add.getRhs());
      continue;
    }
    if (isTheRead(value))
      ++reads;
    else
      others.push_back(value);
  }
  return reads == 1 &&
         llvm::none_of(others, [&](Value other) { return readsTensor(other); });
}

FailureOr<TermOp> mlir::energy::buildEnergyReadingValues(
    ModelOp model, ArrayRef<TermOp> terms, ArrayRef<LetOp> lets,
    ArrayRef<StringRef> values, StringRef name) {
  OpBuilder declarations = OpBuilder::atBlockEnd(&model.getBody().front());
  auto energy = TermOp::create(declarations, model.getLoc(),
                               declarations.getStringAttr(name),
                               /*auxiliary=*/true, /*loss=*/false);
  OpBuilder body = OpBuilder::atBlockEnd(&energy.getBody().emplaceBlock());
  Value sum;
  for (TermOp term : terms) {
    IRMapping mapping;
    Block &source = term.getBody().front();
    for (Operation &op : source.without_terminator())
      body.clone(op, mapping);
    Value value = mapping.lookupOrDefault(
        cast<YieldOp>(source.getTerminator()).getValues().front());
    sum = sum ? AddOp::create(body, term.getLoc(), sum, value).getResult()
              : value;
  }
  YieldOp::create(body, model.getLoc(), sum);
  llvm::DenseMap<Operation *, StringRef> valueOf;
  for (auto [let, value] : llvm::zip(lets, values))
    valueOf[let] = value;
  SymbolTableCollection tables;
  if (failed(inlineLets(energy.getBody(), tables,
                        [&](LetOp let) { return valueOf.contains(let); })))
    return failure();
  SmallVector<ReadOp> reads;
  energy.getBody().walk([&](ReadOp read) {
    if (isa_and_nonnull<LetOp>(
            tables.lookupNearestSymbolFrom(read, read.getSourceAttr())))
      reads.push_back(read);
  });
  for (ReadOp read : reads) {
    OpBuilder at(read);
    Operation *let = tables.lookupNearestSymbolFrom(read, read.getSourceAttr());
    Value replacement = ReadOp::create(
        at, read.getLoc(), read.getType(),
        FlatSymbolRefAttr::get(model.getContext(), valueOf.lookup(let)),
        read.getMapAttr(), read.getIndices());
    read.getResult().replaceAllUsesWith(replacement);
    read.erase();
  }
  return energy;
}
