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
// their own tables (ContractTables.cpp). Last, once products are formed, a
// loop over several indices that nothing encloses computes what depends on
// some of them only (a row's softmax read at every slot) once per position
// of those (energy-plan-row-tables).
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"
#include "Slices.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallBitVector.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// The values `member` uses: its operands and those of the ops nested in
/// it that come from outside it (a reduction's body reading a value of the
/// loop around).
SmallVector<Value> usedValues(Operation *member) {
  SmallVector<Value> used;
  member->walk([&](Operation *nested) {
    for (Value operand : nested->getOperands())
      if (nested == member || isDefinedOutside(operand, member))
        used.push_back(operand);
  });
  return used;
}

/// The domain and body of a loop-like op whose body runs per position.
struct InnerLoop {
  Operation *op;
  ArrayAttr sizes;
  Block *body;
};

std::optional<InnerLoop> innerLoopOf(Operation *op) {
  if (auto reduce = dyn_cast<ReduceOp>(op))
    return InnerLoop{op, reduce.getSizes(), &reduce.getBody().front()};
  if (auto loop = dyn_cast<ForeachOp>(op))
    return InnerLoop{op, loop.getSizes(), &loop.getBody().front()};
  // A table nested in a loop or table runs its body at every position of
  // both too (a row's softmax over its components).
  if (auto table = dyn_cast<TabulateOp>(op); table && !isStatement(table))
    return InnerLoop{op, table.getSizes(), &table.getBody().front()};
  return std::nullopt;
}

/// Whether evaluating `op` costs more than addressing memory.
bool isComputation(Operation *op) {
  return !isa<ReadOp, ExtractOp, ConstantOp, RoundingUnitOp, StepOp, SizeOp,
              ToRealOp>(op) &&
         op->getDialect()->getNamespace() == "energy" &&
         op->getNumResults() == 1 && isa<ArrayType>(op->getResult(0).getType());
}

/// A loop over plain dims around an inner loop, whose indices the inner
/// loop's tables may be indexed by too (a batch index that rows and columns
/// share); none for other ops.
std::optional<InnerLoop> carrierOf(Operation *op) {
  std::optional<InnerLoop> loop = innerLoopOf(op);
  if (auto table = dyn_cast<TabulateOp>(op))
    loop = InnerLoop{op, table.getSizes(), &table.getBody().front()};
  if (!loop || !hasPlainDims(loop->sizes))
    return std::nullopt;
  return loop;
}

bool hasPredicate(Operation *op) {
  if (auto reduce = dyn_cast<ReduceOp>(op))
    return reduce.hasPredicate();
  if (auto foreach = dyn_cast<ForeachOp>(op))
    return foreach.hasPredicate();
  return false;
}

/// A table at the builder's point over `sizes` (plain dims) of arrays of
/// `element`'s type, with one index argument per value of `indices`, mapped
/// to it in `mapping`; its body is left for the caller to fill.
TabulateOp tableOver(OpBuilder &builder, Location loc,
                     ArrayRef<Attribute> sizes, ValueRange indices,
                     Type element, IRMapping &mapping) {
  MLIRContext *context = builder.getContext();
  SmallVector<StringAttr> dims;
  for (Attribute size : sizes)
    dims.push_back(
        StringAttr::get(context, *cast<DimExprAttr>(size).getDimName()));
  llvm::append_range(dims, cast<ArrayType>(element).getShape());
  auto table = TabulateOp::create(builder, loc, ArrayType::get(context, dims),
                                  ArrayAttr::get(context, sizes));
  Block &body = table.getBody().emplaceBlock();
  for (Value index : indices)
    mapping.map(index, body.addArgument(index.getType(), index.getLoc()));
  return table;
}

/// Whether `loop` as a whole reads every index of the loop directly around
/// it (carriers[0]) but not every index of the loops around that one, and
/// reads only what they compute from their indices (`liftable`, masks in
/// `outerMask`): the level above then tabulates the whole loop once per
/// position of the indices it reads (the residual x[b, j] − Σ_i a[b, j, i]
/// v[b, i] in a sum over j inside a table over (b, i')), and a table of its
/// body's values over those indices and its own (a[b, j, i] v[b, i], a
/// vector for every (b, j, i)) would store what that loop computes once
/// anyway.
bool isComputedOnceAbove(InnerLoop loop, ArrayRef<InnerLoop> carriers,
                         const llvm::DenseMap<Value, uint64_t> &outerMask,
                         const llvm::DenseSet<Operation *> &liftable) {
  if (carriers.size() < 2 || !innerLoopOf(carriers.front().op) ||
      !onlyReads(loop.op))
    return false;
  uint64_t inner = 0, all = 0, used = 0;
  for (auto [position, carrier] : llvm::enumerate(carriers))
    for (BlockArgument argument : carrier.body->getArguments()) {
      uint64_t bit = outerMask.lookup(argument);
      if (!bit)
        return false;
      all |= bit;
      if (position == 0)
        inner |= bit;
    }
  bool known = true;
  loop.op->walk([&](Operation *nested) {
    for (Value operand : nested->getOperands()) {
      if (!isDefinedOutside(operand, loop.op))
        continue;
      used |= outerMask.lookup(operand);
      Operation *def = operand.getDefiningOp();
      // A value the loops around compute of more than their indices.
      if (def && carriers.back().op->isAncestor(def) && !liftable.contains(def))
        known = false;
    }
  });
  return known && (used & inner) == inner && (used & all) != all;
}

/// Hoists the values of `loop`'s body that depend on its indices only, or
/// on them and the indices of the loops around it: each goes into a table
/// over the indices it uses, ahead of the outermost loop it can be
/// computed outside of. Returns whether it made any table.
bool hoistFrom(InnerLoop loop, SymbolTable &symbols) {
  // Only a loop inside another runs its body more often than its domain.
  Operation *outer = loop.op->getParentOp();
  if (!isa<ReduceOp, ForeachOp, TabulateOp, SoftmaxContractOp>(outer) ||
      !hasPlainDims(loop.sizes))
    return false;
  Block &body = *loop.body;
  // The loops around, innermost first, whose indices tables may carry.
  SmallVector<InnerLoop> carriers;
  for (Operation *op = outer; op; op = op->getParentOp()) {
    std::optional<InnerLoop> carrier = carrierOf(op);
    if (!carrier)
      break;
    carriers.push_back(*carrier);
  }
  bool predicated = hasPredicate(loop.op) ||
                    llvm::any_of(carriers, [](const InnerLoop &carrier) {
                      return hasPredicate(carrier.op);
                    });
  // Ops of the body that depend on nothing but its indices, the indices of
  // the loops around it and values from outside the enclosing loop.
  llvm::DenseSet<Value> own, carried;
  for (BlockArgument argument : body.getArguments())
    own.insert(argument);
  for (const InnerLoop &carrier : carriers)
    for (BlockArgument argument : carrier.body->getArguments())
      carried.insert(argument);
  // Values the loops around compute from their indices alone (Wk[k] in a
  // loop over heads k): a table may compute them again itself.
  llvm::DenseSet<Operation *> liftable;
  for (const InnerLoop &carrier : llvm::reverse(carriers))
    for (Operation &op : carrier.body->without_terminator()) {
      if (op.getNumRegions() ||
          !(isa<ReadOp, ExtractOp>(op) || isMemoryEffectFree(&op)) ||
          (predicated && !readsPlainly(&op)))
        continue;
      if (llvm::all_of(op.getOperands(), [&](Value operand) {
            Operation *def = operand.getDefiningOp();
            return carried.contains(operand) || liftable.contains(def) ||
                   isDefinedOutside(operand, carriers.back().op);
          }))
        liftable.insert(&op);
    }
  auto isLifted = [&](Value value) {
    return liftable.contains(value.getDefiningOp());
  };
  // Which indices of the loops around each value depends on: one that
  // depends on all of them (and on the inner loop's) is a value per
  // position of the whole nest, which a table would only copy.
  llvm::DenseMap<Value, uint64_t> outerMask;
  uint64_t allOuter = 0;
  unsigned bit = 0;
  for (const InnerLoop &carrier : carriers)
    for (BlockArgument argument : carrier.body->getArguments())
      if (bit < 64) {
        outerMask[argument] = uint64_t(1) << bit++;
        allOuter |= outerMask[argument];
      }
  auto maskOf = [&](Operation *op) {
    uint64_t mask = 0;
    op->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        mask |= outerMask.lookup(operand);
    });
    return mask;
  };
  for (const InnerLoop &carrier : llvm::reverse(carriers))
    for (Operation &op : carrier.body->without_terminator())
      if (liftable.contains(&op))
        for (Value result : op.getResults())
          outerMask[result] = maskOf(&op);
  if (isComputedOnceAbove(loop, carriers, outerMask, liftable))
    return false;
  llvm::DenseSet<Operation *> candidates;
  for (Operation &op : body.without_terminator()) {
    // A sum or table nested in the body (x[b, j] − Wd Σ_i a[b, j, i] in a
    // table over (b, i)) counts with the values its regions capture.
    bool nestedLoop = isa<ReduceOp, TabulateOp>(op) && onlyReads(&op);
    if ((op.getNumRegions() && !nestedLoop) ||
        (predicated && !readsPlainly(&op)))
      continue;
    bool local = true;
    op.walk([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        if (isDefinedOutside(operand, &op))
          local &= own.contains(operand) || carried.contains(operand) ||
                   isLifted(operand) || isDefinedOutside(operand, outer);
    });
    uint64_t mask = maskOf(&op);
    if (!local || (allOuter && mask == allOuter))
      continue;
    for (Value result : op.getResults())
      outerMask[result] = mask;
    for (Value result : op.getResults())
      own.insert(result);
    candidates.insert(&op);
  }
  // Worth a table: computations used by something that depends on more. A
  // read of a let computes the let's body.
  auto worthATable = [&](Operation *op) {
    if (auto read = dyn_cast<ReadOp>(op))
      return isa_and_nonnull<LetOp>(symbols.lookup(read.getSource()));
    return isComputation(op);
  };
  SmallVector<Operation *> hoisted;
  for (Operation &op : body.without_terminator()) {
    if (!candidates.contains(&op) || !worthATable(&op))
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
  MLIRContext *context = loop.op->getContext();
  bool made = false;
  for (Operation *op : hoisted) {
    Value value = op->getResult(0);
    llvm::SetVector<Operation *> slice;
    addToSlice(value, body, slice);
    // The lifted values the slice needs, outermost loop first.
    llvm::SetVector<Operation *> lifted;
    {
      llvm::DenseSet<Operation *> needed;
      SmallVector<Operation *> work(slice.begin(), slice.end());
      while (!work.empty()) {
        Operation *member = work.pop_back_val();
        for (Value operand : usedValues(member))
          if (isLifted(operand) &&
              needed.insert(operand.getDefiningOp()).second)
            work.push_back(operand.getDefiningOp());
      }
      for (const InnerLoop &carrier : llvm::reverse(carriers))
        for (Operation &member : carrier.body->without_terminator())
          if (needed.contains(&member))
            lifted.insert(&member);
    }
    auto uses = [&](Value argument) {
      auto usesIn = [&](Operation *member) {
        bool found = false;
        member->walk([&](Operation *nested) {
          found |= llvm::is_contained(nested->getOperands(), argument);
        });
        return found;
      };
      return llvm::any_of(slice, usesIn) || llvm::any_of(lifted, usesIn);
    };
    // The outermost carrier the table can go before: every value the
    // slice needs, other than its own indices and those of the carriers
    // inside that one, is available there.
    size_t level = 0;
    bool anyCarried = false;
    for (size_t candidate = 0; candidate < carriers.size(); ++candidate) {
      llvm::DenseSet<Value> indices(own.begin(), own.end());
      for (size_t inner = 0; inner <= candidate; ++inner)
        for (BlockArgument argument : carriers[inner].body->getArguments())
          indices.insert(argument);
      bool available = true;
      for (auto *members : {&lifted, &slice})
        for (Operation *member : *members)
          for (Value operand : usedValues(member))
            if (!indices.contains(operand) && !isLifted(operand) &&
                !availableBefore(operand, carriers[candidate].op))
              available = false;
      if (!available)
        break;
      level = candidate;
    }
    SmallVector<Value> outerIndices;
    SmallVector<Attribute> sizes;
    bool everyIndex = !carriers.empty();
    for (size_t inner = carriers.empty() ? 0 : level + 1; inner-- > 0;)
      for (BlockArgument argument : carriers[inner].body->getArguments()) {
        if (!uses(argument)) {
          everyIndex = false;
          continue;
        }
        outerIndices.push_back(argument);
        sizes.push_back(carriers[inner].sizes[argument.getArgNumber()]);
        anyCarried = true;
      }
    // A table over every index of the loops it would leave saves nothing.
    if (everyIndex)
      continue;
    // Without carried indices, as far out as the values allow.
    Operation *point = carriers.empty() ? outer : carriers[level].op;
    while (!anyCarried &&
           !isa<ModelOp, TermOp, GradientOp, UpdateProgramOp, BackwardProgramOp,
                DynamicsOp, LetOp, OutputOp, RepeatOp>(point->getParentOp())) {
      Operation *next = point->getParentOp();
      bool available = lifted.empty();
      for (Operation *member : slice)
        for (Value operand : usedValues(member))
          if (!own.contains(operand) && !availableBefore(operand, next))
            available = false;
      if (!available)
        break;
      point = next;
    }
    llvm::append_range(sizes, loop.sizes);
    auto elementType = cast<ArrayType>(value.getType());
    SmallVector<Value> tableIndices(outerIndices);
    llvm::append_range(tableIndices, body.getArguments());
    OpBuilder builder(point);
    IRMapping mapping;
    TabulateOp table = tableOver(builder, op->getLoc(), sizes, tableIndices,
                                 elementType, mapping);
    Block &tableBody = table.getBody().front();
    OpBuilder inside = OpBuilder::atBlockEnd(&tableBody);
    for (Operation *member : lifted)
      inside.clone(*member, mapping);
    cloneSlice(body, slice, inside, mapping);
    YieldOp::create(inside, op->getLoc(), mapping.lookupOrDefault(value));
    moveLoopInvariantCode(cast<LoopLikeOpInterface>(table.getOperation()));
    builder.setInsertionPoint(op);
    auto map = AffineMap::getMultiDimIdentityMap(tableIndices.size(), context);
    Value row = ExtractOp::create(builder, op->getLoc(), elementType, table,
                                  AffineMapAttr::get(map), tableIndices);
    value.replaceAllUsesWith(row);
    made = true;
  }
  if (made)
    eraseDeadOps(body);
  return made;
}

/// Hoists, out of a loop over several indices that no other loop encloses,
/// the values of its body that depend on some of its indices only (a row's
/// softmax over slots, read in a table over (b, j, i) at every slot i):
/// each goes into a table over the indices it uses, ahead of the loop.
/// Returns whether it made any table.
bool hoistFromStatement(InnerLoop loop) {
  Block &body = *loop.body;
  unsigned count = body.getNumArguments();
  if (!isStatement(loop.op) || count < 2 || count > 64 ||
      !hasPlainDims(loop.sizes) || hasPredicate(loop.op))
    return false;
  uint64_t all = (uint64_t(1) << count) - 1;
  // The indices each value of the body depends on; values of the ops that
  // may leave the loop only (their operands from outside it, its indices
  // or other such values).
  llvm::DenseMap<Value, uint64_t> maskOf;
  llvm::DenseMap<Operation *, uint64_t> opMask;
  for (BlockArgument argument : body.getArguments())
    maskOf[argument] = uint64_t(1) << argument.getArgNumber();
  llvm::DenseSet<Operation *> movable;
  for (Operation &op : body) {
    bool nestedLoop = isa<ReduceOp, TabulateOp>(op) && onlyReads(&op);
    bool local = (!op.getNumRegions() || nestedLoop) &&
                 (isa<ReadOp>(op) || isMemoryEffectFree(&op) || nestedLoop);
    uint64_t mask = 0;
    op.walk([&](Operation *nested) {
      for (Value operand : nested->getOperands()) {
        if (!isDefinedOutside(operand, &op) ||
            isDefinedOutside(operand, loop.op))
          continue;
        mask |= maskOf.lookup(operand);
        Operation *def = operand.getDefiningOp();
        local &= !def || movable.contains(def);
      }
    });
    opMask[&op] = mask;
    for (Value result : op.getResults())
      maskOf[result] = mask;
    if (local && readsPlainly(&op) && !op.hasTrait<OpTrait::IsTerminator>())
      movable.insert(&op);
  }
  // Worth a table: what does more than element-wise work on its operands
  // (a table that only gathers elements is a copy).
  auto doesRowWork = [](Operation *op) {
    if (auto table = dyn_cast<TabulateOp>(op))
      return table
          ->walk([](Operation *nested) {
            return isa<TabulateOp, ExtractOp, ReadOp, YieldOp, ConstantOp>(
                       nested)
                       ? WalkResult::advance()
                       : WalkResult::interrupt();
          })
          .wasInterrupted();
    return isa<MatmulOp, DotOp, QuadOp, OuterOp, SoftmaxOp, LogSoftmaxOp,
               LayerNormOp, RmsNormOp, ReduceOp, ReduceElementsOp, SumLastOp,
               InverseOp, LogDetOp>(op);
  };
  SmallVector<Operation *> hoisted;
  for (Operation &op : body.without_terminator()) {
    if (!movable.contains(&op) || !isComputation(&op))
      continue;
    uint64_t mask = opMask.lookup(&op);
    if (mask == 0 || mask == all)
      continue;
    llvm::SetVector<Operation *> slice;
    addToSlice(op.getResult(0), body, slice);
    bool usedWider = llvm::any_of(op.getUsers(), [&](Operation *user) {
      Operation *inBody = body.findAncestorOpInBlock(*user);
      return !inBody || (opMask.lookup(inBody) & ~mask) != 0 ||
             inBody->hasTrait<OpTrait::IsTerminator>();
    });
    if (usedWider && llvm::any_of(slice, doesRowWork))
      hoisted.push_back(&op);
  }
  MLIRContext *context = loop.op->getContext();
  for (Operation *op : hoisted) {
    Value value = op->getResult(0);
    uint64_t mask = opMask.lookup(op);
    llvm::SetVector<Operation *> slice;
    addToSlice(value, body, slice);
    SmallVector<Value> indices;
    SmallVector<Attribute> sizes;
    for (BlockArgument argument : body.getArguments())
      if (mask & (uint64_t(1) << argument.getArgNumber())) {
        indices.push_back(argument);
        sizes.push_back(loop.sizes[argument.getArgNumber()]);
      }
    OpBuilder builder(loop.op);
    IRMapping mapping;
    TabulateOp table = tableOver(builder, op->getLoc(), sizes, indices,
                                 value.getType(), mapping);
    Block &tableBody = table.getBody().front();
    OpBuilder inside = OpBuilder::atBlockEnd(&tableBody);
    cloneSlice(body, slice, inside, mapping);
    YieldOp::create(inside, op->getLoc(), mapping.lookupOrDefault(value));
    builder.setInsertionPoint(op);
    Value element =
        ExtractOp::create(builder, op->getLoc(), value.getType(), table,
                          AffineMapAttr::get(AffineMap::getMultiDimIdentityMap(
                              indices.size(), context)),
                          indices);
    value.replaceAllUsesWith(element);
  }
  if (!hoisted.empty())
    eraseDeadOps(body);
  return !hoisted.empty();
}

/// Replaces each whole-element read of a let at a table's own indices
/// (`tabulate (b, c) { read @L[b, c] }`, the table being where the let is
/// computed once per position) by the let's body, so that the work in the
/// body's own loops that depends on fewer indices is tabulated too.
/// Returns whether it replaced any.
bool inlineLetsIntoTables(ModelOp model) {
  SymbolTable symbols(model);
  SmallVector<ReadOp> reads;
  model.walk([&](ReadOp read) {
    auto table = dyn_cast<TabulateOp>(read->getParentOp());
    auto let = symbols.lookup<LetOp>(read.getSource());
    if (!table || !let || !read.getMap().isIdentity() ||
        read.getIndices().size() > let.getDomain().size() ||
        read.getIndices().empty())
      return;
    // A row (a prefix of the domain's indices): a table over the rest.
    if (read.getIndices().size() < let.getDomain().size() &&
        !hasPlainDims(ArrayAttr::get(
            model.getContext(),
            let.getDomain().getValue().drop_front(read.getIndices().size()))))
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
    unsigned fixed = read.getIndices().size();
    IRMapping mapping;
    mapping.map(letBody.getArguments().take_front(fixed), read.getIndices());
    OpBuilder builder(read);
    Location loc = read.getLoc();
    Value element = cast<YieldOp>(letBody.getTerminator()).getValues()[0];
    Value value;
    if (fixed == let.getDomain().size()) {
      for (Operation &op : letBody.without_terminator())
        builder.clone(op, mapping);
      value = mapping.lookupOrDefault(element);
    } else {
      auto row = TabulateOp::create(
          builder, loc, read.getType(),
          ArrayAttr::get(model.getContext(),
                         let.getDomain().getValue().drop_front(fixed)));
      Block &rowBody = row.getBody().emplaceBlock();
      for (BlockArgument argument : letBody.getArguments().drop_front(fixed))
        mapping.map(argument,
                    rowBody.addArgument(argument.getType(), argument.getLoc()));
      OpBuilder inside = OpBuilder::atBlockEnd(&rowBody);
      for (Operation &op : letBody.without_terminator())
        inside.clone(op, mapping);
      YieldOp::create(inside, loc, mapping.lookupOrDefault(element));
      moveLoopInvariantCode(cast<LoopLikeOpInterface>(row.getOperation()));
      value = row;
    }
    read.replaceAllUsesWith(value);
    auto table = cast<TabulateOp>(read->getParentOp());
    read.erase();
    moveLoopInvariantCode(cast<LoopLikeOpInterface>(table.getOperation()));
  }
  return !reads.empty();
}

/// Reads an element of a let's row (`read @a[b, j, i]`, the let over
/// (b, j) and i an index of its element) as the element of the row's read
/// (`extract (read @a[b, j])[i]`), moved out of the loops over the element's
/// indices: the row is then computed once, not once per element.
void readLetRowsWhole(ModelOp model, SymbolTable &symbols) {
  SmallVector<ReadOp> reads;
  model.walk([&](ReadOp read) {
    auto let = symbols.lookup<LetOp>(read.getSource());
    if (let && read.getMap().isIdentity() &&
        read.getIndices().size() > let.getDomain().size())
      reads.push_back(read);
  });
  for (ReadOp read : reads) {
    auto let = symbols.lookup<LetOp>(read.getSource());
    size_t rowIndices = let.getDomain().size();
    OpBuilder builder(read);
    MLIRContext *context = model.getContext();
    auto row = ReadOp::create(
        builder, read.getLoc(), cast<ArrayType>(let.getElementType()),
        read.getSourceAttr(),
        AffineMapAttr::get(
            AffineMap::getMultiDimIdentityMap(rowIndices, context)),
        read.getIndices().take_front(rowIndices));
    size_t elementIndices = read.getIndices().size() - rowIndices;
    Value element =
        ExtractOp::create(builder, read.getLoc(), read.getType(), row,
                          AffineMapAttr::get(AffineMap::getMultiDimIdentityMap(
                              elementIndices, context)),
                          read.getIndices().drop_front(rowIndices));
    read.getResult().replaceAllUsesWith(element);
    read.erase();
    for (Operation *loop = row->getParentOp();
         auto loopLike = dyn_cast<LoopLikeOpInterface>(loop);
         loop = loop->getParentOp())
      moveLoopInvariantCode(loopLike);
  }
}

/// Whether `indices` are the arguments of `body`, each once, in any order,
/// over the let's `domain` where the loop around runs over `sizes`.
bool readsEveryPosition(OperandRange indices, Block *body, ArrayAttr sizes,
                        ArrayAttr domain) {
  if (indices.size() != body->getNumArguments() ||
      indices.size() != domain.size())
    return false;
  llvm::SmallBitVector seen(indices.size());
  for (auto [position, index] : llvm::enumerate(indices)) {
    auto argument = dyn_cast<BlockArgument>(index);
    if (!argument || argument.getOwner() != body ||
        seen.test(argument.getArgNumber()) ||
        sizes[argument.getArgNumber()] != domain[position])
      return false;
    seen.set(argument.getArgNumber());
  }
  return true;
}

/// Replaces each read of a let's element at the indices of a sum or table
/// that runs over the let's whole domain, in any order, and is a statement
/// (a loss's mean over every position of a let it reads) by the element of
/// a read of the whole let ahead of it: the let is then a table, whose
/// products of rows and matrices are GEMMs, not products per position.
void readLetsAtLoopIndicesWhole(ModelOp model, SymbolTable &symbols) {
  SmallVector<ReadOp> reads;
  model.walk([&](ReadOp read) {
    auto let = symbols.lookup<LetOp>(read.getSource());
    Operation *loop = read->getParentOp();
    if (!let || let.getDomain().empty() || !hasPlainDims(let.getDomain()) ||
        !read.getMap().isIdentity() || !isStatement(loop))
      return;
    ArrayAttr sizes;
    if (auto sum = dyn_cast<ReduceOp>(loop); sum && !sum.hasPredicate())
      sizes = sum.getSizes();
    else if (auto table = dyn_cast<TabulateOp>(loop))
      sizes = table.getSizes();
    if (!sizes ||
        read->getBlock() != &loop->getRegion(loop->getNumRegions() - 1).front())
      return;
    if (readsEveryPosition(read.getIndices(), read->getBlock(), sizes,
                           let.getDomain()))
      reads.push_back(read);
  });
  for (ReadOp read : reads) {
    auto let = symbols.lookup<LetOp>(read.getSource());
    OpBuilder builder(read->getParentOp());
    auto whole = ReadOp::create(
        builder, read.getLoc(), let.getArrayType(), read.getSourceAttr(),
        AffineMapAttr::get(AffineMap::get(builder.getContext())), ValueRange());
    builder.setInsertionPoint(read);
    Value element =
        ExtractOp::create(builder, read.getLoc(), read.getType(), whole,
                          read.getMapAttr(), read.getIndices());
    read.getResult().replaceAllUsesWith(element);
    read.erase();
  }
}

/// Replaces each read of a whole let (no indices) directly in a program,
/// term or gradient by a table over the let's domain that reads the let at
/// every position: the let's body is then inlined into the table, whose
/// work the other steps plan like any table's (the matrix-vector products
/// of a let that an explicit rule stores become one product of all rows).
void tabulateWholeLetReads(ModelOp model) {
  SymbolTable symbols(model);
  readLetRowsWhole(model, symbols);
  readLetsAtLoopIndicesWhole(model, symbols);
  SmallVector<ReadOp> reads;
  model.walk([&](ReadOp read) {
    auto let = symbols.lookup<LetOp>(read.getSource());
    if (let && read.getIndices().empty() && !let.getDomain().empty() &&
        hasPlainDims(let.getDomain()) && isStatement(read) &&
        read.getType() == let.getArrayType())
      reads.push_back(read);
  });
  MLIRContext *context = model.getContext();
  for (ReadOp read : reads) {
    auto let = symbols.lookup<LetOp>(read.getSource());
    OpBuilder builder(read);
    auto table = TabulateOp::create(builder, read.getLoc(), read.getType(),
                                    let.getDomain());
    Block &body = table.getBody().emplaceBlock();
    for (BlockArgument argument : let.getBody().front().getArguments())
      body.addArgument(argument.getType(), argument.getLoc());
    OpBuilder inside = OpBuilder::atBlockEnd(&body);
    auto element = ReadOp::create(
        inside, read.getLoc(), cast<ArrayType>(let.getElementType()),
        read.getSourceAttr(),
        AffineMapAttr::get(
            AffineMap::getMultiDimIdentityMap(body.getNumArguments(), context)),
        body.getArguments());
    YieldOp::create(inside, read.getLoc(), element.getResult());
    read.getResult().replaceAllUsesWith(table.getResult());
    read.erase();
  }
}

} // namespace

void mlir::energy::hoistLoopTables(ModelOp model) {
  tabulateWholeLetReads(model);
  // Tables made here may read lets too: their bodies are inlined in turn,
  // and their loops get tables of their own.
  bool more = true;
  for (int round = 0; more && round < 8; ++round) {
    more = inlineLetsIntoTables(model);
    SymbolTable symbols(model);
    SmallVector<InnerLoop> loops;
    model.walk([&](Operation *op) {
      if (std::optional<InnerLoop> loop = innerLoopOf(op))
        loops.push_back(*loop);
    });
    for (InnerLoop loop : loops)
      more |= hoistFrom(loop, symbols);
  }
}

void mlir::energy::hoistRowTables(ModelOp model) {
  SmallVector<InnerLoop> statements;
  model.walk([&](Operation *op) {
    if (std::optional<InnerLoop> loop = carrierOf(op); loop && isStatement(op))
      statements.push_back(*loop);
  });
  for (InnerLoop loop : statements)
    hoistFromStatement(loop);
}
