//===- ShardedRank.h - How the compiler builds a rank's programs -*- C++
//-*-===//
//
// The rank's model the front end wrote (energyc --shard) as the options of
// energy-supplied-gradients: shared by energyc and energy-run.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TOOLS_COMMON_SHARDEDRANK_H
#define ENERGY_TOOLS_COMMON_SHARDEDRANK_H

#include "energy/Frontend/Shard.h"
#include "energy/Transforms/Pipelines.h"

namespace energy::tools {

/// The dim of the rank's rows and each sharded tensor's gathered copy.
inline mlir::energy::ShardedRankOptions
shardedRankOf(const frontend::ShardedModel &sharded, bool blockModel = false) {
  mlir::energy::ShardedRankOptions rank;
  rank.rowsDim = sharded.dim;
  // A ring's rank model holds no copies; its block model does.
  bool copies = !sharded.ring || blockModel;
  for (const frontend::ShardedTensor &tensor : sharded.tensors)
    if (copies && !tensor.gathered.empty())
      rank.copies.push_back({tensor.name, tensor.gathered});
  // The runtime calls a block model's backward step alone, at each block.
  rank.backwardStepAlone = blockModel;
  return rank;
}

} // namespace energy::tools

#endif // ENERGY_TOOLS_COMMON_SHARDEDRANK_H
