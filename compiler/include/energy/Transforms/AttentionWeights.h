//===- AttentionWeights.h - The softmax weights of an lse term --*- C++ -*-===//
//
// What `energy-run --plot-attention TERM:CHILD` shows: for an energy term
// −Σ_children lse_parents s(child, parent), the weights
// softmax_parent s(child, ·) of the chosen children, as an output added to
// the model (so that any evaluator of the model computes them).
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TRANSFORMS_ATTENTIONWEIGHTS_H
#define ENERGY_TRANSFORMS_ATTENTIONWEIGHTS_H

#include "energy/IR/EnergyOps.h"

#include <map>
#include <string>
#include <vector>

namespace mlir::energy {

/// The output that AttentionWeights adds, and what its axes are.
struct AttentionWeightsOutput {
  OutputOp output;
  /// Names of its leading axes: the children left free, then the parent.
  std::vector<std::string> axisNames;
  /// The child indices of the term, in the order the term binds them.
  std::vector<std::string> childIndices;
};

/// Adds to `model` an output `@<term>.weights` over [free children...,
/// parent] holding exp((s − L) / T) for the term's (first) lse, 0 where its
/// predicate excludes a parent; children named in `fixed` are held at the
/// given positions. Errors (no such term, no lse, an unknown or out-of-range
/// child, a free child over a dim expression) are emitted on the model.
FailureOr<AttentionWeightsOutput>
addAttentionWeights(ModelOp model, StringRef term,
                    const std::map<std::string, int64_t> &fixed);

} // namespace mlir::energy

#endif // ENERGY_TRANSFORMS_ATTENTIONWEIGHTS_H
