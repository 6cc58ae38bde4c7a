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
#include <cmath>
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

// For a site κ T L(r) (κ its factor in the term) with L(r) = log Σ_b
// exp(l_b(r)), each block's lse l_b, w_b = exp(l_b − L) and J_b = ⟨∇l_b, c⟩,
// the part of ∇⟨∇E, c⟩ is
//   κ T Σ_b w_b (∇J_b + (J_b − J) ∇l_b),  J = Σ_b w_b J_b.
// In the block model the site is (weight + probe)·T l_b + scale·T: with the
// weight at w_b, its backward step gives κ T w_b ∇J_b and the probe's
// adjoint κ T J_b; the scale's gradient is κ T; with the weight at
// w_b (J_b − J), its gradient is the rest.
namespace energy {
/// One backward step's sites around the ring: what each visit adds, where
/// it goes in the rank's session.
class RingBackwardStep {
public:
  explicit RingBackwardStep(ShardedSession &sharded)
      : sharded(sharded), block(*sharded.blockSession),
        blockManifest(block.model().manifest()),
        rankManifest(sharded.session.model().manifest()),
        sites(sharded.layout.ring->sites) {}

  Status run() {
    if (Status status = sharded.mergeRingSites(); !status)
      return status;
    if (Status status = knowScales(); !status)
      return status;
    std::vector<ShardedSession::NamedTensor> riding;
    if (Status status = bindCotangents(riding); !status)
      return status;
    if (Status status = prepareTravellers(); !status)
      return status;
    if (Status status = sharded.aroundRing([&] { return hessianVisit(); },
                                           travelling, std::move(riding));
        !status)
      return status;
    shareFactors();
    chooseWeightedGradients();
    if (Status status =
            sharded.aroundRing([&] { return weightedVisit(); }, travelling);
        !status)
      return status;
    for (size_t n = 0; n < travelling.size(); ++n)
      add(travellerTarget[n], travelling[n]);
    return addIntoRank();
  }

private:
  /// κ T per site and row (the scale's gradient), once per session.
  Status knowScales() {
    if (!sharded.ringScales.empty())
      return Status::success();
    std::vector<std::string> scales;
    for (const ShardLayout::RingSite &site : sites)
      scales.push_back(site.scale);
    Expected<std::vector<Tensor>> gradients = block.gradients(scales);
    if (!gradients)
      return gradients.status();
    sharded.ringScales = std::move(*gradients);
    return Status::success();
  }

  /// The rank's cotangents in the block model; its rows' ride with the
  /// block into the copies' (`riding`). Notes the block's adjoints.
  Status bindCotangents(std::vector<ShardedSession::NamedTensor> &riding) {
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
      Expected<Tensor> value = sharded.session.get(
          (rows.empty() ? *buffer.cotangentOf : rows) + ".cotangent");
      if (!value)
        return value.status();
      if (!rows.empty())
        riding.emplace_back(buffer.name, std::move(*value));
      else if (Status status = block.set(buffer.name, *value); !status)
        return status;
    }
    return Status::success();
  }

  /// A copy's adjoint travels with its block to the rows' adjoint (an
  /// input's copy has none: its adjoint goes nowhere).
  Status prepareTravellers() {
    for (const ShardLayout::ShardedTensor &tensor : sharded.layout.tensors) {
      std::optional<std::string> target =
          adjointBuffer(rankManifest, tensor.name);
      if (tensor.gathered.empty() || !target)
        continue;
      Expected<Tensor> zeros = zerosOf(sharded.session, *target);
      if (!zeros)
        return zeros.status();
      travellerOf[tensor.gathered] = travelling.size();
      travelling.push_back(std::move(*zeros));
      travellerTarget.push_back(*target);
    }
    return Status::success();
  }

  /// The block model's backward step at this visit's block with the
  /// shares w_b: a copy's part travels, a probe's is the site's slope
  /// κ T J_b (the scale's is 0), the rest adds into the rank's buffer of
  /// the name.
  Status hessianVisit() {
    if (Status status = sharded.bindRingWeights(slopes.size()); !status)
      return status;
    std::vector<Tensor> &visitSlopes = slopes.emplace_back();
    for (const ShardLayout::RingSite &site : sites) {
      Expected<Tensor> zeros = zerosOf(block, site.probe);
      if (!zeros)
        return zeros.status();
      visitSlopes.push_back(std::move(*zeros));
    }
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
          return each.probe == *buffer.adjointOf ||
                 each.scale == *buffer.adjointOf;
        });
        if (site != sites.end()) {
          if (site->probe == *buffer.adjointOf)
            addInto(visitSlopes[site - sites.begin()], *part);
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
    return Status::success();
  }

  /// Each visit's slopes become the weight's factor J_b − J: J_b the slope
  /// over κ T, J their mean with the shares w_b (a row whose site is
  /// scaled by 0 needs none).
  void shareFactors() {
    const std::vector<Tensor> &merged = sharded.ringMerged;
    for (size_t site = 0; site < sites.size(); ++site) {
      Tensor mean(DType::F64, merged[site].shape());
      for (size_t visit = 0; visit < slopes.size(); ++visit)
        for (int64_t i = 0; i < mean.elementCount(); ++i) {
          double partial = sharded.ringPartials[visit][site].at(i);
          if (!std::isinf(partial))
            mean.set(i, mean.at(i) + std::exp(partial - merged[site].at(i)) *
                                         slopes[visit][site].at(i));
        }
      for (std::vector<Tensor> &visitSlopes : slopes)
        for (int64_t i = 0; i < mean.elementCount(); ++i) {
          double scale = sharded.ringScales[site].at(i);
          visitSlopes[site].set(
              i, scale != 0 ? (visitSlopes[site].at(i) - mean.at(i)) / scale
                            : 0.0);
        }
    }
  }

  /// The gradients the weighted pass asks the block model for, and the
  /// rank's buffer each adds into (a whole state's rank adjoint; empty: a
  /// copy's, which travels).
  void chooseWeightedGradients() {
    for (const std::string &name : block.model().gradientNames()) {
      bool probe = std::any_of(sites.begin(), sites.end(), [&](auto &site) {
        return site.probe == name || site.scale == name;
      });
      std::optional<std::string> target =
          rankManifest.findBuffer(name + ENERGY_ARTIFACT_RANK_ADJOINT_SUFFIX)
              ? name + ENERGY_ARTIFACT_RANK_ADJOINT_SUFFIX
              : adjointBuffer(rankManifest, name);
      if (probe || (!target && !travellerOf.count(name)))
        continue;
      wanted.push_back(name);
      targets.push_back(target.value_or(""));
    }
  }

  /// The block model's gradient at this visit's block with the weight at
  /// w_b (J_b − J).
  Status weightedVisit() {
    if (Status status =
            sharded.bindRingWeights(weightedVisits, &slopes[weightedVisits]);
        !status)
      return status;
    ++weightedVisits;
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
  }

  Status addIntoRank() {
    for (auto &[name, part] : sums) {
      Expected<Tensor> value = sharded.session.get(name);
      if (!value)
        return value.status();
      addInto(*value, part);
      if (Status status = sharded.session.set(name, *value); !status)
        return status;
    }
    return Status::success();
  }

  std::string rowsOfCopy(const std::string &name) const {
    for (const ShardLayout::ShardedTensor &tensor : sharded.layout.tensors)
      if (!tensor.gathered.empty() && tensor.gathered == name)
        return tensor.name;
    return "";
  }
  static Expected<Tensor> zerosOf(Session &in, const std::string &name) {
    Expected<std::vector<int64_t>> shape = in.shapeOf(name);
    if (!shape)
      return shape.status();
    return Tensor(DType::F64, *shape);
  }
  void add(const std::string &name, const Tensor &part) {
    if (auto it = sums.find(name); it != sums.end())
      addInto(it->second, part);
    else
      sums.emplace(name, part);
  }
  void travel(const std::string &copy, const Tensor &part) {
    if (auto it = travellerOf.find(copy); it != travellerOf.end())
      addInto(travelling[it->second], part);
  }

  ShardedSession &sharded;
  Session &block;
  const Manifest &blockManifest, &rankManifest;
  const std::vector<ShardLayout::RingSite> &sites;
  /// The block model's adjoint buffers (and whole states' rank adjoints).
  std::vector<std::string> adjoints;
  /// What the passes add to the rank's buffers, by name.
  std::map<std::string, Tensor> sums;
  /// Each copy's travelling adjoint, the rank's buffer it adds into.
  std::vector<Tensor> travelling;
  std::vector<std::string> travellerTarget;
  std::map<std::string, size_t> travellerOf;
  /// Per visit and site, each row's κ T J_b, then J_b − J.
  std::vector<std::vector<Tensor>> slopes;
  std::vector<std::string> wanted, targets;
  size_t weightedVisits = 0;
};
} // namespace energy

Status ShardedSession::ringBackwardStep() {
  return RingBackwardStep(*this).run();
}
