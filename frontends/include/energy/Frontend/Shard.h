//===- Shard.h - One rank's model of a run sharded along a dim --*- C++ -*-===//
//
// Rewrites a checked model into the model one rank of a sequence-sharded run
// evaluates: its rows of the sharded dim, the other ranks' rows gathered.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_FRONTEND_SHARD_H
#define ENERGY_FRONTEND_SHARD_H

#include "energy/Frontend/AST.h"
#include "energy/Frontend/Diagnostics.h"
#include "energy/Runtime/TensorRole.h"

#include "llvm/Support/SourceMgr.h"

#include <optional>
#include <string>
#include <vector>

namespace energy {
namespace frontend {

/// A tensor with an axis of the sharded dim: in the rank's model it holds
/// the rank's rows; `gathered`, when not empty, names a param of the whole
/// dim that the rank fills with every rank's rows (the reads that are not
/// at the rank's own rows read it).
struct ShardedTensor {
  std::string name;
  std::string gathered;
  unsigned axis = 0;
  TensorRole role = TensorRole::Input;
};

/// A site of a ring: an lse over the sharded dim inside a row sum. The
/// rank's lse over every block is the merge (log-add-exp) of `partial`, an
/// output of the block model (each row's lse over the block, divided by the
/// lse's temperature), over the blocks; both models read the merge as the
/// input `merged`. Where the lse has a predicate, `count` is the block
/// model's output of each row's admitted columns in the block (an lse over
/// none is 0, a block that admits none adds nothing to the merge).
/// In the block model the site is `(weight + probe)·lse_block + scale·T`:
/// the input `weight`, each row's share of the site's gradient (exp(lse_block
/// / T − merged) in a gradient), and the params `probe` and `scale`, 0:
/// in a loss's gradient through a run, the probe's adjoint in a backward
/// step is each row's derivative of the block's lse along the cotangents
/// (times the site's factor and T), and the scale's gradient that factor.
struct RingSite {
  std::string merged, partial, count, weight, probe, scale;
};

/// The ring: the rank's model holds no copies; a second model, the block
/// model, reads one block of the dim's rows at a time in the copies
/// (`blockDim` rows, the first at global position `blockOffsetDim`, or
/// every `stride`-th one from it). Its energy is 0 wherever the blocks'
/// lse are merged, its gradient each site's gradient over the block.
struct ShardRing {
  std::string blockSource;
  std::string blockDim, blockOffsetDim;
  std::vector<RingSite> sites;
};

/// The rank's model and how to bind it. Every term is a sum of a part over
/// the rank's rows (an outermost `sum` or `mean` over the dim in a linear
/// position) and a part every rank evaluates whole, scaled by
/// `firstRankConst` (1 on rank 0, 0 elsewhere), so that the ranks' energies
/// and gradients add up to the model's.
struct ShardedModel {
  /// The rank's model, as .energy source.
  std::string source;
  /// The sharded dim (the rank's row count in the rank's model), the dim of
  /// the whole length, and the dim of the rank's first row (each of the
  /// last two, and firstRankConst, empty when the model does not read it).
  std::string dim, wholeDim, offsetDim;
  /// 1: the rank holds rows offset, offset + 1, ... (a contiguous slice);
  /// R: rows offset, offset + R, ... (striped over R ranks, the offset the
  /// rank), where the model uses its rows' positions as numbers.
  int64_t stride = 1;
  std::string firstRankConst;
  std::vector<ShardedTensor> tensors;
  /// With a ring (--ring), its block model.
  std::optional<ShardRing> ring;
};

/// Rewrites `model` (checked, parsed from `buffer`) for a run sharded along
/// dim `dim` over `ranks` ranks (the rank count matters only to a model
/// that uses its rows' positions as numbers, whose rows are striped). What
/// cannot be sharded (a read along the dim at a shifted index, a derived dim of
/// it, a fn or output that reads along it, ...) is an error at its location;
/// none is returned then. With `ring`, the copies are streamed in blocks
/// (ShardRing): every read along the dim other than the rank's rows must be
/// at the index of an lse over the dim added linearly to a row sum.
std::optional<ShardedModel>
shardModel(const ModelSpec &model, llvm::StringRef buffer, llvm::StringRef dim,
           int64_t ranks, bool ring, DiagnosticEngine &diagnostics);

/// Parses and checks buffer `bufferId`, rewrites it for --shard `dim` and
/// adds the rank's model to `sourceMgr` as a new buffer, whose id goes to
/// `shardedBuffer` (it is parsed and checked too, so that its errors are
/// reported here; its warnings, of declarations the rank does not read, are
/// not). With `ring`, the block model is added and checked too, its id in
/// `blockBuffer`. None on any error.
std::optional<ShardedModel>
shardSourceBuffer(llvm::SourceMgr &sourceMgr, unsigned bufferId,
                  llvm::StringRef dim, int64_t ranks,
                  DiagnosticEngine &diagnostics, unsigned &shardedBuffer,
                  bool ring = false, unsigned *blockBuffer = nullptr);

} // namespace frontend
} // namespace energy

#endif // ENERGY_FRONTEND_SHARD_H
