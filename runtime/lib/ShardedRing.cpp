//===- ShardedRing.cpp - A sharded run's copies streamed around a ring ----===//
//
// ShardedSession with a ring: no rank holds the whole length; each rank's
// block of rows visits every rank in turn, each row's lse over the blocks is
// merged (log-add-exp), and a copy's gradient travels home with its block.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/ShardedSession.h"

#include "energy/Runtime/Manifest.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace energy;

namespace {
/// log(exp(a) + exp(b)), exact where either is -inf.
double logAddExp(double a, double b) {
  double high = std::max(a, b);
  if (high == -std::numeric_limits<double>::infinity())
    return high;
  return high + std::log(std::exp(a - high) + std::exp(b - high));
}

bool contains(const std::vector<std::string> &names, const std::string &name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}
} // namespace

Status ShardedSession::shift(Tensor &tensor) {
  std::vector<double> values(tensor.elementCount()), received;
  for (int64_t i = 0; i < tensor.elementCount(); ++i)
    values[i] = tensor.at(i);
  if (Status status = communicator->shiftRing(values, received); !status)
    return status;
  for (int64_t i = 0; i < tensor.elementCount(); ++i)
    tensor.set(i, received[i]);
  return Status::success();
}

Expected<std::vector<Tensor>> ShardedSession::ringBlocks() {
  std::vector<Tensor> blocks;
  for (const ShardLayout::ShardedTensor &tensor : layout.tensors) {
    if (tensor.gathered.empty())
      continue;
    Expected<Tensor> rows = session.get(tensor.name);
    if (!rows)
      return rows.status();
    blocks.push_back(std::move(*rows));
  }
  return blocks;
}

Status ShardedSession::bindBlocks(const std::vector<Tensor> &blocks,
                                  int owner) {
  size_t next = 0;
  for (const ShardLayout::ShardedTensor &tensor : layout.tensors) {
    if (tensor.gathered.empty())
      continue;
    if (Status status = blockSession->set(tensor.gathered, blocks[next++]);
        !status)
      return status;
  }
  const std::string &offsetDim = layout.ring->blockOffsetDim;
  if (offsetDim.empty())
    return Status::success();
  // Rank `owner`'s rows: every stride-th from `owner`, or a contiguous
  // slice (a ring's blocks are of one length).
  int64_t offset = layout.stride != 1 ? owner : owner * (end - begin);
  return blockSession->setDim(offsetDim, offset);
}

Status ShardedSession::mergeRingSites() {
  if (!ringStale)
    return Status::success();
  if (!ringInputsBound) {
    // The merged lse are inputs: bound (with zeros) before the sessions
    // evaluate anything.
    for (const ShardLayout::RingSite &site : layout.ring->sites)
      for (Session *each : {&session, &*blockSession}) {
        Expected<std::vector<int64_t>> shape = each->shapeOf(site.merged);
        if (!shape)
          return shape.status();
        if (Status status = each->set(site.merged, Tensor(DType::F64, *shape));
            !status)
          return status;
      }
    ringInputsBound = true;
  }
  // The block model reads the rank's tensors as they are now.
  std::vector<std::string> blockTensors = blockSession->model().tensorNames();
  for (const std::string &name : session.model().tensorNames()) {
    if (!contains(blockTensors, name))
      continue;
    Expected<Tensor> value = session.get(name);
    if (!value)
      return value.status();
    if (Status status = blockSession->set(name, *value); !status)
      return status;
  }
  Expected<std::vector<Tensor>> blocks = ringBlocks();
  if (!blocks)
    return blocks.status();
  int size = communicator->size();
  int owner = communicator->rank();
  std::vector<Tensor> merged;
  for (int step = 0; step < size; ++step) {
    if (Status status = bindBlocks(*blocks, owner); !status)
      return status;
    for (size_t site = 0; site < layout.ring->sites.size(); ++site) {
      const ShardLayout::RingSite &names = layout.ring->sites[site];
      Expected<Tensor> partial = blockSession->get(names.partial);
      if (!partial)
        return partial.status();
      if (!names.count.empty()) {
        Expected<Tensor> count = blockSession->get(names.count);
        if (!count)
          return count.status();
        for (int64_t i = 0; i < partial->elementCount(); ++i)
          if (count->at(i) == 0)
            partial->set(i, -std::numeric_limits<double>::infinity());
      }
      if (step == 0) {
        merged.push_back(std::move(*partial));
        continue;
      }
      Tensor &into = merged[site];
      for (int64_t i = 0; i < into.elementCount(); ++i)
        into.set(i, logAddExp(into.at(i), partial->at(i)));
    }
    if (step + 1 == size)
      break;
    for (Tensor &block : *blocks)
      if (Status status = shift(block); !status)
        return status;
    owner = (owner + size - 1) % size;
  }
  for (size_t site = 0; site < merged.size(); ++site) {
    // A row no block admits: an lse over nothing, 0.
    for (int64_t i = 0; i < merged[site].elementCount(); ++i)
      if (std::isinf(merged[site].at(i)))
        merged[site].set(i, 0.0);
    const std::string &name = layout.ring->sites[site].merged;
    if (Status status = session.set(name, merged[site]); !status)
      return status;
    if (Status status = blockSession->set(name, merged[site]); !status)
      return status;
  }
  ringStale = false;
  return Status::success();
}

Expected<Tensor> ShardedSession::ringGradient(const std::string &name) {
  if (Status status = mergeRingSites(); !status)
    return status;
  const ShardLayout::ShardedTensor *tensor = sharded(name);
  bool copied = tensor && !tensor->gathered.empty();
  bool throughBlocks = contains(blockSession->model().gradientNames(), name);
  // The terms without sites, and the sites' merged lse as constants.
  bool direct = contains(session.model().gradientNames(), name);
  Expected<Tensor> gradient =
      direct ? session.gradient(name) : session.get(name);
  if (!gradient)
    return gradient.status();
  if (!direct)
    for (int64_t i = 0; i < gradient->elementCount(); ++i)
      gradient->set(i, 0.0);
  if (throughBlocks || copied) {
    Expected<std::vector<Tensor>> blocks = ringBlocks();
    if (!blocks)
      return blocks.status();
    std::optional<Tensor> travelling;
    int size = communicator->size();
    int owner = communicator->rank();
    for (int step = 0; step < size; ++step) {
      if (Status status = bindBlocks(*blocks, owner); !status)
        return status;
      std::vector<std::string> wanted;
      if (throughBlocks)
        wanted.push_back(name);
      if (copied)
        wanted.push_back(tensor->gathered);
      Expected<std::vector<Tensor>> parts = blockSession->gradients(wanted);
      if (!parts)
        return parts.status();
      if (throughBlocks)
        for (int64_t i = 0; i < gradient->elementCount(); ++i)
          gradient->set(i, gradient->at(i) + (*parts)[0].at(i));
      if (copied) {
        Tensor &part = parts->back();
        if (!travelling)
          travelling = std::move(part);
        else
          for (int64_t i = 0; i < travelling->elementCount(); ++i)
            travelling->set(i, travelling->at(i) + part.at(i));
        // The block's gradient goes on with it; after the last step, home.
        if (Status status = shift(*travelling); !status)
          return status;
      }
      if (step + 1 < size)
        for (Tensor &block : *blocks)
          if (Status status = shift(block); !status)
            return status;
      owner = (owner + size - 1) % size;
    }
    if (travelling)
      for (int64_t i = 0; i < gradient->elementCount(); ++i)
        gradient->set(i, gradient->at(i) + travelling->at(i));
  }
  if (tensor)
    return gradient;
  if (Status status = sumOverRanks(*gradient); !status)
    return status;
  return gradient;
}
