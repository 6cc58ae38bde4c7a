//===- ShardedSession.cpp - One rank of a sequence-sharded run ------------===//
//
// Binding the rank's rows, gathering the copies the rank's model reads, and
// putting the ranks' energies and gradients together in rank order.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/ShardedSession.h"

#include "energy/Runtime/ArtifactABI.h"
#include "energy/Runtime/Manifest.h"

#include <algorithm>
#include <cstring>

using namespace energy;

namespace {
/// A tensor's elements as [outer, rows, inner] around axis `axis`.
struct RowBlocks {
  int64_t outer = 1, rows = 1, inner = 1;
  RowBlocks(const std::vector<int64_t> &shape, unsigned axis) {
    for (unsigned i = 0; i < shape.size(); ++i) {
      if (i < axis)
        outer *= shape[i];
      else if (i > axis)
        inner *= shape[i];
    }
    rows = shape[axis];
  }
};
} // namespace

Expected<ShardedSession>
ShardedSession::create(const Model &rankModel, ShardLayout layout,
                       int64_t length, SessionOptions options,
                       Communicator &communicator, const Model *blockModel) {
  if (layout.stride != 1 && layout.stride != communicator.size())
    return Status::error("--shard " + layout.dim +
                         ": the rank's model was "
                         "written for rows striped over " +
                         std::to_string(layout.stride) + " ranks, not " +
                         std::to_string(communicator.size()));
  if (length < communicator.size())
    return Status::error("--shard " + layout.dim + ": dim " + layout.dim +
                         " is " + std::to_string(length) +
                         ", fewer rows than the " +
                         std::to_string(communicator.size()) + " ranks");
  int64_t begin = 0, end = 0;
  shardOf(length, communicator.rank(), communicator.size(), begin, end);
  options.dims[layout.dim] = end - begin;
  if (!layout.wholeDim.empty())
    options.dims[layout.wholeDim] = length;
  if (!layout.offsetDim.empty())
    options.dims[layout.offsetDim] =
        layout.stride == 1 ? begin : communicator.rank();
  if (!layout.firstRankConst.empty())
    options.consts[layout.firstRankConst] = communicator.rank() == 0 ? 1 : 0;
  Expected<Session> session = rankModel.session(options);
  if (!session)
    return session.status();
  std::optional<Session> blockSession;
  if (layout.ring) {
    if (!blockModel)
      return Status::error("--shard " + layout.dim +
                           " --ring: the rank's model needs its block model");
    if (length % communicator.size() != 0)
      return Status::error("--shard " + layout.dim + " --ring: dim " +
                           layout.dim + " is " + std::to_string(length) +
                           ", not a multiple of the " +
                           std::to_string(communicator.size()) +
                           " ranks (a ring passes blocks of one length)");
    options.dims[layout.ring->blockDim] = end - begin;
    if (!layout.ring->blockOffsetDim.empty())
      options.dims[layout.ring->blockOffsetDim] = 0;
    Expected<Session> block = blockModel->session(options);
    if (!block)
      return block.status().withContext("the block model");
    blockSession = std::move(*block);
  }
  return ShardedSession(std::move(*session), std::move(blockSession),
                        std::move(layout), length, begin, end, communicator);
}

int64_t ShardedSession::globalRow(int rank, int64_t row) const {
  if (layout.stride != 1)
    return rank + row * layout.stride;
  int64_t rankBegin = 0, rankEnd = 0;
  shardOf(length, rank, communicator->size(), rankBegin, rankEnd);
  return rankBegin + row;
}

const ShardLayout::ShardedTensor *
ShardedSession::sharded(const std::string &name) const {
  for (const ShardLayout::ShardedTensor &tensor : layout.tensors)
    if (tensor.name == name)
      return &tensor;
  return nullptr;
}

void ShardedSession::invalidateCopies(bool statesOnly) {
  ringStale = true;
  for (const ShardLayout::ShardedTensor &tensor : layout.tensors) {
    if (tensor.gathered.empty())
      continue;
    const Manifest &manifest = session.model().manifest();
    std::optional<size_t> buffer = manifest.findBuffer(tensor.name);
    if (!statesOnly ||
        (buffer && manifest.buffers[*buffer].role == TensorRole::State))
      staleCopies.insert(tensor.name);
  }
}

namespace {
/// The error of a whole tensor whose axis of the dim is not the length.
Status wholeShapeError(const std::string &name, const std::string &shape,
                       unsigned axis, const std::string &dim, int64_t length) {
  return Status::error("tensor '" + name + "' has shape " + shape +
                           "; its axis " + std::to_string(axis) + " is dim " +
                           dim + ", which is " + std::to_string(length),
                       ErrorKind::Shape);
}
} // namespace

Expected<std::map<std::string, SafetensorsRows>> ShardedSession::rowsOf(
    const std::map<std::string, std::vector<int64_t>> &shapes) const {
  std::map<std::string, SafetensorsRows> rows;
  for (const auto &[name, shape] : shapes) {
    const ShardLayout::ShardedTensor *tensor = sharded(name);
    if (!tensor)
      continue;
    if (shape.size() <= tensor->axis || shape[tensor->axis] != length)
      return wholeShapeError(name, Tensor::shapeText(shape), tensor->axis,
                             layout.dim, length);
    SafetensorsRows &selected = rows[name];
    selected.axis = tensor->axis;
    for (int64_t row = 0; row < end - begin; ++row)
      selected.indices.push_back(globalRow(communicator->rank(), row));
  }
  return rows;
}

Status ShardedSession::setRows(const std::string &name, const Tensor &rows) {
  const ShardLayout::ShardedTensor *tensor = sharded(name);
  if (!tensor)
    return Status::error("tensor '" + name + "' has no axis of dim " +
                         layout.dim + " to bind the rank's rows of");
  if (rows.rank() <= tensor->axis || rows.shape()[tensor->axis] != end - begin)
    return Status::error("the rank's rows of tensor '" + name +
                             "' have shape " + rows.shapeString() +
                             "; its axis " + std::to_string(tensor->axis) +
                             " is the rank's " + std::to_string(end - begin) +
                             " rows of dim " + layout.dim,
                         ErrorKind::Shape);
  ringStale = true;
  if (!tensor->gathered.empty())
    staleCopies.insert(name);
  return session.set(name, rows);
}

Status ShardedSession::set(const std::string &name, const Tensor &whole) {
  ringStale = true;
  const ShardLayout::ShardedTensor *tensor = sharded(name);
  if (tensor && !tensor->gathered.empty())
    staleCopies.insert(name);
  if (!tensor)
    return session.set(name, whole);
  if (whole.rank() <= tensor->axis || whole.shape()[tensor->axis] != length)
    return wholeShapeError(name, whole.shapeString(), tensor->axis, layout.dim,
                           length);
  std::vector<int64_t> shape = whole.shape();
  shape[tensor->axis] = end - begin;
  Tensor rows(whole.dtype(), shape);
  RowBlocks blocks(whole.shape(), tensor->axis);
  int64_t count = end - begin;
  int rank = communicator->rank();
  for (int64_t o = 0; o < blocks.outer; ++o)
    for (int64_t r = 0; r < count; ++r) {
      int64_t from = (o * length + globalRow(rank, r)) * blocks.inner;
      for (int64_t i = 0; i < blocks.inner; ++i)
        rows.set((o * count + r) * blocks.inner + i, whole.at(from + i));
    }
  return session.set(name, rows);
}

Expected<Tensor> ShardedSession::allGatherRows(const Tensor &rows,
                                               unsigned axis) {
  RowBlocks blocks(rows.shape(), axis);
  int size = communicator->size();
  // Every rank sends as many rows as the longest part (shardOf's first).
  int64_t first = 0, longest = 0;
  shardOf(length, 0, size, first, longest);
  std::vector<double> sent(blocks.outer * longest * blocks.inner, 0.0);
  for (int64_t o = 0; o < blocks.outer; ++o)
    for (int64_t r = 0; r < blocks.rows; ++r)
      for (int64_t i = 0; i < blocks.inner; ++i)
        sent[(o * longest + r) * blocks.inner + i] =
            rows.at((o * blocks.rows + r) * blocks.inner + i);
  std::vector<double> received;
  if (Status status = communicator->allGather(sent, received); !status)
    return status;
  std::vector<int64_t> shape = rows.shape();
  shape[axis] = length;
  Tensor whole(rows.dtype(), shape);
  for (int rank = 0; rank < size; ++rank) {
    int64_t rankBegin = 0, rankEnd = 0;
    shardOf(length, rank, size, rankBegin, rankEnd);
    const double *part = received.data() + rank * sent.size();
    for (int64_t o = 0; o < blocks.outer; ++o)
      for (int64_t r = 0; r < rankEnd - rankBegin; ++r) {
        int64_t to = (o * length + globalRow(rank, r)) * blocks.inner;
        for (int64_t i = 0; i < blocks.inner; ++i)
          whole.set(to + i, part[(o * longest + r) * blocks.inner + i]);
      }
  }
  return whole;
}

Status ShardedSession::gatherCopies() {
  if (layout.ring)
    return mergeRingSites(); // a ring streams the copies instead
  for (const ShardLayout::ShardedTensor &tensor : layout.tensors) {
    if (tensor.gathered.empty() || !staleCopies.count(tensor.name))
      continue;
    Expected<Tensor> rows = session.get(tensor.name);
    if (!rows)
      return rows.status();
    Expected<Tensor> whole = allGatherRows(*rows, tensor.axis);
    if (!whole)
      return whole.status();
    if (Status status = session.set(tensor.gathered, *whole); !status)
      return status;
    staleCopies.erase(tensor.name);
  }
  return Status::success();
}

Expected<double> ShardedSession::energy() {
  if (Status status = gatherCopies(); !status)
    return status;
  Expected<double> rankEnergy = session.energy();
  if (!rankEnergy)
    return rankEnergy.status();
  std::vector<double> sum{*rankEnergy};
  if (Status status = communicator->allReduceSum(sum); !status)
    return status;
  return sum[0];
}

Status ShardedSession::sumOverRanks(Tensor &tensor) {
  std::vector<double> values(tensor.elementCount());
  for (int64_t i = 0; i < tensor.elementCount(); ++i)
    values[i] = tensor.at(i);
  if (Status status = communicator->allReduceSum(values); !status)
    return status;
  for (int64_t i = 0; i < tensor.elementCount(); ++i)
    tensor.set(i, values[i]);
  return Status::success();
}

Expected<Tensor> ShardedSession::rankGradient(const std::string &name) {
  if (layout.ring) {
    Expected<std::vector<Tensor>> parts = ringGradients({name});
    if (!parts)
      return parts.status();
    return std::move(parts->front());
  }
  if (Status status = gatherCopies(); !status)
    return status;
  const ShardLayout::ShardedTensor *tensor = sharded(name);
  if (!tensor || tensor->gathered.empty()) {
    Expected<Tensor> rankGradient = session.gradient(name);
    if (!rankGradient || tensor)
      return rankGradient;
    if (Status status = sumOverRanks(*rankGradient); !status)
      return status;
    return rankGradient;
  }
  // The rows' own gradient and the gradient of the copy (every rank's
  // reads of every row), from one kernel where the artifact has one.
  Expected<std::vector<Tensor>> both =
      session.gradients({name, tensor->gathered});
  if (!both)
    return both.status();
  Expected<Tensor> rankGradient = std::move((*both)[0]);
  Expected<Tensor> copyGradient = std::move((*both)[1]);
  Expected<std::vector<double>> rows =
      sumRowsOverRanks(*copyGradient, tensor->axis);
  if (!rows)
    return rows.status();
  for (int64_t at = 0; at < rankGradient->elementCount(); ++at)
    rankGradient->set(at, rankGradient->at(at) + (*rows)[at]);
  return rankGradient;
}

Expected<std::vector<double>>
ShardedSession::sumRowsOverRanks(const Tensor &whole, unsigned axis) {
  // Each rank's rows go to that rank (a reduce-scatter).
  RowBlocks blocks(whole.shape(), axis);
  int size = communicator->size();
  std::vector<size_t> counts(size);
  std::vector<double> values;
  values.reserve(whole.elementCount());
  for (int rank = 0; rank < size; ++rank) {
    int64_t rankBegin = 0, rankEnd = 0;
    shardOf(length, rank, size, rankBegin, rankEnd);
    counts[rank] = blocks.outer * (rankEnd - rankBegin) * blocks.inner;
    for (int64_t o = 0; o < blocks.outer; ++o)
      for (int64_t r = 0; r < rankEnd - rankBegin; ++r) {
        int64_t from = (o * length + globalRow(rank, r)) * blocks.inner;
        for (int64_t i = 0; i < blocks.inner; ++i)
          values.push_back(whole.at(from + i));
      }
  }
  std::vector<double> rows;
  if (Status status = communicator->reduceScatterSum(values, counts, rows);
      !status)
    return status;
  return rows;
}

Expected<std::vector<Tensor>>
ShardedSession::rankGradients(const std::vector<std::string> &names) {
  if (layout.ring)
    return ringGradients(names);
  std::vector<Tensor> parts;
  for (const std::string &name : names) {
    Expected<Tensor> part = rankGradient(name);
    if (!part)
      return part.status();
    parts.push_back(std::move(*part));
  }
  return parts;
}

Expected<Tensor> ShardedSession::gradient(const std::string &name) {
  Expected<std::vector<Tensor>> whole = gradients({name});
  if (!whole)
    return whole.status();
  return std::move(whole->front());
}

Expected<std::vector<Tensor>>
ShardedSession::gradients(const std::vector<std::string> &names) {
  Expected<std::vector<Tensor>> parts = rankGradients(names);
  if (!parts)
    return parts.status();
  for (size_t n = 0; n < names.size(); ++n)
    if (const ShardLayout::ShardedTensor *tensor = sharded(names[n])) {
      Expected<Tensor> whole = allGatherRows((*parts)[n], tensor->axis);
      if (!whole)
        return whole.status();
      (*parts)[n] = std::move(*whole);
    }
  return parts;
}

std::vector<std::string> ShardedSession::stateNames() const {
  std::vector<std::string> names;
  for (const ManifestBuffer &buffer : session.model().manifest().buffers)
    if (isDefaultGradient(buffer)) {
      bool copy = false;
      for (const ShardLayout::ShardedTensor &tensor : layout.tensors)
        copy = copy || tensor.gathered == buffer.name;
      if (!copy)
        names.push_back(buffer.name);
    }
  return names;
}

std::vector<std::string> ShardedSession::suppliedTensors() const {
  const std::string suffix = ENERGY_ARTIFACT_SUPPLIED_GRADIENT_SUFFIX;
  std::vector<std::string> supplied;
  for (const ManifestBuffer &buffer : session.model().manifest().buffers) {
    const std::string &name = buffer.name;
    if (buffer.kind == BufferKind::Tensor && name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), std::string::npos, suffix) ==
            0)
      supplied.push_back(name.substr(0, name.size() - suffix.size()));
  }
  return supplied;
}

Status ShardedSession::supplyGradients() {
  for (const std::string &name : suppliedTensors()) {
    Expected<Tensor> gradient = rankGradient(name);
    if (!gradient)
      return gradient.status();
    if (Status status = session.set(
            name + ENERGY_ARTIFACT_SUPPLIED_GRADIENT_SUFFIX, *gradient);
        !status)
      return status;
  }
  return Status::success();
}

Expected<int64_t> ShardedSession::run(std::optional<int64_t> steps) {
  if (!session.model().hasDynamics())
    return Status::error("model " + session.model().name() +
                         " has no dynamics to run");
  if (suppliedTensors().empty())
    return Status::error(
        "the rank's model of " + session.model().name() +
        " computes its own gradient in each step; a sharded run needs it "
        "compiled with supplied gradients (energy-supplied-gradients)");
  Expected<int64_t> count = session.stepsToTake(steps);
  if (!count)
    return count.status();
  for (int64_t step = 0; step < *count; ++step) {
    if (Status status = supplyGradients(); !status)
      return status.withContext("step " + std::to_string(step));
    if (Status status = session.step(); !status)
      return status;
    invalidateCopies(/*statesOnly=*/true);
  }
  return *count;
}

Expected<Tensor> ShardedSession::get(const std::string &name) {
  Expected<Tensor> value = session.get(name);
  if (!value)
    return value.status();
  if (const ShardLayout::ShardedTensor *tensor = sharded(name))
    return allGatherRows(*value, tensor->axis);
  return value;
}
