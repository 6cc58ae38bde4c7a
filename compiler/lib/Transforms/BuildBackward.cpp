//===- BuildBackward.cpp - The dynamics run backwards ---------------------===//
//
// Builds `energy.backward_program` from the step program and the model's
// losses: the reverse-mode derivative of one step, for gradients of a loss
// through the unrolled dynamics (`backward implicit`'s solve at a fixed point
// is BuildImplicitBackward.cpp's).
//
//===----------------------------------------------------------------------===//

#include "BackwardBuilder.h"
#include "CotangentPairing.h"
#include "LetReads.h"
#include "energy/Transforms/Gradients.h"
#include "energy/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::energy {
#define GEN_PASS_DEF_ENERGYBUILDBACKWARD
#include "energy/Transforms/Passes.h.inc"
} // namespace mlir::energy

using namespace mlir;
using namespace mlir::energy;

namespace {

/// Whether `op`, between a store to `tensor` and the next one, may read
/// what the store wrote: a read of the tensor, of a let (which may read
/// it), or anything else that reads state (a gradient reads every tensor).
bool mayRead(Operation *op, StringRef tensor, SymbolTable &symbols) {
  if (auto read = dyn_cast<ReadOp>(op))
    return read.getSource() == tensor ||
           !isa_and_nonnull<TensorOp>(symbols.lookup(read.getSource()));
  if (isa<StoreOp>(op))
    return false;
  if (op->getNumRegions() != 0)
    return true;
  auto effects = dyn_cast<MemoryEffectOpInterface>(op);
  return !effects || !effects.hasNoEffect();
}

/// Removes the stores of `block` whose value nothing reads before the next
/// store to the same tensor, and the stores that put back what the tensor
/// already holds (`store (read T) into T` with no store to T between), then
/// the ops left without uses. In a backward step these are the forward
/// sweep's stores that the reverse sweep undoes before anything reads them,
/// and the work (a first-order gradient) that only they needed.
void removeUndoneStores(Block &block, SymbolTable &symbols) {
  bool changed = true;
  while (changed) {
    changed = false;
    for (auto store : llvm::make_early_inc_range(block.getOps<StoreOp>())) {
      StringRef tensor = store.getTensor();
      bool overwritten = false;
      for (Operation *op = store->getNextNode(); op; op = op->getNextNode()) {
        if (auto next = dyn_cast<StoreOp>(op);
            next && next.getTensor() == tensor) {
          overwritten = true;
          break;
        }
        if (mayRead(op, tensor, symbols))
          break;
      }
      bool restoring = false;
      if (auto read = store.getValue().getDefiningOp<ReadOp>();
          read && read->getBlock() == &block && read.getSource() == tensor &&
          read.getMap().getNumResults() == 0) {
        restoring = true;
        for (Operation *op = read->getNextNode(); op != store;
             op = op->getNextNode())
          if (auto between = dyn_cast<StoreOp>(op);
              between && between.getTensor() == tensor)
            restoring = false;
      }
      if (overwritten || restoring) {
        store.erase();
        changed = true;
      }
    }
  }
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
    if (isOpTriviallyDead(&op))
      op.erase();
}

} // namespace

LogicalResult BackwardBuilder::build() {
  // A caller that seeds the backward program (energy-caller-cotangents)
  // passes the inputs' adjoints on too.
  auto tensors = model.getBody().front().getOps<TensorOp>();
  bool callerSeeds = llvm::any_of(
      tensors, [](TensorOp tensor) { return tensor.getIncomingOf(); });
  for (TensorOp tensor : tensors)
    if ((tensor.getRole() != Role::input || callerSeeds) &&
        !tensor.getIncomingOf() && !tensor.getAdjointOf() &&
        !tensor.getCotangentOf() && !tensor.getSolverOf())
      differentiable.insert(tensor.getSymName());
  for (StringRef tensor : differentiable)
    adjointTensor(tensor);

  DynamicsOp dynamics = model.getDynamics();
  bool implicit = dynamics && dynamics.getImplicitIterations();
  OpBuilder declarations = OpBuilder::atBlockEnd(&model.getBody().front());
  backward = BackwardProgramOp::create(declarations, loc(), implicit);
  Block &seed = backward.getSeed().emplaceBlock();
  buildSeed(seed);
  Block &step = backward.getBody().emplaceBlock();
  Block &finish = backward.getFinish().emplaceBlock();
  // The programs a call runs around its steps, reversed where the adjoints
  // pass them: the seed is at the state the call's finish left, the finish
  // at the state its begin left.
  if (program && !program.getFinish().empty() &&
      failed(reverseProgram(&program.getFinish().front(), seed)))
    return failure();
  if (failed(implicit
                 ? buildImplicitSolve(dynamics, finish)
                 : reverseProgram(
                       program ? &program.getBody().front() : nullptr, step)))
    return failure();
  if (program && !program.getBegin().empty() &&
      failed(reverseProgram(&program.getBegin().front(), finish)))
    return failure();
  buildFinish(finish);
  return success();
}

StringRef BackwardBuilder::auxiliaryTensor(StringRef name, StringRef suffix,
                                           ArrayAttr shape,
                                           Provenance provenance) {
  std::string full = (name + "." + suffix).str();
  if (auto existing = symbols.lookup<TensorOp>(full))
    return existing.getSymName();
  OpBuilder declarations = OpBuilder::atBlockEnd(&model.getBody().front());
  if (Operation *last = lastTensor())
    declarations.setInsertionPointAfter(last);
  auto tensor =
      TensorOp::create(declarations, model.getLoc(), full, Role::state, shape,
                       InitKindAttr::get(context, InitKind::zeros),
                       DenseF64ArrayAttr(), FlatSymbolRefAttr());
  switch (provenance) {
  case Provenance::AdjointOf:
    tensor.setAdjointOfAttr(ref(name));
    break;
  case Provenance::CotangentOf:
    tensor.setCotangentOfAttr(ref(name));
    break;
  case Provenance::SolverOf:
    tensor.setSolverOfAttr(ref(name));
    break;
  }
  symbols.insert(tensor);
  return tensor.getSymName();
}

Operation *BackwardBuilder::lastTensor() {
  Operation *last = nullptr;
  for (TensorOp tensor : model.getBody().front().getOps<TensorOp>())
    last = tensor;
  return last;
}

StringRef BackwardBuilder::adjointTensor(StringRef tensor) {
  return auxiliaryTensor(tensor, "adjoint",
                         symbols.lookup<TensorOp>(tensor).getShape(),
                         Provenance::AdjointOf);
}

void BackwardBuilder::buildSeed(Block &block) {
  OpBuilder builder = OpBuilder::atBlockEnd(&block);
  llvm::MapVector<StringRef, Value> seeds;
  for (TermOp loss : model.getBody().front().getOps<TermOp>()) {
    if (!loss.getLoss())
      continue;
    for (StringRef tensor : readTensors(loss.getBody(), model)) {
      if (!differentiable.contains(tensor))
        continue;
      Value g = GradOp::create(builder, loss.getLoc(), typeOf(tensor),
                               ref(tensor), ref(loss.getSymName()))
                    ->getResult(0);
      Value &seed = seeds[tensor];
      seed =
          seed ? AddOp::create(builder, loss.getLoc(), seed, g).getResult() : g;
    }
  }
  for (StringRef tensor : differentiable) {
    Value seed = seeds.lookup(tensor);
    if (!seed)
      seed = zeros(builder, model.getLoc(), typeOf(tensor));
    StoreOp::create(builder, model.getLoc(), seed, ref(adjointTensor(tensor)));
  }
}

void BackwardBuilder::buildFinish(Block &block) {
  OpBuilder builder = OpBuilder::atBlockEnd(&block);
  for (TensorOp tensor : model.getBody().front().getOps<TensorOp>()) {
    FlatSymbolRefAttr source = tensor.getInitSourceAttr();
    if (!source || !differentiable.contains(tensor.getSymName()) ||
        !differentiable.contains(source.getValue()))
      continue;
    Location loc = tensor.getLoc();
    Value passed = readWhole(builder, loc, adjointTensor(tensor.getSymName()));
    StringRef target = adjointTensor(source.getValue());
    Value sum =
        AddOp::create(builder, loc, readWhole(builder, loc, target), passed);
    StoreOp::create(builder, loc, sum, ref(target));
  }
}

LogicalResult BackwardBuilder::reverseProgram(Block *source, Block &block) {
  adjoints.clear();
  tensorAdjoints.clear();
  replaced.clear();
  OpBuilder builder = OpBuilder::atBlockEnd(&block);
  // The forward sweep: the program as it is, each store preceded by a read
  // of the value it replaces.
  IRMapping mapping;
  SmallVector<Operation *> forward;
  if (!source)
    return success();
  for (Operation &op : source->getOperations()) {
    if (op.getNumRegions() != 0)
      return op.emitOpError()
             << "cannot be differentiated through yet: gradients of a loss "
                "through the steps support gradient rules with fixed "
                "steps and explicit rules, not adaptive `ode` steps or "
                "`stationary` rules; `backward implicit;` in the dynamics "
                "differentiates such runs at their fixed point instead";
    Value old;
    if (auto store = dyn_cast<StoreOp>(op))
      old = readWhole(builder, op.getLoc(), store.getTensor());
    forward.push_back(builder.clone(op, mapping));
    if (old)
      replaced[forward.back()] = old;
  }

  // The reverse sweep.
  for (Operation *op : llvm::reverse(forward))
    if (failed(reverse(op, builder)))
      return failure();

  for (StringRef tensor : differentiable) {
    auto it = tensorAdjoints.find(tensor);
    if (it == tensorAdjoints.end())
      continue;
    Value value = it->second;
    if (!value)
      value = zeros(builder, loc(), typeOf(tensor));
    StoreOp::create(builder, loc(), value, ref(adjointTensor(tensor)));
  }
  removeUndoneStores(block, symbols);
  return success();
}

Value BackwardBuilder::currentTensorAdjoint(OpBuilder &builder, Location loc,
                                            StringRef tensor) {
  auto [it, inserted] = tensorAdjoints.try_emplace(tensor, Value());
  if (inserted)
    it->second = readWhole(builder, loc, adjointTensor(tensor));
  return it->second;
}

void BackwardBuilder::addTensorAdjoint(OpBuilder &builder, Location loc,
                                       StringRef tensor, Value adjoint) {
  Value current = currentTensorAdjoint(builder, loc, tensor);
  tensorAdjoints[tensor] =
      current ? AddOp::create(builder, loc, current, adjoint).getResult()
              : adjoint;
}

void BackwardBuilder::addAdjoint(OpBuilder &builder, Location loc, Value value,
                                 Value adjoint) {
  Value &slot = adjoints[value];
  slot =
      slot ? AddOp::create(builder, loc, slot, adjoint).getResult() : adjoint;
}

LogicalResult BackwardBuilder::reverse(Operation *op, OpBuilder &builder) {
  Location loc = op->getLoc();
  if (auto store = dyn_cast<StoreOp>(op)) {
    StringRef tensor = store.getTensor();
    if (differentiable.contains(tensor)) {
      if (Value adjoint = currentTensorAdjoint(builder, loc, tensor))
        addAdjoint(builder, loc, store.getValue(), adjoint);
      tensorAdjoints[tensor] = Value();
    }
    // Later ops of the sweep see the value the store replaced.
    StoreOp::create(builder, loc, replaced.lookup(op), store.getTensorAttr());
    return success();
  }
  if (auto read = dyn_cast<ReadOp>(op))
    return reverseRead(read, builder);
  if (auto grad = dyn_cast<GradOp>(op))
    return reverseGrad(grad, builder);

  SmallVector<Value> resultAdjoints;
  bool any = false;
  for (Value result : op->getResults()) {
    resultAdjoints.push_back(adjoints.lookup(result));
    any |= static_cast<bool>(resultAdjoints.back());
  }
  // Constants, `step` and sizes depend on nothing.
  if (!any || op->getNumOperands() == 0)
    return success();
  auto rule = dyn_cast<DerivativeOpInterface>(op);
  if (!rule || !rule.hasDerivativeRule())
    return op->emitOpError()
           << "has no derivative rule; a loss's gradient through the "
              "dynamics reaches it";
  for (auto [result, adjoint] : llvm::zip(op->getResults(), resultAdjoints))
    if (!adjoint)
      adjoint = zeros(builder, loc, cast<ArrayType>(result.getType()));
  SmallVector<Value> operandAdjoints;
  if (failed(rule.buildAdjoints(builder, resultAdjoints, operandAdjoints)))
    return failure();
  for (auto [operand, adjoint] : llvm::zip(op->getOperands(), operandAdjoints))
    if (adjoint)
      addAdjoint(builder, loc, operand, adjoint);
  return success();
}

LogicalResult BackwardBuilder::reverseRead(ReadOp read, OpBuilder &builder) {
  Value adjoint = adjoints.lookup(read.getResult());
  if (!adjoint)
    return success();
  Location loc = read.getLoc();
  Operation *source = symbols.lookup(read.getSource());
  if (auto let = dyn_cast_or_null<LetOp>(source)) {
    if (read.getMap().getNumResults() != 0)
      return read.emitOpError()
             << "reads let " << read.getSourceAttr()
             << " in part; a loss's gradient through the dynamics needs "
                "whole reads of lets in the step";
    return reverseLetRead(let, adjoint, builder, loc);
  }
  StringRef tensor = read.getSource();
  if (!differentiable.contains(tensor))
    return success();
  if (read.getMap().getNumResults() != 0)
    adjoint = EmbedOp::create(builder, loc, typeOf(tensor), adjoint,
                              read.getMapAttr(), read.getIndices());
  addTensorAdjoint(builder, loc, tensor, adjoint);
  return success();
}

void BackwardBuilder::pullBackThrough(TermOp term, StringRef cotangent,
                                      Value adjoint, OpBuilder &builder,
                                      Location loc) {
  StoreOp::create(builder, loc, adjoint, ref(cotangent));
  addGradients(term, readTensors(term.getBody(), model), builder, loc);
}

Value BackwardBuilder::addGradients(TermOp term,
                                    const llvm::SetVector<StringRef> &tensors,
                                    OpBuilder &builder, Location loc,
                                    const llvm::SetVector<StringRef> &skipped,
                                    StringRef wanted) {
  Value found;
  for (StringRef tensor : tensors) {
    if (!differentiable.contains(tensor) || skipped.contains(tensor))
      continue;
    Value product = GradOp::create(builder, loc, typeOf(tensor), ref(tensor),
                                   ref(term.getSymName()))
                        ->getResult(0);
    addTensorAdjoint(builder, loc, tensor, product);
    if (tensor == wanted)
      found = product;
  }
  return found;
}

LogicalResult BackwardBuilder::reverseGrad(GradOp grad, OpBuilder &builder) {
  FailureOr<bool> joint = reverseGradJointly(grad, builder);
  if (failed(joint) || *joint)
    return joint;
  for (auto [tensorRef, result] :
       llvm::zip(grad.getTensors(), grad.getResults())) {
    Value adjoint = adjoints.lookup(result);
    if (!adjoint)
      continue;
    StringRef tensor = tensorRef.getValue();
    FailureOr<std::pair<TermOp, StringRef>> term =
        directionalTerm(tensor, grad.getOfAttr());
    if (failed(term))
      return failure();
    Location loc = grad.getLoc();
    if (!grad.getOfAttr()) {
      FailureOr<bool> fixed =
          pullBackThroughFixedLets(tensor, adjoint, builder, loc);
      if (failed(fixed))
        return failure();
      if (*fixed)
        continue;
    }
    auto [let, through] = residualStream(tensor, grad.getOfAttr());
    if (!let) {
      pullBackThrough(term->first, term->second, adjoint, builder, loc);
      continue;
    }
    StoreOp::create(builder, loc, adjoint, ref(term->second));
    Value inStream =
        addGradients(term->first, readTensors(term->first.getBody(), model),
                     builder, loc, through, tensor);
    if (!inStream)
      continue;
    auto [letTerm, letCotangent] = letPullback(let);
    StoreOp::create(builder, loc, inStream, ref(letCotangent));
    addGradients(letTerm, through, builder, loc);
  }
  return success();
}

FailureOr<bool> BackwardBuilder::reverseGradJointly(GradOp grad,
                                                    OpBuilder &builder) {
  FlatSymbolRefAttr of = grad.getOfAttr();
  SmallVector<FlatSymbolRefAttr> tensors;
  SmallVector<Value> pulled;
  for (auto [tensor, result] : llvm::zip(grad.getTensors(), grad.getResults()))
    if (Value adjoint = adjoints.lookup(result)) {
      tensors.push_back(tensor);
      pulled.push_back(adjoint);
    }
  if (tensors.size() < 2)
    return false;
  if (!of) {
    FailureOr<TermOp> energy = energyOfFixedLets();
    if (failed(energy))
      return failure();
    if (*energy)
      return false;
  }
  for (FlatSymbolRefAttr tensor : tensors)
    if (residualStream(tensor.getValue(), of).first)
      return false;
  FailureOr<std::pair<TermOp, SmallVector<StringRef>>> joint =
      directionalTerm(tensors, of);
  if (failed(joint))
    return failure();
  auto &[term, cotangents] = *joint;
  for (auto [adjoint, cotangent] : llvm::zip(pulled, cotangents))
    StoreOp::create(builder, grad.getLoc(), adjoint, ref(cotangent));
  addGradients(term, readTensors(term.getBody(), model), builder,
               grad.getLoc());
  return true;
}

FailureOr<bool> BackwardBuilder::pullBackThroughFixedLets(StringRef tensor,
                                                          Value adjoint,
                                                          OpBuilder &builder,
                                                          Location loc) {
  FailureOr<TermOp> energy = energyOfFixedLets();
  if (failed(energy))
    return failure();
  if (!*energy)
    return false;
  FailureOr<std::pair<TermOp, StringRef>> term =
      directionalTerm(tensor, FlatSymbolRefAttr::get(*energy));
  if (failed(term))
    return failure();
  StoreOp::create(builder, loc, adjoint, ref(term->second));
  // In a backward step the lets' values are the same at every step (they
  // read no state): stored once by the seed, their cotangents summed over
  // the steps and pulled back through the lets once by the finish, since
  // the pull-back is linear in the cotangent with coefficients that no
  // step changes.
  bool deferred = builder.getInsertionBlock() == &backward.getBody().front();
  auto readWhole = [&](OpBuilder &at, StringRef tensor, ArrayType type) {
    return ReadOp::create(at, loc, type, ref(tensor),
                          AffineMapAttr::get(AffineMap::get(context)),
                          ValueRange())
        .getResult();
  };
  for (LetOp let : fixedLets) {
    if (!deferred) {
      StoreOp::create(builder, loc,
                      readWhole(builder, let.getSymName(), let.getArrayType()),
                      ref(valueTensor(let)));
      continue;
    }
    if (!deferredLets.insert(let.getOperation()).second)
      continue;
    auto [letTerm, letCotangent] = letPullback(let);
    OpBuilder seed = OpBuilder::atBlockEnd(&backward.getSeed().front());
    StoreOp::create(seed, loc,
                    readWhole(seed, let.getSymName(), let.getArrayType()),
                    ref(valueTensor(let)));
    StoreOp::create(seed, loc, zeros(seed, loc, let.getArrayType()),
                    ref(letCotangent));
    // At the start of the finish, before what reads the adjoints.
    Block &finish = backward.getFinish().front();
    OpBuilder end(context);
    if (finishCursor)
      end.setInsertionPointAfter(finishCursor);
    else
      end.setInsertionPointToStart(&finish);
    // The gradients first, then their additions: one joint derivation.
    SmallVector<std::pair<StringRef, Value>> products;
    for (StringRef tensor : readTensors(let.getBody(), model))
      if (differentiable.contains(tensor))
        products.push_back(
            {tensor, GradOp::create(end, loc, typeOf(tensor), ref(tensor),
                                    ref(letTerm.getSymName()))
                         ->getResult(0)});
    for (auto [tensor, product] : products) {
      StringRef adjointOf = adjointTensor(tensor);
      Value sum = AddOp::create(
          end, loc, readWhole(end, adjointOf, typeOf(tensor)), product);
      finishCursor = StoreOp::create(end, loc, sum, ref(adjointOf));
    }
  }
  addGradients(term->first, readTensors(term->first.getBody(), model), builder,
               loc);
  // Every value's gradient before the stores of any, so that the gradients
  // join (energy-join-gradients): one derivation of the term for all.
  SmallVector<Value> cotangents;
  for (LetOp let : fixedLets) {
    StringRef value = valueTensor(let);
    cotangents.push_back(GradOp::create(builder, loc, typeOf(value), ref(value),
                                        ref(term->first.getSymName()))
                             ->getResult(0));
  }
  for (auto [let, cotangent] : llvm::zip(fixedLets, cotangents)) {
    auto [letTerm, letCotangent] = letPullback(let);
    if (deferred) {
      Value sum = AddOp::create(
          builder, loc, readWhole(builder, letCotangent, let.getArrayType()),
          cotangent);
      StoreOp::create(builder, loc, sum, ref(letCotangent));
      continue;
    }
    StoreOp::create(builder, loc, cotangent, ref(letCotangent));
    addGradients(letTerm, readTensors(let.getBody(), model), builder, loc);
  }
  return true;
}

StringRef BackwardBuilder::valueTensor(LetOp let) {
  SmallVector<Attribute> shape;
  for (StringRef dim : let.getArrayType().getShape())
    shape.push_back(ref(dim));
  return auxiliaryTensor(let.getSymName(), "value",
                         ArrayAttr::get(context, shape),
                         Provenance::CotangentOf);
}

FailureOr<TermOp> BackwardBuilder::energyOfFixedLets() {
  constexpr StringLiteral kName = "energy.fixed_lets";
  if (auto existing = symbols.lookup<TermOp>(kName))
    return existing;
  if (fixedLetsSearched)
    return TermOp();
  fixedLetsSearched = true;
  SmallVector<TermOp> terms;
  llvm::SetVector<StringRef> lets;
  for (TermOp term : model.getBody().front().getOps<TermOp>()) {
    if (term.getAuxiliary() || term.getLoss())
      continue;
    terms.push_back(term);
    term.getBody().walk([&](ReadOp read) {
      if (symbols.lookup<LetOp>(read.getSource()))
        lets.insert(read.getSource());
    });
  }
  // Every let the energy reads, through other lets too.
  for (size_t i = 0; i < lets.size(); ++i)
    symbols.lookup<LetOp>(lets[i]).getBody().walk([&](ReadOp read) {
      if (symbols.lookup<LetOp>(read.getSource()))
        lets.insert(read.getSource());
    });
  for (StringRef name : lets) {
    auto let = symbols.lookup<LetOp>(name);
    llvm::SetVector<StringRef> reads = readTensors(let.getBody(), model);
    bool readsState = llvm::any_of(reads, [&](StringRef tensor) {
      auto op = symbols.lookup<TensorOp>(tensor);
      return op.getRole() == Role::state || op.getExchanged();
    });
    bool readsDifferentiable = llvm::any_of(reads, [&](StringRef tensor) {
      return differentiable.contains(tensor);
    });
    if (!readsState && readsDifferentiable)
      fixedLets.push_back(let);
  }
  if (fixedLets.empty() || terms.empty())
    return TermOp();

  SmallVector<StringRef> values;
  for (LetOp let : fixedLets)
    values.push_back(valueTensor(let));
  FailureOr<TermOp> energy =
      buildEnergyReadingValues(model, terms, fixedLets, values, kName);
  if (failed(energy))
    return failure();
  symbols.insert(*energy);
  return energy;
}

std::pair<LetOp, llvm::SetVector<StringRef>>
BackwardBuilder::residualStream(StringRef tensor, FlatSymbolRefAttr of) {
  SmallVector<TermOp> terms;
  for (TermOp term : model.getBody().front().getOps<TermOp>())
    if (of ? term.getSymName() == of.getValue()
           : !term.getAuxiliary() && !term.getLoss())
      terms.push_back(term);
  LetOp found;
  for (LetOp let : model.getBody().front().getOps<LetOp>()) {
    if (!isResidualOf(let, tensor, model))
      continue;
    if (found)
      return {};
    found = let;
  }
  if (!found)
    return {};
  auto readBeside = [&](StringRef other) {
    return llvm::any_of(terms, [&](TermOp term) {
      return readsBeside(term.getBody(), other, found.getSymName(), model);
    });
  };
  if (readBeside(tensor))
    return {};
  llvm::SetVector<StringRef> through;
  for (StringRef read : readTensors(found.getBody(), model))
    if (read != tensor && differentiable.contains(read) && !readBeside(read))
      through.insert(read);
  if (through.empty())
    return {};
  return {found, through};
}

FailureOr<std::pair<TermOp, StringRef>>
BackwardBuilder::directionalTerm(StringRef tensor, FlatSymbolRefAttr of) {
  FailureOr<std::pair<TermOp, SmallVector<StringRef>>> term =
      directionalTerm({FlatSymbolRefAttr::get(context, tensor)}, of);
  if (failed(term))
    return failure();
  return std::make_pair(term->first, term->second.front());
}

FailureOr<std::pair<TermOp, SmallVector<StringRef>>>
BackwardBuilder::directionalTerm(ArrayRef<FlatSymbolRefAttr> tensors,
                                 FlatSymbolRefAttr of) {
  SmallVector<StringRef> names, cotangents;
  for (FlatSymbolRefAttr tensor : tensors) {
    names.push_back(tensor.getValue());
    cotangents.push_back(
        auxiliaryTensor(tensor.getValue(), "cotangent",
                        symbols.lookup<TensorOp>(tensor.getValue()).getShape(),
                        Provenance::CotangentOf));
  }
  std::string name =
      directionalTermName(names, of ? of.getValue() : StringRef());
  auto term = symbols.lookup<TermOp>(name);
  if (!term) {
    FailureOr<GradientOp> gradient = getOrDeriveGradient(model, tensors, of);
    if (failed(gradient))
      return failure();
    term = buildDirectionalTerm(*gradient, cotangents, name);
    symbols.insert(term);
  }
  return std::make_pair(term, std::move(cotangents));
}

LogicalResult BackwardBuilder::reverseLetRead(LetOp let, Value adjoint,
                                              OpBuilder &builder,
                                              Location loc) {
  auto [term, cotangent] = letPullback(let);
  pullBackThrough(term, cotangent, adjoint, builder, loc);
  return success();
}

std::pair<TermOp, StringRef> BackwardBuilder::letPullback(LetOp let) {
  std::string name = (let.getSymName() + ".backprop").str();
  SmallVector<Attribute> shape;
  ArrayType whole = let.getArrayType();
  for (StringRef dim : whole.getShape())
    shape.push_back(ref(dim));
  StringRef cotangent =
      auxiliaryTensor(let.getSymName(), "cotangent",
                      ArrayAttr::get(context, shape), Provenance::CotangentOf);
  auto term = symbols.lookup<TermOp>(name);
  if (!term) {
    OpBuilder declarations = OpBuilder::atBlockEnd(&model.getBody().front());
    term = TermOp::create(declarations, let.getLoc(),
                          declarations.getStringAttr(name),
                          /*auxiliary=*/true, /*loss=*/false);
    OpBuilder body = OpBuilder::atBlockEnd(&term.getBody().emplaceBlock());
    YieldOp::create(body, let.getLoc(),
                    buildCotangentPairing(body, let, ref(cotangent)));
    symbols.insert(term);
  }
  return {term, cotangent};
}

namespace {

struct BuildBackwardPass
    : public mlir::energy::impl::EnergyBuildBackwardBase<BuildBackwardPass> {
  using Base::Base;

  void runOnOperation() override {
    ModelOp model = getOperation();
    Block &declarations = model.getBody().front();
    bool hasLoss = llvm::any_of(declarations.getOps<TermOp>(),
                                [](TermOp term) { return term.getLoss(); });
    if (!hasLoss || !declarations.getOps<BackwardProgramOp>().empty())
      return;
    auto programs = declarations.getOps<UpdateProgramOp>();
    BackwardBuilder builder(model, programs.empty() ? UpdateProgramOp()
                                                    : *programs.begin());
    if (failed(builder.build()))
      signalPassFailure();
  }
};

} // namespace
