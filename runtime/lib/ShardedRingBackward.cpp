//===- ShardedRingBackward.cpp - A backward step's sites around a ring ----===//
//
// The sites' part of a backward step's Hessian-vector product on a ring: the
// block model's backward step at each block, then its gradient weighted by
// each row's derivative of the merged lse along the cotangents.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/ShardedSession.h"

#include "energy/Runtime/ArtifactABI.h"
#include "energy/Runtime/Manifest.h"

#include <algorithm>
#include <map>

using namespace energy;

namespace {
void addInto(Tensor &into, const Tensor &part) {
  for (int64_t i = 0; i < into.elementCount(); ++i)
    into.set(i, into.at(i) + part.at(i));
}

/// The buffer holding the adjoint of tensor `name`, if any.
std::optional<std::string> adjointBuffer(const Manifest &manifest,
                                         const std::string &name) {
  for (const ManifestBuffer &buffer : manifest.buffers)
    if (buffer.adjointOf == name)
      return buffer.name;
  return std::nullopt;
}
} // namespace

// For a site T·L(r) with L(r) = log Σ_b exp(l_b(r)), each block's lse l_b
// and w_b = exp(l_b − L), the part of ∇⟨∇E, c⟩ is
//   T Σ_b w_b (∇J_b + (J_b − J) ∇l_b),  J_b = ⟨∇l_b, c⟩,  J = Σ_b w_b J_b:
// the block model's backward step gives T w_b (∇J_b + J_b ∇l_b) (its
// surrogate T w_b with L held) and, in the probe's adjoint over its
// gradient summed over the blocks, J; the block model's gradient with the
// weight at −1 − J gives −J T w_b ∇l_b. (All times the site's factor.)
Status ShardedSession::ringBackwardStep() {
  if (Status status = mergeRingSites(); !status)
    return status;
  Session &block = *blockSession;
  const Manifest &blockManifest = block.model().manifest();
  const Manifest &rankManifest = session.model().manifest();
  auto rowsOfCopy = [&](const std::string &name) -> std::string {
    for (const ShardLayout::ShardedTensor &tensor : layout.tensors)
      if (!tensor.gathered.empty() && tensor.gathered == name)
        return tensor.name;
    return "";
  };
  auto zerosOf = [](Session &in, const std::string &name) -> Expected<Tensor> {
    Expected<std::vector<int64_t>> shape = in.shapeOf(name);
    if (!shape)
      return shape.status();
    return Tensor(DType::F64, *shape);
  };

  // The rank's cotangents in the block model; its rows' ride with the
  // block into the copies'.
  std::vector<NamedTensor> riding;
  std::vector<std::string> adjoints;
  for (const ManifestBuffer &buffer : blockManifest.buffers) {
    if (buffer.adjointOf ||
        (buffer.cotangentOf &&
         buffer.name ==
             *buffer.cotangentOf + ENERGY_ARTIFACT_RANK_ADJOINT_SUFFIX)) {
      adjoints.push_back(buffer.name);
      continue;
    }
    if (!buffer.cotangentOf ||
        buffer.name != *buffer.cotangentOf + ".cotangent")
      continue;
    std::string rows = rowsOfCopy(*buffer.cotangentOf);
    Expected<Tensor> value =
        session.get((rows.empty() ? *buffer.cotangentOf : rows) + ".cotangent");
    if (!value)
      return value.status();
    if (!rows.empty())
      riding.emplace_back(buffer.name, std::move(*value));
    else if (Status status = block.set(buffer.name, *value); !status)
      return status;
  }

  // What each visit adds: a copy's part travels with its block to the
  // rows' adjoint, a probe's is the site's slope, the rest adds into the
  // rank's buffer of the name.
  std::map<std::string, Tensor> sums;
  auto add = [&](const std::string &name, const Tensor &part) {
    if (auto it = sums.find(name); it != sums.end())
      addInto(it->second, part);
    else
      sums.emplace(name, part);
  };
  std::vector<Tensor> travelling;
  std::vector<std::string> travellerTarget;
  std::map<std::string, size_t> travellerOf;
  for (const ShardLayout::ShardedTensor &tensor : layout.tensors) {
    std::optional<std::string> target =
        adjointBuffer(rankManifest, tensor.name);
    if (tensor.gathered.empty() || !target)
      continue; // an input's copy: its adjoint goes nowhere
    Expected<Tensor> zeros = zerosOf(session, *target);
    if (!zeros)
      return zeros.status();
    travellerOf[tensor.gathered] = travelling.size();
    travelling.push_back(std::move(*zeros));
    travellerTarget.push_back(*target);
  }
  auto travel = [&](const std::string &copy, const Tensor &part) {
    if (auto it = travellerOf.find(copy); it != travellerOf.end())
      addInto(travelling[it->second], part);
  };
  const std::vector<ShardLayout::RingSite> &sites = layout.ring->sites;
  // Per site and row, Σ_b κ T w_b J_b (the probe's adjoint) and Σ_b κ T w_b
  // (its gradient, over the blocks the row's lse admits columns of), κ the
  // site's factor in its term.
  std::vector<Tensor> slopes, scales;
  std::vector<std::string> probes;
  for (const ShardLayout::RingSite &site : sites) {
    Expected<Tensor> zeros = zerosOf(block, site.probe);
    if (!zeros)
      return zeros.status();
    if (Status status = block.set(site.probe, *zeros); !status)
      return status;
    slopes.push_back(*zeros);
    scales.push_back(std::move(*zeros));
    probes.push_back(site.probe);
  }

  auto hessianPart = [&]() -> Status {
    for (const std::string &name : adjoints) {
      Expected<Tensor> zeros = zerosOf(block, name);
      if (!zeros)
        return zeros.status();
      if (Status status = block.set(name, *zeros); !status)
        return status;
    }
    if (Status status = block.backwardStepAtCotangents(); !status)
      return status;
    for (const std::string &name : adjoints) {
      Expected<Tensor> part = block.get(name);
      if (!part)
        return part.status();
      const ManifestBuffer &buffer =
          blockManifest.buffers[*blockManifest.findBuffer(name)];
      if (buffer.adjointOf) {
        auto site = std::find_if(sites.begin(), sites.end(), [&](auto &each) {
          return each.probe == *buffer.adjointOf;
        });
        if (site != sites.end()) {
          addInto(slopes[site - sites.begin()], *part);
          continue;
        }
        if (!rowsOfCopy(*buffer.adjointOf).empty()) {
          travel(*buffer.adjointOf, *part);
          continue;
        }
      }
      if (!rankManifest.findBuffer(name))
        return Status::error("the rank's model has no buffer '" + name +
                             "' for the ring's block model's");
      add(name, *part);
    }
    Expected<std::vector<Tensor>> gradients = block.gradients(probes);
    if (!gradients)
      return gradients.status();
    for (size_t site = 0; site < sites.size(); ++site) {
      std::optional<Tensor> count;
      if (!sites[site].count.empty()) {
        Expected<Tensor> value = block.get(sites[site].count);
        if (!value)
          return value.status();
        count = std::move(*value);
      }
      const Tensor &gradient = (*gradients)[site];
      for (int64_t i = 0; i < gradient.elementCount(); ++i)
        if (!count || count->at(i) != 0)
          scales[site].set(i, scales[site].at(i) + gradient.at(i));
    }
    return Status::success();
  };
  if (Status status = aroundRing(hessianPart, travelling, std::move(riding));
      !status)
    return status;

  // Each site's gradient weighted by −J per row (1 + weight at −J; a row
  // whose site is scaled by 0 needs no J).
  for (size_t site = 0; site < sites.size(); ++site) {
    Tensor &weight = slopes[site];
    for (int64_t i = 0; i < weight.elementCount(); ++i) {
      double scale = scales[site].at(i);
      weight.set(i, -1.0 - (scale != 0 ? weight.at(i) / scale : 0.0));
    }
    if (Status status = block.set(sites[site].weight, weight); !status)
      return status;
  }
  std::vector<std::string> wanted, targets;
  for (const std::string &name : block.model().gradientNames()) {
    bool probe = std::any_of(sites.begin(), sites.end(),
                             [&](auto &site) { return site.probe == name; });
    std::optional<std::string> target =
        rankManifest.findBuffer(name + ENERGY_ARTIFACT_RANK_ADJOINT_SUFFIX)
            ? name + ENERGY_ARTIFACT_RANK_ADJOINT_SUFFIX
            : adjointBuffer(rankManifest, name);
    if (probe || (!target && !travellerOf.count(name)))
      continue;
    wanted.push_back(name);
    targets.push_back(target.value_or(""));
  }
  auto weightedPart = [&]() -> Status {
    Expected<std::vector<Tensor>> parts = block.gradients(wanted);
    if (!parts)
      return parts.status();
    for (size_t n = 0; n < wanted.size(); ++n) {
      if (targets[n].empty())
        travel(wanted[n], (*parts)[n]);
      else
        add(targets[n], (*parts)[n]);
    }
    return Status::success();
  };
  Status weighted = aroundRing(weightedPart, travelling);
  for (const ShardLayout::RingSite &site : sites)
    if (Expected<Tensor> zeros = zerosOf(block, site.weight); zeros)
      (void)block.set(site.weight, *zeros);
  if (!weighted)
    return weighted;

  for (size_t n = 0; n < travelling.size(); ++n)
    add(travellerTarget[n], travelling[n]);
  for (auto &[name, part] : sums) {
    Expected<Tensor> value = session.get(name);
    if (!value)
      return value.status();
    addInto(*value, part);
    if (Status status = session.set(name, *value); !status)
      return status;
  }
  return Status::success();
}
