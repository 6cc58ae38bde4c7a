//===- InlineTables.cpp - Tables computed where a loop reads them ---------===//
//
// A table that loops over the same positions read element by element, each
// at its own position, is an array written in one pass and read back in
// another: computed inside the loops that read it instead, it costs no pass
// over memory. Read by one loop, the table's work is done once either way;
// read by several, only elementwise work that is cheaper than the pass is
// done again in each.
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"

#include "energy/Transforms/ProgramReads.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// The ops a table read by several loops may compute again in each: those
/// that do a constant amount of work per element of their result.
bool isElementwise(Operation *op) {
  Dialect *dialect = op->getDialect();
  return isa<ReadOp, ExtractOp, ConstantOp, BroadcastOp, AddOp, SubOp, MulOp,
             DivOp, NegOp, ExpOp, LogOp, YieldOp>(op) ||
         (dialect && !isa<EnergyDialect>(dialect));
}

/// The most ops of a table read by several loops that each computes again.
constexpr unsigned kMaxRecomputedOps = 6;

/// The index arguments of the loops (tables, foreachs, sums over
/// positions) that `op` sits in, each in the body of the next, up to the
/// one in `block`, with the size each runs over; false where `op` is not
/// in such a nest (in a predicate, a contraction, another block).
bool loopIndices(Operation *op, Block *block,
                 SmallVectorImpl<std::pair<Value, Attribute>> &indices) {
  while (op->getBlock() != block) {
    Operation *parent = op->getParentOp();
    ArrayAttr sizes;
    Region *body = nullptr;
    if (auto table = dyn_cast_or_null<TabulateOp>(parent)) {
      sizes = table.getSizes();
      body = &table.getBody();
    } else if (auto foreach = dyn_cast_or_null<ForeachOp>(parent)) {
      sizes = foreach.getSizes();
      body = &foreach.getBody();
    } else if (auto reduce = dyn_cast_or_null<ReduceOp>(parent)) {
      sizes = reduce.getSizes();
      body = &reduce.getBody();
    }
    if (!body || op->getBlock() != &body->front())
      return false;
    for (BlockArgument argument : body->front().getArguments())
      indices.push_back({argument, sizes[argument.getArgNumber()]});
    op = parent;
  }
  return true;
}

/// Whether `extract` reads one element of `table` in loops, in the table's
/// block, that each run over as many positions as the table has, each of
/// its indices one of theirs, over the same size, every one used once (so
/// the loops read each element once).
bool readsAtItsPosition(ExtractOp extract, TabulateOp table) {
  SmallVector<std::pair<Value, Attribute>> loops;
  if (extract.getSource() != table.getResult() ||
      !extract.getMap().isIdentity() ||
      extract.getType() != table.getBodyValue().getType() ||
      !loopIndices(extract, table->getBlock(), loops) ||
      loops.size() != table.getSizes().size() ||
      extract.getIndices().size() != loops.size())
    return false;
  llvm::SmallPtrSet<Value, 4> seen;
  for (auto [position, index] : llvm::enumerate(extract.getIndices())) {
    auto loop =
        llvm::find_if(loops, [&](auto &loop) { return loop.first == index; });
    if (loop == loops.end() || !seen.insert(index).second ||
        loop->second != table.getSizes()[position])
      return false;
  }
  return true;
}

/// The outermost loop around `op` in `block`.
Operation *outermostIn(Operation *op, Block *block) {
  while (op->getBlock() != block)
    op = op->getParentOp();
  return op;
}

/// The tensors the ops nested in `region` read.
llvm::SmallDenseSet<StringAttr> tensorsRead(Region &region) {
  llvm::SmallDenseSet<StringAttr> read;
  region.walk([&](ReadOp op) { read.insert(op.getSourceAttr().getAttr()); });
  return read;
}

/// Computes `table` in the loops that read it, when every read is an
/// element at the reading loop's position in the table's block, no op from
/// the table to the last read writes a tensor it reads, and (read more
/// than once) its work is a few elementwise ops. Returns whether it did.
bool inlineTable(TabulateOp table) {
  Block &body = table.getBody().front();
  // The reads, by where they compute the element (a loop body and the
  // indices there): the first read of each computes it.
  llvm::MapVector<std::pair<Block *, SmallVector<Value>>,
                  SmallVector<ExtractOp>>
      readsAt;
  for (Operation *user : table->getUsers()) {
    auto extract = dyn_cast<ExtractOp>(user);
    if (!extract || !readsAtItsPosition(extract, table))
      return false;
    SmallVector<Value> indices(extract.getIndices());
    readsAt[{extract->getBlock(), indices}].push_back(extract);
  }
  if (readsAt.empty())
    return false;
  if (readsAt.size() > 1 &&
      (body.getOperations().size() > kMaxRecomputedOps + 1 ||
       llvm::any_of(body, [](Operation &op) {
         return op.getNumRegions() || !isElementwise(&op);
       })))
    return false;
  // The loops that read the table come after it in its block; nothing from
  // it through the last of them may change what its body reads.
  Operation *last = table;
  for (auto &[at, reads] : readsAt)
    for (ExtractOp extract : reads)
      if (Operation *loop = outermostIn(extract, table->getBlock());
          last->isBeforeInBlock(loop))
        last = loop;
  llvm::SmallDenseSet<StringAttr> tensors = tensorsRead(table.getBody());
  for (Operation *op = table->getNextNode(); op; op = op->getNextNode()) {
    if (llvm::any_of(tensors, [&](StringAttr tensor) {
          return mayWriteTensor(op, tensor.getValue());
        }))
      return false;
    if (op == last)
      break;
  }

  Value yielded = table.getBodyValue();
  for (auto &[at, reads] : readsAt) {
    ExtractOp first = *llvm::min_element(
        reads, [](ExtractOp a, ExtractOp b) { return a->isBeforeInBlock(b); });
    OpBuilder builder(first);
    IRMapping mapping;
    for (auto [argument, index] : llvm::zip(body.getArguments(), at.second))
      mapping.map(argument, index);
    for (Operation &op : body.without_terminator())
      builder.clone(op, mapping);
    for (ExtractOp extract : reads) {
      extract.getResult().replaceAllUsesWith(mapping.lookupOrDefault(yielded));
      extract.erase();
    }
  }
  table.erase();
  return true;
}

} // namespace

void mlir::energy::inlineTables(ModelOp model) {
  // In program order, so that a chain of tables folds into its last reader.
  SmallVector<TabulateOp> tables;
  model.walk([&](TabulateOp table) { tables.push_back(table); });
  for (TabulateOp table : tables)
    inlineTable(table);
}
