//===- ShardedSession.h - One rank of a sequence-sharded run ----*- C++ -*-===//
//
// A session of the model one rank evaluates (energyc --shard DIM): it holds
// the rank's rows of DIM and answers for the whole model over a Communicator.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_RUNTIME_SHARDEDSESSION_H
#define ENERGY_RUNTIME_SHARDEDSESSION_H

#include "energy/Runtime/Communicator.h"
#include "energy/Runtime/Safetensors.h"
#include "energy/Runtime/Session.h"

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace energy {

/// How a rank's model binds (the front end's ShardedModel without its
/// source): the sharded dim, the dims of the whole length and of the rank's
/// first row (each empty when the model does not read it), the rows' stride
/// (1: each rank a contiguous slice; the rank count: rank r holds rows r,
/// r + R, ..., striped), the const that is 1 on the first rank and 0
/// elsewhere (empty when unused), and the tensors with an axis of the dim.
struct ShardLayout {
  struct ShardedTensor {
    std::string name;
    /// The param the rank fills with every rank's rows (empty: none).
    std::string gathered;
    unsigned axis = 0;
  };
  std::string dim, wholeDim, offsetDim, firstRankConst;
  int64_t stride = 1;
  std::vector<ShardedTensor> tensors;
  /// A ring (energyc --ring): the copies are params of a second model, the
  /// block model, which holds one rank's rows of them at a time (`blockDim`
  /// rows, from global row `blockOffsetDim`, empty when unread); per site,
  /// the input of each row's lse merged over the blocks (in both models)
  /// and the block model's output of each row's lse over one block (and,
  /// where the lse has a predicate, of each row's columns in the block: an
  /// lse over none is 0, and such a block adds nothing to the merge); and
  /// the block model's per-row input `weight` (each row's share of the
  /// site's gradient: the site there is `(weight + probe)·lse_block +
  /// scale·T`) and params `probe` and `scale` (0; a backward step reads the
  /// probe's adjoint and the scale's gradient).
  struct RingSite {
    std::string merged, partial, count, weight, probe, scale;
  };
  struct Ring {
    std::string blockDim, blockOffsetDim;
    std::vector<RingSite> sites;
  };
  std::optional<Ring> ring;
};

/// One rank's session. Every rank calls the same methods in the same order
/// (each is collective); all return the whole model's values on every rank:
/// the energy summed over the ranks in rank order, gradients of sharded
/// tensors put together from every rank's rows, others summed.
class ShardedSession {
public:
  /// Rank `communicator.rank()` of a run over `length` rows of the
  /// layout's dim, as many rows per rank as shardOf gives (a contiguous
  /// slice, or every R-th row with a stride of R). `options` holds the
  /// model's other dims and consts.
  static Expected<ShardedSession> create(const Model &rankModel,
                                         ShardLayout layout, int64_t length,
                                         SessionOptions options,
                                         Communicator &communicator,
                                         const Model *blockModel = nullptr);

  /// Binds `whole` (the model's tensor, every row) by the rank's rows.
  Status set(const std::string &name, const Tensor &whole);
  /// Binds the rank's rows of sharded tensor `name` (what readSafetensors
  /// reads of a file given rowsOf(name)).
  Status setRows(const std::string &name, const Tensor &rows);
  /// For each sharded tensor of `shapes` (whole tensors' shapes, by name),
  /// the rank's rows to read of it; an error where its axis is not the
  /// whole length.
  Expected<std::map<std::string, SafetensorsRows>>
  rowsOf(const std::map<std::string, std::vector<int64_t>> &shapes) const;
  Expected<double> energy();
  /// The gradient of the model's energy with respect to tensor `name`,
  /// whole.
  Expected<Tensor> gradient(const std::string &name);
  /// The gradients of several tensors, whole (on a ring, from one pass
  /// around it).
  Expected<std::vector<Tensor>>
  gradients(const std::vector<std::string> &names);
  /// The tensor `name`, whole.
  Expected<Tensor> get(const std::string &name);
  /// Runs the dynamics `steps` steps (else the model's count): before each
  /// step the ranks put the gradient together, which the rank's step
  /// program reads (a model compiled with energy-supplied-gradients).
  /// Returns the steps taken.
  Expected<int64_t> run(std::optional<int64_t> steps = std::nullopt);
  /// For a model with a loss (compiled with energy-supplied-gradients):
  /// Session::backward on every rank, the ranks putting their parts
  /// together between its kernels; the losses are summed in rank order.
  /// Afterwards adjoint(X) is the derivative of the sum of the losses with
  /// respect to X, and the state is back where the run started.
  Expected<BackwardResult> backward(const BackwardOptions &options = {});
  /// The adjoint of tensor `name` after backward(), whole.
  Expected<Tensor> adjoint(const std::string &name);
  /// The tensors with an adjoint, gathered copies aside.
  std::vector<std::string> adjointNames() const;
  /// The model's forward states, optimizer state and gathered copies aside.
  std::vector<std::string> stateNames() const;

  /// The rank's tensors (its states only, with `statesOnly`) were changed
  /// through rankSession(): their copies are gathered again before the next
  /// evaluation.
  void invalidateCopies(bool statesOnly = false);

  int64_t rowCount() const { return end - begin; }
  /// The bytes the rank's sessions' buffers take (a ring's block model's
  /// too).
  uint64_t bufferBytes() const {
    return session.bufferBytes() +
           (blockSession ? blockSession->bufferBytes() : 0);
  }
  /// The position in the whole length of row `row` of rank `rank`.
  int64_t globalRow(int rank, int64_t row) const;
  Session &rankSession() { return session; }

private:
  friend class ShardedBackwardHooks;
  friend class RingBackwardStep;
  ShardedSession(Session session, std::optional<Session> blockSession,
                 ShardLayout layout, int64_t length, int64_t begin, int64_t end,
                 Communicator &communicator)
      : session(std::move(session)), blockSession(std::move(blockSession)),
        layout(std::move(layout)), length(length), begin(begin), end(end),
        communicator(&communicator) {
    // Every copy is gathered before the first evaluation, also those of
    // tensors the session initialises itself.
    invalidateCopies();
  }

  const ShardLayout::ShardedTensor *sharded(const std::string &name) const;
  /// Fills the gathered copies from every rank's rows.
  Status gatherCopies();
  /// The gradient of `name` at this rank's rows (for a sharded tensor) or
  /// whole (summed over the ranks).
  Expected<Tensor> rankGradient(const std::string &name);
  /// rankGradient of each of `names` (on a ring, from one pass around it).
  Expected<std::vector<Tensor>>
  rankGradients(const std::vector<std::string> &names);
  /// Every rank's rows of `rows` (this rank's rows of a tensor whose axis
  /// `axis` is the dim) as the whole tensor.
  Expected<Tensor> allGatherRows(const Tensor &rows, unsigned axis);
  /// Every rank's `tensor` summed, into `tensor`.
  Status sumOverRanks(Tensor &tensor);
  /// Every rank's `whole` (a tensor whose axis `axis` is the dim) summed,
  /// this rank's rows of the sum (a reduce-scatter).
  Expected<std::vector<double>> sumRowsOverRanks(const Tensor &whole,
                                                 unsigned axis);
  /// The tensors whose gradient the rank's step program reads supplied.
  std::vector<std::string> suppliedTensors() const;
  /// Gives the rank's step program the gradient of each supplied tensor.
  Status supplyGradients();

  // The ring (ShardedRing.cpp).
  /// Copies the states and the sharded tensors the block model reads from
  /// the rank's session, and merges each site's lse over every rank's block
  /// into both sessions' inputs; nothing when nothing changed since.
  Status mergeRingSites();
  /// The rank's parts of the gradients of `names` (as rankGradient), from
  /// one pass around the ring: the rank model's, plus each block's through
  /// the block model, a copy's gradient travelling with its block back to
  /// the rows' rank.
  Expected<std::vector<Tensor>>
  ringGradients(const std::vector<std::string> &names);
  /// The rank's rows of every copied tensor (the block it starts with).
  Expected<std::vector<Tensor>> ringBlocks();
  /// Binds `blocks`, rank `owner`'s rows, as the block model's copies.
  Status bindBlocks(const std::vector<Tensor> &blocks, int owner);
  /// `tensor` sent to the next rank, the previous rank's received.
  Status shift(Tensor &tensor);
  using NamedTensor = std::pair<std::string, Tensor>;
  /// Binds every rank's block in turn (this rank's first) and calls
  /// `visit`; `travelling` goes around with the blocks and, after the last
  /// visit, is back on this rank with its own block's additions. Each of
  /// `riding`, this rank's value of a block model's tensor, goes around
  /// with the blocks too, bound with them.
  Status aroundRing(const std::function<Status()> &visit,
                    std::vector<Tensor> &travelling,
                    std::vector<NamedTensor> riding = {});
  /// Sets each site's weight in the block model to the rows' shares of the
  /// site's gradient in the block of visit `visit` (exp(lse_block −
  /// merged)), times `factors` (a tensor per site) where given.
  Status bindRingWeights(size_t visit,
                         const std::vector<Tensor> *factors = nullptr);
  /// After the rank's backward step: adds the sites' part of the step's
  /// Hessian-vector product to the rank's adjoints, from two passes around
  /// the ring (the block model's backward step with each block's shares,
  /// then its gradient with the shares times each row's derivative of the
  /// block's lse less the merged lse's, along the cotangents).
  Status ringBackwardStep();

  Session session;
  std::optional<Session> blockSession;
  ShardLayout layout;
  int64_t length, begin, end;
  Communicator *communicator;
  /// The sharded tensors whose gathered copies are out of date.
  std::set<std::string> staleCopies;
  /// Whether the last backward() succeeded (its adjoints are whole).
  bool adjointsWhole = false;
  /// Whether the ring's merged lse are out of date, and whether their
  /// inputs were ever bound.
  bool ringStale = true, ringInputsBound = false;
  /// Per site, the merged lse; per visit of the last merge and site, each
  /// row's lse over that block (−inf where it admits no column); per site,
  /// each row's factor of the site in its term (times T), once known.
  std::vector<Tensor> ringMerged;
  std::vector<std::vector<Tensor>> ringPartials;
  std::vector<Tensor> ringScales;
};

} // namespace energy

#endif // ENERGY_RUNTIME_SHARDEDSESSION_H
