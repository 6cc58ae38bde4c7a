//===- LoopTables.cpp - Work of an inner loop's own indices ahead of it ---===//
//
// A reduction or loop nested in another evaluates its body at every position
// of both; work in its body that depends on its own indices only (a
// component's log-determinant inside a sum over points and components) is
// computed once per position of those indices, into an `energy.tabulate`
// ahead of the outermost loop it does not depend on, and read back with
// `energy.extract`. Work that also depends on indices of the loop directly
// around (a batch index b in Σ_c W x[b, c] inside a loop over (b, p)) is
// tabulated over those too, just ahead of that loop. Softmax contractions have
// their own tables (ContractTables.cpp).
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"
#include "Slices.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// The domain and body of a loop-like op whose body runs per position.
struct InnerLoop {
  Operation *op;
  ArrayAttr sizes;
  Block *body;
};

std::optional<InnerLoop> innerLoopOf(Operation *op) {
  if (auto reduce = dyn_cast<ReduceOp>(op); reduce && !reduce.hasPredicate())
    return InnerLoop{op, reduce.getSizes(), &reduce.getBody().front()};
  if (auto loop = dyn_cast<ForeachOp>(op); loop && !loop.hasPredicate())
    return InnerLoop{op, loop.getSizes(), &loop.getBody().front()};
  return std::nullopt;
}

/// Whether evaluating `op` costs more than addressing memory.
bool isComputation(Operation *op) {
  return !isa<ReadOp, ExtractOp, ConstantOp, StepOp, SizeOp, ToRealOp>(op) &&
         op->getDialect()->getNamespace() == "energy" &&
         op->getNumResults() == 1 && isa<ArrayType>(op->getResult(0).getType());
}

/// Whether `value` is available before `point`: defined in a block that
/// encloses `point`, before it.
bool availableBefore(Value value, Operation *point) {
  Region *region = value.getParentRegion();
  if (!region->isAncestor(point->getParentRegion()))
    return false;
  Operation *def = value.getDefiningOp();
  if (!def)
    return true;
  Operation *ancestor = def->getBlock()->findAncestorOpInBlock(*point);
  return ancestor && def->isBeforeInBlock(ancestor);
}

/// The indices of `outer`, a loop over plain dims directly around an inner
/// loop, that the inner loop's tables may be indexed by too (a batch index
/// that rows and columns share), with their sizes; none for other ops.
std::optional<InnerLoop> carriedLoopOf(Operation *outer) {
  std::optional<InnerLoop> loop = innerLoopOf(outer);
  if (!loop)
    if (auto table = dyn_cast<TabulateOp>(outer))
      loop = InnerLoop{outer, table.getSizes(), &table.getBody().front()};
  if (!loop || !hasPlainDims(loop->sizes))
    return std::nullopt;
  return loop;
}

/// Hoists the values of `loop`'s body that depend on its indices only, or
/// on them and the indices of the loop directly around it.
void hoistFrom(InnerLoop loop) {
  // Only a loop inside another runs its body more often than its domain.
  Operation *outer = loop.op->getParentOp();
  if (!isa<ReduceOp, ForeachOp, TabulateOp, SoftmaxContractOp>(outer) ||
      !hasPlainDims(loop.sizes))
    return;
  Block &body = *loop.body;
  // Ops of the body that depend on nothing but its indices, the indices of
  // the loop around it and values from outside that loop.
  std::optional<InnerLoop> carrier = carriedLoopOf(outer);
  llvm::DenseSet<Value> own, carried;
  for (BlockArgument argument : body.getArguments())
    own.insert(argument);
  if (carrier)
    for (BlockArgument argument : carrier->body->getArguments())
      carried.insert(argument);
  llvm::DenseSet<Operation *> candidates;
  for (Operation &op : body.without_terminator()) {
    if (op.getNumRegions())
      continue;
    bool local = llvm::all_of(op.getOperands(), [&](Value operand) {
      return own.contains(operand) || carried.contains(operand) ||
             isDefinedOutside(operand, outer);
    });
    if (!local)
      continue;
    for (Value result : op.getResults())
      own.insert(result);
    candidates.insert(&op);
  }
  // Worth a table: computations used by something that depends on more.
  SmallVector<Operation *> hoisted;
  for (Operation &op : body.without_terminator()) {
    if (!candidates.contains(&op) || !isComputation(&op))
      continue;
    bool dependsOnIndex = false;
    op.walk([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        dependsOnIndex |= own.contains(operand);
    });
    bool usedByPairs = llvm::any_of(op.getUsers(), [&](Operation *user) {
      Operation *inBody = body.findAncestorOpInBlock(*user);
      return !inBody || !candidates.contains(inBody);
    });
    if (dependsOnIndex && usedByPairs)
      hoisted.push_back(&op);
  }
  if (hoisted.empty())
    return;
  // Which of the carried indices each table needs.
  auto carriedBy = [&](Operation *op) {
    SmallVector<BlockArgument> used;
    if (!carrier)
      return used;
    llvm::SetVector<Operation *> slice;
    addToSlice(op->getResult(0), body, slice);
    for (BlockArgument argument : carrier->body->getArguments())
      if (llvm::any_of(slice, [&](Operation *member) {
            bool uses = false;
            member->walk([&](Operation *nested) {
              uses |= llvm::is_contained(nested->getOperands(), argument);
            });
            return uses;
          }))
        used.push_back(argument);
    return used;
  };
  bool anyCarried = llvm::any_of(
      hoisted, [&](Operation *op) { return !carriedBy(op).empty(); });
  // The outermost op around `loop` whose values the tables do not need;
  // tables indexed by the carried indices go just before their loop.
  Operation *point = outer;
  while (!anyCarried &&
         !isa<ModelOp, TermOp, GradientOp, UpdateProgramOp, BackwardProgramOp,
              DynamicsOp, LetOp, OutputOp, RepeatOp>(point->getParentOp())) {
    Operation *next = point->getParentOp();
    bool available = true;
    for (Operation *op : hoisted) {
      llvm::SetVector<Operation *> slice;
      addToSlice(op->getResult(0), body, slice);
      for (Operation *member : slice)
        for (Value operand : member->getOperands())
          if (!own.contains(operand) && !availableBefore(operand, next))
            available = false;
    }
    if (!available)
      break;
    point = next;
  }
  MLIRContext *context = loop.op->getContext();
  for (Operation *op : hoisted) {
    Value value = op->getResult(0);
    auto elementType = cast<ArrayType>(value.getType());
    SmallVector<BlockArgument> outerIndices = carriedBy(op);
    SmallVector<Attribute> sizes;
    for (BlockArgument index : outerIndices)
      sizes.push_back(carrier->sizes[index.getArgNumber()]);
    llvm::append_range(sizes, loop.sizes);
    SmallVector<StringAttr> dims;
    for (Attribute size : sizes)
      dims.push_back(
          StringAttr::get(context, *cast<DimExprAttr>(size).getDimName()));
    llvm::append_range(dims, elementType.getShape());
    OpBuilder builder(point);
    auto table =
        TabulateOp::create(builder, op->getLoc(), ArrayType::get(context, dims),
                           ArrayAttr::get(context, sizes));
    Block &tableBody = table.getBody().emplaceBlock();
    IRMapping mapping;
    for (BlockArgument index : outerIndices)
      mapping.map(index,
                  tableBody.addArgument(index.getType(), index.getLoc()));
    addIndexArguments(tableBody, body, mapping);
    llvm::SetVector<Operation *> slice;
    addToSlice(value, body, slice);
    OpBuilder inside = OpBuilder::atBlockEnd(&tableBody);
    cloneSlice(body, slice, inside, mapping);
    YieldOp::create(inside, op->getLoc(), mapping.lookup(value));
    moveLoopInvariantCode(cast<LoopLikeOpInterface>(table.getOperation()));
    builder.setInsertionPoint(op);
    SmallVector<Value> indices(outerIndices.begin(), outerIndices.end());
    llvm::append_range(indices, body.getArguments());
    auto map = AffineMap::getMultiDimIdentityMap(indices.size(), context);
    Value row = ExtractOp::create(builder, op->getLoc(), elementType, table,
                                  AffineMapAttr::get(map), indices);
    value.replaceAllUsesWith(row);
  }
}

/// Replaces each whole-element read of a let at a table's own indices
/// (`tabulate (b, c) { read @L[b, c] }`, the table being where the let is
/// computed once per position) by the let's body, so that the work in the
/// body's own loops that depends on fewer indices is tabulated too.
void inlineLetsIntoTables(ModelOp model) {
  SymbolTable symbols(model);
  SmallVector<ReadOp> reads;
  model.walk([&](ReadOp read) {
    auto table = dyn_cast<TabulateOp>(read->getParentOp());
    auto let = symbols.lookup<LetOp>(read.getSource());
    if (!table || !let || !read.getMap().isIdentity() ||
        read.getIndices().size() != let.getDomain().size() ||
        read.getType() != let.getElementType())
      return;
    Block &tableBody = table.getBody().front();
    if (llvm::all_of(read.getIndices(), [&](Value index) {
          return llvm::is_contained(tableBody.getArguments(), index);
        }))
      reads.push_back(read);
  });
  for (ReadOp read : reads) {
    auto let = symbols.lookup<LetOp>(read.getSource());
    Block &letBody = let.getBody().front();
    IRMapping mapping;
    mapping.map(letBody.getArguments(), read.getIndices());
    OpBuilder builder(read);
    for (Operation &op : letBody.without_terminator())
      builder.clone(op, mapping);
    read.replaceAllUsesWith(
        mapping.lookup(cast<YieldOp>(letBody.getTerminator()).getValues()[0]));
    auto table = cast<TabulateOp>(read->getParentOp());
    read.erase();
    moveLoopInvariantCode(cast<LoopLikeOpInterface>(table.getOperation()));
  }
}

} // namespace

void mlir::energy::hoistLoopTables(ModelOp model) {
  inlineLetsIntoTables(model);
  SmallVector<InnerLoop> loops;
  model.walk([&](Operation *op) {
    if (std::optional<InnerLoop> loop = innerLoopOf(op))
      loops.push_back(*loop);
  });
  for (InnerLoop loop : loops)
    hoistFrom(loop);
}
