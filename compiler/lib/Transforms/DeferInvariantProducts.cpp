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
// is pulled back to We.
//
//===----------------------------------------------------------------------===//

#include "PlanKernels.h"
#include "RunInvariance.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// A product in a gradient that adds into one of its tensors: `accumulate
/// (batch_matmul ...) into @tensor`, with the factor at `invariantPosition`
/// (0 lhs, 1 rhs) the same at every step and the other not.
struct DeferredProduct {
  AccumulateOp accumulate;
  BatchMatmulOp product;
  unsigned invariantPosition;
  Value stepFactor() { return product->getOperand(1 - invariantPosition); }
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
      for (DeferredProduct product : productsOf(gradient))
        defer(gradient, calls, product);
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

  /// The products of `gradient`'s top level that can be deferred.
  SmallVector<DeferredProduct> productsOf(GradientOp gradient) {
    SmallVector<DeferredProduct> products;
    Block &body = gradient.getBody().front();
    for (auto accumulate : body.getOps<AccumulateOp>()) {
      auto product = accumulate.getValue().getDefiningOp<BatchMatmulOp>();
      if (!product || !product->hasOneUse() || product->getBlock() != &body ||
          !accumulate.getIndices().empty())
        continue;
      auto tensor = model.lookupSymbol<TensorOp>(accumulate.getTensorAttr());
      if (!tensor || tensor.getArrayType() != product.getType())
        continue;
      SmallVector<bool> invariant;
      for (Value factor : product->getOperands()) {
        Operation *def = factor.getDefiningOp();
        invariant.push_back(def && def->getBlock() == &body &&
                            invariance.isInvariant(def));
      }
      if (invariant[0] == invariant[1])
        continue;
      DeferredProduct deferred{accumulate, product, invariant[0] ? 0u : 1u};
      auto stepType = dyn_cast<ArrayType>(deferred.stepFactor().getType());
      if (!stepType || stepType.isScalar())
        continue;
      products.push_back(deferred);
    }
    return products;
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

  /// The step factor of `product` adds into a new tensor that `gradient`
  /// also computes the gradient of, into itself; the seed zeroes it and the
  /// finish adds its product into the adjoint.
  void defer(GradientOp gradient, ArrayRef<GradOp> calls,
             DeferredProduct product) {
    FlatSymbolRefAttr adjoint =
        commonTarget(calls, product.accumulate.getTensorAttr());
    if (!adjoint || !onlyReadAtTheEnd(adjoint))
      return;
    auto backward = calls.front()->getParentOfType<BackwardProgramOp>();
    if (llvm::any_of(calls, [&](GradOp call) {
          return call->getParentOfType<BackwardProgramOp>() != backward;
        }))
      return;
    Value stepFactor = product.stepFactor();
    auto stepType = cast<ArrayType>(stepFactor.getType());
    FlatSymbolRefAttr sum = deferredTensor(adjoint, stepType);
    Location loc = product.product.getLoc();

    // The gradient adds the step factor into the sum.
    OpBuilder builder(product.accumulate);
    AccumulateOp::create(builder, product.accumulate.getLoc(), stepFactor, sum,
                         AffineMapAttr::get(AffineMap::get(model.getContext())),
                         ValueRange());
    SmallVector<Operation *> invariantCone = coneOf(
        product.product->getOperand(product.invariantPosition).getDefiningOp(),
        /*stopAtKeptValues=*/false);
    product.accumulate.erase();
    // Clone the invariant factor's ops before the product is gone.
    Block &finish = backward.getFinish().empty()
                        ? backward.getFinish().emplaceBlock()
                        : backward.getFinish().front();
    OpBuilder atFinish = OpBuilder::atBlockEnd(&finish);
    IRMapping mapping;
    for (Operation *op : invariantCone)
      atFinish.clone(*op, mapping);
    mapping.map(stepFactor, readWhole(atFinish, loc, sum, stepType));
    Value total = atFinish.clone(*product.product, mapping)->getResult(0);
    auto adjointType = cast<ArrayType>(total.getType());
    Value added = AddOp::create(
        atFinish, loc, readWhole(atFinish, loc, adjoint, adjointType), total);
    StoreOp::create(atFinish, loc, added, adjoint);
    product.product.erase();

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
