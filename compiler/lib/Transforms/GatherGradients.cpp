//===- GatherGradients.cpp - Gradients as sums instead of scatters --------===//
//
// Rewrites accumulations that add into one slot at every position of a loop,
// and loops that scatter into the positions of an inner domain, into
// accumulations of sums, taking loop-invariant linear factors out of them;
// pair sums added into slots that ignore the row, whose summand is a wide
// linear map of the column's values (a parameter's outer products), are
// summed over the rows first, per column.
//
//===----------------------------------------------------------------------===//

#include "Linearity.h"
#include "Slices.h"
#include "energy/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::energy {
#define GEN_PASS_DEF_ENERGYGATHERGRADIENTS
#include "energy/Transforms/Passes.h.inc"
} // namespace mlir::energy

using namespace mlir;
using namespace mlir::energy;

namespace {
/// Σ_p M v_p = M Σ_p v_p and Σ_p c v_p = c Σ_p v_p for M, c invariant in
/// `sum`: rewrites the body's yield and returns the value to use for the
/// whole sum (after `sum`).
Value pullOutLinearFactor(ReduceOp sum, OpBuilder &builder) {
  Block &body = sum.getBody().front();
  auto yield = cast<YieldOp>(body.getTerminator());
  Value summand = yield.getValues()[0];
  Operation *op = summand.getDefiningOp();
  Value factor, inner;
  bool matrix = false;
  if (auto matmul = dyn_cast_or_null<MatmulOp>(op);
      matmul && isDefinedOutside(matmul.getLhs(), sum) &&
      cast<ArrayType>(matmul.getRhs().getType()).getRank() == 1) {
    factor = matmul.getLhs();
    inner = matmul.getRhs();
    matrix = true;
  } else if (auto mul = dyn_cast_or_null<MulOp>(op);
             mul && isDefinedOutside(mul.getLhs(), sum) &&
             cast<ArrayType>(mul.getLhs().getType()).isScalar() &&
             mul.getRhs().getType() == mul.getType()) {
    factor = mul.getLhs();
    inner = mul.getRhs();
  } else if (mul && isDefinedOutside(mul.getRhs(), sum) &&
             cast<ArrayType>(mul.getRhs().getType()).isScalar() &&
             mul.getLhs().getType() == mul.getType()) {
    factor = mul.getRhs();
    inner = mul.getLhs();
  }
  if (!factor)
    return sum.getResult();
  // The sum now sums `inner`; the factor applies to the result.
  yield->setOperands(inner);
  sum.getResult().setType(inner.getType());
  if (op->use_empty())
    op->erase();
  Value total = sum.getResult();
  Value outer =
      matrix
          ? MatmulOp::create(builder, sum.getLoc(), factor, total).getResult()
          : MulOp::create(builder, sum.getLoc(), factor, total).getResult();
  return outer;
}

struct GatherGradientsPass
    : public mlir::energy::impl::EnergyGatherGradientsBase<
          GatherGradientsPass> {
  void runOnOperation() override {
    SymbolTable symbols(getOperation());
    for (GradientOp gradient : getOperation().getOps<GradientOp>())
      for (ForeachOp outer : llvm::make_early_inc_range(
               gradient.getBody().front().getOps<ForeachOp>()))
        gatherPairSums(outer, symbols);
    SmallVector<ForeachOp> loops;
    getOperation().walk([&](ForeachOp loop) { loops.push_back(loop); });
    for (ForeachOp loop : loops)
      gather(loop);
    for (GradientOp gradient : getOperation().getOps<GradientOp>())
      for (ForeachOp outer : llvm::make_early_inc_range(
               gradient.getBody().front().getOps<ForeachOp>()))
        gatherScatters(outer, symbols);
  }

  /// Whether `outer` may be the domain of the lets that a gather stashes
  /// its reductions in: a let is computed at every position of its domain,
  /// which ranges over dims, so the loop must be such a domain and skip no
  /// position.
  static bool isLetDomain(ForeachOp outer) {
    return !outer.hasPredicate() && hasPlainDims(outer.getSizes());
  }

  /// One term of a value built by additions, negations and transposes,
  /// with the sign and transposition it is added with.
  struct AddedLeaf {
    Value value;
    bool negated = false;
    bool transposed = false;
  };

  /// The terms of `value` through additions, subtractions (not those that
  /// broadcast a scalar), negations and transposes computed in `block`.
  static void collectAddedLeaves(Value value, Block &block, AddedLeaf path,
                                 SmallVectorImpl<AddedLeaf> &leaves) {
    Operation *op = value.getDefiningOp();
    path.value = value;
    if (!op || op->getBlock() != &block ||
        (isa<AddOp, SubOp>(op) &&
         (op->getOperand(0).getType() != value.getType() ||
          op->getOperand(1).getType() != value.getType()))) {
      leaves.push_back(path);
    } else if (isa<AddOp>(op)) {
      collectAddedLeaves(op->getOperand(0), block, path, leaves);
      collectAddedLeaves(op->getOperand(1), block, path, leaves);
    } else if (isa<SubOp>(op)) {
      collectAddedLeaves(op->getOperand(0), block, path, leaves);
      path.negated = !path.negated;
      collectAddedLeaves(op->getOperand(1), block, path, leaves);
    } else if (isa<NegOp>(op)) {
      path.negated = !path.negated;
      collectAddedLeaves(op->getOperand(0), block, path, leaves);
    } else if (isa<TransposeOp>(op)) {
      path.transposed = !path.transposed;
      collectAddedLeaves(op->getOperand(0), block, path, leaves);
    } else {
      leaves.push_back(path);
    }
  }

  /// `value` as `leaf` is added (transposed, negated), built at `builder`.
  static Value applyPath(OpBuilder &builder, Location loc, Value value,
                         const AddedLeaf &leaf) {
    if (leaf.transposed)
      value = TransposeOp::create(builder, loc, value);
    if (leaf.negated)
      value = NegOp::create(builder, loc, value);
    return value;
  }

  /// Whether `value`, computed in `body` (of a loop or sum over columns in
  /// the body of `outer`), adds a matrix (or wider) per pair summed over
  /// the columns as it is, and less summed over the rows `row` (an index of
  /// `outer`) first (summedWidth): outer(g_rc, x_c) adds g_rc summed over
  /// the rows and the outer product summed over the columns, while
  /// outer(a_r, w_rc x_c) adds x_c either way. Rows of tables per pair are
  /// left to the contractions, which sum them as matrix products.
  static bool isNarrowerOverRows(Value value, Block &body, ForeachOp outer,
                                 Value row) {
    SmallVector<Value> steady;
    for (Value index : outer.getBody().front().getArguments())
      if (index != row)
        steady.push_back(index);
    llvm::append_range(steady, body.getArguments());
    int64_t overRows = summedWidth(
        value, body, [&](Value v) { return dependsOnlyOn(v, outer, steady); });
    int64_t overColumns = summedWidth(value, body, [&](Value v) {
      return isDefinedOutside(v, body.getParentOp());
    });
    return overColumns >= 2 && overRows < overColumns;
  }

  /// Rewrites each sum over columns that `accumulate` (in the body of
  /// `outer`, into slots `row` does not choose) adds, when its summand adds
  /// less summed over the rows first (isNarrowerOverRows), as a loop over the
  /// columns in `outer`'s body that accumulates each summand (a scatter, for
  /// gatherPairSums); what else the accumulation adds stays.
  static void scatterPairSums(AccumulateOp accumulate, ForeachOp outer,
                              Value row) {
    Block &outerBody = outer.getBody().front();
    SmallVector<AddedLeaf> leaves, pairSums, kept;
    collectAddedLeaves(accumulate.getValue(), outerBody, AddedLeaf(), leaves);
    for (const AddedLeaf &leaf : leaves) {
      auto sum = leaf.value.getDefiningOp<ReduceOp>();
      bool scattered = sum && sum->getBlock() == &outerBody &&
                       sum->hasOneUse() && sum.getKind() == ReduceKind::sum &&
                       !sum.getTemperature() &&
                       isNarrowerOverRows(
                           cast<YieldOp>(sum.getBody().front().getTerminator())
                               .getValues()
                               .front(),
                           sum.getBody().front(), outer, row);
      (scattered ? pairSums : kept).push_back(leaf);
    }
    if (pairSums.empty())
      return;
    Location loc = accumulate.getLoc();
    OpBuilder builder(accumulate);
    if (!kept.empty()) {
      Value rest = applyPath(builder, loc, kept.front().value, kept.front());
      for (const AddedLeaf &leaf : llvm::drop_begin(kept))
        rest = AddOp::create(builder, loc, rest,
                             applyPath(builder, loc, leaf.value, leaf));
      AccumulateOp::create(builder, loc, rest, accumulate.getTensorAttr(),
                           accumulate.getMapAttr(), accumulate.getIndices());
    }
    for (const AddedLeaf &leaf : pairSums) {
      auto sum = leaf.value.getDefiningOp<ReduceOp>();
      auto scatter = ForeachOp::create(builder, sum.getLoc(), sum.getSizes());
      IRMapping mapping;
      sum.getPredicate().cloneInto(&scatter.getPredicate(), mapping);
      sum.getBody().cloneInto(&scatter.getBody(), mapping);
      Operation *yield = scatter.getBody().front().getTerminator();
      OpBuilder inside(yield);
      Value added = applyPath(inside, loc, yield->getOperand(0), leaf);
      AccumulateOp::create(inside, loc, added, accumulate.getTensorAttr(),
                           accumulate.getMapAttr(), accumulate.getIndices());
      yield->erase();
    }
    accumulate.erase();
  }

  /// Gathers, for each loop over columns in the body of `outer` (and each
  /// sum over columns that an accumulation adds, scatterPairSums), the
  /// accumulations that add less summed over the rows first
  /// (isNarrowerOverRows; the row is the last of `outer`'s indices that
  /// their slots do not use), in a loop of their own over `outer`'s other
  /// indices and the columns that sums over the rows (gatherScatter), so
  /// that their wide maps apply once per column after the sum. The loop's other
  /// accumulations stay. `outer` goes when nothing is left in it.
  void gatherPairSums(ForeachOp outer, SymbolTable &symbols) {
    if (!isLetDomain(outer))
      return;
    Block &outerBody = outer.getBody().front();
    // Sums over columns that accumulations add, as scatters.
    for (AccumulateOp accumulate :
         llvm::to_vector(outerBody.getOps<AccumulateOp>())) {
      Value row;
      for (Value index : outerBody.getArguments())
        if (!llvm::is_contained(accumulate.getIndices(), index))
          row = index;
      if (row)
        scatterPairSums(accumulate, outer, row);
    }
    bool rewritten = false;
    for (ForeachOp inner : llvm::to_vector(outerBody.getOps<ForeachOp>())) {
      Block &innerBody = inner.getBody().front();
      bool nested = false;
      inner.getBody().walk([&](Operation *op) {
        nested |= isa<AccumulateOp>(op) && op->getBlock() != &innerBody;
      });
      auto accumulates = llvm::to_vector(innerBody.getOps<AccumulateOp>());
      if (nested || accumulates.empty())
        continue;
      // Each accumulation's row is the last of `outer`'s indices its slots
      // do not use; those of the first gathered one's row are gathered.
      std::optional<unsigned> rowPosition;
      llvm::SmallPtrSet<Operation *, 4> wide;
      for (AccumulateOp accumulate : accumulates) {
        std::optional<unsigned> position;
        for (auto [index, argument] : llvm::enumerate(outerBody.getArguments()))
          if (!llvm::is_contained(accumulate.getIndices(), argument))
            position = index;
        // A slot chosen by a column is a scatter's (gatherScatters).
        bool scatters = llvm::any_of(accumulate.getIndices(), [&](Value index) {
          return llvm::is_contained(innerBody.getArguments(), index);
        });
        if (scatters || !position || (rowPosition && position != rowPosition) ||
            !isNarrowerOverRows(accumulate.getValue(), innerBody, outer,
                                outerBody.getArgument(*position)))
          continue;
        rowPosition = position;
        wide.insert(accumulate);
      }
      if (wide.empty())
        continue;
      // Those accumulations in a copy of the loop of their own.
      ForeachOp pairs = inner;
      if (wide.size() != accumulates.size()) {
        OpBuilder builder(inner);
        pairs = cast<ForeachOp>(builder.clone(*inner));
        Block &pairsBody = pairs.getBody().front();
        for (auto [original, copy] :
             llvm::zip(accumulates,
                       llvm::to_vector(pairsBody.getOps<AccumulateOp>())))
          (wide.contains(original) ? original : copy).erase();
        eraseDeadOps(innerBody);
        eraseDeadOps(pairsBody);
      }
      SmallVector<bool> carried(outerBody.getNumArguments(), true);
      carried[*rowPosition] = false;
      gatherScatterWithStash(pairs, outer, carried, symbols);
      rewritten = true;
    }
    if (!rewritten)
      return;
    eraseDeadOps(outerBody);
    if (outerBody.getOps<AccumulateOp>().empty() &&
        outerBody.getOps<ForeachOp>().empty())
      outer.erase();
  }

  /// gatherScatter for `inner`, with the reductions of `outer`'s body that
  /// it needs stashed in lets first.
  static void gatherScatterWithStash(ForeachOp inner, ForeachOp outer,
                                     ArrayRef<bool> carried,
                                     SymbolTable &symbols) {
    Block &outerBody = outer.getBody().front();
    llvm::SetVector<Operation *> needed;
    addOperandsToSlice(inner, outerBody, needed);
    SmallVector<ReadOp> stashed;
    SmallVector<Operation *> copies;
    for (Operation *op : needed)
      if (auto reduce = dyn_cast<ReduceOp>(op);
          reduce && llvm::any_of(reduce->getUsers(), [&](Operation *user) {
            return inner->isAncestor(user);
          }))
        stashed.push_back(stash(reduce, inner, outer, symbols, copies));
    gatherScatter(inner, outer, carried);
    for (Operation *copy : llvm::reverse(copies))
      if (copy->use_empty())
        copy->erase();
    for (ReadOp read : stashed)
      if (read->use_empty())
        read.erase();
  }

  void gather(ForeachOp loop) {
    Block &body = loop.getBody().front();
    SmallVector<AccumulateOp> invariant;
    for (AccumulateOp accumulate : body.getOps<AccumulateOp>())
      if (llvm::all_of(accumulate.getIndices(), [&](Value index) {
            return isDefinedOutside(index, loop);
          }))
        invariant.push_back(accumulate);
    for (AccumulateOp accumulate : invariant) {
      // sum = Σ over the loop's domain of the accumulated value.
      OpBuilder builder(loop);
      Value value = accumulate.getValue();
      auto sum = ReduceOp::create(builder, loop.getLoc(), value.getType(),
                                  ReduceKind::sum, loop.getSizes(), Value());
      IRMapping mapping;
      loop.getPredicate().cloneInto(&sum.getPredicate(), mapping);
      Block &sumBody = sum.getBody().emplaceBlock();
      addIndexArguments(sumBody, body, mapping);
      // The ops of the loop body that the value needs, in order.
      llvm::SetVector<Operation *> slice;
      addToSlice(value, body, slice);
      OpBuilder inner = OpBuilder::atBlockEnd(&sumBody);
      cloneSlice(body, slice, inner, mapping);
      YieldOp::create(inner, loop.getLoc(), mapping.lookupOrDefault(value));
      moveLoopInvariantCode(cast<LoopLikeOpInterface>(sum.getOperation()));
      builder.setInsertionPointAfter(sum);
      Value total = pullOutLinearFactor(sum, builder);
      AccumulateOp::create(builder, accumulate.getLoc(), total,
                           accumulate.getTensorAttr(), accumulate.getMapAttr(),
                           accumulate.getIndices());
      accumulate.erase();
    }
    // A loop left without effects computes nothing.
    if (!invariant.empty() && body.getOps<AccumulateOp>().empty() &&
        body.getOps<ForeachOp>().empty())
      loop.erase();
  }

  /// Whether `inner`, a loop in the body of `outer`, only adds into slots
  /// that its own indices choose, maybe together with some of `outer`'s (a
  /// batch index that rows and columns share): a scatter, whose sum over
  /// the rest of `outer`'s domain can be gathered slot by slot. Returns, for
  /// each of `outer`'s indices, whether the slots use it (it is then carried
  /// into the gathering loop instead of summed over).
  static std::optional<SmallVector<bool>> scatterIndices(ForeachOp inner,
                                                         ForeachOp outer) {
    Block &body = inner.getBody().front();
    Block &outerBody = outer.getBody().front();
    SmallVector<bool> carried(outerBody.getNumArguments(), false);
    bool accumulates = false;
    WalkResult walk = inner.getBody().walk([&](Operation *op) {
      if (isa<ForeachOp>(op))
        return WalkResult::interrupt();
      auto accumulate = dyn_cast<AccumulateOp>(op);
      if (!accumulate)
        return WalkResult::advance();
      accumulates = true;
      if (accumulate->getBlock() != &body)
        return WalkResult::interrupt();
      for (Value index : accumulate.getIndices()) {
        if (isDefinedOutside(index, outer) ||
            llvm::is_contained(body.getArguments(), index))
          continue;
        auto *position = llvm::find(outerBody.getArguments(), index);
        if (position == outerBody.args_end())
          return WalkResult::interrupt();
        carried[position - outerBody.args_begin()] = true;
      }
      return WalkResult::advance();
    });
    if (!accumulates || walk.wasInterrupted() ||
        llvm::all_of(carried, [](bool c) { return c; }))
      return std::nullopt;
    return carried;
  }

  /// A scatter that adds into slots which together need every index of
  /// `outer` (a relative position table's bias[h, i - j] beside the keys'
  /// x[b, j]) cannot be gathered whole; where one of its accumulates alone
  /// can, `inner` becomes one loop per accumulate (copies that differ only
  /// in what they add; what a copy no longer uses is dead), each gathered
  /// on its own.
  static void splitByAccumulate(ForeachOp inner, ForeachOp outer) {
    auto accumulates =
        llvm::to_vector(inner.getBody().front().getOps<AccumulateOp>());
    // Each copy keeps one accumulate: none may hide in a nested region.
    size_t all = 0;
    inner.getBody().walk([&](AccumulateOp) { ++all; });
    if (accumulates.size() < 2 || all != accumulates.size() ||
        scatterIndices(inner, outer))
      return;
    OpBuilder builder(inner);
    SmallVector<ForeachOp> copies;
    for (size_t kept = 0; kept < accumulates.size(); ++kept) {
      auto copy = cast<ForeachOp>(builder.clone(*inner));
      auto copied =
          llvm::to_vector(copy.getBody().front().getOps<AccumulateOp>());
      for (auto [number, accumulate] : llvm::enumerate(copied))
        if (number != kept)
          accumulate.erase();
      copies.push_back(copy);
    }
    if (llvm::none_of(copies, [&](ForeachOp copy) {
          return scatterIndices(copy, outer).has_value();
        })) {
      for (ForeachOp copy : copies)
        copy.erase();
      return;
    }
    inner.erase();
  }

  /// Adds to `block` an index argument per index of `outerBody` that is
  /// summed over (not `carried`), mapped; carried ones keep their mapping.
  static void addSummedIndices(Block &block, Block &outerBody,
                               ArrayRef<bool> carried, IRMapping &mapping) {
    for (auto [argument, isCarried] :
         llvm::zip(outerBody.getArguments(), carried))
      if (!isCarried)
        mapping.map(argument,
                    block.addArgument(argument.getType(), argument.getLoc()));
  }

  /// Rewrites each scatter nested in `outer` (the parent side of an lse
  /// term: Σ_c w_cp q_c added into slot p) as a loop of its own over the
  /// scatter's domain that gathers a sum over `outer`'s domain, so that
  /// every slot is written by one position of one loop. Reductions of
  /// `outer`'s body that the scatter needs (the lse of each child) are
  /// computed once more, into a let that the new loop reads.
  void gatherScatters(ForeachOp outer, SymbolTable &symbols) {
    if (!isLetDomain(outer))
      return;
    Block &outerBody = outer.getBody().front();
    for (ForeachOp inner : llvm::to_vector(outerBody.getOps<ForeachOp>()))
      splitByAccumulate(inner, outer);
    SmallVector<std::pair<ForeachOp, SmallVector<bool>>> scatters;
    for (ForeachOp inner : outerBody.getOps<ForeachOp>())
      if (std::optional<SmallVector<bool>> carried =
              scatterIndices(inner, outer))
        scatters.emplace_back(inner, std::move(*carried));
    for (auto &[inner, carried] : scatters)
      gatherScatterWithStash(inner, outer, carried, symbols);
    if (!scatters.empty() && outerBody.getOps<AccumulateOp>().empty() &&
        outerBody.getOps<ForeachOp>().empty())
      outer.erase();
  }

  /// Replaces `reduce`, where the scatter `inner` uses it, by a read of a
  /// new let over `outer`'s domain that computes it; `outer` itself keeps
  /// computing it (the code generator fuses it with the sums using it).
  static ReadOp stash(ReduceOp reduce, ForeachOp inner, ForeachOp outer,
                      SymbolTable &symbols,
                      SmallVectorImpl<Operation *> &copies) {
    Block &outerBody = outer.getBody().front();
    Block &top = *outer->getBlock();
    auto gradient = outer->getParentOfType<GradientOp>();
    OpBuilder builder(gradient);
    auto let = LetOp::create(
        builder, reduce.getLoc(),
        builder.getStringAttr(gradient.getTensor().str() + ".gather"),
        outer.getSizes(), TypeAttr::get(reduce.getType()));
    symbols.insert(let);
    Block &letBody = let.getBody().emplaceBlock();
    IRMapping mapping;
    addIndexArguments(letBody, outerBody, mapping);
    // A let reads no values from outside: the values of the gradient's
    // body that the reduction needs are recomputed in it.
    llvm::SetVector<Operation *> local, global;
    addToSlice(reduce.getResult(), outerBody, local);
    for (Operation *op : local)
      addOperandsToSlice(op, top, global);
    OpBuilder inside = OpBuilder::atBlockEnd(&letBody);
    cloneSlice(top, global, inside, mapping);
    cloneSlice(outerBody, local, inside, mapping);
    YieldOp::create(inside, reduce.getLoc(),
                    mapping.lookupOrDefault(reduce.getResult()));
    builder.setInsertionPointAfter(reduce);
    auto read =
        ReadOp::create(builder, reduce.getLoc(), reduce.getType(),
                       FlatSymbolRefAttr::get(let.getSymNameAttr()),
                       AffineMapAttr::get(AffineMap::getMultiDimIdentityMap(
                           outerBody.getNumArguments(), builder.getContext())),
                       outerBody.getArguments());
    reduce.getResult().replaceUsesWithIf(read, [&](OpOperand &use) {
      return inner->isAncestor(use.getOwner());
    });
    redirectDerived(reduce, read, inner, outerBody, copies);
    return read;
  }

  /// What `inner` reads of values that `outer`'s body computes from
  /// `reduce` (a row's factor exp(lse − c) beside its lse), it reads
  /// computed from `read` instead: copies of those ops, right after each,
  /// so that moving `inner` out of `outer` takes the let's read along, not
  /// the reduction again.
  static void redirectDerived(ReduceOp reduce, ReadOp read, ForeachOp inner,
                              Block &outerBody,
                              SmallVectorImpl<Operation *> &copies) {
    llvm::SetVector<Operation *> slice;
    addOperandsToSlice(inner, outerBody, slice);
    SmallVector<Operation *> needed = slice.takeVector();
    llvm::sort(needed, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    IRMapping derived;
    derived.map(reduce.getResult(), read.getResult());
    for (Operation *op : needed) {
      if (op == reduce.getOperation() || op->isBeforeInBlock(read) ||
          !llvm::any_of(op->getOperands(), [&](Value operand) {
            return derived.contains(operand);
          }))
        continue;
      OpBuilder builder(op->getContext());
      builder.setInsertionPointAfter(op);
      Operation *copy = builder.clone(*op, derived);
      copies.push_back(copy);
      for (auto [from, to] : llvm::zip(op->getResults(), copy->getResults()))
        from.replaceUsesWithIf(to, [&](OpOperand &use) {
          return inner->isAncestor(use.getOwner());
        });
    }
  }

  /// Gives `gather` (its slots `outer`'s `carried` indices, then from
  /// `innerStart` `inner`'s) the predicate of `inner` when that reads no
  /// index `outer` sums over; false, changing nothing, otherwise.
  static bool copyPredicateOfSlots(ForeachOp inner, ForeachOp outer,
                                   ArrayRef<bool> carried, ForeachOp gather,
                                   size_t innerStart) {
    Block &outerBody = outer.getBody().front();
    Block &innerPredicate = inner.getPredicate().front();
    llvm::SetVector<Operation *> needed;
    for (Operation &op : innerPredicate)
      addOperandsToSlice(&op, outerBody, needed);
    auto readsSummed = [&](Operation *op) {
      WalkResult result = op->walk([&](Operation *nested) {
        for (Value operand : nested->getOperands())
          if (auto argument = dyn_cast<BlockArgument>(operand);
              argument && argument.getOwner() == &outerBody &&
              !carried[argument.getArgNumber()])
            return WalkResult::interrupt();
        return WalkResult::advance();
      });
      return result.wasInterrupted();
    };
    if (llvm::any_of(needed, readsSummed) ||
        llvm::any_of(innerPredicate,
                     [&](Operation &op) { return readsSummed(&op); }))
      return false;
    Block &gatherBody = gather.getBody().front();
    Block &predicate = gather.getPredicate().emplaceBlock();
    for (BlockArgument argument : gatherBody.getArguments())
      predicate.addArgument(argument.getType(), argument.getLoc());
    IRMapping mapping;
    unsigned slot = 0;
    for (auto [argument, isCarried] :
         llvm::zip(outerBody.getArguments(), carried))
      if (isCarried)
        mapping.map(argument, predicate.getArgument(slot++));
    for (auto [position, argument] :
         llvm::enumerate(innerPredicate.getArguments()))
      mapping.map(argument, predicate.getArgument(innerStart + position));
    OpBuilder inside = OpBuilder::atBlockEnd(&predicate);
    cloneSlice(outerBody, needed, inside, mapping);
    for (Operation &op : innerPredicate)
      inside.clone(op, mapping);
    return true;
  }

  /// Moves the scatter `inner` out of `outer`: a new loop after `outer`
  /// over `outer`'s `carried` indices and `inner`'s domain accumulates, at
  /// each slot, the sum over the rest of `outer`'s domain of what `inner`
  /// added there.
  static void gatherScatter(ForeachOp inner, ForeachOp outer,
                            ArrayRef<bool> carried) {
    Block &outerBody = outer.getBody().front();
    Block &innerBody = inner.getBody().front();
    OpBuilder builder(outer->getContext());
    builder.setInsertionPointAfter(outer);
    SmallVector<Attribute> gatherSizes, summedSizes;
    for (auto [size, isCarried] : llvm::zip(outer.getSizes(), carried))
      (isCarried ? gatherSizes : summedSizes).push_back(size);
    llvm::append_range(gatherSizes, inner.getSizes());
    auto gather = ForeachOp::create(builder, inner.getLoc(),
                                    builder.getArrayAttr(gatherSizes));
    Block &gatherBody = gather.getBody().emplaceBlock();
    IRMapping slots;
    for (auto [argument, isCarried] :
         llvm::zip(outerBody.getArguments(), carried))
      if (isCarried)
        slots.map(argument, gatherBody.addArgument(argument.getType(),
                                                   argument.getLoc()));
    size_t innerStart = gatherBody.getNumArguments();
    addIndexArguments(gatherBody, innerBody, slots);
    ArrayAttr summed = builder.getArrayAttr(summedSizes);
    // A predicate of the slots alone (not of the summed indices) is the
    // gather loop's: a slot it excludes is neither read nor written (a
    // causal bias's [h, i - j] at j > i would index outside the tensor).
    bool predicateOfSlots =
        inner.hasPredicate() &&
        copyPredicateOfSlots(inner, outer, carried, gather, innerStart);
    builder.setInsertionPointToStart(&gatherBody);
    for (AccumulateOp accumulate :
         llvm::to_vector(innerBody.getOps<AccumulateOp>())) {
      Value value = accumulate.getValue();
      auto sum = ReduceOp::create(builder, inner.getLoc(), value.getType(),
                                  ReduceKind::sum, summed, Value());
      // The positions of `outer` at which `inner` admitted the slot.
      if (inner.hasPredicate() && !predicateOfSlots) {
        Block &predicate = sum.getPredicate().emplaceBlock();
        IRMapping mapping = slots;
        addSummedIndices(predicate, outerBody, carried, mapping);
        Block &innerPredicate = inner.getPredicate().front();
        for (auto [from, to] :
             llvm::zip(innerPredicate.getArguments(),
                       gatherBody.getArguments().drop_front(innerStart)))
          mapping.map(from, to);
        llvm::SetVector<Operation *> needed;
        for (Operation &op : innerPredicate)
          addOperandsToSlice(&op, outerBody, needed);
        OpBuilder inside = OpBuilder::atBlockEnd(&predicate);
        cloneSlice(outerBody, needed, inside, mapping);
        for (Operation &op : innerPredicate)
          inside.clone(op, mapping);
      }
      Block &sumBody = sum.getBody().emplaceBlock();
      IRMapping mapping = slots;
      addSummedIndices(sumBody, outerBody, carried, mapping);
      llvm::SetVector<Operation *> innerSlice, outerSlice;
      addToSlice(value, innerBody, innerSlice);
      // The value may be computed in `outer`'s body (a sum over its own
      // domain, the same at every slot): it moves with the rest.
      addToSlice(value, outerBody, outerSlice);
      for (Operation *op : innerSlice)
        addOperandsToSlice(op, outerBody, outerSlice);
      OpBuilder inside = OpBuilder::atBlockEnd(&sumBody);
      cloneSlice(outerBody, outerSlice, inside, mapping);
      cloneSlice(innerBody, innerSlice, inside, mapping);
      YieldOp::create(inside, inner.getLoc(), mapping.lookupOrDefault(value));
      moveLoopInvariantCode(cast<LoopLikeOpInterface>(sum.getOperation()));
      builder.setInsertionPointAfter(sum);
      Value total = pullOutLinearFactor(sum, builder);
      SmallVector<Value> indices;
      for (Value index : accumulate.getIndices())
        indices.push_back(slots.lookupOrDefault(index));
      AccumulateOp::create(builder, accumulate.getLoc(), total,
                           accumulate.getTensorAttr(), accumulate.getMapAttr(),
                           indices);
    }
    inner.erase();
  }
};
} // namespace
