//===- CallerCotangents.cpp - The energy-caller-cotangents pass -----------===//
//
// A model compiled as a layer of a larger program (energy.torch.EnergyModule)
// is differentiated with the cotangents its caller has for the final states
// and the outputs, not with the model's own losses: they become one loss
// Σ ⟨X̄, X⟩ + Σ ⟨Ō, O⟩ over the forward states X and the outputs O, X̄ and Ō
// inputs the caller sets.
//
//===----------------------------------------------------------------------===//

#include "CotangentPairing.h"
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
/// The incoming cotangent's name for `symbol`, or an error on `op` when
/// the model has that name already.
FailureOr<std::string> incomingName(Operation *op, StringRef symbol,
                                    SymbolTable &symbols) {
  std::string name = (symbol + ".incoming").str();
  if (!symbols.lookup(name))
    return name;
  op->emitError() << "'" << name << "' is taken: the caller's cotangent of @"
                  << symbol << " needs that name";
  return failure();
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
      if (tensor.isForwardState())
        states.push_back(tensor);
    auto outputs = llvm::to_vector(declarations.getOps<OutputOp>());
    if (states.empty() && outputs.empty()) {
      model.emitError() << "model " << model.getSymName()
                        << " has no state tensor or output whose final "
                           "value a caller could differentiate";
      return signalPassFailure();
    }
    SymbolTable symbols(model);
    for (TermOp loss :
         llvm::make_early_inc_range(declarations.getOps<TermOp>()))
      if (loss.getLoss())
        loss.erase();

    // One input per state and output, after the last tensor.
    Operation *lastTensor = nullptr;
    for (TensorOp tensor : declarations.getOps<TensorOp>())
      lastTensor = tensor;
    OpBuilder builder = OpBuilder::atBlockEnd(&declarations);
    builder.setInsertionPointAfter(lastTensor);
    auto declareIncoming = [&](Operation *of, StringRef symbol,
                               ArrayAttr shape) -> FailureOr<TensorOp> {
      FailureOr<std::string> name = incomingName(of, symbol, symbols);
      if (failed(name))
        return failure();
      auto incoming =
          TensorOp::create(builder, of->getLoc(), *name, Role::input, shape,
                           InitKindAttr::get(&getContext(), InitKind::zeros),
                           DenseF64ArrayAttr(), FlatSymbolRefAttr());
      incoming.setIncomingOfAttr(FlatSymbolRefAttr::get(&getContext(), symbol));
      return incoming;
    };
    SmallVector<std::pair<TensorOp, TensorOp>> statePairs;
    for (TensorOp state : states) {
      FailureOr<TensorOp> incoming =
          declareIncoming(state, state.getSymName(), state.getShape());
      if (failed(incoming))
        return signalPassFailure();
      statePairs.push_back({*incoming, state});
    }
    SmallVector<std::pair<TensorOp, OutputOp>> outputPairs;
    for (OutputOp output : outputs) {
      SmallVector<Attribute> shape;
      for (StringRef dim : output.getArrayType().getShape())
        shape.push_back(FlatSymbolRefAttr::get(&getContext(), dim));
      FailureOr<TensorOp> incoming = declareIncoming(
          output, output.getSymName(), ArrayAttr::get(&getContext(), shape));
      if (failed(incoming))
        return signalPassFailure();
      outputPairs.push_back({*incoming, output});
    }

    // The loss Σ ⟨X̄, X⟩ + Σ ⟨Ō, O⟩.
    builder.setInsertionPointToEnd(&declarations);
    auto loss = TermOp::create(builder, model.getLoc(),
                               builder.getStringAttr("incoming"),
                               /*auxiliary=*/true, /*loss=*/true);
    OpBuilder body = OpBuilder::atBlockEnd(&loss.getBody().emplaceBlock());
    Value sum;
    auto add = [&](Location loc, Value term) {
      sum = sum ? AddOp::create(body, loc, sum, term).getResult() : term;
    };
    for (auto [incoming, state] : statePairs) {
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
      add(loc, product);
    }
    for (auto [incoming, output] : outputPairs)
      add(output.getLoc(),
          buildCotangentPairing(
              body, output, FlatSymbolRefAttr::get(incoming.getSymNameAttr())));
    YieldOp::create(body, model.getLoc(), sum);
  }
};
} // namespace
