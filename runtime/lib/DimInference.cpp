//===- DimInference.cpp - Resolving a model's dims ------------------------===//
//
// Given dims, then inference from bound tensors' axes, then defaults, then
// derived dims in declaration order.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/DimInference.h"

using namespace energy;

Status energy::resolveDims(
    const Manifest &manifest, const std::map<std::string, int64_t> &given,
    const std::string &givenBy,
    const std::map<std::string, std::vector<int64_t>> &boundShapes,
    std::vector<int64_t> &values) {
  std::vector<std::optional<int64_t>> known(manifest.dims.size());
  std::vector<std::string> sources(manifest.dims.size());
  for (const auto &[name, value] : given) {
    std::optional<size_t> found = manifest.findDim(name);
    if (!found)
      return Status::error(givenBy + " sets dim '" + name +
                           "', which the model does not have");
    size_t index = *found;
    known[index] = value;
    sources[index] = givenBy;
  }
  // Inference: an axis that is just a free dim takes the size of the bound
  // tensor's axis.
  for (const ManifestBuffer &buffer : manifest.buffers) {
    auto value = boundShapes.find(buffer.name);
    if (value == boundShapes.end())
      continue;
    if (value->second.size() != buffer.shape.size())
      return Status::error("tensor '" + buffer.name + "' has rank " +
                               std::to_string(value->second.size()) +
                               "; the model declares it with rank " +
                               std::to_string(buffer.shape.size()),
                           ErrorKind::Shape);
    for (size_t axis = 0; axis < buffer.shape.size(); ++axis) {
      std::optional<std::string> dimName = buffer.shape[axis].singleDim();
      if (!dimName)
        continue;
      size_t index = *manifest.findDim(*dimName);
      if (manifest.dims[index].derived)
        continue;
      int64_t size = value->second[axis];
      std::string source = "tensor '" + buffer.name + "'";
      if (known[index] && *known[index] != size)
        return Status::error("dim " + *dimName + " is " +
                                 std::to_string(*known[index]) + " from " +
                                 sources[index] + " but " + source +
                                 " gives it " + std::to_string(size),
                             ErrorKind::Shape);
      known[index] = size;
      sources[index] = source;
    }
  }
  for (size_t i = 0; i < manifest.dims.size(); ++i) {
    const ManifestDim &dim = manifest.dims[i];
    if (dim.derived) {
      Expected<int64_t> value =
          dim.derived->evaluate([&](const std::string &name) {
            return known[*manifest.findDim(name)];
          });
      if (!value)
        return value.status().withContext("dim " + dim.name + " (" +
                                          dim.derived->text() + ")");
      if (*value < 0)
        return Status::error("dim " + dim.name + " (" + dim.derived->text() +
                             ") is negative: " + std::to_string(*value));
      known[i] = *value;
    } else if (!known[i]) {
      if (!dim.defaultValue)
        return Status::error("dim " + dim.name +
                             " is not bound; give it a value (--dim " +
                             dim.name + "=...)");
      known[i] = dim.defaultValue;
    }
  }
  values.clear();
  for (const std::optional<int64_t> &value : known)
    values.push_back(*value);
  return Status::success();
}
