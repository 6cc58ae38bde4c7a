//===- SuppliedGradients.cpp - The energy-supplied-gradients pass ---------===//
//
// One rank of a sharded run steps with the gradient the runtime puts
// together from every rank's part: the update program reads it from inputs
// instead of computing it.
//
//===----------------------------------------------------------------------===//

#include "Slices.h"
#include "energy/Interfaces/ElementwiseOpInterface.h"
#include "energy/Runtime/ArtifactABI.h"
#include "energy/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::energy {
#define GEN_PASS_DEF_ENERGYSUPPLIEDGRADIENTS
#include "energy/Transforms/Passes.h.inc"
} // namespace mlir::energy

using namespace mlir;
using namespace mlir::energy;

namespace {
struct SuppliedGradientsPass
    : public mlir::energy::impl::EnergySuppliedGradientsBase<
          SuppliedGradientsPass> {
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
      if (auto read = dyn_cast<ReadOp>(op);
          read && symbols.lookup<TensorOp>(read.getSourceAttr().getValue()))
        return WalkResult::advance();
      op->emitError() << "a sharded run steps element by element; this step "
                         "computes '"
                      << op->getName()
                      << "' (a closed form, a solver or a rule that sums)";
      return WalkResult::interrupt();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();

    Operation *lastTensor = nullptr;
    for (TensorOp tensor : declarations.getOps<TensorOp>())
      lastTensor = tensor;
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
          if (symbols.lookup(name)) {
            grad.emitError()
                << "'" << name << "' is taken: the supplied gradient of "
                << symbol << " needs that name";
            return signalPassFailure();
          }
          OpBuilder declare(&getContext());
          declare.setInsertionPointAfter(lastTensor);
          supplied = TensorOp::create(
              declare, tensor.getLoc(), name, Role::input, tensor.getShape(),
              InitKindAttr::get(&getContext(), InitKind::zeros),
              DenseF64ArrayAttr(), FlatSymbolRefAttr());
          symbols.insert(supplied);
          lastTensor = supplied;
        }
        replacements.push_back(
            readWholeTensor(read, grad.getLoc(), supplied.getArrayType(),
                            FlatSymbolRefAttr::get(supplied.getSymNameAttr())));
      }
      grad.replaceAllUsesWith(replacements);
      grad.erase();
    }
  }
};
} // namespace
