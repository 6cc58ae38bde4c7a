//===- Gradients.h - Gradient derivation for other passes -------*- C++ -*-===//
//
// The derivation behind `energy-derive-gradients`, callable from other
// passes (Newton's Hessian-vector products), and the directional term
// ⟨∇E, v⟩ whose gradient is the Hessian-vector product H v.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TRANSFORMS_GRADIENTS_H
#define ENERGY_TRANSFORMS_GRADIENTS_H

#include "energy/IR/EnergyOps.h"

#include <string>

namespace mlir::energy {

/// The `energy.gradient` of `tensor` in `model` (of the term `of` only, when
/// given; of every non-auxiliary term otherwise), derived and appended to
/// the model unless it exists. Errors are emitted at the op without a rule.
FailureOr<GradientOp> getOrDeriveGradient(ModelOp model, StringRef tensor,
                                          FlatSymbolRefAttr of = {});

/// The joint `energy.gradient` of `tensors` (in this order): one program
/// that computes all their gradients at the same values.
FailureOr<GradientOp> getOrDeriveGradient(ModelOp model,
                                          ArrayRef<FlatSymbolRefAttr> tensors,
                                          FlatSymbolRefAttr of = {});

/// Replaces every read of a let inside `region` (but those of the lets
/// `kept` holds to) by a copy of the let's body at the read's indices,
/// until no such read is left. Fails (with an error) on a read that slices
/// a let without fixing all of its domain indices.
LogicalResult inlineLets(Region &region, SymbolTableCollection &tables,
                         function_ref<bool(LetOp)> kept = nullptr);

/// Appends to the model the auxiliary term `name` = ⟨g, v⟩, where g is the
/// gradient `gradient` computes and v the tensor `direction` (of g's
/// shape): every `energy.accumulate %g into @x[i]` becomes the sum of
/// g ⊙ v[i], every `energy.foreach` a `reduce sum` over the same domain.
/// Differentiating the term with respect to the gradient's tensor gives
/// the Hessian-vector product H v.
TermOp buildDirectionalTerm(GradientOp gradient, StringRef direction,
                            StringRef name);

/// The same for a joint gradient with one direction per tensor (in the
/// gradient's order): ⟨g₁, v₁⟩ + ⟨g₂, v₂⟩ + …, whose gradient is the sum
/// of the Hessian-vector products, derived once.
TermOp buildDirectionalTerm(GradientOp gradient, ArrayRef<StringRef> directions,
                            StringRef name);

/// The name of the backward program's directional term of `tensors`' joint
/// gradient (of term `of` only, when given): `x.backprop`,
/// `x.v.backprop.attn`.
std::string directionalTermName(ArrayRef<StringRef> tensors, StringRef of = {});

} // namespace mlir::energy

#endif // ENERGY_TRANSFORMS_GRADIENTS_H
