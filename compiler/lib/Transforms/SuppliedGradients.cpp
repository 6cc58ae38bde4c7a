//===- SuppliedGradients.cpp - The energy-supplied-gradients pass ---------===//
//
// One rank of a sharded run steps with the gradient the runtime puts
// together from every rank's part: the update program reads it from inputs
// instead of computing it, and the backward program differentiates the
// ranks' sum, with the cotangents the runtime gathers in between.
//
//===----------------------------------------------------------------------===//

#include "LetReads.h"
#include "Slices.h"
#include "energy/Interfaces/ElementwiseOpInterface.h"
#include "energy/Runtime/ArtifactABI.h"
#include "energy/Transforms/Gradients.h"
#include "energy/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::energy {
#define GEN_PASS_DEF_ENERGYEXCHANGEDTENSORS
#define GEN_PASS_DEF_ENERGYSUPPLIEDGRADIENTS
#include "energy/Transforms/Passes.h.inc"
} // namespace mlir::energy

using namespace mlir;
using namespace mlir::energy;

namespace {
/// A new tensor `name` of `like`'s shape, zeros, with `role`, declared
/// after the model's tensors; an error at `at` when another symbol has the
/// name.
TensorOp declareTensor(ModelOp model, SymbolTable &symbols, StringRef name,
                       Role role, TensorOp like, Operation *at) {
  if (symbols.lookup(name)) {
    at->emitError() << "'" << name << "' is taken: one rank of a sharded run "
                    << "needs that name for @" << like.getSymName();
    return {};
  }
  OpBuilder declare(model.getContext());
  for (TensorOp tensor : model.getBody().front().getOps<TensorOp>())
    declare.setInsertionPointAfter(tensor);
  auto tensor =
      TensorOp::create(declare, like.getLoc(), name, role, like.getShape(),
                       InitKindAttr::get(model.getContext(), InitKind::zeros),
                       DenseF64ArrayAttr(), FlatSymbolRefAttr());
  symbols.insert(tensor);
  return tensor;
}

/// The backward program of one rank: its Hessian-vector products pair the
/// gathered cotangents with the copies' gradients, its cotangents are a
/// part of their own, and what states held whole get from the rank's
/// energy is kept apart.
class RankBackward {
public:
  RankBackward(ModelOp model, BackwardProgramOp backward, SymbolTable &symbols,
               const llvm::StringMap<std::string> &copyOf, StringRef rowsDim)
      : model(model), backward(backward), symbols(symbols), copyOf(copyOf),
        rowsDim(rowsDim) {}

  /// `stepped`: the tensors whose gradient the step takes (and the rank is
  /// supplied).
  LogicalResult rewrite(ArrayRef<StringRef> stepped) {
    if (backward.getImplicit())
      return backward.emitError()
             << "a sharded run cannot differentiate at a fixed point yet "
                "(`backward implicit`)";
    Block &step = backward.getBody().front();
    WalkResult walk = step.walk([&](GradOp grad) {
      if (grad.getOf())
        return WalkResult::advance();
      grad.emitError() << "a sharded run's loss gradient needs a step that is "
                          "linear in the gradient; the derivative of this "
                          "step reads the gradient itself";
      return WalkResult::interrupt();
    });
    if (walk.wasInterrupted() || stepped.empty())
      return failure(walk.wasInterrupted());
    // The product is of the energy, or of the energy with the lets that
    // read no state read from tensors (BuildBackward's energy.fixed_lets).
    // The product is of the energy, or of the energy with the lets that
    // read no state read from tensors (BuildBackward's energy.fixed_lets).
    StringRef of;
    std::string name;
    SmallVector<GradOp> calls;
    for (StringRef energy : {StringRef("energy.fixed_lets"), StringRef()}) {
      of = energy;
      name = directionalTermName(stepped, of);
      step.walk([&](GradOp grad) {
        if (grad.getOf() && *grad.getOf() == name)
          calls.push_back(grad);
      });
      if (!calls.empty())
        break;
    }
    // Where the rank's energy reads no row of the stepped tensors (only
    // their copies), the product has no call yet: its calls go after the
    // cotangents' stores.
    Operation *anchor = calls.empty() ? nullptr : calls.back();
    for (StoreOp store : step.getOps<StoreOp>())
      if (!anchor &&
          llvm::is_contained(stepped, cotangentOf(store.getTensor())))
        anchor = store;
    if (!symbols.lookup<TermOp>(name) || !anchor)
      return backward.emitError()
             << "a sharded run's loss gradient takes the step's "
                "Hessian-vector product of the energy as one term; this "
                "model's goes through the residual stream of a let";
    FailureOr<TermOp> term = pairCopies(stepped, name, of);
    if (failed(term))
      return failure();
    if (failed(retarget(calls, anchor, *term)) ||
        failed(separateCotangents(stepped)))
      return failure();
    return success();
  }

private:
  FlatSymbolRefAttr ref(StringRef name) {
    return FlatSymbolRefAttr::get(model.getContext(), name);
  }

  /// The state tensor `of` + `suffix` of `of`'s shape, marked as `of`'s
  /// cotangent (not a forward state): the existing one, or a new one (empty,
  /// with an error, when another symbol has the name).
  StringRef auxiliaryOf(StringRef of, StringRef suffix) {
    std::string name = (of + suffix).str();
    if (auto existing = symbols.lookup<TensorOp>(name))
      return existing.getSymName();
    TensorOp tensor = declareTensor(model, symbols, name, Role::state,
                                    symbols.lookup<TensorOp>(of), backward);
    if (!tensor)
      return {};
    tensor.setCotangentOfAttr(ref(of));
    return tensor.getSymName();
  }

  /// The term ⟨∇_X E, X̄⟩ + ⟨∇_C E, C̄⟩ over the stepped tensors X and the
  /// copies C of those that have one (the term named `name` itself when
  /// none has).
  FailureOr<TermOp> pairCopies(ArrayRef<StringRef> stepped, StringRef name,
                               StringRef of) {
    SmallVector<StringRef> tensors(stepped), directions;
    for (StringRef tensor : stepped)
      directions.push_back(auxiliaryOf(tensor, ".cotangent"));
    for (StringRef tensor : stepped)
      if (auto it = copyOf.find(tensor); it != copyOf.end()) {
        tensors.push_back(it->second);
        directions.push_back(auxiliaryOf(it->second, ".cotangent"));
      }
    if (llvm::is_contained(directions, StringRef()))
      return failure();
    if (tensors.size() == stepped.size())
      return symbols.lookup<TermOp>(name);
    SmallVector<FlatSymbolRefAttr> refs;
    for (StringRef tensor : tensors)
      refs.push_back(ref(tensor));
    FailureOr<GradientOp> gradient = getOrDeriveGradient(
        model, refs, of.empty() ? FlatSymbolRefAttr() : ref(of));
    if (failed(gradient))
      return failure();
    std::string joint = directionalTermName(tensors, of);
    if (auto existing = symbols.lookup<TermOp>(joint))
      return existing;
    TermOp term = buildDirectionalTerm(*gradient, directions, joint);
    symbols.insert(term);
    return term;
  }

  /// Whether `tensor` is a state every rank holds whole.
  bool heldWhole(StringRef tensor) {
    auto op = symbols.lookup<TensorOp>(tensor);
    if (!op || op.getRole() != Role::state ||
        !(op.isForwardState() || op.getOptimizerState()))
      return false;
    return llvm::none_of(op.getShape(), [&](Attribute dim) {
      return cast<FlatSymbolRefAttr>(dim).getValue() == rowsDim;
    });
  }

  /// The calls take the gradients of `term`; the tensors it reads beyond
  /// theirs get theirs too, added to their adjoints at the end of the step.
  /// A state held whole keeps the rank's part in `@V.rank_adjoint`.
  LogicalResult retarget(ArrayRef<GradOp> calls, Operation *anchor,
                         TermOp term) {
    Block &step = backward.getBody().front();
    llvm::SmallSetVector<StringRef, 8> taken;
    for (GradOp call : calls) {
      call.setOfAttr(ref(term.getSymName()));
      for (FlatSymbolRefAttr tensor : call.getTensors())
        taken.insert(tensor.getValue());
    }
    OpBuilder builder(model.getContext());
    Location loc = backward.getLoc();
    builder.setInsertionPointAfter(anchor);
    SmallVector<std::pair<StringRef, Value>> added;
    for (StringRef tensor : readTensors(term.getBody(), model)) {
      if (taken.contains(tensor) || adjointOf(tensor).empty())
        continue;
      auto type = symbols.lookup<TensorOp>(tensor).getArrayType();
      Value gradient = GradOp::create(builder, loc, type, ref(tensor),
                                      ref(term.getSymName()))
                           ->getResult(0);
      added.push_back({tensor, gradient});
    }
    builder.setInsertionPointToEnd(&step);
    for (auto [tensor, gradient] : added) {
      StringRef adjoint = adjointOf(tensor);
      Value sum = AddOp::create(
          builder, loc,
          readWholeTensor(builder, loc, cast<ArrayType>(gradient.getType()),
                          ref(adjoint)),
          gradient);
      StoreOp::create(builder, loc, sum, ref(adjoint));
    }
    SmallVector<std::pair<StringRef, Value>> parts(added);
    for (GradOp call : calls)
      for (auto [position, tensor] : llvm::enumerate(call.getTensors()))
        if (Value result = call.getResultOf(position))
          parts.push_back({tensor.getValue(), result});
    for (auto [tensor, part] : parts) {
      if (!heldWhole(tensor))
        continue;
      StringRef rankAdjoint =
          auxiliaryOf(tensor, ENERGY_ARTIFACT_RANK_ADJOINT_SUFFIX);
      if (rankAdjoint.empty())
        return failure();
      // The runtime adds every rank's part; the rank's own adjoint gets none.
      builder.setInsertionPointAfterValue(part);
      auto type = cast<ArrayType>(part.getType());
      Value zero = ConstantOp::create(builder, loc, 0.0);
      Value zeros = BroadcastOp::create(builder, loc, type, zero);
      part.replaceAllUsesExcept(zeros, zeros.getDefiningOp());
      StoreOp::create(builder, loc, part, ref(rankAdjoint));
    }
    return success();
  }

  /// The tensor whose cotangent `tensor` is, or empty.
  StringRef cotangentOf(StringRef tensor) {
    auto op = symbols.lookup<TensorOp>(tensor);
    return op && op.getCotangentOf() ? *op.getCotangentOf() : StringRef();
  }

  /// The adjoint tensor of `tensor`, or empty.
  StringRef adjointOf(StringRef tensor) {
    for (TensorOp op : model.getBody().front().getOps<TensorOp>())
      if (op.getAdjointOf() && *op.getAdjointOf() == tensor)
        return op.getSymName();
    return {};
  }

  /// Moves the stores of the stepped tensors' cotangents, and what they
  /// store, to the program's `cotangents` part.
  LogicalResult separateCotangents(ArrayRef<StringRef> stepped) {
    Block &step = backward.getBody().front();
    llvm::StringSet<> cotangents;
    for (StringRef tensor : stepped)
      cotangents.insert((tensor + ".cotangent").str());
    SmallVector<StoreOp> stores;
    for (StoreOp store : step.getOps<StoreOp>())
      if (cotangents.contains(store.getTensor()))
        stores.push_back(store);
    if (stores.empty())
      return success();
    Block &part = backward.getCotangents().emplaceBlock();
    OpBuilder builder = OpBuilder::atBlockEnd(&part);
    IRMapping mapping;
    for (StoreOp store : stores) {
      llvm::SetVector<Operation *> cone;
      if (failed(coneOf(store, cone)))
        return failure();
      for (Operation &op : step) {
        if (&op == store.getOperation())
          break;
        if (!cone.contains(&op))
          continue;
        if (!mapping.contains(&op))
          builder.clone(op, mapping);
      }
      builder.clone(*store, mapping);
      store.erase();
    }
    eraseDeadOps(step);
    return success();
  }

  /// The ops of the step's block that `store` stores the value of, which
  /// must read nothing a store ahead of it writes.
  LogicalResult coneOf(StoreOp store, llvm::SetVector<Operation *> &cone) {
    Block *block = store->getBlock();
    SmallVector<Value> pending{store.getValue()};
    while (!pending.empty()) {
      Operation *op = pending.pop_back_val().getDefiningOp();
      if (!op || op->getBlock() != block || !cone.insert(op))
        continue;
      if (op->getNumRegions() != 0 || isa<GradOp, StoreOp>(op))
        return store.emitError()
               << "a sharded run's loss gradient computes the step's "
                  "cotangents element by element; this one computes '"
               << op->getName() << "'";
      if (auto read = dyn_cast<ReadOp>(op))
        for (Operation *earlier = &block->front(); earlier != store;
             earlier = earlier->getNextNode())
          if (auto written = dyn_cast<StoreOp>(earlier);
              written && written.getTensor() == read.getSource() &&
              earlier->isBeforeInBlock(op))
            return store.emitError()
                   << "a sharded run's loss gradient computes the step's "
                      "cotangents from the values at the step's start; this "
                      "one reads @"
                   << read.getSource() << " after the step stores it";
      for (Value operand : op->getOperands())
        pending.push_back(operand);
    }
    return success();
  }

  ModelOp model;
  BackwardProgramOp backward;
  SymbolTable &symbols;
  const llvm::StringMap<std::string> &copyOf;
  StringRef rowsDim;
};

struct SuppliedGradientsPass
    : public mlir::energy::impl::EnergySuppliedGradientsBase<
          SuppliedGradientsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModelOp model = getOperation();
    Block &declarations = model.getBody().front();
    auto programs = declarations.getOps<UpdateProgramOp>();
    if (programs.empty())
      return;
    UpdateProgramOp program = *programs.begin();
    if (DynamicsOp dynamics = model.getDynamics();
        dynamics && !dynamics.getUntil().empty()) {
      dynamics.emitError()
          << "a sharded run cannot stop by a rule yet (`until`): every rank "
             "would decide on its own rows";
      return signalPassFailure();
    }
    SymbolTable symbols(model);
    SmallVector<GradOp> grads;
    bool stored = false;
    WalkResult walk =
        program.getBody().walk([&](Operation *op) {
          if (isa<StoreOp>(op))
            stored = true;
          auto grad = dyn_cast<GradOp>(op);
          if (!grad)
            return WalkResult::advance();
          if (stored || !grads.empty() || grad.getOf() ||
              grad->getParentOp() != program) {
            grad.emitError()
                << "a sharded run supplies the gradient once per step, at the "
                   "step's start, of the whole energy; this step takes it "
                << (grad.getOf() ? "of one term"
                    : stored     ? "after updating a state"
                                 : "more than once")
                << " (an optimizer with a look-ahead or several stages)";
            return WalkResult::interrupt();
          }
          grads.push_back(grad);
          return WalkResult::advance();
        });
    if (walk.wasInterrupted())
      return signalPassFailure();
    // The rest of the step works element by element on values each rank
    // holds: a sum or product would see only this rank's rows.
    walk = program.getBody().walk([&](Operation *op) {
      if (isa<GradOp, StoreOp, ConstantOp, ElementwiseOpInterface>(op))
        return WalkResult::advance();
      // Tensors' elements, and consts (an option `lr = alpha`).
      if (auto read = dyn_cast<ReadOp>(op);
          read && (symbols.lookup<TensorOp>(read.getSource()) ||
                   symbols.lookup<ConstOp>(read.getSource())))
        return WalkResult::advance();
      if (auto read = dyn_cast<ReadOp>(op)) {
        op->emitError() << "a sharded run steps element by element from the "
                           "gradient; this step reads let @"
                        << read.getSource()
                        << " (an explicit rule), which it does not evaluate "
                           "yet";
        return WalkResult::interrupt();
      }
      op->emitError() << "a sharded run steps element by element; this step "
                         "computes '"
                      << op->getName()
                      << "' (a closed form, a solver or a rule that sums)";
      return WalkResult::interrupt();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();

    // The tensors the grad ops stepped, read before the ops go.
    SmallVector<StringRef> stepped;
    for (GradOp grad : grads)
      for (FlatSymbolRefAttr tensor : grad.getTensors())
        stepped.push_back(tensor.getValue());
    for (GradOp grad : grads) {
      OpBuilder read(grad);
      SmallVector<Value> replacements;
      for (auto [position, symbol] : llvm::enumerate(grad.getTensors())) {
        auto tensor = symbols.lookup<TensorOp>(symbol.getValue());
        std::string name =
            (symbol.getValue() + ENERGY_ARTIFACT_SUPPLIED_GRADIENT_SUFFIX)
                .str();
        auto supplied = symbols.lookup<TensorOp>(name);
        if (!supplied) {
          supplied =
              declareTensor(model, symbols, name, Role::input, tensor, grad);
          if (!supplied)
            return signalPassFailure();
          supplied.setExchanged(true);
        }
        replacements.push_back(
            readWholeTensor(read, grad.getLoc(), supplied.getArrayType(),
                            FlatSymbolRefAttr::get(supplied.getSymNameAttr())));
      }
      grad.replaceAllUsesWith(replacements);
      grad.erase();
    }
    llvm::StringMap<std::string> copyOf;
    for (const std::string &pair : copies) {
      auto [tensor, copy] = StringRef(pair).split('=');
      if (copy.empty() || !symbols.lookup<TensorOp>(tensor) ||
          !symbols.lookup<TensorOp>(copy)) {
        model.emitError() << "energy-supplied-gradients: '" << pair
                          << "' does not name a tensor and its copy (X=C)";
        return signalPassFailure();
      }
      if (!symbols.lookup<TensorOp>(copy).getExchanged()) {
        model.emitError() << "energy-supplied-gradients: the copy @" << copy
                          << " is not marked `exchanged` "
                             "(energy-exchanged-tensors)";
        return signalPassFailure();
      }
      copyOf[tensor] = copy.str();
    }
    auto backwards = declarations.getOps<BackwardProgramOp>();
    if (backwards.empty())
      return;
    RankBackward rank(model, *backwards.begin(), symbols, copyOf, rowsDim);
    if (failed(rank.rewrite(stepped)))
      signalPassFailure();
  }
};
} // namespace

namespace {
struct ExchangedTensorsPass
    : public mlir::energy::impl::EnergyExchangedTensorsBase<
          ExchangedTensorsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModelOp model = getOperation();
    SmallVector<std::pair<TensorOp, TensorOp>> pairs;
    for (const std::string &pair : copies) {
      auto [name, copyName] = StringRef(pair).split('=');
      auto tensor = model.lookupSymbol<TensorOp>(name);
      auto copy = model.lookupSymbol<TensorOp>(copyName);
      if (!tensor || !copy) {
        model.emitError() << "energy-exchanged-tensors: model "
                          << model.getSymName() << " has no tensor @"
                          << (tensor ? copyName : name);
        return signalPassFailure();
      }
      copy.setExchanged(true);
      pairs.push_back({tensor, copy});
    }
    // One gradient of each sharded tensor and its copy, where the energy
    // reads both.
    for (auto [tensor, copy] : pairs) {
      llvm::SetVector<StringRef> read;
      for (TermOp term : model.getBody().front().getOps<TermOp>())
        if (!term.getAuxiliary() && !term.getLoss())
          for (StringRef name : readTensors(term.getBody(), model))
            read.insert(name);
      if (!read.contains(tensor.getSymName()) ||
          !read.contains(copy.getSymName()))
        continue;
      SmallVector<FlatSymbolRefAttr> both = {
          FlatSymbolRefAttr::get(tensor.getSymNameAttr()),
          FlatSymbolRefAttr::get(copy.getSymNameAttr())};
      if (failed(getOrDeriveGradient(model, both)))
        return signalPassFailure();
    }
  }
};
} // namespace
