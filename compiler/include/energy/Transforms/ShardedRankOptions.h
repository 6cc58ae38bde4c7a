//===- ShardedRankOptions.h - How one rank's programs are built -*- C++ -*-===//
//
// The options of energy-supplied-gradients that the pipelines and the
// artifact options carry: plain data, so that backends' headers
// (Codegen/Artifact.h) include it without the pass infrastructure.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TRANSFORMS_SHARDEDRANKOPTIONS_H
#define ENERGY_TRANSFORMS_SHARDEDRANKOPTIONS_H

#include <string>
#include <utility>
#include <vector>

namespace mlir::energy {

/// One rank of a sharded run (energy-supplied-gradients): the dim of which
/// it holds some rows, and each sharded tensor's gathered copy.
struct ShardedRankOptions {
  std::string rowsDim;
  std::vector<std::pair<std::string, std::string>> copies;
  /// Whether the step program reads the gradient the ranks put together
  /// (runs and loss gradients), not only the copies marked.
  bool suppliedGradients = true;
  /// Whether the runtime calls the backward program's step alone, without
  /// its finish (a ring's block model): no product is deferred to the
  /// finish then.
  bool backwardStepAlone = false;
};

} // namespace mlir::energy

#endif // ENERGY_TRANSFORMS_SHARDEDRANKOPTIONS_H
