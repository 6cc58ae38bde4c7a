//===- RunCaches.cpp - Values kept between a call's kernel calls ----------===//
//
// Work in a step or a backward step that reads only parameters, inputs and
// consts (the keys W x of an attention over an input, We x in LISTA's
// rule) gives the same value at every step of a run; work that a backward
// step does again of its forward step (W1 x of JEM's sampler, S z of
// LISTA's, D a at Nesterov's look-ahead) gives the value the forward step
// computed. Each becomes an `energy.once`, kept in scratch tensors within
// one call of the runtime.
//
//===----------------------------------------------------------------------===//

#include "LetReads.h"
#include "PlanKernels.h"
#include "RunInvariance.h"
#include "Slices.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// Ops whose work is more than a pass over their operands: products,
/// loops, normalisations of rows.
bool doesWork(Operation *op) {
  return isa<GradOp, BatchMatmulOp, MatmulOp, OuterOp, DotOp, QuadOp, ReduceOp,
             ReduceElementsOp, SumLastOp, TabulateOp, SoftmaxContractOp,
             PrefixSumOp, LayerNormOp, RmsNormOp, SoftmaxOp, LogSoftmaxOp,
             InverseOp, LogDetOp>(op);
}

/// Whether keeping `value`, computed by `cone`, saves work worth its
/// memory: an array that a product, a loop or a normalisation computes.
bool worthKeeping(Value value, ArrayRef<Operation *> cone) {
  auto type = dyn_cast<ArrayType>(value.getType());
  if (!type || type.isScalar())
    return false;
  return llvm::any_of(cone, doesWork);
}

/// Whether keeping `value`, computed by `cone` once for a whole call, saves
/// work worth its memory: also a matrix that a transpose or element-wise
/// ops make of others (W + Wᵀ, a scaled param), which each gradient call
/// would otherwise make again.
bool worthKeepingForTheCall(Value value, ArrayRef<Operation *> cone) {
  if (worthKeeping(value, cone))
    return true;
  auto type = dyn_cast<ArrayType>(value.getType());
  return type && type.getRank() >= 2 && llvm::any_of(cone, [](Operation *op) {
           return !isa<ReadOp, ConstantOp, BroadcastOp>(op);
         });
}

/// The tensors that stores ahead of an op replaced by a step's kept value
/// (Nesterov's look-ahead, stored into the state ahead of the gradient),
/// each with the kept value's cache, in the order of the tensors' names:
/// the op then reads a value of the step just as if it read the step's
/// states, and reads the same in another block only where that block
/// stores the same kept values.
using StoredStepValues = SmallVector<std::pair<StringRef, Attribute>>;

/// A block whose ops run at the states of a dynamics step: the step
/// program's, the backward step's, or a gradient's that they call.
struct StepSite {
  Block *block;
  /// Whether the forward step runs it, and whether the backward step does.
  bool forward, backward;
  /// A gradient's calls (in the two programs' blocks); none for a program.
  SmallVector<GradOp> calls;

  /// What `cone` (ops of the block, its root last) reads of `tensors`, if
  /// they are as they are at the start of the step or as a step's kept
  /// values stored ahead of it (of its calls, the same for every call)
  /// make them, and the same all through the cone (keeping it computes it
  /// at its root); nullopt where other stores write them.
  std::optional<StoredStepValues>
  stepState(ArrayRef<Operation *> cone,
            const llvm::StringSet<> &tensors) const {
    Operation *op = cone.back();
    if (calls.empty())
      return storedWithin(cone, tensors) ? std::nullopt
                                         : storedAhead(op, tensors);
    std::optional<StoredStepValues> state;
    for (GradOp call : calls) {
      std::optional<StoredStepValues> ahead = storedAhead(call, tensors);
      if (!ahead || (state && *state != *ahead))
        return std::nullopt;
      state = std::move(ahead);
    }
    return state;
  }

private:
  /// Whether an op from the first of `cone` (in block order) to its root
  /// stores into one of `tensors`.
  static bool storedWithin(ArrayRef<Operation *> cone,
                           const llvm::StringSet<> &tensors) {
    for (Operation *op = cone.front(); op != cone.back();
         op = op->getNextNode())
      if (storesInto(op, tensors))
        return true;
    return false;
  }

  /// Whether `op` or an op inside it stores into one of `tensors`.
  static bool storesInto(Operation *op, const llvm::StringSet<> &tensors) {
    return op
        ->walk([&](StoreOp store) {
          return tensors.contains(store.getTensor()) ? WalkResult::interrupt()
                                                     : WalkResult::advance();
        })
        .wasInterrupted();
  }

  static std::optional<StoredStepValues>
  storedAhead(Operation *op, const llvm::StringSet<> &tensors) {
    // The names are the stores' own (the context's), not copies.
    StoredStepValues stored;
    for (Operation &earlier : *op->getBlock()) {
      if (&earlier == op)
        break;
      if (auto store = dyn_cast<StoreOp>(earlier);
          store && tensors.contains(store.getTensor())) {
        auto kept = store.getValue().getDefiningOp<OnceOp>();
        if (!kept || !kept.getPerStep())
          return std::nullopt;
        auto *entry = llvm::find_if(stored, [&](auto &value) {
          return value.first == store.getTensor();
        });
        if (entry == stored.end())
          stored.push_back({store.getTensor(), kept.getCacheAttr()});
        else
          entry->second = kept.getCacheAttr();
        continue;
      }
      if (storesInto(&earlier, tensors))
        return std::nullopt;
    }
    llvm::sort(stored, [](auto &a, auto &b) { return a.first < b.first; });
    return stored;
  }
};

/// The blocks that run at a step's states, where the model has a backward
/// step: the two programs', and the gradients whose every call is an op of
/// one of them.
SmallVector<StepSite> stepSites(ModelOp model) {
  Block &declarations = model.getBody().front();
  auto updates = declarations.getOps<UpdateProgramOp>();
  auto backwards = declarations.getOps<BackwardProgramOp>();
  if (updates.empty() || backwards.empty() ||
      declarations.getOps<DynamicsOp>().empty())
    return {};
  Region &backwardStep = (*backwards.begin()).getBody();
  if (backwardStep.empty() || backwardStep.front().empty())
    return {};
  // A row per step: not for runs of thousands of steps.
  constexpr int64_t kMostRows = 1024;
  FailureOr<int64_t> steps =
      (*declarations.getOps<DynamicsOp>().begin())
          .getSteps()
          .evaluate([](StringRef) { return std::nullopt; });
  if (succeeded(steps) && *steps > kMostRows)
    return {};
  Block *forwardBlock = &(*updates.begin()).getBody().front();
  Block *backwardBlock = &backwardStep.front();
  SmallVector<StepSite> sites{{forwardBlock, true, false, {}},
                              {backwardBlock, false, true, {}}};
  for (GradientOp gradient : declarations.getOps<GradientOp>()) {
    StepSite site{&gradient.getBody().front(), false, false, {}};
    bool elsewhere = false;
    model.walk([&](GradOp call) {
      if (call.getGradient() != gradient)
        return;
      site.calls.push_back(call);
      site.forward |= call->getBlock() == forwardBlock;
      site.backward |= call->getBlock() == backwardBlock;
      elsewhere |=
          call->getBlock() != forwardBlock && call->getBlock() != backwardBlock;
    });
    if (!site.calls.empty() && !elsewhere)
      sites.push_back(std::move(site));
  }
  return sites;
}

class RunCacheBuilder {
public:
  explicit RunCacheBuilder(ModelOp model) : model(model), invariance(model) {}

  /// Keeps the run-invariant values of `block` that its other ops read.
  void keepInvariantValues(Block &block) {
    SmallVector<Operation *> ops;
    for (Operation &op : block)
      ops.push_back(&op);
    bool changed = false;
    for (Operation *op : ops) {
      if (isa<OnceOp>(op) || op->getNumResults() != 1 ||
          !invariance.isInvariant(op) ||
          (!readByVariantWork(op) && !readByOpsOfItsBlock(op, 2)))
        continue;
      SmallVector<Operation *> cone = coneOf(op, /*stopAtKeptValues=*/true);
      if (!worthKeepingForTheCall(op->getResult(0), cone))
        continue;
      keep(op, cone);
      changed = true;
    }
    if (changed)
      eraseDeadOps(block);
  }

private:
  /// Whether an op of `op`'s block that is not run-invariant reads it.
  bool readByVariantWork(Operation *op) {
    for (Operation *user : op->getUsers()) {
      Operation *top = op->getBlock()->findAncestorOpInBlock(*user);
      if (!top || !invariance.isInvariant(top))
        return true;
    }
    return false;
  }

  /// Whether at least `count` ops of `op`'s block read it (kept on its own,
  /// it is computed once for all of them, not once in each one's cone).
  bool readByOpsOfItsBlock(Operation *op, unsigned count) {
    llvm::SmallPtrSet<Operation *, 4> readers;
    for (Operation *user : op->getUsers())
      if (Operation *top = op->getBlock()->findAncestorOpInBlock(*user))
        readers.insert(top);
    return readers.size() >= count;
  }

  /// Replaces `root`'s result by an `energy.once` of its cone, kept in
  /// `cache` and `valid` (new ones where null; per step with `perStep`).
  std::pair<FlatSymbolRefAttr, FlatSymbolRefAttr>
  keep(Operation *root, ArrayRef<Operation *> cone, bool perStep = false,
       std::pair<FlatSymbolRefAttr, FlatSymbolRefAttr> kept = {}) {
    Value value = root->getResult(0);
    auto type = cast<ArrayType>(value.getType());
    // A contraction outside the cone given a kept normaliser computes its
    // scores itself: the kept one's are not there to reuse.
    for (Operation *user : value.getUsers())
      if (auto contract = dyn_cast<SoftmaxContractOp>(user);
          contract && contract.getGivenLse() == value &&
          !llvm::is_contained(cone, user))
        contract.setReusesScores(false);
    if (!kept.first)
      kept = cacheTensors(type, perStep ? stepCount() : StringAttr());
    OpBuilder builder(root);
    auto once =
        OnceOp::create(builder, root->getLoc(), type, kept.first, kept.second,
                       perStep ? builder.getUnitAttr() : UnitAttr());
    Block *body = builder.createBlock(&once.getBody());
    IRMapping mapping;
    builder.setInsertionPointToStart(body);
    for (Operation *op : cone)
      builder.clone(*op, mapping);
    YieldOp::create(builder, root->getLoc(), mapping.lookup(value));
    value.replaceUsesWithIf(once.getResult(), [&](OpOperand &use) {
      return !once->isAncestor(use.getOwner());
    });
    invariance.isInvariant(once);
    return kept;
  }

  /// A new scratch tensor of `type` and its flag: scalar, or with a row and
  /// a flag per step when `steps` (a dim) is given.
  std::pair<FlatSymbolRefAttr, FlatSymbolRefAttr>
  cacheTensors(ArrayType type, StringAttr steps) {
    SmallVector<Attribute> shape, flagShape;
    if (steps) {
      shape.push_back(FlatSymbolRefAttr::get(steps));
      flagShape.push_back(FlatSymbolRefAttr::get(steps));
    }
    for (StringAttr dim : type.getShape())
      shape.push_back(FlatSymbolRefAttr::get(dim));
    return declareKeptValue(model, shape, flagShape, nextCache);
  }

  /// The dim `tape.steps`, the dynamics' step count, made on first use.
  StringAttr stepCount() {
    constexpr StringLiteral kName = "tape.steps";
    if (auto existing = model.lookupSymbol<DimOp>(kName))
      return existing.getSymNameAttr();
    auto dynamics = *model.getBody().front().getOps<DynamicsOp>().begin();
    OpBuilder declarations = OpBuilder::atBlockBegin(&model.getBody().front());
    for (DimOp dim : model.getBody().front().getOps<DimOp>())
      declarations.setInsertionPointAfter(dim);
    auto dim = DimOp::create(declarations, model.getLoc(), kName, IntegerAttr(),
                             dynamics.getStepsAttr());
    return dim.getSymNameAttr();
  }

public:
  /// Makes kept values that compute the same, in different blocks (the
  /// keys of an input in a gradient and in its backward), one kept value:
  /// the first of them that runs fills it for the others.
  void shareKeptValues() {
    SmallVector<OnceOp> kept;
    model.walk([&](OnceOp once) {
      if (!once.getPerStep())
        kept.push_back(once);
    });
    for (auto [position, once] : llvm::enumerate(kept))
      for (OnceOp earlier : ArrayRef<OnceOp>(kept).take_front(position))
        if (earlier.getCacheAttr() != once.getCacheAttr() &&
            earlier.getType() == once.getType() &&
            computeSame(earlier.getBodyValue(), once.getBodyValue(),
                        IRMapping())) {
          dropCacheTensors(once);
          once.setCacheAttr(earlier.getCacheAttr());
          once.setValidAttr(earlier.getValidAttr());
          break;
        }
  }

private:
  /// Erases the scratch tensor and flag of `once`, which no other reads.
  void dropCacheTensors(OnceOp once) {
    for (FlatSymbolRefAttr name : {once.getCacheAttr(), once.getValidAttr()})
      if (Operation *tensor = SymbolTable::lookupSymbolIn(model, name))
        tensor->erase();
  }

public:
  /// Keeps, per step, what a backward step computes again of its forward
  /// step: values of the step program's blocks and of the gradients they
  /// call (stepSites) that read states as they are at the start of the
  /// step, computed the same in the forward and in the backward step (a
  /// gradient's value itself, where the backward step needs it: Heun's
  /// first stage).
  void keepStepValues() {
    // A value read from a kept one is kept in a later round: a network's
    // layer after the normalisation it reads. The sites are found again
    // each round: a kept gradient call is no longer a call of the program.
    constexpr int kRounds = 4;
    for (int round = 0; round < kRounds; ++round)
      if (!keepStepValuesOnce(stepSites(model)))
        break;
  }

private:
  struct Candidate {
    Operation *op;
    SmallVector<Operation *> cone;
    /// The step's kept values stored ahead into tensors it reads.
    StoredStepValues state;
    bool forward, backward;
  };

  /// One round of keepStepValues; whether it kept anything.
  bool keepStepValuesOnce(ArrayRef<StepSite> sites) {
    SmallVector<Candidate> candidates;
    for (const StepSite &site : sites)
      for (Operation &op : *site.block) {
        if (isa<OnceOp>(op) || op.getNumResults() != 1 ||
            invariance.isInvariant(&op))
          continue;
        SmallVector<Operation *> whole = coneOf(&op, /*stopAtKeptValues=*/true);
        SmallVector<Operation *> cone =
            computedOnlyHere(whole) ? whole : withinContractOutputs(whole);
        if (!computedOnlyHere(cone) || !worthKeeping(op.getResult(0), cone) ||
            !onlyReadsTensors(whole))
          continue;
        std::optional<StoredStepValues> state =
            site.stepState(whole, tensorsReadBy(opsComputing(op.getResult(0))));
        if (!state)
          continue;
        candidates.push_back({&op, std::move(cone), std::move(*state),
                              site.forward, site.backward});
      }
    // A cone that holds a value kept in this round waits for the next, where
    // it reads the kept value instead of computing it again.
    llvm::SmallPtrSet<Operation *, 8> taken;
    auto ready = [&](const Candidate &candidate) {
      return !taken.contains(candidate.op) &&
             llvm::none_of(candidate.cone,
                           [&](Operation *op) { return taken.contains(op); });
    };
    bool kept = false;
    for (Candidate &first : candidates) {
      if (!first.forward || !ready(first))
        continue;
      SmallVector<Candidate *> group{&first};
      bool backward = first.backward;
      for (Candidate &other : candidates)
        if (&other != &first && ready(other) && other.state == first.state &&
            other.op->getResult(0).getType() ==
                first.op->getResult(0).getType() &&
            computeSame(
                first.op->getResult(0), other.op->getResult(0),
                keptAlike(first.op->getBlock(), other.op->getBlock()))) {
          group.push_back(&other);
          backward |= other.backward;
        }
      if (!backward)
        continue;
      std::pair<FlatSymbolRefAttr, FlatSymbolRefAttr> tensors;
      for (Candidate *member : group) {
        taken.insert(member->op);
        tensors = keep(member->op, member->cone, /*perStep=*/true, tensors);
      }
      kept = true;
    }
    for (const StepSite &site : sites)
      eraseDeadOps(*site.block);
    return kept;
  }

  /// The kept values of block `a` and those of block `b` that hold the
  /// same: the same row per step, or bodies that compute the same.
  static IRMapping keptAlike(Block *a, Block *b) {
    IRMapping alike;
    for (OnceOp first : a->getOps<OnceOp>())
      for (OnceOp second : b->getOps<OnceOp>())
        if (first.getPerStep() == second.getPerStep() &&
            first.getType() == second.getType() &&
            (first.getCacheAttr() == second.getCacheAttr() ||
             (!first.getPerStep() &&
              computeSame(first.getBodyValue(), second.getBodyValue(),
                          IRMapping())))) {
          alike.map(first.getResult(), second.getResult());
          break;
        }
    return alike;
  }

private:
  /// Whether what `cone` computes beside its root is read only in it, so
  /// that computing the cone inside an `energy.once` computes nothing twice.
  static bool computedOnlyHere(ArrayRef<Operation *> cone) {
    llvm::SmallPtrSet<Operation *, 8> members(cone.begin(), cone.end());
    Operation *root = cone.back();
    return llvm::all_of(cone, [&](Operation *op) {
      if (op == root || !doesWork(op))
        return true;
      return llvm::all_of(op->getUsers(), [&](Operation *user) {
        Operation *top = op->getBlock()->findAncestorOpInBlock(*user);
        return top && members.contains(top);
      });
    });
  }

  /// The ops of `cone` (its root last) that compute its root from the
  /// outputs of the contractions in it: a value of the step that reads one
  /// output of a contraction whose others the step needs as well (the
  /// back-projection of a weighted sum of keys) is kept reading that output,
  /// computed by the contraction outside the kept value.
  static SmallVector<Operation *>
  withinContractOutputs(ArrayRef<Operation *> cone) {
    llvm::SmallPtrSet<Operation *, 8> members(cone.begin(), cone.end());
    return coneOf(cone.back(), [&](Operation *op) {
      return members.contains(op) && !isa<SoftmaxContractOp>(op);
    });
  }

  /// The ops that compute `value` (an op's result in a block; not into
  /// kept values), where of a contraction's output only those that its
  /// normaliser, its weights and that output's value need (the ops of its
  /// regions that compute them, and what they read of the block): an output
  /// that weighs the keys does not read the tangents another one weighs.
  static SmallVector<Operation *> opsComputing(Value value) {
    SmallVector<Operation *> ops;
    llvm::SmallPtrSet<Operation *, 16> seen;
    Block *block = value.getDefiningOp()->getBlock();
    SmallVector<Value> work{value};
    auto pushUsed = [&](Operation *op) {
      llvm::SetVector<Value> used;
      for (Region &region : op->getRegions())
        getUsedValuesDefinedAbove(region, used);
      used.insert(op->operand_begin(), op->operand_end());
      llvm::append_range(work, used);
    };
    while (!work.empty()) {
      Value next = work.pop_back_val();
      Operation *def = next.getDefiningOp();
      if (!def || isa<OnceOp>(def))
        continue;
      Operation *top = block->findAncestorOpInBlock(*def);
      auto contract = dyn_cast_or_null<SoftmaxContractOp>(top);
      if (!contract) {
        if (def->getBlock() == block && seen.insert(def).second) {
          ops.push_back(def);
          pushUsed(def);
        }
        continue;
      }
      if (def != contract.getOperation()) {
        // An op of the contraction's regions.
        if (seen.insert(def).second) {
          ops.push_back(def);
          pushUsed(def);
        }
        continue;
      }
      auto yielded = [](Region &region) {
        return region.front().getTerminator()->getOperand(0);
      };
      work.push_back(contract.getScoreValue());
      if (contract.hasPredicate())
        work.push_back(yielded(contract.getPredicate()));
      if (Value temperature = contract.getTemperature())
        work.push_back(temperature);
      if (Value given = contract.getGivenLse())
        work.push_back(given);
      auto result = cast<OpResult>(next);
      for (auto [outputs, values] :
           {std::pair(contract.getRowOutputs(), contract.getRowValues()),
            std::pair(contract.getColOutputs(), contract.getColValues())})
        if (auto at = llvm::find(outputs, result); at != outputs.end())
          work.push_back(values[at - outputs.begin()]);
    }
    return ops;
  }

  /// Whether `call` is a gradient's value that only reads: it adds into no
  /// tensor, and its gradient runs no plugin code.
  static bool isReadingGradient(GradOp call) {
    GradientOp gradient = call.getGradient();
    return gradient && !call.getIntoAttr() &&
           !gradient
                ->walk([](Operation *op) {
                  return isa<ApplyOp, AggregateOp, AggregateWeightsOp, StoreOp,
                             GradOp>(op)
                             ? WalkResult::interrupt()
                             : WalkResult::advance();
                })
                .wasInterrupted();
  }

  /// Whether `cone` only reads: ops that read, and at its top level
  /// gradient calls that read (tensorsReadBy sees into their gradients).
  static bool onlyReadsTensors(ArrayRef<Operation *> cone) {
    return llvm::all_of(cone, [](Operation *op) {
      if (auto call = dyn_cast<GradOp>(op))
        return isReadingGradient(call);
      return onlyReads(op) && !op->walk([](GradOp) {
                                   return WalkResult::interrupt();
                                 }).wasInterrupted();
    });
  }

  /// The tensors `cone` reads, directly, through lets or in the gradients
  /// it calls.
  llvm::StringSet<> tensorsReadBy(ArrayRef<Operation *> cone) {
    llvm::StringSet<> tensors;
    auto readsOf = [&](Operation *op) {
      op->walk([&](ReadOp read) {
        if (auto let = model.lookupSymbol<LetOp>(read.getSource()))
          for (StringRef tensor : readTensors(let.getBody(), model))
            tensors.insert(tensor);
        else
          tensors.insert(read.getSource());
      });
    };
    for (Operation *op : cone) {
      readsOf(op);
      if (auto call = dyn_cast<GradOp>(op))
        if (GradientOp gradient = call.getGradient())
          readsOf(gradient);
    }
    return tensors;
  }

  ModelOp model;
  RunInvariance invariance;
  unsigned nextCache = 0;
};

} // namespace

void mlir::energy::keepValuesBetweenCalls(ModelOp model) {
  RunCacheBuilder builder(model);
  for (Operation &op : model.getBody().front()) {
    if (isa<GradientOp, UpdateProgramOp>(op))
      builder.keepInvariantValues(op.getRegion(0).front());
    else if (isa<BackwardProgramOp>(op))
      for (Region &region : op.getRegions())
        if (!region.empty())
          builder.keepInvariantValues(region.front());
  }
  builder.shareKeptValues();
  builder.keepStepValues();
}
