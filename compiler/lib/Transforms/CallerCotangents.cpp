//===- CallerCotangents.cpp - The energy-caller-cotangents pass -----------===//
//
// A model compiled as a layer of a larger program (energy.torch.EnergyModule)
// is differentiated with the cotangents its caller has for the final states,
// not with the model's own losses: they become one loss ⟨X̄, X⟩ summed over
// the forward states X, X̄ an input the caller sets.
//
//===----------------------------------------------------------------------===//

#include "Slices.h"
#include "energy/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::energy {
#define GEN_PASS_DEF_ENERGYCALLERCOTANGENTS
#include "energy/Transforms/Passes.h.inc"
} // namespace mlir::energy

using namespace mlir;
using namespace mlir::energy;

namespace {
/// Whether `tensor` is part of the forward state: a state no pass added.
bool isForwardState(TensorOp tensor) {
  return tensor.getRole() == Role::state && !tensor.getOptimizerState() &&
         !tensor.getAdjointOf() && !tensor.getCotangentOf() &&
         !tensor.getSolverOf() && !tensor.getDeferredOf() &&
         !tensor.getCacheFlag() && !tensor.getFlagOf();
}

struct CallerCotangentsPass
    : public mlir::energy::impl::EnergyCallerCotangentsBase<
          CallerCotangentsPass> {
  void runOnOperation() override {
    ModelOp model = getOperation();
    Block &declarations = model.getBody().front();
    if (llvm::any_of(declarations.getOps<TensorOp>(),
                     [](TensorOp tensor) { return tensor.getIncomingOf(); }))
      return;
    SmallVector<TensorOp> states;
    for (TensorOp tensor : declarations.getOps<TensorOp>())
      if (isForwardState(tensor))
        states.push_back(tensor);
    if (states.empty()) {
      model.emitError() << "model " << model.getSymName()
                        << " has no state tensor whose final value a caller "
                           "could differentiate";
      return signalPassFailure();
    }
    SymbolTable symbols(model);
    for (TermOp loss :
         llvm::make_early_inc_range(declarations.getOps<TermOp>()))
      if (loss.getLoss())
        loss.erase();

    OpBuilder builder = OpBuilder::atBlockEnd(&declarations);
    builder.setInsertionPointAfter(states.back());
    SmallVector<std::pair<TensorOp, TensorOp>> pairs;
    for (TensorOp state : states) {
      std::string name = (state.getSymName() + ".incoming").str();
      if (symbols.lookup(name)) {
        state.emitError() << "'" << name << "' is taken: the caller's "
                          << "cotangent of @" << state.getSymName()
                          << " needs that name";
        return signalPassFailure();
      }
      auto incoming = TensorOp::create(
          builder, state.getLoc(), name, Role::input, state.getShape(),
          InitKindAttr::get(&getContext(), InitKind::zeros),
          DenseF64ArrayAttr(), FlatSymbolRefAttr());
      incoming.setIncomingOfAttr(
          FlatSymbolRefAttr::get(state.getSymNameAttr()));
      pairs.push_back({incoming, state});
    }

    builder.setInsertionPointToEnd(&declarations);
    auto loss = TermOp::create(builder, model.getLoc(),
                               builder.getStringAttr("incoming"),
                               /*auxiliary=*/true, /*loss=*/true);
    OpBuilder body = OpBuilder::atBlockEnd(&loss.getBody().emplaceBlock());
    Value sum;
    for (auto [incoming, state] : pairs) {
      Location loc = state.getLoc();
      Value product = MulOp::create(
          body, loc,
          readWholeTensor(body, loc, incoming.getArrayType(),
                          FlatSymbolRefAttr::get(incoming.getSymNameAttr())),
          readWholeTensor(body, loc, state.getArrayType(),
                          FlatSymbolRefAttr::get(state.getSymNameAttr())));
      if (!state.getArrayType().isScalar())
        product =
            ReduceElementsOp::create(body, loc, ElementsKind::sum, product);
      sum = sum ? AddOp::create(body, loc, sum, product).getResult() : product;
    }
    YieldOp::create(body, model.getLoc(), sum);
  }
};
} // namespace
