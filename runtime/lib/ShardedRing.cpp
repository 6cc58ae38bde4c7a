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
#include <functional>
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

Status ShardedSession::aroundRing(const std::function<Status()> &visit,
                                  std::vector<Tensor> &travelling,
                                  std::vector<NamedTensor> riding) {
  Expected<std::vector<Tensor>> blocks = ringBlocks();
  if (!blocks)
    return blocks.status();
  for (auto &[name, value] : riding)
    blocks->push_back(std::move(value));
  size_t copies = blocks->size() - riding.size();
  int size = communicator->size();
  int owner = communicator->rank();
  for (int step = 0; step < size; ++step) {
    if (Status status = bindBlocks(*blocks, owner); !status)
      return status;
    for (size_t i = 0; i < riding.size(); ++i)
      if (Status status =
              blockSession->set(riding[i].first, (*blocks)[copies + i]);
          !status)
        return status;
    if (Status status = visit(); !status)
      return status;
    // What travels goes on after every visit, home after the last; the
    // blocks only between visits.
    for (Tensor &tensor : travelling)
      if (Status status = shift(tensor); !status)
        return status;
    if (step + 1 < size)
      for (Tensor &block : *blocks)
        if (Status status = shift(block); !status)
          return status;
    owner = (owner + size - 1) % size;
  }
  return Status::success();
}

Status ShardedSession::mergeRingSites() {
  if (!ringStale)
    return Status::success();
  if (!ringInputsBound) {
    // The merged lse are inputs: bound (with zeros) before the sessions
    // evaluate anything.
    for (const ShardLayout::RingSite &site : layout.ring->sites)
      for (auto [each, name] : {std::pair(&session, &site.merged),
                                std::pair(&*blockSession, &site.merged),
                                std::pair(&*blockSession, &site.weight)}) {
        Expected<std::vector<int64_t>> shape = each->shapeOf(*name);
        if (!shape)
          return shape.status();
        if (Status status = each->set(*name, Tensor(DType::F64, *shape));
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
  std::vector<Tensor> &merged = ringMerged, nothing;
  merged.clear();
  ringPartials.clear();
  auto mergeBlock = [&]() -> Status {
    bool first = merged.empty();
    std::vector<Tensor> &partials = ringPartials.emplace_back();
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
      partials.push_back(*partial);
      if (first) {
        merged.push_back(std::move(*partial));
        continue;
      }
      Tensor &into = merged[site];
      for (int64_t i = 0; i < into.elementCount(); ++i)
        into.set(i, logAddExp(into.at(i), partial->at(i)));
    }
    return Status::success();
  };
  if (Status status = aroundRing(mergeBlock, nothing); !status)
    return status;
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

Status ShardedSession::bindRingWeights(size_t visit,
                                       const std::vector<Tensor> *factors) {
  for (size_t site = 0; site < layout.ring->sites.size(); ++site) {
    const Tensor &partial = ringPartials[visit][site];
    const Tensor &merged = ringMerged[site];
    Tensor weight(DType::F64, partial.shape());
    for (int64_t i = 0; i < weight.elementCount(); ++i) {
      // A block the row's lse admits no column of has no share.
      double share = std::isinf(partial.at(i))
                         ? 0.0
                         : std::exp(partial.at(i) - merged.at(i));
      weight.set(i, factors ? share * (*factors)[site].at(i) : share);
    }
    if (Status status =
            blockSession->set(layout.ring->sites[site].weight, weight);
        !status)
      return status;
  }
  return Status::success();
}

Expected<std::vector<Tensor>>
ShardedSession::ringGradients(const std::vector<std::string> &names) {
  if (Status status = mergeRingSites(); !status)
    return status;
  std::vector<std::string> blockGradients =
      blockSession->model().gradientNames();
  std::vector<std::string> rankGradients = session.model().gradientNames();
  // The terms without sites, the sites' merged lse as constants; and what
  // each block's gradients add: the block model's gradient of the tensor
  // (at the rank's rows, or whole) and that of its copy (the block's rows).
  std::vector<Tensor> gradients;
  std::vector<std::string> wanted;
  std::vector<std::optional<size_t>> rowsPart, copyPart;
  for (const std::string &name : names) {
    bool direct = contains(rankGradients, name);
    Expected<Tensor> gradient =
        direct ? session.gradient(name) : session.get(name);
    if (!gradient)
      return gradient.status();
    if (!direct)
      for (int64_t i = 0; i < gradient->elementCount(); ++i)
        gradient->set(i, 0.0);
    gradients.push_back(std::move(*gradient));
    rowsPart.emplace_back();
    copyPart.emplace_back();
    if (contains(blockGradients, name)) {
      rowsPart.back() = wanted.size();
      wanted.push_back(name);
    }
    if (const ShardLayout::ShardedTensor *tensor = sharded(name);
        tensor && !tensor->gathered.empty()) {
      copyPart.back() = wanted.size();
      wanted.push_back(tensor->gathered);
    }
  }
  auto addInto = [](Tensor &into, const Tensor &part) {
    for (int64_t i = 0; i < into.elementCount(); ++i)
      into.set(i, into.at(i) + part.at(i));
  };
  if (!wanted.empty()) {
    // A copy's gradient travels with its block (zero at the start, of the
    // rank's rows' shape, which every block has), home after the last visit.
    std::vector<Tensor> travelling;
    std::vector<size_t> travellerOf(names.size(), 0);
    for (size_t n = 0; n < names.size(); ++n)
      if (copyPart[n]) {
        Expected<Tensor> rows = session.get(names[n]);
        if (!rows)
          return rows.status();
        travellerOf[n] = travelling.size();
        travelling.emplace_back(rows->dtype(), rows->shape());
      }
    size_t visit = 0;
    auto addBlock = [&]() -> Status {
      if (Status status = bindRingWeights(visit++); !status)
        return status;
      Expected<std::vector<Tensor>> parts = blockSession->gradients(wanted);
      if (!parts)
        return parts.status();
      for (size_t n = 0; n < names.size(); ++n) {
        if (rowsPart[n])
          addInto(gradients[n], (*parts)[*rowsPart[n]]);
        if (copyPart[n])
          addInto(travelling[travellerOf[n]], (*parts)[*copyPart[n]]);
      }
      return Status::success();
    };
    if (Status status = aroundRing(addBlock, travelling); !status)
      return status;
    for (size_t n = 0; n < names.size(); ++n)
      if (copyPart[n])
        addInto(gradients[n], travelling[travellerOf[n]]);
  }
  for (size_t n = 0; n < names.size(); ++n)
    if (!sharded(names[n]))
      if (Status status = sumOverRanks(gradients[n]); !status)
        return status;
  return gradients;
}
