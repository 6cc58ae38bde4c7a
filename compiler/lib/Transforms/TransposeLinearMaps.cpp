//===- TransposeLinearMaps.cpp - Maps to the other side of a product ------===//
//
// An inner product ⟨L(u), v⟩ whose map L and covector v vary with fewer
// loop indices than u does is ⟨u, Lᵀ(v)⟩, with Lᵀ(v) built by the ops'
// reverse-mode rules (the transpose of a linear map is its pullback): the
// map then applies once per position of its own indices instead of at
// every one of u's. A Hessian-vector product through an attention, ⟨J_i(Wᵀ
// w_ij k_j), c_i⟩ per pair (J_i a layer norm's backward at column i), is
// w_ij ⟨k_j, W J_iᵀ c_i⟩: a dot product of a row with a column's table.
//
//===----------------------------------------------------------------------===//

#include "Linearity.h"
#include "PlanKernels.h"
#include "Slices.h"
#include "energy/Interfaces/DerivativeOpInterface.h"
#include "energy/Transforms/InternalErrors.h"

#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

using IndexSet = IndexDependence::IndexSet;

/// An inner product ⟨mapped, covector⟩ of two arrays of one type: a `dot`,
/// or the sum of the elements of their product.
struct InnerProduct {
  Operation *op;
  Value lhs, rhs;
};

std::optional<InnerProduct> asInnerProduct(Operation *op) {
  if (auto dot = dyn_cast<DotOp>(op))
    return InnerProduct{op, dot.getLhs(), dot.getRhs()};
  auto sum = dyn_cast<ReduceElementsOp>(op);
  if (!sum || sum.getKind() != ElementsKind::sum)
    return std::nullopt;
  auto product = sum.getOperand().getDefiningOp<MulOp>();
  if (!product || product.getLhs().getType() != product.getRhs().getType() ||
      isScalar(product.getLhs()))
    return std::nullopt;
  return InnerProduct{op, product.getLhs(), product.getRhs()};
}

/// Whether `map` does more than scale or add: a matrix product, a product
/// by an array, a sum of elements.
bool transforms(Operation *map, function_ref<bool(Value)> invariant) {
  if (isa<AddOp, SubOp, NegOp, TransposeOp>(map))
    return false;
  if (isa<MulOp, DivOp>(map))
    return llvm::any_of(map->getOperands(), [&](Value operand) {
      return invariant(operand) && !isScalar(operand);
    });
  return true;
}

/// Records the ops a builder creates, to erase them when a rewrite is
/// abandoned.
struct CreatedOps : public OpBuilder::Listener {
  SmallVector<Operation *> ops;
  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    ops.push_back(op);
  }
  void eraseAll() {
    for (Operation *op : llvm::reverse(ops)) {
      op->dropAllUses();
      op->erase();
    }
    ops.clear();
  }
};

/// ⟨u, w⟩ for two arrays of one type.
Value innerProduct(OpBuilder &builder, Location loc, Value u, Value w) {
  if (isScalar(u))
    return MulOp::create(builder, loc, u, w);
  if (cast<ArrayType>(u.getType()).getRank() == 1)
    return DotOp::create(builder, loc, u, w);
  Value product = MulOp::create(builder, loc, u, w);
  return ReduceElementsOp::create(builder, loc, ElementsKind::sum, product);
}

class Transposer {
public:
  explicit Transposer(Operation *scope) : dependence(scope) {}

  /// Rewrites `product` when one of its orders and one index it is inside
  /// make it ⟨L(u), v⟩ as above.
  bool rewrite(InnerProduct product) {
    SmallVector<Value> indices;
    for (Operation *op = product.op; op; op = op->getParentOp()) {
      for (Region &region : op->getRegions())
        if (!region.empty() && region.isAncestor(product.op->getParentRegion()))
          llvm::append_range(indices, region.front().getArguments());
      if (isa<TermOp>(op))
        break;
    }
    for (Value index : indices)
      for (bool swapped : {false, true})
        if (rewrite(product, swapped ? product.rhs : product.lhs,
                    swapped ? product.lhs : product.rhs, index))
          return true;
    return false;
  }

private:
  /// ⟨mapped, covector⟩ as ⟨u, Lᵀ covector⟩ when mapped = L(u), the u
  /// varying with `index` and with every index that L and the covector
  /// vary with, L and the covector not varying with `index`.
  bool rewrite(InnerProduct product, Value mapped, Value covector,
               Value index) {
    auto invariant = [&](Value value) {
      return !dependence.dependsOn(value, index);
    };
    if (!invariant(covector) || invariant(mapped))
      return false;
    Block &body = *product.op->getBlock();
    LinearDecomposition linear = decomposeLinearly(mapped, body, invariant);
    if (!llvm::any_of(linear.maps, [&](Operation *map) {
          return transforms(map, invariant);
        }))
      return false;
    // What L and the covector vary with; each varying u must vary with all
    // of it, or L(u) could be computed ahead at fewer positions than Lᵀ v.
    IndexSet fixedIndices = dependence.of(covector);
    for (Operation *map : linear.maps)
      for (Value operand : map->getOperands())
        if (invariant(operand))
          for (Value used : dependence.of(operand))
            fixedIndices.insert(used);
    for (Value atom : linear.atoms) {
      if (invariant(atom))
        continue;
      const IndexSet &atomIndices = dependence.of(atom);
      if (!llvm::all_of(fixedIndices,
                        [&](Value used) { return atomIndices.contains(used); }))
        return false;
    }

    CreatedOps created;
    OpBuilder builder(product.op);
    builder.setListener(&created);
    Location loc = product.op->getLoc();
    // The rules of linear ops do not fail; should one, its error is not
    // the user's and the product stays as it was.
    GuardedDiagnosticHandler quiet(product.op->getContext(),
                                   [](Diagnostic &) { return success(); });
    llvm::DenseMap<Value, Value> adjoints;
    adjoints[mapped] = covector;
    SmallVector<Operation *> maps(linear.maps.begin(), linear.maps.end());
    llvm::sort(
        maps, [](Operation *a, Operation *b) { return b->isBeforeInBlock(a); });
    for (Operation *map : maps) {
      Value adjoint = adjoints.lookup(map->getResult(0));
      auto rule = dyn_cast<DerivativeOpInterface>(map);
      if (!adjoint)
        continue;
      SmallVector<Value> operandAdjoints;
      if (!rule || !rule.hasDerivativeRule() ||
          failed(rule.buildAdjoints(builder, {adjoint}, operandAdjoints))) {
        created.eraseAll();
        return false;
      }
      for (auto [operand, contribution] :
           llvm::zip(map->getOperands(), operandAdjoints)) {
        if (!contribution || (!linear.atoms.contains(operand) &&
                              !linear.maps.contains(operand.getDefiningOp())))
          continue;
        Value &slot = adjoints[operand];
        slot = slot
                   ? AddOp::create(builder, loc, slot, contribution).getResult()
                   : contribution;
      }
    }
    Value total;
    for (Value atom : linear.atoms) {
      Value transposed = adjoints.lookup(atom);
      if (!transposed)
        continue;
      if (!invariant(transposed) || transposed.getType() != atom.getType()) {
        created.eraseAll();
        return false;
      }
      Value part = innerProduct(builder, loc, atom, transposed);
      total =
          total ? AddOp::create(builder, loc, total, part).getResult() : part;
    }
    if (!total) {
      created.eraseAll();
      return false;
    }
    product.op->getResult(0).replaceAllUsesWith(total);
    product.op->erase();
    return true;
  }

  IndexDependence dependence;
};

} // namespace

bool mlir::energy::transposeLinearMaps(Operation *scope) {
  // One rewrite at a time, each search with dependences of its own: a
  // rewrite (and an abandoned one) adds ops and erases others.
  bool changed = false;
  for (int round = 0, rewrote = true; rewrote && round < 64; ++round) {
    rewrote = false;
    SmallVector<InnerProduct> products;
    scope->walk([&](Operation *op) {
      if (std::optional<InnerProduct> product = asInnerProduct(op))
        products.push_back(*product);
    });
    for (InnerProduct product : products) {
      Block *body = product.op->getBlock();
      if (Transposer(scope).rewrite(product)) {
        eraseDeadOps(*body);
        rewrote = changed = true;
        break;
      }
    }
  }
  return changed;
}

void mlir::energy::transposeLinearMaps(ModelOp model) {
  for (TermOp term : model.getBody().front().getOps<TermOp>())
    transposeLinearMaps(term);
}
