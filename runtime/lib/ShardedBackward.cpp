//===- ShardedBackward.cpp - A loss's gradient through a sharded run ------===//
//
// ShardedSession::backward: Session::backward on every rank, with what the
// ranks exchange between its kernels: supplied gradients before each
// forward step, gathered cotangents before each backward step, and after
// it every rank's part of the copies' and whole states' adjoints.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/ShardedSession.h"

#include "energy/Runtime/ArtifactABI.h"
#include "energy/Runtime/Manifest.h"

using namespace energy;

namespace energy {
/// The exchanges between the kernels of one rank's backward run.
class ShardedBackwardHooks : public BackwardHooks {
public:
  explicit ShardedBackwardHooks(ShardedSession &sharded) : sharded(sharded) {}

  Status beforeForwardStep(int64_t) override {
    return sharded.supplyGradients();
  }
  Status afterForwardStep(int64_t) override { return restored(); }
  Status restored() override {
    sharded.invalidateCopies(/*statesOnly=*/true);
    return Status::success();
  }
  Status beforeLosses() override { return sharded.gatherCopies(); }
  Status afterLosses(BackwardResult &result) override {
    std::vector<double> values;
    for (const auto &[name, value] : result.losses)
      values.push_back(value);
    if (Status status = sharded.communicator->allReduceSum(values); !status)
      return status;
    size_t at = 0;
    for (auto &[name, value] : result.losses)
      value = values[at++];
    return Status::success();
  }
  Status afterSeed() override {
    if (Status status = foldCopies(); !status)
      return status;
    // The losses' parts on each rank.
    for (const ManifestBuffer &buffer : manifest().buffers)
      if (buffer.adjointOf && heldWhole(*buffer.adjointOf, /*states=*/true))
        if (Status status = sumOverRanks(buffer.name); !status)
          return status;
    return Status::success();
  }
  Status beforeBackwardStep(int64_t) override {
    if (Status status = sharded.gatherCopies(); !status)
      return status;
    // Every rank's cotangents, which the rank's Hessian-vector product
    // pairs with its gradient in the copy.
    for (const ShardLayout::ShardedTensor &tensor : sharded.layout.tensors) {
      std::string rows = tensor.name + ".cotangent";
      std::string whole = tensor.gathered + ".cotangent";
      if (tensor.gathered.empty() || !manifest().findBuffer(rows) ||
          !manifest().findBuffer(whole))
        continue;
      Expected<Tensor> mine = session().get(rows);
      if (!mine)
        return mine.status();
      Expected<Tensor> every = sharded.allGatherRows(*mine, tensor.axis);
      if (!every)
        return every.status();
      if (Status status = session().set(whole, *every); !status)
        return status;
    }
    return Status::success();
  }
  Status afterBackwardStep(int64_t) override {
    if (sharded.layout.ring)
      if (Status status = sharded.ringBackwardStep(); !status)
        return status;
    if (Status status = foldCopies(); !status)
      return status;
    // What each rank's energy gave a state every rank holds whole.
    for (const ManifestBuffer &buffer : manifest().buffers) {
      std::optional<std::string> adjoint =
          buffer.cotangentOf ? adjointOf(*buffer.cotangentOf) : std::nullopt;
      if (!adjoint || buffer.name != *buffer.cotangentOf +
                                         ENERGY_ARTIFACT_RANK_ADJOINT_SUFFIX)
        continue;
      Expected<Tensor> part = session().get(buffer.name);
      if (!part)
        return part.status();
      if (Status status = sharded.sumOverRanks(*part); !status)
        return status;
      std::vector<double> values(part->elementCount());
      for (int64_t i = 0; i < part->elementCount(); ++i)
        values[i] = part->at(i);
      if (Status status = addInto(*adjoint, values); !status)
        return status;
    }
    return Status::success();
  }
  Status beforeFinish() override {
    // The finish hands the adjoint of a state every rank holds whole to the
    // tensor it starts from: from rank 0 only, so that the sum after it
    // counts it once.
    handedOver.clear();
    if (sharded.communicator->rank() == 0)
      return Status::success();
    for (const ManifestBuffer &buffer : manifest().buffers) {
      if (!buffer.init || buffer.init->kind != InitKind::Copy ||
          !heldWhole(buffer.name, /*states=*/true) ||
          !heldWhole(buffer.init->source, /*states=*/false))
        continue;
      std::optional<std::string> adjoint = adjointOf(buffer.name);
      if (!adjoint)
        continue;
      Expected<Tensor> value = session().get(*adjoint);
      if (!value)
        return value.status();
      Tensor zeros(value->dtype(), value->shape());
      if (Status status = session().set(*adjoint, zeros); !status)
        return status;
      handedOver.emplace_back(*adjoint, std::move(*value));
    }
    return Status::success();
  }
  Status afterFinish() override {
    // Params and inputs every rank holds whole: each rank's part (of the
    // losses, the steps and the finish's products), summed once.
    for (const ManifestBuffer &buffer : manifest().buffers)
      if (buffer.adjointOf && heldWhole(*buffer.adjointOf, /*states=*/false))
        if (Status status = sumOverRanks(buffer.name); !status)
          return status;
    for (auto &[name, value] : handedOver)
      if (Status status = session().set(name, value); !status)
        return status;
    return Status::success();
  }

private:
  Session &session() { return sharded.session; }
  const Manifest &manifest() { return sharded.session.model().manifest(); }

  /// The adjoint buffer of tensor `name`, if it has one.
  std::optional<std::string> adjointOf(const std::string &name) {
    for (const ManifestBuffer &buffer : manifest().buffers)
      if (buffer.adjointOf == name)
        return buffer.name;
    return std::nullopt;
  }

  /// Whether every rank holds tensor `name` whole (no rows of the dim, not
  /// a gathered copy): a state, or with `states` false a param or input.
  bool heldWhole(const std::string &name, bool states) {
    if (sharded.sharded(name))
      return false;
    for (const ShardLayout::ShardedTensor &tensor : sharded.layout.tensors)
      if (tensor.gathered == name)
        return false;
    std::optional<size_t> index = manifest().findBuffer(name);
    return index &&
           (manifest().buffers[*index].role == TensorRole::State) == states;
  }

  Status sumOverRanks(const std::string &name) {
    Expected<Tensor> value = session().get(name);
    if (!value)
      return value.status();
    if (Status status = sharded.sumOverRanks(*value); !status)
      return status;
    return session().set(name, *value);
  }

  Status addInto(const std::string &name, const std::vector<double> &values) {
    Expected<Tensor> value = session().get(name);
    if (!value)
      return value.status();
    for (int64_t i = 0; i < value->elementCount(); ++i)
      value->set(i, value->at(i) + values[i]);
    return session().set(name, *value);
  }

  /// Each copy's adjoint (every rank's reads of the rows) added to the
  /// rows' rank's adjoint, then cleared.
  Status foldCopies() {
    for (const ShardLayout::ShardedTensor &tensor : sharded.layout.tensors) {
      std::optional<std::string> copy = adjointOf(tensor.gathered);
      std::optional<std::string> rows = adjointOf(tensor.name);
      if (tensor.gathered.empty() || !copy || !rows)
        continue;
      Expected<Tensor> whole = session().get(*copy);
      if (!whole)
        return whole.status();
      Expected<std::vector<double>> mine =
          sharded.sumRowsOverRanks(*whole, tensor.axis);
      if (!mine)
        return mine.status();
      if (Status status = addInto(*rows, *mine); !status)
        return status;
      for (int64_t i = 0; i < whole->elementCount(); ++i)
        whole->set(i, 0.0);
      if (Status status = session().set(*copy, *whole); !status)
        return status;
    }
    return Status::success();
  }

  ShardedSession &sharded;
  /// The adjoints beforeFinish cleared on this rank, to put back after it.
  std::vector<std::pair<std::string, Tensor>> handedOver;
};
} // namespace energy

Expected<BackwardResult>
ShardedSession::backward(const BackwardOptions &options) {
  adjointsWhole = false;
  // A ring's merged lse are inputs of the rank's model, bound before it runs.
  if (layout.ring)
    if (Status status = mergeRingSites(); !status)
      return status;
  if (suppliedTensors().empty() && session.model().hasDynamics())
    return Status::error(
        "the rank's model of " + session.model().name() +
        " computes its own gradient in each step; a sharded run needs it "
        "compiled with supplied gradients (energy-supplied-gradients)");
  ShardedBackwardHooks hooks(*this);
  BackwardOptions rankOptions = options;
  rankOptions.hooks = &hooks;
  Expected<BackwardResult> result = session.backward(rankOptions);
  invalidateCopies(/*statesOnly=*/true);
  if (result)
    adjointsWhole = true;
  return result;
}

Expected<Tensor> ShardedSession::adjoint(const std::string &name) {
  if (!adjointsWhole)
    return Status::error("no adjoint of '" + name +
                         "': no sharded backward run has finished");
  Expected<const Tensor *> value = session.adjoint(name);
  if (!value)
    return value.status();
  if (const ShardLayout::ShardedTensor *tensor = sharded(name))
    return allGatherRows(**value, tensor->axis);
  return **value;
}

std::vector<std::string> ShardedSession::adjointNames() const {
  std::vector<std::string> names;
  for (const std::string &name : session.model().adjointNames()) {
    bool copy = false;
    for (const ShardLayout::ShardedTensor &tensor : layout.tensors)
      copy = copy || tensor.gathered == name;
    if (!copy)
      names.push_back(name);
  }
  return names;
}
