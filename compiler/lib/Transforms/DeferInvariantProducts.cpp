//===- DeferInvariantProducts.cpp - Products by run-invariant values, once ===//
//
// A backward step adds into a parameter's adjoint a product of a value of
// the step and a value that no step changes (LISTA's Σ_b ū[b] ⊗ x[b] for
// We, with x an input): the products of all the steps are one product of
// the sum of the step values, since a product is linear in each factor.
// The step values add into a tensor of their own, zeroed by the backward
// program's seed; its finish multiplies the sum into the adjoint, once.
// This is what reverse mode does for a run-invariant value computed once
// ahead of the loop (x Weᵀ): its cotangent sums over the steps before it
// is pulled back to We. In the same way a step value that reaches the
// adjoint through a map linear in it, with run-invariant coefficients,
// and not element-wise (continuous Hopfield's c·(G + Gᵀ) for the symmetric
// use of W): the steps' values sum, and the finish maps the sum once.
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"
#include "RunInvariance.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

#include <functional>

using namespace mlir;
using namespace mlir::energy;

namespace {

/// What a gradient adds into one of its tensors, `accumulate v into
/// @tensor`, as a map linear in a value of the step: the step value that
/// the steps sum instead, the ops that map it to v (moved to the finish),
/// and the run-invariant ops they read (copied there).
struct Deferred {
  AccumulateOp accumulate;
  Value stepValue;
  SmallVector<Operation *> map;
  SmallVector<Operation *> invariantCone;
};

class ProductDeferrer {
public:
  explicit ProductDeferrer(ModelOp model) : model(model), invariance(model) {}

  void run() {
    for (GradientOp gradient :
         llvm::to_vector(model.getBody().front().getOps<GradientOp>())) {
      SmallVector<GradOp> calls = callsOf(gradient);
      if (calls.empty() || !llvm::all_of(calls, isBackwardStepCall))
        continue;
      for (Deferred deferred : deferrable(gradient))
        defer(gradient, calls, deferred);
    }
  }

private:
  /// Every call of `gradient` in the model.
  SmallVector<GradOp> callsOf(GradientOp gradient) {
    SmallVector<GradOp> calls;
    model.walk([&](GradOp call) {
      if (call.getGradient() == gradient)
        calls.push_back(call);
    });
    return calls;
  }

  /// Whether `call` is in the step of an unrolled backward program, whose
  /// seed and finish bracket every run of its steps.
  static bool isBackwardStepCall(GradOp call) {
    auto backward = call->getParentOfType<BackwardProgramOp>();
    return backward && !backward.getImplicit() && !backward.getSeed().empty() &&
           backward.getBody().isAncestor(call->getParentRegion());
  }

  /// What `gradient`'s top level adds into its tensors that can be
  /// deferred.
  SmallVector<Deferred> deferrable(GradientOp gradient) {
    SmallVector<Deferred> found;
    Block &body = gradient.getBody().front();
    for (auto accumulate : body.getOps<AccumulateOp>()) {
      Operation *def = accumulate.getValue().getDefiningOp();
      if (!def || def->getBlock() != &body || !def->hasOneUse() ||
          !accumulate.getIndices().empty())
        continue;
      auto tensor = model.lookupSymbol<TensorOp>(accumulate.getTensorAttr());
      if (!tensor || tensor.getArrayType() != accumulate.getValue().getType())
        continue;
      std::optional<Deferred> deferred;
      if (auto product = dyn_cast<BatchMatmulOp>(def))
        deferred = byInvariantFactor(product);
      if (!deferred)
        deferred = byLinearMap(def);
      if (!deferred)
        continue;
      auto stepType = dyn_cast<ArrayType>(deferred->stepValue.getType());
      if (!stepType || stepType.isScalar())
        continue;
      deferred->accumulate = accumulate;
      found.push_back(std::move(*deferred));
    }
    return found;
  }

  bool isInvariantValue(Value value, Block &body) {
    Operation *def = value.getDefiningOp();
    return def && def->getBlock() == &body && invariance.isInvariant(def);
  }

  /// A product of a step value and a run-invariant factor.
  std::optional<Deferred> byInvariantFactor(BatchMatmulOp product) {
    Block &body = *product->getBlock();
    bool lhs = isInvariantValue(product.getLhs(), body);
    bool rhs = isInvariantValue(product.getRhs(), body);
    if (lhs == rhs)
      return std::nullopt;
    Value invariant = lhs ? product.getLhs() : product.getRhs();
    Deferred deferred;
    deferred.stepValue = lhs ? product.getRhs() : product.getLhs();
    deferred.map.push_back(product);
    deferred.invariantCone =
        coneOf(invariant.getDefiningOp(), /*stopAtKeptValues=*/false);
    return deferred;
  }

  /// A map of one step value, linear in it: sums, differences, negations
  /// and transposes of maps of it, and its products with (and quotients
  /// by) run-invariant values, ending at `last`, each op's result read only
  /// by the map. Deferred only where the map has an op that is not
  /// element-wise (a transpose: a pass of its own at every step, where an
  /// element-wise map is fused into the accumulation).
  std::optional<Deferred> byLinearMap(Operation *last) {
    Block &body = *last->getBlock();
    Value root;
    llvm::SetVector<Operation *> map, invariantOps;
    bool sawTranspose = false;
    std::function<bool(Value)> linear = [&](Value value) -> bool {
      Operation *op = value.getDefiningOp();
      bool mapOp = op && op->getBlock() == &body &&
                   isa<AddOp, SubOp, NegOp, TransposeOp, MulOp, DivOp>(op);
      if (!mapOp) {
        if (isInvariantValue(value, body) || (root && root != value))
          return false;
        root = value;
        return true;
      }
      if (isa<MulOp, DivOp>(op)) {
        Value lhs = op->getOperand(0), rhs = op->getOperand(1);
        bool rhsInvariant = isInvariantValue(rhs, body);
        bool lhsInvariant = isa<MulOp>(op) && isInvariantValue(lhs, body);
        if (rhsInvariant == lhsInvariant)
          return false;
        Value coefficient = rhsInvariant ? rhs : lhs;
        for (Operation *cone :
             coneOf(coefficient.getDefiningOp(), /*stopAtKeptValues=*/false))
          invariantOps.insert(cone);
        if (!linear(rhsInvariant ? lhs : rhs))
          return false;
      } else {
        for (Value operand : op->getOperands())
          if (!linear(operand))
            return false;
      }
      sawTranspose |= isa<TransposeOp>(op);
      map.insert(op);
      return true;
    };
    if (!linear(last->getResult(0)) || !root || !sawTranspose)
      return std::nullopt;
    for (Operation *op : map)
      for (Operation *user : op->getUsers())
        if (op != last && !map.contains(user))
          return std::nullopt;
    Deferred deferred;
    deferred.stepValue = root;
    deferred.map.assign(map.begin(), map.end());
    llvm::sort(deferred.map, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    deferred.invariantCone.assign(invariantOps.begin(), invariantOps.end());
    llvm::sort(deferred.invariantCone, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    return deferred;
  }

  /// The tensor that each call adds `tensor`'s gradient into, when all add
  /// it into the same one.
  static FlatSymbolRefAttr commonTarget(ArrayRef<GradOp> calls,
                                        FlatSymbolRefAttr tensor) {
    FlatSymbolRefAttr target;
    for (GradOp call : calls) {
      SmallVector<FlatSymbolRefAttr> tensors = call.getTensors();
      SmallVector<FlatSymbolRefAttr> into = call.getIntoTensors();
      auto found = llvm::find(tensors, tensor);
      if (found == tensors.end())
        return nullptr;
      FlatSymbolRefAttr entry = into[found - tensors.begin()];
      if (!entry || (target && entry != target))
        return nullptr;
      target = entry;
    }
    return target;
  }

  /// Whether `adjoint` is read only once the backward steps are done: the
  /// adjoint of a param or input (a state's feeds the steps' cotangents),
  /// not one the runtime reads between the steps (of an `exchanged` copy).
  bool onlyReadAtTheEnd(FlatSymbolRefAttr adjoint) {
    auto tensor = model.lookupSymbol<TensorOp>(adjoint);
    if (!tensor || !tensor.getAdjointOf())
      return false;
    auto of = model.lookupSymbol<TensorOp>(*tensor.getAdjointOf());
    return of && of.getRole() != Role::state && !of.getExchanged();
  }

  /// The step value adds into a new tensor that `gradient` also computes
  /// the gradient of, into itself; the seed zeroes it and the finish adds
  /// its map into the adjoint.
  void defer(GradientOp gradient, ArrayRef<GradOp> calls, Deferred deferred) {
    FlatSymbolRefAttr adjoint =
        commonTarget(calls, deferred.accumulate.getTensorAttr());
    if (!adjoint || !onlyReadAtTheEnd(adjoint))
      return;
    auto backward = calls.front()->getParentOfType<BackwardProgramOp>();
    if (llvm::any_of(calls, [&](GradOp call) {
          return call->getParentOfType<BackwardProgramOp>() != backward;
        }))
      return;
    Value stepValue = deferred.stepValue;
    auto stepType = cast<ArrayType>(stepValue.getType());
    FlatSymbolRefAttr sum = deferredTensor(adjoint, stepType);
    Location loc = deferred.map.back()->getLoc();

    // The gradient adds the step value into the sum.
    OpBuilder builder(deferred.accumulate);
    AccumulateOp::create(builder, deferred.accumulate.getLoc(), stepValue, sum,
                         AffineMapAttr::get(AffineMap::get(model.getContext())),
                         ValueRange());
    deferred.accumulate.erase();
    // The invariant values and the map, from the sum, in the finish.
    Block &finish = backward.getFinish().empty()
                        ? backward.getFinish().emplaceBlock()
                        : backward.getFinish().front();
    OpBuilder atFinish = OpBuilder::atBlockEnd(&finish);
    IRMapping mapping;
    for (Operation *op : deferred.invariantCone)
      atFinish.clone(*op, mapping);
    mapping.map(stepValue, readWhole(atFinish, loc, sum, stepType));
    Value total;
    for (Operation *op : deferred.map)
      total = atFinish.clone(*op, mapping)->getResult(0);
    auto adjointType = cast<ArrayType>(total.getType());
    Value added = AddOp::create(
        atFinish, loc, readWhole(atFinish, loc, adjoint, adjointType), total);
    StoreOp::create(atFinish, loc, added, adjoint);
    for (Operation *op : llvm::reverse(deferred.map))
      op->erase();

    // Zeroed where each backward pass begins.
    Block &seed = backward.getSeed().front();
    OpBuilder atSeed = OpBuilder::atBlockBegin(&seed);
    Value zero = ConstantOp::create(atSeed, loc, 0.0);
    StoreOp::create(atSeed, loc,
                    BroadcastOp::create(atSeed, loc, stepType, zero), sum);

    // The gradient computes the sum's gradient too, into the sum itself.
    SmallVector<Attribute> also;
    if (ArrayAttr existing = gradient.getAlsoAttr())
      also.assign(existing.begin(), existing.end());
    also.push_back(sum);
    ArrayAttr alsoAttr = ArrayAttr::get(model.getContext(), also);
    gradient.setAlsoAttr(alsoAttr);
    for (GradOp call : calls) {
      SmallVector<Attribute> into;
      if (ArrayAttr existing = call.getIntoAttr())
        into.assign(existing.begin(), existing.end());
      else
        into.assign(call.getTensors().size(),
                    UnitAttr::get(model.getContext()));
      into.push_back(sum);
      call.setAlsoAttr(alsoAttr);
      call.setIntoAttr(ArrayAttr::get(model.getContext(), into));
    }
  }

  Value readWhole(OpBuilder &builder, Location loc, FlatSymbolRefAttr tensor,
                  ArrayType type) {
    return ReadOp::create(
        builder, loc, type, tensor,
        AffineMapAttr::get(AffineMap::get(model.getContext())), ValueRange());
  }

  /// A new state tensor of `type`'s shape, zeros, marked `deferred_of =
  /// @adjoint`.
  FlatSymbolRefAttr deferredTensor(FlatSymbolRefAttr adjoint, ArrayType type) {
    MLIRContext *context = model.getContext();
    std::string name;
    do
      name = adjoint.getValue().str() + ".deferred." +
             std::to_string(nextDeferred++);
    while (SymbolTable::lookupSymbolIn(model, name));
    OpBuilder declarations = OpBuilder::atBlockBegin(&model.getBody().front());
    for (TensorOp tensor : model.getBody().front().getOps<TensorOp>())
      declarations.setInsertionPointAfter(tensor);
    SmallVector<Attribute> shape;
    for (StringAttr dim : type.getShape())
      shape.push_back(FlatSymbolRefAttr::get(dim));
    auto tensor = TensorOp::create(declarations, model.getLoc(), name,
                                   Role::state, ArrayAttr::get(context, shape),
                                   InitKindAttr::get(context, InitKind::zeros),
                                   DenseF64ArrayAttr(), FlatSymbolRefAttr());
    tensor.setDeferredOfAttr(adjoint);
    return FlatSymbolRefAttr::get(tensor.getSymNameAttr());
  }

  ModelOp model;
  RunInvariance invariance;
  unsigned nextDeferred = 0;
};

} // namespace

void mlir::energy::deferInvariantProducts(ModelOp model) {
  ProductDeferrer(model).run();
}
