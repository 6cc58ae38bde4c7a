//===- DeriveGradients.cpp - Gradients of the global energy ---------------===//
//
// Builds, for each tensor whose gradient the model needs, an
// `energy.gradient` program by reverse-mode differentiation of every energy
// term through the ops' DerivativeOpInterface rules.
//
//===----------------------------------------------------------------------===//

#include "Linearity.h"
#include "energy/Transforms/Gradients.h"
#include "energy/Transforms/Passes.h"

#include "energy/IR/IndexArithmetic.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::energy {
#define GEN_PASS_DEF_ENERGYDERIVEGRADIENTS
#include "energy/Transforms/Passes.h.inc"
} // namespace mlir::energy

using namespace mlir;
using namespace mlir::energy;

namespace {

/// Reverse-mode differentiation of the energy terms of a model with respect
/// to the tensors of an `energy.gradient`, appending to its body: one
/// recomputation and one reverse sweep serve them all.
class GradientBuilder {
public:
  GradientBuilder(GradientOp gradient, SymbolTableCollection &tables)
      : gradient(gradient), tables(tables) {
    for (FlatSymbolRefAttr tensor : gradient.getTensors())
      tensors.insert(tensor.getValue());
  }

  /// Appends the recomputation and reverse sweep of `term`.
  LogicalResult addTerm(TermOp term) {
    Block &target = gradient.getBody().front();
    Operation *previous = target.empty() ? nullptr : &target.back();
    OpBuilder builder = OpBuilder::atBlockEnd(&target);
    Block &source = term.getBody().front();
    IRMapping mapping;
    for (Operation &op : source.without_terminator())
      builder.clone(op, mapping);
    // The term's value, held by a yield while lets are inlined (the value
    // may itself be a read of a let), then let go.
    auto held = YieldOp::create(
        builder, term.getLoc(),
        mapping.lookupOrDefault(
            cast<YieldOp>(source.getTerminator()).getValues().front()));
    LogicalResult inlined = inlineLets(gradient.getBody(), tables);
    Value energy = held.getValues().front();
    held.erase();
    if (failed(inlined))
      return failure();
    SmallVector<Operation *> forward;
    for (Operation &op : llvm::make_range(
             previous ? std::next(previous->getIterator()) : target.begin(),
             target.end()))
      forward.push_back(&op);

    markActive(forward);
    if (!active.contains(energy)) {
      for (Operation *op : llvm::reverse(forward))
        op->erase();
      return success();
    }
    sinkIntoReductions(forward);

    builder.setInsertionPointToEnd(&target);
    Value seed = ConstantOp::create(builder, term.getLoc(), 1.0);
    return reverse(forward, energy, seed, builder);
  }

private:
  bool isReadOfTensor(Operation *op) {
    auto read = dyn_cast<ReadOp>(op);
    return read && tensors.contains(read.getSource());
  }

  /// Marks the values of `ops` (and of their nested ops) that depend on the
  /// tensor.
  void markActive(ArrayRef<Operation *> ops) {
    for (Operation *op : ops)
      op->walk([&](Operation *nested) {
        bool isActive = isReadOfTensor(nested) ||
                        llvm::any_of(nested->getOperands(), [&](Value v) {
                          return active.contains(v);
                        });
        if (auto reduce = dyn_cast<ReduceOp>(nested))
          isActive |= active.contains(reduce.getBodyValue());
        if (isActive)
          for (Value result : nested->getResults())
            active.insert(result);
      });
  }

  /// Recomputes, inside each reduction, the values it uses that depend on
  /// the tensor and are defined outside it, so that their adjoints are local
  /// to the loop that reverses the reduction.
  void sinkIntoReductions(ArrayRef<Operation *> ops) {
    SmallVector<ReduceOp> reductions;
    for (Operation *op : ops)
      op->walk<WalkOrder::PreOrder>(
          [&](ReduceOp reduce) { reductions.push_back(reduce); });
    for (ReduceOp reduce : reductions) {
      Region &body = reduce.getBody();
      bool changed = true;
      while (changed) {
        changed = false;
        body.walk([&](Operation *user) {
          for (OpOperand &use : user->getOpOperands()) {
            Value value = use.get();
            Operation *def = value.getDefiningOp();
            // A reduction is not recomputed at every position: its adjoint
            // is summed over the loop instead (reverseBody).
            if (!def || !active.contains(value) ||
                body.isAncestor(def->getParentRegion()) ||
                def->getNumRegions() != 0)
              continue;
            OpBuilder builder(&body.front(), body.front().begin());
            Operation *copy = builder.clone(*def);
            // The copy's values depend on the tensors as the original's do
            // (a constant in its body does not).
            markActive({copy});
            Value replacement =
                copy->getResult(cast<OpResult>(value).getResultNumber());
            value.replaceUsesWithIf(replacement, [&](OpOperand &operand) {
              return body.isAncestor(operand.getOwner()->getParentRegion());
            });
            changed = true;
            return WalkResult::interrupt();
          }
          return WalkResult::advance();
        });
      }
    }
  }

  /// Erases `op`, and its values from the active ones: a later op may be
  /// allocated where it was, and must not count as active then.
  void eraseAndForget(Operation *op) {
    op->walk([&](Operation *nested) {
      for (Value result : nested->getResults())
        active.erase(result);
    });
    op->erase();
  }

  /// Adds `contribution` to the adjoint of `value`.
  void accumulateAdjoint(DenseMap<Value, Value> &adjoints, Value value,
                         Value contribution, OpBuilder &builder, Location loc) {
    if (!contribution || !active.contains(value))
      return;
    Value &slot = adjoints[value];
    slot = slot ? AddOp::create(builder, loc, slot, contribution).getResult()
                : contribution;
  }

  /// Walks `forward` backwards from `output`, whose adjoint is `seed`,
  /// building adjoints at the builder's insertion point.
  LogicalResult reverse(ArrayRef<Operation *> forward, Value output, Value seed,
                        OpBuilder &builder) {
    DenseMap<Value, Value> adjoints;
    return reverse(forward, output, seed, builder, adjoints);
  }

  /// The same with the adjoints of the sweep in `adjoints` (a caller reads
  /// those of values defined outside `forward` from it).
  LogicalResult reverse(ArrayRef<Operation *> forward, Value output, Value seed,
                        OpBuilder &builder, DenseMap<Value, Value> &adjoints) {
    adjoints[output] = seed;
    for (Operation *op : llvm::reverse(forward)) {
      if (op->getNumResults() != 1 || !active.contains(op->getResult(0)))
        continue;
      Value adjoint = adjoints.lookup(op->getResult(0));
      if (!adjoint)
        continue;
      Location loc = op->getLoc();
      if (auto read = dyn_cast<ReadOp>(op)) {
        if (isReadOfTensor(read))
          AccumulateOp::create(builder, loc, adjoint, read.getSourceAttr(),
                               read.getMapAttr(), read.getIndices());
        continue;
      }
      auto rule = dyn_cast<DerivativeOpInterface>(op);
      if (!rule || !rule.hasDerivativeRule())
        return op->emitOpError()
               << "has no derivative rule; the energy reaches "
               << gradient.getTensorAttr() << " through it";
      SmallVector<Value> operandAdjoints;
      if (failed(rule.buildAdjoints(builder, {adjoint}, operandAdjoints)))
        return failure();
      for (auto [operand, contribution] :
           llvm::zip(op->getOperands(), operandAdjoints))
        accumulateAdjoint(adjoints, operand, contribution, builder, loc);
      if (auto reduce = dyn_cast<ReduceOp>(op))
        if (failed(reverseBody(reduce, adjoint, builder, adjoints)))
          return failure();
    }
    return success();
  }

  /// Reverses the body of `reduce`, whose result has adjoint `adjoint`: a
  /// loop over the same domain that recomputes the body and walks it back
  /// from the body's value, seeded by the reduction's rule.
  LogicalResult reverseBody(ReduceOp reduce, Value adjoint, OpBuilder &builder,
                            DenseMap<Value, Value> &outerAdjoints) {
    if (!active.contains(reduce.getBodyValue()))
      return success();
    // Active values from outside that the body reads (reductions, which
    // sinkIntoReductions leaves outside): their adjoints are sums over the
    // domain, each one a reduction of its own that recomputes the body.
    SetVector<Value> outside;
    reduce.getBody().walk([&](Operation *op) {
      for (Value operand : op->getOperands())
        if (active.contains(operand) &&
            !reduce.getBody().isAncestor(operand.getParentRegion()))
          outside.insert(operand);
    });
    for (Value value : outside) {
      FailureOr<Value> sum = sumBodyAdjoint(reduce, adjoint, value, builder);
      if (failed(sum))
        return failure();
      accumulateAdjoint(outerAdjoints, value, *sum, builder, reduce.getLoc());
    }
    // A plugin's aggregation: its weights need every position's value, so
    // they are tabulated ahead of the loop.
    Value weights;
    if (reduce.getKind() == ReduceKind::custom) {
      Value table = reduce.buildValueTable(builder);
      weights =
          AggregateWeightsOp::create(builder, reduce.getLoc(), table.getType(),
                                     *reduce.getAggregation(), table);
    }
    auto loop = ForeachOp::create(builder, reduce.getLoc(), reduce.getSizes());
    IRMapping mapping;
    reduce.getPredicate().cloneInto(&loop.getPredicate(), mapping);
    reduce.getBody().cloneInto(&loop.getBody(), mapping);
    reduce.getBody().walk([&](Operation *op) {
      for (Value result : op->getResults())
        if (active.contains(result))
          active.insert(mapping.lookup(result));
    });
    Block &body = loop.getBody().front();
    Operation *yield = body.getTerminator();
    Value value = mapping.lookupOrDefault(reduce.getBodyValue());
    yield->erase();
    SmallVector<Operation *> forward;
    for (Operation &op : body)
      forward.push_back(&op);
    OpBuilder inner = OpBuilder::atBlockEnd(&body);
    Value seed = bodySeed(reduce, adjoint, weights, body, value, inner);
    if (!seed)
      return failure();
    return reverse(forward, value, seed, inner);
  }

  /// Σ over the domain of `reduce` of the adjoint that `outside` (a value
  /// defined outside the body) gets from the body at each position: a
  /// `reduce sum` that recomputes the body and walks it back, keeping only
  /// that adjoint (the accumulations into tensors are reverseBody's); null
  /// where the body gives it none.
  FailureOr<Value> sumBodyAdjoint(ReduceOp reduce, Value adjoint, Value outside,
                                  OpBuilder &builder) {
    if (reduce.getKind() == ReduceKind::custom)
      return reduce.emitOpError()
             << "reads a reduction computed outside it; a plugin's "
                "aggregation cannot sum its adjoint";
    Location loc = reduce.getLoc();
    auto sum = ReduceOp::create(builder, loc, outside.getType(),
                                ReduceKind::sum, reduce.getSizes(), Value());
    IRMapping mapping;
    reduce.getPredicate().cloneInto(&sum.getPredicate(), mapping);
    reduce.getBody().cloneInto(&sum.getBody(), mapping);
    reduce.getBody().walk([&](Operation *op) {
      for (Value result : op->getResults())
        if (active.contains(result))
          active.insert(mapping.lookup(result));
    });
    Block &body = sum.getBody().front();
    Value value = mapping.lookupOrDefault(reduce.getBodyValue());
    body.getTerminator()->erase();
    SmallVector<Operation *> forward;
    for (Operation &op : body)
      forward.push_back(&op);
    OpBuilder inner = OpBuilder::atBlockEnd(&body);
    Value seed = bodySeed(reduce, adjoint, Value(), body, value, inner);
    if (!seed)
      return failure();
    DenseMap<Value, Value> adjoints;
    if (failed(reverse(forward, value, seed, inner, adjoints)))
      return failure();
    // Only the adjoint of `outside` is wanted here.
    SmallVector<Operation *> accumulations;
    body.walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (!isa<AccumulateOp, ForeachOp>(op))
        return WalkResult::advance();
      accumulations.push_back(op);
      return WalkResult::skip();
    });
    for (Operation *op : accumulations)
      eraseAndForget(op);
    // Where the body gives `outside` nothing (a step's derivative), there
    // is no sum: no loop of zeros for the planner to keep.
    Value part = adjoints.lookup(outside);
    if (!part) {
      eraseAndForget(sum);
      return Value();
    }
    YieldOp::create(inner, loc, part);
    return sum.getResult();
  }

  /// The adjoint of the body's value at one position of `reduce`, whose
  /// result has adjoint `adjoint` (`weights`: a plugin aggregation's table).
  Value bodySeed(ReduceOp reduce, Value adjoint, Value weights, Block &body,
                 Value value, OpBuilder &inner) {
    Value seed;
    if (weights) {
      unsigned rank = body.getNumArguments();
      SmallVector<AffineExpr> positions;
      for (unsigned i = 0; i < rank; ++i)
        positions.push_back(getAffineDimExpr(i, inner.getContext()));
      auto map = AffineMap::get(rank, 0, positions, inner.getContext());
      Value weight = ExtractOp::create(
          inner, reduce.getLoc(), ArrayType::getScalar(inner.getContext()),
          weights, AffineMapAttr::get(map), body.getArguments());
      seed = MulOp::create(inner, reduce.getLoc(), adjoint, weight);
    } else {
      seed = reduce.buildBodyAdjoint(inner, adjoint, reduce.getResult(), value);
    }
    return seed;
  }

  GradientOp gradient;
  /// The names of the tensors differentiated with respect to.
  llvm::SmallDenseSet<StringRef> tensors;
  SymbolTableCollection &tables;
  DenseSet<Value> active;
};

} // namespace

LogicalResult mlir::energy::inlineLets(Region &region,
                                       SymbolTableCollection &tables,
                                       function_ref<bool(LetOp)> kept) {
  while (true) {
    SmallVector<ReadOp> letReads;
    region.walk([&](ReadOp read) {
      auto let = dyn_cast_or_null<LetOp>(
          tables.lookupNearestSymbolFrom(read, read.getSourceAttr()));
      if (let && !(kept && kept(let)))
        letReads.push_back(read);
    });
    if (letReads.empty())
      return success();
    for (ReadOp read : letReads) {
      auto let = cast<LetOp>(
          tables.lookupNearestSymbolFrom(read, read.getSourceAttr()));
      unsigned domainRank = let.getDomain().size();
      AffineMap map = read.getMap();
      OpBuilder builder(read);
      Location loc = read.getLoc();
      ValueRange operands = read.getIndices();
      ValueRange dims = operands.take_front(map.getNumDims());
      ValueRange symbols = operands.drop_front(map.getNumDims());
      IRMapping mapping;
      Block &body = let.getBody().front();
      for (auto [argument, expr] :
           llvm::zip(body.getArguments(), map.getResults()))
        mapping.map(argument,
                    materializeAffineExpr(builder, loc, expr, dims, symbols));
      // A read that fixes the first k indices of the domain is the slice
      // Σ_{free} embed(element at the free indices): differentiable op by
      // op, the adjoint of each element being its entry of the slice's.
      ReduceOp slice;
      unsigned fixed = map.getNumResults();
      if (fixed < domainRank) {
        slice = ReduceOp::create(
            builder, loc, read.getType(), ReduceKind::sum,
            builder.getArrayAttr(let.getDomain().getValue().drop_front(fixed)),
            Value());
        Block &sliceBody = slice.getBody().emplaceBlock();
        for (BlockArgument argument : body.getArguments().drop_front(fixed))
          mapping.map(argument, sliceBody.addArgument(argument.getType(),
                                                      argument.getLoc()));
        builder.setInsertionPointToStart(&sliceBody);
      }
      for (Operation &op : body.without_terminator())
        builder.clone(op, mapping);
      Value value = mapping.lookupOrDefault(
          cast<YieldOp>(body.getTerminator()).getValues().front());
      // Indices beyond the domain's slice the element, as for a tensor.
      if (map.getNumResults() > domainRank) {
        AffineMap beyond = AffineMap::get(
            map.getNumDims(), map.getNumSymbols(),
            map.getResults().drop_front(domainRank), builder.getContext());
        value = ExtractOp::create(builder, loc, read.getType(), value,
                                  AffineMapAttr::get(beyond), operands);
      }
      if (slice) {
        Block &sliceBody = slice.getBody().front();
        auto identity = AffineMap::getMultiDimIdentityMap(
            sliceBody.getNumArguments(), builder.getContext());
        Value embedded = EmbedOp::create(builder, loc, read.getType(), value,
                                         AffineMapAttr::get(identity),
                                         sliceBody.getArguments());
        YieldOp::create(builder, loc, embedded);
        value = slice.getResult();
      }
      read.replaceAllUsesWith(value);
      read.erase();
    }
  }
}

FailureOr<GradientOp> mlir::energy::getOrDeriveGradient(ModelOp model,
                                                        StringRef tensor,
                                                        FlatSymbolRefAttr of) {
  MLIRContext *context = model.getContext();
  return getOrDeriveGradient(model, {FlatSymbolRefAttr::get(context, tensor)},
                             of);
}

FailureOr<GradientOp> mlir::energy::getOrDeriveGradient(
    ModelOp model, ArrayRef<FlatSymbolRefAttr> tensors, FlatSymbolRefAttr of) {
  assert(!tensors.empty() && "a gradient of no tensor");
  Block &declarations = model.getBody().front();
  for (GradientOp existing : declarations.getOps<GradientOp>())
    if (existing.getTensors() == tensors && existing.getOfAttr() == of)
      return existing;
  SymbolTableCollection tables;
  OpBuilder builder = OpBuilder::atBlockEnd(&declarations);
  ArrayAttr also;
  if (tensors.size() > 1)
    also = builder.getArrayAttr(SmallVector<Attribute>(
        tensors.drop_front().begin(), tensors.drop_front().end()));
  auto gradient =
      GradientOp::create(builder, model.getLoc(), tensors.front(), also, of);
  gradient.getBody().emplaceBlock();
  GradientBuilder derivation(gradient, tables);
  for (TermOp term : declarations.getOps<TermOp>()) {
    bool included =
        of ? term.getSymName() == of.getValue() : !term.getAuxiliary();
    if (included && failed(derivation.addTerm(term)))
      return failure();
  }
  return gradient;
}

namespace {
/// Rewrites the gradient program `source` into ops at `builder` that sum
/// ⟨g, v[i]⟩ over its accumulations, v the direction of the tensor each
/// accumulates into, returning the sum.
Value buildDirectionalSum(Block &source, OpBuilder &builder, IRMapping &mapping,
                          const llvm::StringMap<StringRef> &directions,
                          Location loc) {
  MLIRContext *context = builder.getContext();
  Value total;
  auto add = [&](Value part) {
    total = total ? AddOp::create(builder, loc, total, part).getResult() : part;
  };
  for (Operation &op : source) {
    if (auto accumulate = dyn_cast<AccumulateOp>(op)) {
      Value g = mapping.lookupOrDefault(accumulate.getValue());
      SmallVector<Value> indices;
      for (Value index : accumulate.getIndices())
        indices.push_back(mapping.lookupOrDefault(index));
      StringRef direction = directions.lookup(accumulate.getTensor());
      assert(!direction.empty() && "an accumulation without a direction");
      Value v = ReadOp::create(builder, loc, g.getType(),
                               FlatSymbolRefAttr::get(context, direction),
                               accumulate.getMapAttr(), indices);
      Value product = MulOp::create(builder, loc, g, v);
      add(ReduceElementsOp::create(builder, loc, ElementsKind::sum, product));
      continue;
    }
    if (auto loop = dyn_cast<ForeachOp>(op)) {
      auto sum = ReduceOp::create(builder, loc, ArrayType::getScalar(context),
                                  ReduceKind::sum, loop.getSizes(), Value());
      loop.getPredicate().cloneInto(&sum.getPredicate(), mapping);
      Block &body = sum.getBody().emplaceBlock();
      for (BlockArgument argument : loop.getBody().getArguments())
        mapping.map(argument,
                    body.addArgument(argument.getType(), argument.getLoc()));
      OpBuilder inner = OpBuilder::atBlockEnd(&body);
      Value part = buildDirectionalSum(loop.getBody().front(), inner, mapping,
                                       directions, loc);
      YieldOp::create(inner, loc, part);
      add(sum);
      continue;
    }
    builder.clone(op, mapping);
  }
  return total ? total : ConstantOp::create(builder, loc, 0.0).getResult();
}
} // namespace

std::string mlir::energy::directionalTermName(ArrayRef<StringRef> tensors,
                                              StringRef of) {
  std::string name;
  for (StringRef tensor : tensors)
    name += (tensor + ".").str();
  name += "backprop";
  if (!of.empty())
    name += ("." + of).str();
  return name;
}

TermOp mlir::energy::buildDirectionalTerm(GradientOp gradient,
                                          StringRef direction, StringRef name) {
  SmallVector<StringRef> directions(gradient.getTensors().size(), direction);
  return buildDirectionalTerm(gradient, directions, name);
}

TermOp mlir::energy::buildDirectionalTerm(GradientOp gradient,
                                          ArrayRef<StringRef> directions,
                                          StringRef name) {
  llvm::StringMap<StringRef> directionOf;
  for (auto [tensor, direction] : llvm::zip(gradient.getTensors(), directions))
    directionOf[tensor.getValue()] = direction;
  auto model = gradient->getParentOfType<ModelOp>();
  OpBuilder builder = OpBuilder::atBlockEnd(&model.getBody().front());
  Location loc = gradient.getLoc();
  auto term = TermOp::create(builder, loc, builder.getStringAttr(name),
                             /*auxiliary=*/true);
  OpBuilder body = OpBuilder::atBlockEnd(&term.getBody().emplaceBlock());
  IRMapping mapping;
  Value sum = buildDirectionalSum(gradient.getBody().front(), body, mapping,
                                  directionOf, loc);
  YieldOp::create(body, loc, sum);
  // The maps the gradient applies per pair to what the direction is
  // paired with apply to the direction once per position instead, in the
  // term and in the gradients derived from it.
  transposeLinearMaps(term);
  return term;
}

namespace {
struct DeriveGradientsPass
    : public mlir::energy::impl::EnergyDeriveGradientsBase<
          DeriveGradientsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModelOp model = getOperation();
    SymbolTableCollection tables;
    MLIRContext *context = &getContext();

    // (tensors, term) pairs; a null term is the global energy.
    using Target = std::pair<SmallVector<FlatSymbolRefAttr>, FlatSymbolRefAttr>;
    SmallVector<Target> targets;
    auto addTarget = [&](Target target) {
      if (!llvm::is_contained(targets, target))
        targets.push_back(std::move(target));
    };
    model.walk([&](Operation *op) {
      if (auto update = dyn_cast<UpdateOp>(op))
        addTarget({{update.getNodeAttr()}, FlatSymbolRefAttr()});
      if (auto grad = dyn_cast<GradOp>(op))
        addTarget({grad.getTensors(), grad.getOfAttr()});
    });
    for (const std::string &name : wrt) {
      auto tensor = dyn_cast_or_null<TensorOp>(
          tables.lookupSymbolIn(model, StringAttr::get(context, name)));
      if (!tensor) {
        model.emitError() << "cannot differentiate with respect to '" << name
                          << "': it is not a tensor of the model";
        return signalPassFailure();
      }
      addTarget({{FlatSymbolRefAttr::get(tensor.getSymNameAttr())},
                 FlatSymbolRefAttr()});
    }
    for (auto &[tensors, of] : targets)
      if (failed(getOrDeriveGradient(model, tensors, of)))
        return signalPassFailure();
  }
};
} // namespace
