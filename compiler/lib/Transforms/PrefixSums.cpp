//===- PrefixSums.cpp - Sums bounded by an outer index as running sums ----===//
//
// A sum Σ_{j ≤ i} f(j) inside a loop over i, whose summand does not depend
// on i, is at every i a prefix of one running sum: the running sums of f
// along j are computed once (`energy.prefix_sum`), in a table over the
// indices f uses, ahead of the loops, and read at i. j < i, j ≥ i and j > i
// alike; O(N) per table row where the loop took O(N²).
//
//===----------------------------------------------------------------------===//

#include "Linearity.h"
#include "PlanKernels.h"
#include "Slices.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

#include <functional>

using namespace mlir;
using namespace mlir::energy;

namespace {

/// Which running sum a bound on the summed index selects: j ≤ p, j < p,
/// j ≥ p or j > p for a position p the predicate computes without j.
struct Bound {
  /// What p is computed from, not from j.
  Value position;
  /// Applied to `position` in order: p + v, p - v, v - p, ⌊p / v⌋ or
  /// ⌈p / v⌉, v a value or else the constant (a comparison of j + W with i
  /// is one of j with i - W, one of 2·j with i one of j with ⌊i / 2⌋).
  struct Step {
    enum Kind { Add, Subtract, SubtractFrom, FloorDivide, CeilDivide };
    Kind kind;
    Value value;
    int64_t constant = 0;
  };
  SmallVector<Step> steps;
  /// The ops of the predicate that compute values p is made of, in order.
  SmallVector<Operation *> positionOps;
  /// p where it is an index of a loop around (j ≤ i), else null.
  BlockArgument outer;
  bool reverse = false;
  bool exclusive = false;
};

/// The comparison `kind` with its operands swapped (a ≤ b is b ≥ a).
std::optional<arith::CmpIPredicate>
swappedComparison(arith::CmpIPredicate kind) {
  using P = arith::CmpIPredicate;
  const std::pair<P, P> swapped[] = {
      {P::sle, P::sge}, {P::slt, P::sgt}, {P::sge, P::sle}, {P::sgt, P::slt},
      {P::ule, P::uge}, {P::ult, P::ugt}, {P::uge, P::ule}, {P::ugt, P::ult}};
  auto found = llvm::find_if(
      swapped, [&](const std::pair<P, P> &pair) { return pair.first == kind; });
  if (found == std::end(swapped))
    return std::nullopt;
  return found->second;
}

/// The bound of a predicate that is one comparison of the summed index j
/// (the predicate's argument), plus or minus values computed without it,
/// with a position computed without it (either way round).
std::optional<Bound> boundOf(ReduceOp sum) {
  Region &predicate = sum.getPredicate();
  if (!predicate.hasOneBlock() || predicate.front().getNumArguments() != 1)
    return std::nullopt;
  Block &block = predicate.front();
  BlockArgument inner = block.getArgument(0);
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  if (!yield || yield.getValues().size() != 1)
    return std::nullopt;
  auto compare = yield.getValues()[0].getDefiningOp<arith::CmpIOp>();
  if (!compare || compare->getBlock() != &block)
    return std::nullopt;
  // The ops computed from j (sums and differences on the way to the
  // comparison); the others compute the position: pure, without regions.
  Bound bound;
  llvm::SmallPtrSet<Operation *, 4> fromInner;
  auto readsInner = [&](Value value) {
    return value == inner || fromInner.contains(value.getDefiningOp());
  };
  for (Operation &op : block.without_terminator()) {
    if (&op == compare.getOperation())
      continue;
    if (op.getNumRegions() || !isMemoryEffectFree(&op))
      return std::nullopt;
    if (llvm::any_of(op.getOperands(), readsInner))
      fromInner.insert(&op);
    else
      bound.positionOps.push_back(&op);
  }
  arith::CmpIPredicate kind = compare.getPredicate();
  Value lhs = compare.getLhs(), rhs = compare.getRhs();
  using P = arith::CmpIPredicate;
  // p ≥ j is j ≤ p: the comparison with its operands swapped.
  if (readsInner(rhs)) {
    std::swap(lhs, rhs);
    std::optional<P> swapped = swappedComparison(kind);
    if (!swapped)
      return std::nullopt;
    kind = *swapped;
  }
  if (!readsInner(lhs) || readsInner(rhs))
    return std::nullopt;
  // j + v ⋈ p is j ⋈ p - v, v - j ⋈ p is j ⋈' v - p (the comparison turned).
  unsigned visited = 0;
  while (lhs != inner) {
    Operation *op = lhs.getDefiningOp();
    if (!isa<arith::AddIOp, arith::SubIOp, arith::MulIOp>(op))
      return std::nullopt;
    ++visited;
    Value first = op->getOperand(0), second = op->getOperand(1);
    if (readsInner(first) && readsInner(second))
      return std::nullopt;
    bool innerFirst = readsInner(first);
    if (isa<arith::MulIOp>(op)) {
      // c·j ≤ p is j ≤ ⌊p / c⌋ and c·j ≥ p is j ≥ ⌈p / c⌉ for c > 0, the
      // other way round for c < 0; a strict comparison is first the other
      // with p ∓ 1.
      APInt factor;
      if (!matchPattern(innerFirst ? second : first, m_ConstantInt(&factor)) ||
          factor.isZero())
        return std::nullopt;
      if (kind == P::slt || kind == P::sgt) {
        bound.steps.push_back(
            {Bound::Step::Add, Value(), kind == P::slt ? -1 : 1});
        kind = kind == P::slt ? P::sle : P::sge;
      }
      if (kind != P::sle && kind != P::sge)
        return std::nullopt;
      bool negative = factor.isNegative();
      bound.steps.push_back({(kind == P::sle) != negative
                                 ? Bound::Step::FloorDivide
                                 : Bound::Step::CeilDivide,
                             Value(), factor.getSExtValue()});
      if (negative)
        kind = kind == P::sle ? P::sge : P::sle;
      lhs = innerFirst ? first : second;
    } else if (isa<arith::AddIOp>(op)) {
      bound.steps.push_back(
          {Bound::Step::Subtract, innerFirst ? second : first});
      lhs = innerFirst ? first : second;
    } else if (innerFirst) {
      bound.steps.push_back({Bound::Step::Add, second});
      lhs = first;
    } else {
      bound.steps.push_back({Bound::Step::SubtractFrom, first});
      std::optional<P> swapped = swappedComparison(kind);
      if (!swapped)
        return std::nullopt;
      kind = *swapped;
      lhs = second;
    }
  }
  // Nothing else is computed from j.
  if (visited != fromInner.size())
    return std::nullopt;
  bound.position = rhs;
  auto outer = dyn_cast<BlockArgument>(rhs);
  if (outer && outer.getOwner() != &block && bound.steps.empty())
    bound.outer = outer;
  switch (kind) {
  case P::sle:
  case P::ule:
    break;
  case P::slt:
  case P::ult:
    bound.exclusive = true;
    break;
  case P::sge:
  case P::uge:
    bound.reverse = true;
    break;
  case P::sgt:
  case P::ugt:
    bound.reverse = bound.exclusive = true;
    break;
  default:
    return std::nullopt;
  }
  // Unsigned comparisons agree with signed ones for plain indices only.
  if (!bound.outer && kind != P::sle && kind != P::slt && kind != P::sge &&
      kind != P::sgt)
    return std::nullopt;
  return bound;
}

/// The sizes of the loop-like op whose body `index` is an argument of, when
/// it is a loop or table over plain dims.
ArrayAttr loopSizesOf(BlockArgument index) {
  Operation *owner = index.getOwner()->getParentOp();
  ArrayAttr sizes;
  if (auto reduce = dyn_cast<ReduceOp>(owner);
      reduce && index.getParentRegion() == &reduce.getBody())
    sizes = reduce.getSizes();
  else if (auto loop = dyn_cast<ForeachOp>(owner);
           loop && index.getParentRegion() == &loop.getBody())
    sizes = loop.getSizes();
  else if (auto table = dyn_cast<TabulateOp>(owner))
    sizes = table.getSizes();
  if (!sizes || !hasPlainDims(sizes))
    return ArrayAttr();
  return sizes;
}

/// Replaces `sum` (a bounded sum as above) by a read of a table of running
/// sums; returns whether it did.
bool rewriteAsPrefixSum(ReduceOp sum) {
  if (sum.getKind() != ReduceKind::sum || sum.getTemperature() ||
      sum.getAggregation() || sum.getSizes().size() != 1 ||
      !hasPlainDims(sum.getSizes()) || !sum.hasPredicate())
    return false;
  Block &body = sum.getBody().front();
  BlockArgument inner = body.getArgument(0);
  std::optional<Bound> bound = boundOf(sum);
  if (!bound)
    return false;
  // Plain: j against an index of a loop around over j's own dim, read at
  // that index. Otherwise the position is computed (i·R + N__offset of a
  // sharded rank's rows, i - W of a window) from indices of loops around
  // and dims, and read clamped to j's domain.
  ArrayAttr outerSizes = bound->outer ? loopSizesOf(bound->outer) : ArrayAttr();
  bool plain = outerSizes &&
               outerSizes[bound->outer.getArgNumber()] == sum.getSizes()[0];
  llvm::SetVector<BlockArgument> bounding;
  Block &predicate = sum.getPredicate().front();
  // The indices of loops around that the position reads; other values it
  // reads are computed before the sum, where the position is read.
  for (Operation &op : predicate.without_terminator())
    for (Value operand : op.getOperands()) {
      auto index = dyn_cast<BlockArgument>(operand);
      if (!index || !isDefinedOutside(operand, sum))
        continue;
      if (!isa<ReduceOp, ForeachOp, TabulateOp>(
              index.getOwner()->getParentOp()) ||
          !loopSizesOf(index))
        return false;
      bounding.insert(index);
    }
  if (bounding.empty())
    return false;
  // What the summand uses from outside: indices of loops around (not the
  // bound's); values the loops around compute from those indices alone
  // (a head's Wk[k]), which the table computes again; and values the table
  // can be computed after.
  Operation *statement = sum;
  while (!isa<ModelOp, TermOp, GradientOp, UpdateProgramOp, BackwardProgramOp,
              DynamicsOp, LetOp, OutputOp, RepeatOp>(statement->getParentOp()))
    statement = statement->getParentOp();
  llvm::SetVector<BlockArgument> indices;
  llvm::SetVector<Operation *> lifted;
  SmallVector<Value> others;
  bool usable = true;
  std::function<void(Operation *)> use = [&](Operation *op) {
    if (!isa<ReadOp, ExtractOp>(op) && !isMemoryEffectFree(op))
      usable = false;
    if (!readsPlainly(op))
      usable = false;
    for (Value operand : op->getOperands()) {
      if (!isDefinedOutside(operand, sum))
        continue;
      auto index = dyn_cast<BlockArgument>(operand);
      if (index && isa<ReduceOp, ForeachOp, TabulateOp>(
                       index.getOwner()->getParentOp())) {
        if (bounding.contains(index) || !loopSizesOf(index))
          usable = false;
        indices.insert(index);
        continue;
      }
      Operation *def = operand.getDefiningOp();
      if (def && statement->isProperAncestor(def) &&
          def->getNumRegions() == 0) {
        if (lifted.contains(def))
          continue;
        use(def);
        lifted.insert(def);
        continue;
      }
      others.push_back(operand);
    }
  };
  body.walk([&](Operation *op) { use(op); });
  if (!usable)
    return false;
  // The table goes ahead of the outermost loop among the bound's and those
  // of the indices it uses.
  Operation *point = bounding.front().getOwner()->getParentOp();
  for (BlockArgument index :
       llvm::concat<const BlockArgument>(bounding, indices)) {
    Operation *owner = index.getOwner()->getParentOp();
    if (owner->isProperAncestor(point))
      point = owner;
  }
  auto availableAt = [&](Operation *at) {
    return llvm::all_of(
        others, [&](Value value) { return availableBefore(value, at); });
  };
  if (!availableAt(point))
    return false;
  // The table has indices of its own: as far out as its values allow.
  while (point != statement && availableAt(point->getParentOp()))
    point = point->getParentOp();
  // The table's indices, outermost loop first.
  SmallVector<BlockArgument> ordered(indices.begin(), indices.end());
  llvm::sort(ordered, [](BlockArgument a, BlockArgument b) {
    Operation *ownerA = a.getOwner()->getParentOp();
    Operation *ownerB = b.getOwner()->getParentOp();
    if (ownerA != ownerB)
      return ownerA->isProperAncestor(ownerB);
    return a.getArgNumber() < b.getArgNumber();
  });

  MLIRContext *context = sum.getContext();
  Location loc = sum.getLoc();
  auto element = cast<ArrayType>(sum.getType());
  auto nameOf = [](Attribute size) {
    return *cast<DimExprAttr>(size).getDimName();
  };
  SmallVector<StringAttr> runShape = {
      StringAttr::get(context, nameOf(sum.getSizes()[0]))};
  llvm::append_range(runShape, element.getShape());
  auto runType = ArrayType::get(context, runShape);

  OpBuilder builder(point);
  IRMapping mapping;
  // The summand at every position of j, then its running sums.
  auto buildRunningSums = [&](OpBuilder &at) {
    auto values = TabulateOp::create(at, loc, runType, sum.getSizes());
    Block &valuesBody = values.getBody().emplaceBlock();
    mapping.map(inner, valuesBody.addArgument(inner.getType(), inner.getLoc()));
    OpBuilder inside = OpBuilder::atBlockEnd(&valuesBody);
    for (Operation *op : lifted)
      inside.clone(*op, mapping);
    for (Operation &op : body)
      inside.clone(op, mapping);
    return PrefixSumOp::create(at, loc, values.getResult(), bound->reverse,
                               plain && bound->exclusive)
        .getResult();
  };
  Value table;
  if (ordered.empty()) {
    table = buildRunningSums(builder);
  } else {
    SmallVector<Attribute> sizes;
    SmallVector<StringAttr> shape;
    for (BlockArgument index : ordered) {
      Attribute size = loopSizesOf(index)[index.getArgNumber()];
      sizes.push_back(size);
      shape.push_back(StringAttr::get(context, nameOf(size)));
    }
    llvm::append_range(shape, runShape);
    auto outer =
        TabulateOp::create(builder, loc, ArrayType::get(context, shape),
                           ArrayAttr::get(context, sizes));
    Block &outerBody = outer.getBody().emplaceBlock();
    for (BlockArgument index : ordered)
      mapping.map(index,
                  outerBody.addArgument(index.getType(), index.getLoc()));
    OpBuilder inside = OpBuilder::atBlockEnd(&outerBody);
    Value running = buildRunningSums(inside);
    YieldOp::create(inside, loc, running);
    table = outer.getResult();
  }
  builder.setInsertionPoint(sum);
  SmallVector<Value> at(ordered.begin(), ordered.end());
  auto readAt = [&](Value position) {
    at.push_back(position);
    auto map = AffineMap::getMultiDimIdentityMap(at.size(), context);
    return ExtractOp::create(builder, loc, element, table,
                             AffineMapAttr::get(map), at)
        .getResult();
  };
  Value read;
  if (plain) {
    read = readAt(bound->outer);
  } else {
    // The running sums are inclusive: j < p is j ≤ p - 1, j > p j ≥ p + 1.
    // A position before the first (forward) or past the last (reverse)
    // selects nothing; one past the end the other way selects every j.
    IRMapping positionMapping;
    for (Operation *op : bound->positionOps)
      builder.clone(*op, positionMapping);
    auto constant = [&](int64_t value) {
      return arith::ConstantIndexOp::create(builder, loc, value).getResult();
    };
    Value position = positionMapping.lookupOrDefault(bound->position);
    for (const Bound::Step &step : bound->steps) {
      Value operand = step.value ? positionMapping.lookupOrDefault(step.value)
                                 : constant(step.constant);
      switch (step.kind) {
      case Bound::Step::Add:
        position = arith::AddIOp::create(builder, loc, position, operand);
        break;
      case Bound::Step::Subtract:
        position = arith::SubIOp::create(builder, loc, position, operand);
        break;
      case Bound::Step::SubtractFrom:
        position = arith::SubIOp::create(builder, loc, operand, position);
        break;
      case Bound::Step::FloorDivide:
        position = arith::FloorDivSIOp::create(builder, loc, position, operand);
        break;
      case Bound::Step::CeilDivide:
        position = arith::CeilDivSIOp::create(builder, loc, position, operand);
        break;
      }
    }
    if (bound->exclusive)
      position = arith::AddIOp::create(builder, loc, position,
                                       constant(bound->reverse ? 1 : -1));
    Value count = SizeOp::create(builder, loc, builder.getIndexType(),
                                 cast<DimExprAttr>(sum.getSizes()[0]));
    Value last = arith::SubIOp::create(builder, loc, count, constant(1));
    Value clamped = arith::MaxSIOp::create(
        builder, loc, arith::MinSIOp::create(builder, loc, position, last),
        constant(0));
    Value selects =
        bound->reverse
            ? arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::slt,
                                    position, count)
            : arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::sge,
                                    position, constant(0));
    Value zero = ConstantOp::create(builder, loc, 0.0);
    if (!element.isScalar())
      zero = BroadcastOp::create(builder, loc, element, zero);
    read = SelectOp::create(builder, loc, selects, readAt(clamped), zero);
  }
  sum.getResult().replaceAllUsesWith(read);
  sum.erase();
  return true;
}

/// Whether `result`, computed in `block` (ops in nested regions count as
/// whole), is a linear function of the values `varying`: zero where they
/// are zero, so that a sum of it over their positions is it of their sum.
bool isLinearIn(Value result, Block &block,
                const llvm::SmallPtrSetImpl<Value> &varying) {
  enum State { Fixed, Linear, Other };
  llvm::DenseMap<Value, State> states;
  auto stateOf = [&](Value value) {
    if (varying.contains(value))
      return Linear;
    auto found = states.find(value);
    return found == states.end() ? Fixed : found->second;
  };
  for (Operation &op : block.without_terminator()) {
    bool dependsOnVarying = false;
    op.walk([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        dependsOnVarying |= stateOf(operand) != Fixed;
    });
    State state = Fixed;
    if (dependsOnVarying) {
      state = Other;
      SmallVector<unsigned> arrays, moving;
      for (auto [index, operand] : llvm::enumerate(op.getOperands()))
        if (isa<ArrayType>(operand.getType())) {
          arrays.push_back(index);
          if (stateOf(operand) != Fixed)
            moving.push_back(index);
        }
      auto linearAt = [&](unsigned index) {
        return stateOf(op.getOperand(index)) == Linear &&
               isLinearInOperand(&op, index);
      };
      if (op.getNumRegions() == 0 && op.getNumResults() == 1) {
        Linearity linearity = linearityOf(&op);
        // x + c is not linear in x: every array operand must vary.
        if (linearity == Linearity::Joint && moving.size() == arrays.size() &&
            llvm::all_of(moving, linearAt))
          state = Linear;
        if (linearity == Linearity::Separate && moving.size() == 1 &&
            linearAt(moving.front()))
          state = Linear;
      }
    }
    for (Value value : op.getResults())
      states[value] = state;
  }
  return stateOf(result) == Linear;
}

/// Σ_{…, i} Σ_{j ≤ i} F(i, j), where F depends on i through values the
/// outer body computes and linearly in them, as Σ_{…, j} Σ_{i ≥ j} F(i, j)
/// (j < i, j ≥ i, j > i alike): the linear maps then come out of the inner
/// sum (FactorLinearMaps), and what they apply to is a running sum over i.
/// Returns whether it rewrote `outer`.
bool interchangeBoundedSum(ReduceOp outer) {
  if (outer.getKind() != ReduceKind::sum || outer.hasPredicate() ||
      outer.getTemperature() || outer.getAggregation() ||
      !hasPlainDims(outer.getSizes()))
    return false;
  Block &outerBody = outer.getBody().front();
  auto inner = outer.getBodyValue().getDefiningOp<ReduceOp>();
  if (!inner || inner->getBlock() != &outerBody ||
      inner.getKind() != ReduceKind::sum || inner.getTemperature() ||
      inner.getAggregation() || inner.getSizes().size() != 1 ||
      !hasPlainDims(inner.getSizes()))
    return false;
  std::optional<Bound> bound = boundOf(inner);
  if (!bound || !bound->outer || bound->outer.getOwner() != &outerBody ||
      outer.getSizes()[bound->outer.getArgNumber()] != inner.getSizes()[0])
    return false;
  BlockArgument bounding = bound->outer;
  // The outer body's other ops (which only the inner sum can use, as the
  // body yields it) may run at every position of both indices.
  llvm::SmallPtrSet<Value, 8> varying;
  for (Operation &op : outerBody.without_terminator()) {
    if (&op == inner.getOperation())
      continue;
    if (op.getNumRegions() ||
        (!isa<ReadOp, ExtractOp>(op) && !isMemoryEffectFree(&op)))
      return false;
    bool dependsOnBound = false;
    for (Value operand : op.getOperands())
      dependsOnBound |= operand == bounding || varying.contains(operand);
    if (dependsOnBound)
      for (Value value : op.getResults())
        varying.insert(value);
  }
  // F reads i only through those values, linearly.
  Block &innerBody = inner.getBody().front();
  bool readsBound = false;
  innerBody.walk([&](Operation *op) {
    readsBound |= llvm::is_contained(op->getOperands(), Value(bounding));
  });
  if (readsBound || varying.empty() ||
      !isLinearIn(inner.getBodyValue(), innerBody, varying))
    return false;

  // Σ over the outer domain with j in i's place of F, with each value v it
  // reads from the outer body replaced by Σ_i v under the same bound (j ≤ i
  // read the other way round).
  llvm::SetVector<Value> frontier;
  innerBody.walk([&](Operation *op) {
    for (Value operand : op->getOperands())
      if (varying.contains(operand))
        frontier.insert(operand);
  });
  Location loc = outer.getLoc();
  OpBuilder builder(outer);
  auto swapped = ReduceOp::create(builder, loc, outer.getType(),
                                  ReduceKind::sum, outer.getSizes(), Value());
  Block &swappedBody = swapped.getBody().emplaceBlock();
  IRMapping mapping;
  for (BlockArgument argument : outerBody.getArguments())
    mapping.map(argument,
                swappedBody.addArgument(argument.getType(), argument.getLoc()));
  Value summed = mapping.lookup(bounding);
  OpBuilder inside = OpBuilder::atBlockEnd(&swappedBody);
  // The outer body's values that do not vary with i, once.
  for (Operation &op : outerBody.without_terminator())
    if (&op != inner.getOperation() &&
        !llvm::any_of(op.getResults(),
                      [&](Value value) { return varying.contains(value); }))
      inside.clone(op, mapping);
  using P = arith::CmpIPredicate;
  P kind = bound->reverse ? (bound->exclusive ? P::sgt : P::sge)
                          : (bound->exclusive ? P::slt : P::sle);
  for (Value value : frontier) {
    auto across = ReduceOp::create(inside, loc, value.getType(),
                                   ReduceKind::sum, inner.getSizes(), Value());
    Block &predicate = across.getPredicate().emplaceBlock();
    Value position =
        predicate.addArgument(builder.getIndexType(), inner.getLoc());
    OpBuilder test = OpBuilder::atBlockEnd(&predicate);
    YieldOp::create(
        test, loc,
        arith::CmpIOp::create(test, loc, kind, summed, position).getResult());
    Block &acrossBody = across.getBody().emplaceBlock();
    IRMapping perPosition = mapping;
    perPosition.map(bounding, acrossBody.addArgument(builder.getIndexType(),
                                                     inner.getLoc()));
    llvm::SetVector<Operation *> slice;
    addToSlice(value, outerBody, slice);
    OpBuilder body = OpBuilder::atBlockEnd(&acrossBody);
    for (Operation *op : slice)
      if (llvm::any_of(op->getResults(),
                       [&](Value result) { return varying.contains(result); }))
        body.clone(*op, perPosition);
    YieldOp::create(body, loc, perPosition.lookup(value));
    mapping.map(value, across.getResult());
  }
  mapping.map(innerBody.getArgument(0), summed);
  for (Operation &op : innerBody)
    inside.clone(op, mapping);
  outer.getResult().replaceAllUsesWith(swapped.getResult());
  outer.erase();
  return true;
}

/// A let whose element sums over an index bounded by one of the let's own
/// (`let Z[i] = Σ_{j ≤ i} K[j]`) as a let of one element, the table of the
/// old ones, whose bounded sums then become running sums: the let is
/// computed as a whole rather than element by element. Returns whether it
/// rewrote `let`.
bool computeAsWhole(LetOp let) {
  ArrayAttr domain = let.getDomain();
  if (domain.empty() || !hasPlainDims(domain))
    return false;
  Block &body = let.getBody().front();
  // A sum bounded by a let index whose summand does not depend on it.
  bool bounded = false;
  body.walk([&](ReduceOp sum) {
    std::optional<Bound> bound = boundOf(sum);
    if (!bound || !bound->outer || bound->outer.getOwner() != &body ||
        sum.getKind() != ReduceKind::sum || sum.getTemperature() ||
        sum.getAggregation() || sum.getSizes().size() != 1)
      return;
    bool dependsOnBound = false;
    sum.getBody().walk([&](Operation *op) {
      for (Value operand : op->getOperands()) {
        if (!isDefinedOutside(operand, sum))
          continue;
        llvm::SmallPtrSet<Value, 4> indices;
        collectIndices(operand, let, indices);
        dependsOnBound |= indices.contains(bound->outer);
      }
    });
    bounded |= !dependsOnBound;
  });
  if (!bounded)
    return false;
  MLIRContext *context = let.getContext();
  ArrayType whole = let.getArrayType();
  Block *replacement = new Block();
  let.getBody().push_back(replacement);
  OpBuilder builder = OpBuilder::atBlockEnd(replacement);
  auto table = TabulateOp::create(builder, let.getLoc(), whole, domain);
  Block &tableBody = table.getBody().emplaceBlock();
  IRMapping mapping;
  for (BlockArgument index : body.getArguments())
    mapping.map(index, tableBody.addArgument(index.getType(), index.getLoc()));
  OpBuilder inside = OpBuilder::atBlockEnd(&tableBody);
  for (Operation &op : body)
    inside.clone(op, mapping);
  YieldOp::create(builder, let.getLoc(), table.getResult());
  body.erase();
  let.setDomainAttr(ArrayAttr::get(context, {}));
  let.setElementType(whole);
  return true;
}

} // namespace

void mlir::energy::formPrefixSums(ModelOp model) {
  for (LetOp let :
       llvm::make_early_inc_range(model.getBody().front().getOps<LetOp>()))
    computeAsWhole(let);
  SmallVector<ReduceOp> outers;
  model.walk([&](ReduceOp sum) {
    if (!sum.hasPredicate())
      outers.push_back(sum);
  });
  for (ReduceOp outer : outers)
    interchangeBoundedSum(outer);
  SmallVector<ReduceOp> sums;
  model.walk([&](ReduceOp sum) {
    if (sum.hasPredicate())
      sums.push_back(sum);
  });
  for (ReduceOp sum : sums)
    rewriteAsPrefixSum(sum);
}
