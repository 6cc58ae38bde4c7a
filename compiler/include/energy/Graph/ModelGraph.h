//===- ModelGraph.h - A model's energy graph as a picture -------*- C++ -*-===//
//
// The picture of an energy model (`energyc --emit=dot|svg`): tensors as nodes
// with their role, shape and dynamics rule, energy terms as factor nodes
// with an edge per way a term reads a tensor (labelled by the read's indices
// and, in an lse term, by whether it reads the child or the parent side),
// lets, outputs and explicit rules; laid out and rendered by Graphviz.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_GRAPH_MODELGRAPH_H
#define ENERGY_GRAPH_MODELGRAPH_H

#include "energy/IR/EnergyOps.h"

#include <string>

namespace mlir::energy {

/// Writes the energy graph of `model` (as emitted from its source, before
/// gradients) as a Graphviz `digraph`.
void writeModelGraph(ModelOp model, raw_ostream &os);

/// Lays out the Graphviz text `dot` with Graphviz's `dot` layout and renders
/// it as `format` ("svg", "png", ...) into `rendered`; on failure, `error`
/// says why (Graphviz's own messages included).
LogicalResult renderGraph(StringRef dot, StringRef format,
                          std::string &rendered, std::string &error);

} // namespace mlir::energy

#endif // ENERGY_GRAPH_MODELGRAPH_H
