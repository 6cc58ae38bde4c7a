//===- BuildBackward.cpp - The dynamics run backwards ---------------------===//
//
// Builds `energy.backward_program` from the step program and the model's
// losses: the reverse-mode derivative of one step, for gradients of a loss
// through the unrolled dynamics.
//
//===----------------------------------------------------------------------===//

#include "energy/Transforms/Gradients.h"
#include "energy/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::energy {
#define GEN_PASS_DEF_ENERGYBUILDBACKWARD
#include "energy/Transforms/Passes.h.inc"
} // namespace mlir::energy

using namespace mlir;
using namespace mlir::energy;

namespace {

constexpr StringLiteral kAdjointOf = "adjoint_of";
constexpr StringLiteral kCotangentOf = "cotangent_of";

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

llvm::SetVector<StringRef> readTensors(Region &region, ModelOp model) {
  llvm::SetVector<StringRef> tensors;
  llvm::StringSet<> visitedLets;
  collectReadTensors(region, model, tensors, visitedLets);
  return tensors;
}

class BackwardBuilder {
public:
  BackwardBuilder(ModelOp model, UpdateProgramOp program)
      : model(model), program(program), symbols(model),
        context(model.getContext()) {}

  LogicalResult build() {
    for (TensorOp tensor : model.getBody().front().getOps<TensorOp>())
      if (tensor.getRole() != Role::input && !tensor->hasAttr(kAdjointOf) &&
          !tensor->hasAttr(kCotangentOf))
        differentiable.insert(tensor.getSymName());
    for (StringRef tensor : differentiable)
      adjointTensor(tensor);

    OpBuilder declarations = OpBuilder::atBlockEnd(&model.getBody().front());
    backward = BackwardProgramOp::create(declarations, loc());
    buildSeed(backward.getSeed().emplaceBlock());
    if (failed(buildStep(backward.getBody().emplaceBlock())))
      return failure();
    buildFinish(backward.getFinish().emplaceBlock());
    return success();
  }

private:
  /// Where the step program is, or the model without one.
  Location loc() { return program ? program.getLoc() : model.getLoc(); }

  FlatSymbolRefAttr ref(StringRef name) {
    return FlatSymbolRefAttr::get(context, name);
  }

  ArrayType typeOf(StringRef tensor) {
    return symbols.lookup<TensorOp>(tensor).getArrayType();
  }

  Value readWhole(OpBuilder &builder, Location loc, StringRef tensor) {
    return ReadOp::create(builder, loc, typeOf(tensor), ref(tensor),
                          AffineMapAttr::get(AffineMap::get(context)),
                          ValueRange());
  }

  Value zeros(OpBuilder &builder, Location loc, ArrayType type) {
    Value zero = ConstantOp::create(builder, loc, 0.0);
    if (type.isScalar())
      return zero;
    return BroadcastOp::create(builder, loc, type, zero);
  }

  /// A state tensor `NAME.SUFFIX` of `shape` marked `mark = @NAME`, created
  /// on first use.
  StringRef auxiliaryTensor(StringRef name, StringRef suffix, ArrayAttr shape,
                            StringRef mark) {
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
    tensor->setAttr(mark, ref(name));
    symbols.insert(tensor);
    return tensor.getSymName();
  }

  Operation *lastTensor() {
    Operation *last = nullptr;
    for (TensorOp tensor : model.getBody().front().getOps<TensorOp>())
      last = tensor;
    return last;
  }

  StringRef adjointTensor(StringRef tensor) {
    return auxiliaryTensor(tensor, "adjoint",
                           symbols.lookup<TensorOp>(tensor).getShape(),
                           kAdjointOf);
  }

  /// `seed`: every adjoint starts as the gradient of the sum of the losses.
  void buildSeed(Block &block) {
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
        seed = seed ? AddOp::create(builder, loss.getLoc(), seed, g).getResult()
                    : g;
      }
    }
    for (StringRef tensor : differentiable) {
      Value seed = seeds.lookup(tensor);
      if (!seed)
        seed = zeros(builder, model.getLoc(), typeOf(tensor));
      StoreOp::create(builder, model.getLoc(), seed,
                      ref(adjointTensor(tensor)));
    }
  }

  /// `finish`: a state initialised from another tensor passes its adjoint
  /// on to it.
  void buildFinish(Block &block) {
    OpBuilder builder = OpBuilder::atBlockEnd(&block);
    for (TensorOp tensor : model.getBody().front().getOps<TensorOp>()) {
      FlatSymbolRefAttr source = tensor.getInitSourceAttr();
      if (!source || !differentiable.contains(tensor.getSymName()) ||
          !differentiable.contains(source.getValue()))
        continue;
      Location loc = tensor.getLoc();
      Value passed =
          readWhole(builder, loc, adjointTensor(tensor.getSymName()));
      StringRef target = adjointTensor(source.getValue());
      Value sum =
          AddOp::create(builder, loc, readWhole(builder, loc, target), passed);
      StoreOp::create(builder, loc, sum, ref(target));
    }
  }

  //===--------------------------------------------------------------------===//
  // The step
  //===--------------------------------------------------------------------===//

  LogicalResult buildStep(Block &block) {
    OpBuilder builder = OpBuilder::atBlockEnd(&block);
    // The forward sweep: the step as it is, each store preceded by a read
    // of the value it replaces.
    IRMapping mapping;
    SmallVector<Operation *> forward;
    Block *step = program ? &program.getBody().front() : nullptr;
    for (Operation &op : step ? step->getOperations() : block.getOperations()) {
      if (op.getNumRegions() != 0)
        return op.emitOpError()
               << "cannot be differentiated through yet: gradients of a loss "
                  "through the dynamics support gradient rules with fixed "
                  "steps and explicit rules, not adaptive `ode` steps or "
                  "`stationary` rules";
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
    return success();
  }

  /// The adjoint of `tensor` at this point of the reverse sweep (after the
  /// ops not yet reversed): null for zero.
  Value currentTensorAdjoint(OpBuilder &builder, Location loc,
                             StringRef tensor) {
    auto [it, inserted] = tensorAdjoints.try_emplace(tensor, Value());
    if (inserted)
      it->second = readWhole(builder, loc, adjointTensor(tensor));
    return it->second;
  }

  void addTensorAdjoint(OpBuilder &builder, Location loc, StringRef tensor,
                        Value adjoint) {
    Value current = currentTensorAdjoint(builder, loc, tensor);
    tensorAdjoints[tensor] =
        current ? AddOp::create(builder, loc, current, adjoint).getResult()
                : adjoint;
  }

  void addAdjoint(OpBuilder &builder, Location loc, Value value,
                  Value adjoint) {
    Value &slot = adjoints[value];
    slot =
        slot ? AddOp::create(builder, loc, slot, adjoint).getResult() : adjoint;
  }

  LogicalResult reverse(Operation *op, OpBuilder &builder) {
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
    for (auto [operand, adjoint] :
         llvm::zip(op->getOperands(), operandAdjoints))
      if (adjoint)
        addAdjoint(builder, loc, operand, adjoint);
    return success();
  }

  LogicalResult reverseRead(ReadOp read, OpBuilder &builder) {
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

  /// Stores `adjoint` as the cotangent of `name` and adds the gradient of
  /// `term` (⟨value, cotangent⟩) with respect to every tensor it reads into
  /// their adjoints.
  void pullBackThrough(TermOp term, StringRef cotangent, Value adjoint,
                       OpBuilder &builder, Location loc) {
    StoreOp::create(builder, loc, adjoint, ref(cotangent));
    for (StringRef tensor : readTensors(term.getBody(), model)) {
      if (!differentiable.contains(tensor))
        continue;
      Value product = GradOp::create(builder, loc, typeOf(tensor), ref(tensor),
                                     ref(term.getSymName()))
                          ->getResult(0);
      addTensorAdjoint(builder, loc, tensor, product);
    }
  }

  /// ḡ ↦ ∇_Y ⟨∇_x E, ḡ⟩ for every tensor Y: the gradient of the auxiliary
  /// term ⟨∇E, c⟩, c the cotangent tensor of x.
  LogicalResult reverseGrad(GradOp grad, OpBuilder &builder) {
    Location loc = grad.getLoc();
    for (auto [tensorRef, result] :
         llvm::zip(grad.getTensors(), grad.getResults())) {
      Value adjoint = adjoints.lookup(result);
      if (!adjoint)
        continue;
      StringRef tensor = tensorRef.getValue();
      std::string name = (tensor + ".backprop").str();
      if (FlatSymbolRefAttr of = grad.getOfAttr())
        name += ("." + of.getValue()).str();
      StringRef cotangent = auxiliaryTensor(
          tensor, "cotangent", symbols.lookup<TensorOp>(tensor).getShape(),
          kCotangentOf);
      auto term = symbols.lookup<TermOp>(name);
      if (!term) {
        FailureOr<GradientOp> gradient =
            getOrDeriveGradient(model, tensor, grad.getOfAttr());
        if (failed(gradient))
          return failure();
        term = buildDirectionalTerm(*gradient, cotangent, name);
        symbols.insert(term);
      }
      pullBackThrough(term, cotangent, adjoint, builder, loc);
    }
    return success();
  }

  /// S̄ ↦ ∇_Y ⟨S̄, S⟩ for a let S read whole: the gradient of the auxiliary
  /// term Σ_i ⟨S̄[i], body(i)⟩ over the let's domain.
  LogicalResult reverseLetRead(LetOp let, Value adjoint, OpBuilder &builder,
                               Location loc) {
    std::string name = (let.getSymName() + ".backprop").str();
    SmallVector<Attribute> shape;
    ArrayType whole = let.getArrayType();
    for (StringRef dim : whole.getShape())
      shape.push_back(ref(dim));
    StringRef cotangent =
        auxiliaryTensor(let.getSymName(), "cotangent",
                        ArrayAttr::get(context, shape), kCotangentOf);
    auto term = symbols.lookup<TermOp>(name);
    if (!term) {
      OpBuilder declarations = OpBuilder::atBlockEnd(&model.getBody().front());
      term = TermOp::create(declarations, let.getLoc(),
                            declarations.getStringAttr(name),
                            /*auxiliary=*/true, /*loss=*/false);
      OpBuilder body = OpBuilder::atBlockEnd(&term.getBody().emplaceBlock());
      auto sum =
          ReduceOp::create(body, let.getLoc(), ArrayType::getScalar(context),
                           ReduceKind::sum, let.getDomain(), Value());
      Block &inner = sum.getBody().emplaceBlock();
      IRMapping mapping;
      Block &letBody = let.getBody().front();
      SmallVector<Value> indices;
      for (BlockArgument argument : letBody.getArguments()) {
        Value index = inner.addArgument(argument.getType(), argument.getLoc());
        mapping.map(argument, index);
        indices.push_back(index);
      }
      OpBuilder in = OpBuilder::atBlockEnd(&inner);
      for (Operation &op : letBody.without_terminator())
        in.clone(op, mapping);
      Value element =
          mapping.lookup(cast<YieldOp>(letBody.getTerminator()).getValues()[0]);
      auto map = AffineMap::getMultiDimIdentityMap(indices.size(), context);
      Value weight =
          ReadOp::create(in, let.getLoc(), element.getType(), ref(cotangent),
                         AffineMapAttr::get(map), indices);
      Value product = MulOp::create(in, let.getLoc(), element, weight);
      if (!cast<ArrayType>(product.getType()).isScalar())
        product = ReduceElementsOp::create(in, let.getLoc(), ElementsKind::sum,
                                           product);
      YieldOp::create(in, let.getLoc(), product);
      YieldOp::create(body, let.getLoc(), sum.getResult());
      symbols.insert(term);
    }
    pullBackThrough(term, cotangent, adjoint, builder, loc);
    return success();
  }

  ModelOp model;
  UpdateProgramOp program;
  SymbolTable symbols;
  MLIRContext *context;
  BackwardProgramOp backward;
  llvm::SetVector<StringRef> differentiable;
  /// The adjoint of each forward value, summed over its uses reversed so
  /// far.
  DenseMap<Value, Value> adjoints;
  /// The adjoint of each tensor at the current point of the sweep; a null
  /// entry is zero, a missing one the adjoint the step was entered with.
  llvm::MapVector<StringRef, Value> tensorAdjoints;
  /// For each store of the forward sweep, the value it replaced.
  DenseMap<Operation *, Value> replaced;
};

struct BuildBackwardPass
    : public energy::impl::EnergyBuildBackwardBase<BuildBackwardPass> {
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
