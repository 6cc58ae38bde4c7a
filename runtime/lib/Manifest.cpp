//===- Manifest.cpp - What an artifact says about its model ---------------===//
//
// The manifest is read into a JSON tree first, then checked field by field
// (presence, JSON type, allowed values) and finally for consistency (names
// refer to things that exist, names are unique, derived dims use earlier
// dims only, copies do not form a cycle).
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/Manifest.h"

#include "ManifestFields.h"

#include "energy/Runtime/ArtifactABI.h"
#include "energy/Runtime/CpuFeatures.h"

#include <cstdio>
#include <set>

using namespace energy;
using namespace energy::manifest;
using json::Value;
using Kind = json::Value::Kind;

//===----------------------------------------------------------------------===//
// Reading the JSON
//===----------------------------------------------------------------------===//

/// Checks that every dim `expr` uses is declared, in `declared`.
static Status checkDimsDeclared(const DimExpr &expr,
                                const std::set<std::string> &declared,
                                const std::string &where) {
  for (const std::string &dim : expr.dimNames())
    if (!declared.count(dim))
      return Status::error(where + " uses dim " + dim +
                           ", which is not declared");
  return Status::success();
}

static Status readDims(const Value &list, Manifest &manifest) {
  std::set<std::string> declared;
  for (size_t i = 0; i < list.elements().size(); ++i) {
    const Value &entry = list.elements()[i];
    std::string where = "dims[" + std::to_string(i) + "]";
    if (!entry.is(Kind::Object))
      return wrongKind(where, "an object", entry);
    ManifestDim dim;
    if (Status status = readString(entry, where, "name", dim.name); !status)
      return status;
    where = "dim " + dim.name;
    if (declared.count(dim.name))
      return Status::error(where + " is declared twice");
    Expected<const Value *> byDefault =
        field(entry, where, "default", Kind::Number, true, true);
    if (!byDefault)
      return byDefault.status();
    if (*byDefault) {
      Expected<int64_t> value = readInteger(**byDefault, where + ": default");
      if (!value)
        return value.status();
      if (*value < 0)
        return Status::error(where + ": negative default " +
                             std::to_string(*value));
      dim.defaultValue = *value;
    }
    Expected<const Value *> derived =
        field(entry, where, "derived", Kind::Array, true, true);
    if (!derived)
      return derived.status();
    if (*derived) {
      if (dim.defaultValue)
        return Status::error(where + " has both a default and a derivation");
      Expected<DimExpr> expr = readDimExpr(**derived, where + ": derived");
      if (!expr)
        return expr.status();
      for (const std::string &used : expr->dimNames())
        if (!declared.count(used))
          return Status::error(where + " is derived from dim " + used +
                               ", which is not declared before it");
      dim.derived = std::move(*expr);
    }
    declared.insert(dim.name);
    manifest.dims.push_back(std::move(dim));
  }
  return Status::success();
}

static Status readConsts(const Value &list, Manifest &manifest) {
  for (size_t i = 0; i < list.elements().size(); ++i) {
    const Value &entry = list.elements()[i];
    std::string where = "consts[" + std::to_string(i) + "]";
    if (!entry.is(Kind::Object))
      return wrongKind(where, "an object", entry);
    ManifestConst constant;
    if (Status status = readString(entry, where, "name", constant.name);
        !status)
      return status;
    where = "const " + constant.name;
    if (manifest.findConst(constant.name))
      return Status::error(where + " is declared twice");
    Expected<const Value *> value = field(entry, where, "value", Kind::Number);
    if (!value)
      return value.status();
    constant.value = (*value)->number();
    manifest.consts.push_back(std::move(constant));
  }
  return Status::success();
}

static Expected<InitSpec> readInit(const Value &object,
                                   const std::string &where) {
  InitSpec init;
  std::string kindName;
  if (Status status = readString(object, where, "kind", kindName); !status)
    return status;
  std::optional<InitKind> kind = initKindFromName(kindName);
  if (!kind)
    return Status::error(path(where, "unknown initialiser \"" + kindName +
                                         "\" (known: zeros, ones, eye, "
                                         "normal, uniform, copy)"));
  init.kind = *kind;
  size_t expected = initArgumentCount(init.kind);
  Expected<const Value *> args =
      field(object, where, "args", Kind::Array, true, expected == 0);
  if (!args)
    return args.status();
  if (*args) {
    for (const Value &arg : (*args)->elements()) {
      if (!arg.is(Kind::Number))
        return wrongKind(path(where, "args"), "numbers", arg);
      init.args.push_back(arg.number());
    }
  }
  if (init.args.size() != expected)
    return Status::error(
        path(where, kindName + " takes " + std::to_string(expected) +
                        " arguments, not " + std::to_string(init.args.size())));
  if (init.kind == InitKind::Copy)
    if (Status status = readString(object, where, "source", init.source);
        !status)
      return status;
  return init;
}

static Status readBuffer(const Value &entry, std::string where,
                         Manifest &manifest) {
  if (!entry.is(Kind::Object))
    return wrongKind(where, "an object", entry);
  ManifestBuffer buffer;
  if (Status status = readString(entry, where, "name", buffer.name); !status)
    return status;
  where = "buffer '" + buffer.name + "'";
  if (manifest.findBuffer(buffer.name))
    return Status::error(where + " is declared twice");
  std::string kind;
  if (Status status = readString(entry, where, "kind", kind); !status)
    return status;
  if (kind == "tensor")
    buffer.kind = BufferKind::Tensor;
  else if (kind == "gradient")
    buffer.kind = BufferKind::Gradient;
  else if (kind == "output")
    buffer.kind = BufferKind::Output;
  else
    return Status::error(where + ": unknown kind \"" + kind +
                         "\" (known: tensor, gradient, output)");
  Expected<const Value *> shape = field(entry, where, "shape", Kind::Array);
  if (!shape)
    return shape.status();
  for (size_t axis = 0; axis < (*shape)->elements().size(); ++axis) {
    Expected<DimExpr> expr =
        readDimExpr((*shape)->elements()[axis],
                    where + ": shape axis " + std::to_string(axis));
    if (!expr)
      return expr.status();
    buffer.shape.push_back(std::move(*expr));
  }
  if (buffer.kind == BufferKind::Gradient) {
    if (Status status = readString(entry, where, "tensor", buffer.gradientOf);
        !status)
      return status;
  } else if (buffer.kind == BufferKind::Tensor) {
    std::string role;
    if (Status status = readString(entry, where, "role", role); !status)
      return status;
    if (role == "input")
      buffer.role = TensorRole::Input;
    else if (role == "param")
      buffer.role = TensorRole::Param;
    else if (role == "state")
      buffer.role = TensorRole::State;
    else
      return Status::error(where + ": unknown role \"" + role +
                           "\" (known: input, param, state)");
    Expected<const Value *> init =
        field(entry, where, "init", Kind::Object, true, true);
    if (!init)
      return init.status();
    if (*init) {
      Expected<InitSpec> spec = readInit(**init, where + ": init");
      if (!spec)
        return spec.status();
      buffer.init = std::move(*spec);
    }
    if (Status status = readOptionalString(entry, where, "optimizer_state",
                                           buffer.optimizerStateOf);
        !status)
      return status;
    for (auto [key, out] : {std::pair{"adjoint_of", &buffer.adjointOf},
                            std::pair{"cotangent_of", &buffer.cotangentOf},
                            std::pair{"solver_of", &buffer.solverOf},
                            std::pair{"deferred_of", &buffer.deferredOf},
                            std::pair{"cache_flag", &buffer.cacheFlag},
                            std::pair{"flag_of", &buffer.flagOf},
                            std::pair{"incoming_of", &buffer.incomingOf}})
      if (Status status = readOptionalString(entry, where, key, *out); !status)
        return status;
    for (auto [key, flag] : {std::pair{"run_constant", &buffer.runConstant},
                             std::pair{"per_call", &buffer.perCall}}) {
      Expected<const Value *> value =
          field(entry, where, key, Kind::Bool, true, true);
      if (!value)
        return value.status();
      *flag = *value && (*value)->boolean();
    }
  }
  manifest.buffers.push_back(std::move(buffer));
  return Status::success();
}

/// `target`: what the code was compiled for. An object (arch, cpu, and the
/// CPU features the code may use, each one the runtime can check); a
/// string, as older compilers wrote, is a description only; absent is
/// allowed too.
static Status readTarget(const Value &root, Manifest &manifest) {
  const Value *target = root.find("target");
  if (!target)
    return Status::success();
  if (target->is(Kind::String)) {
    manifest.targetDescription = target->string();
    return Status::success();
  }
  if (!target->is(Kind::Object))
    return wrongKind("target", "an object (or a string)", *target);
  ManifestTarget out;
  if (Status status = readString(*target, "target", "arch", out.arch); !status)
    return status;
  if (Status status = readString(*target, "target", "cpu", out.cpu); !status)
    return status;
  if (Status status = readStrings(*target, "target", "features",
                                  "strings (CPU feature names)", out.features);
      !status)
    return status;
  for (const std::string &feature : out.features)
    if (!isKnownCpuFeature(feature)) {
      std::string known;
      for (const std::string &name : knownCpuFeatures())
        known += (known.empty() ? "" : ", ") + name;
      return Status::error(
          "target: features: unknown CPU feature \"" + feature +
          "\", which this runtime cannot check (known: " + known + ")");
    }
  if (const Value *device = target->find("device")) {
    if (!device->is(Kind::String) || device->string() != "cuda")
      return wrongKind("target: device", "\"cuda\" (or absent)", *device);
    out.device = device->string();
    if (Status status = readStrings(*target, "target", "device_archs",
                                    "strings (\"sm_90\")", out.deviceArchs);
        !status)
      return status;
  }
  manifest.target = std::move(out);
  return Status::success();
}

/// An object mapping names to kernel symbols.
/// `plugins`: [{name, version, library, symbols: [...]}], optional.
static Status readPlugins(const Value &root, Manifest &manifest) {
  Expected<const Value *> list =
      field(root, "", "plugins", Kind::Array, true, true);
  if (!list || !*list)
    return list ? Status::success() : list.status();
  for (size_t i = 0; i < (*list)->elements().size(); ++i) {
    const Value &entry = (*list)->elements()[i];
    std::string where = "plugins[" + std::to_string(i) + "]";
    if (!entry.is(Kind::Object))
      return wrongKind(where, "an object", entry);
    ManifestPlugin plugin;
    for (auto [key, out] : {std::pair{"name", &plugin.name},
                            std::pair{"version", &plugin.version},
                            std::pair{"library", &plugin.library}})
      if (Status status = readString(entry, where, key, *out); !status)
        return status;
    if (Status status =
            readStrings(entry, where, "symbols", "strings", plugin.symbols);
        !status)
      return status;
    manifest.plugins.push_back(std::move(plugin));
  }
  return Status::success();
}

static Status readKernelMap(const Value &kernels, const std::string &key,
                            std::map<std::string, std::string> &out) {
  Expected<const Value *> map = field(kernels, "kernels", key, Kind::Object);
  if (!map)
    return map.status();
  for (const auto &[name, symbol] : (*map)->members()) {
    if (!symbol.is(Kind::String))
      return wrongKind("kernels: " + key + ": " + name, "a string (a symbol)",
                       symbol);
    out[name] = symbol.string();
  }
  return Status::success();
}

static Status readKernels(const Value &kernels, Manifest &manifest) {
  ManifestKernels &out = manifest.kernels;
  if (Status status = readString(kernels, "kernels", "energy", out.energy);
      !status)
    return status;
  if (kernels.find("terms"))
    if (Status status = readKernelMap(kernels, "terms", out.terms); !status)
      return status;
  if (Status status = readKernelMap(kernels, "gradients", out.gradients);
      !status)
    return status;
  if (Status status = readKernelMap(kernels, "outputs", out.outputs); !status)
    return status;
  Expected<const Value *> joints =
      field(kernels, "kernels", "joint_gradients", Kind::Array, false, true);
  if (!joints)
    return joints.status();
  if (*joints)
    for (const Value &entry : (*joints)->elements()) {
      const std::string where = "kernels: joint_gradients";
      if (!entry.is(Kind::Object))
        return wrongKind(where, "objects {tensors, kernel}", entry);
      ManifestKernels::JointGradient joint;
      if (Status status = readString(entry, where, "kernel", joint.kernel);
          !status)
        return status;
      if (Status status = readStrings(entry, where, "tensors", "tensor names",
                                      joint.tensors);
          !status)
        return status;
      out.jointGradients.push_back(std::move(joint));
    }
  if (Status status = readOptionalString(kernels, "kernels", "step", out.step);
      !status)
    return status;
  if (Status status =
          readOptionalString(kernels, "kernels", "until", out.until);
      !status)
    return status;
  for (auto [key, part] : {std::pair{"run_begin", &out.runBegin},
                           std::pair{"run_finish", &out.runFinish}})
    if (Status status = readOptionalString(kernels, "kernels", key, *part);
        !status)
      return status;
  if (kernels.find("losses"))
    if (Status status = readKernelMap(kernels, "losses", out.losses); !status)
      return status;
  Expected<const Value *> backward =
      field(kernels, "kernels", "backward", Kind::Object, true, true);
  if (!backward)
    return backward.status();
  if (*backward) {
    ManifestKernels::Backward parts;
    for (auto [key, part] :
         {std::pair{"seed", &parts.seed}, std::pair{"step", &parts.step},
          std::pair{"finish", &parts.finish}})
      if (Status status =
              readString(**backward, "kernels: backward", key, *part);
          !status)
        return status;
    if (Status status = readOptionalString(**backward, "kernels: backward",
                                           "cotangents", parts.cotangents);
        !status)
      return status;
    std::optional<std::string> mode;
    if (Status status =
            readOptionalString(**backward, "kernels: backward", "mode", mode);
        !status)
      return status;
    if (mode && *mode != "implicit" && *mode != "unrolled")
      return Status::error("kernels: backward: unknown mode '" + *mode +
                           "' (expected implicit or unrolled)");
    parts.implicit = mode && *mode == "implicit";
    out.backward = std::move(parts);
  }
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Consistency
//===----------------------------------------------------------------------===//

/// The tensor buffer `name`, for a reference from `where`.
static Status checkTensorReference(const Manifest &manifest,
                                   const std::string &name,
                                   const std::string &where) {
  std::optional<size_t> index = manifest.findBuffer(name);
  if (!index)
    return Status::error(where + " refers to '" + name +
                         "', which is not a buffer of the manifest");
  if (manifest.buffers[*index].kind != BufferKind::Tensor)
    return Status::error(where + " refers to '" + name +
                         "', which is not a tensor");
  return Status::success();
}

static Status checkConsistency(const Manifest &manifest) {
  std::set<std::string> dims;
  for (const ManifestDim &dim : manifest.dims)
    dims.insert(dim.name);
  for (const ManifestBuffer &buffer : manifest.buffers) {
    std::string where = "buffer '" + buffer.name + "'";
    for (size_t axis = 0; axis < buffer.shape.size(); ++axis)
      if (Status status =
              checkDimsDeclared(buffer.shape[axis], dims,
                                where + ": shape axis " + std::to_string(axis));
          !status)
        return status;
    if (buffer.kind == BufferKind::Gradient)
      if (Status status = checkTensorReference(manifest, buffer.gradientOf,
                                               where + " (a gradient)");
          !status)
        return status;
    if (buffer.optimizerStateOf)
      if (Status status = checkTensorReference(
              manifest, *buffer.optimizerStateOf, where + ": optimizer_state");
          !status)
        return status;
    if (buffer.adjointOf)
      if (Status status = checkTensorReference(manifest, *buffer.adjointOf,
                                               where + ": adjoint_of");
          !status)
        return status;
    if (buffer.incomingOf) {
      std::optional<size_t> of = manifest.findBuffer(*buffer.incomingOf);
      if (!of || (manifest.buffers[*of].kind != BufferKind::Tensor &&
                  manifest.buffers[*of].kind != BufferKind::Output))
        return Status::error(where + ": incoming_of refers to '" +
                             *buffer.incomingOf +
                             "', which is not a tensor or an output");
    }
    if (buffer.init && buffer.init->kind == InitKind::Copy) {
      if (Status status = checkTensorReference(manifest, buffer.init->source,
                                               where + ": init copy");
          !status)
        return status;
      // Follow the chain of copies: it must end at a tensor that is not a
      // copy.
      std::set<std::string> seen = {buffer.name};
      const ManifestBuffer *source = &buffer;
      while (source->init && source->init->kind == InitKind::Copy) {
        if (!seen.insert(source->init->source).second)
          return Status::error(where +
                               ": init copy: the copies form a cycle "
                               "through '" +
                               source->init->source + "'");
        std::optional<size_t> next = manifest.findBuffer(source->init->source);
        if (!next)
          break; // Reported when that buffer is checked.
        source = &manifest.buffers[*next];
      }
    }
    if (buffer.init && buffer.init->kind == InitKind::Eye &&
        buffer.shape.empty())
      return Status::error(where + ": initialiser eye needs at least one axis");
  }

  const ManifestKernels &kernels = manifest.kernels;
  for (const auto &[tensor, symbol] : kernels.gradients) {
    std::string where = "kernels: gradients: '" + tensor + "'";
    if (Status status = checkTensorReference(manifest, tensor, where); !status)
      return status;
    if (!manifest.findGradientBuffer(tensor))
      return Status::error(where + ": there is no gradient buffer of '" +
                           tensor + "'");
  }
  for (const ManifestKernels::JointGradient &joint : kernels.jointGradients)
    for (const std::string &tensor : joint.tensors)
      if (!kernels.gradients.count(tensor))
        return Status::error("kernels: joint_gradients: '" + joint.kernel +
                             "': '" + tensor +
                             "' has no gradient kernel of its own");
  for (const auto &[output, symbol] : kernels.outputs) {
    std::optional<size_t> index = manifest.findBuffer(output);
    if (!index || manifest.buffers[*index].kind != BufferKind::Output)
      return Status::error("kernels: outputs: '" + output +
                           "' is not an output buffer");
  }
  for (const ManifestBuffer &buffer : manifest.buffers)
    if (buffer.kind == BufferKind::Output &&
        !kernels.outputs.count(buffer.name))
      return Status::error("output '" + buffer.name +
                           "' has no kernel in kernels: outputs");
  if (kernels.until && !kernels.step)
    return Status::error("kernels: until is given without a step kernel");
  if (manifest.steps.has_value() != kernels.step.has_value())
    return Status::error(manifest.steps
                             ? "dynamics are given but kernels: step is null"
                             : "kernels: step is given but dynamics is null");
  if (manifest.steps)
    if (Status status =
            checkDimsDeclared(*manifest.steps, dims, "dynamics: steps");
        !status)
      return status;
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Manifest
//===----------------------------------------------------------------------===//

Expected<Manifest> Manifest::parse(std::string_view text) {
  Expected<Value> document = Value::parse(text);
  if (!document)
    return document.status();
  const Value &root = *document;
  if (!root.is(Kind::Object))
    return wrongKind("the manifest", "an object", root);

  Manifest manifest;
  std::string format;
  if (Status status = readString(root, "", "format", format); !status)
    return status;
  if (format != "energy-artifact")
    return Status::error("format is \"" + format +
                         "\", not \"energy-artifact\"");
  Expected<const Value *> version =
      field(root, "", "format_version", Kind::Number);
  if (!version)
    return version.status();
  Expected<int64_t> versionNumber = readInteger(**version, "format_version");
  if (!versionNumber)
    return versionNumber.status();
  manifest.formatVersion = *versionNumber;
  if (manifest.formatVersion != ENERGY_ARTIFACT_FORMAT_VERSION)
    return Status::error(
        "artifact format version " + std::to_string(manifest.formatVersion) +
        ", this runtime reads version " +
        std::to_string(ENERGY_ARTIFACT_FORMAT_VERSION) +
        (manifest.formatVersion < ENERGY_ARTIFACT_FORMAT_VERSION
             ? " (compile the model again with this release's energyc)"
             : ""));

  if (Status status = readString(root, "", "model", manifest.model); !status)
    return status;
  std::string dtype;
  if (Status status = readString(root, "", "dtype", dtype); !status)
    return status;
  if (dtype == "f32")
    manifest.dtype = DType::F32;
  else if (dtype == "f64")
    manifest.dtype = DType::F64;
  else
    return Status::error("dtype: unknown element type \"" + dtype +
                         "\" (known: f32, f64)");
  if (Status status = readTarget(root, manifest); !status)
    return status;
  for (auto [key, out] : {std::pair{"source_name", &manifest.sourceName},
                          std::pair{"source", &manifest.source}})
    if (Status status = readString(root, "", key, *out, /*optional=*/true);
        !status)
      return status;

  Expected<const Value *> dims = field(root, "", "dims", Kind::Array);
  if (!dims)
    return dims.status();
  if (Status status = readDims(**dims, manifest); !status)
    return status;
  Expected<const Value *> consts = field(root, "", "consts", Kind::Array);
  if (!consts)
    return consts.status();
  if (Status status = readConsts(**consts, manifest); !status)
    return status;
  Expected<const Value *> buffers = field(root, "", "buffers", Kind::Array);
  if (!buffers)
    return buffers.status();
  for (size_t i = 0; i < (*buffers)->elements().size(); ++i)
    if (Status status =
            readBuffer((*buffers)->elements()[i],
                       "buffers[" + std::to_string(i) + "]", manifest);
        !status)
      return status;
  Expected<const Value *> kernels = field(root, "", "kernels", Kind::Object);
  if (!kernels)
    return kernels.status();
  if (Status status = readKernels(**kernels, manifest); !status)
    return status;
  if (Status status = readPlugins(root, manifest); !status)
    return status;
  Expected<const Value *> dynamics =
      field(root, "", "dynamics", Kind::Object, true, true);
  if (!dynamics)
    return dynamics.status();
  if (*dynamics) {
    Expected<const Value *> steps =
        field(**dynamics, "dynamics", "steps", Kind::Array);
    if (!steps)
      return steps.status();
    Expected<DimExpr> expr = readDimExpr(**steps, "dynamics: steps");
    if (!expr)
      return expr.status();
    manifest.steps = std::move(*expr);
  }
  if (Status status = readIndexChecks(root, manifest); !status)
    return status;
  if (Status status = checkConsistency(manifest); !status)
    return status;
  return manifest;
}

template <typename Entry>
static std::optional<size_t> findByName(const std::vector<Entry> &entries,
                                        std::string_view name) {
  for (size_t i = 0; i < entries.size(); ++i)
    if (entries[i].name == name)
      return i;
  return std::nullopt;
}

std::optional<size_t> Manifest::findDim(std::string_view name) const {
  return findByName(dims, name);
}

std::optional<size_t> Manifest::findConst(std::string_view name) const {
  return findByName(consts, name);
}

std::optional<size_t> Manifest::findBuffer(std::string_view name) const {
  return findByName(buffers, name);
}

std::optional<size_t>
Manifest::findGradientBuffer(std::string_view tensor) const {
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].kind == BufferKind::Gradient &&
        buffers[i].gradientOf == tensor)
      return i;
  return std::nullopt;
}

std::vector<std::string> Manifest::bufferNames(BufferKind kind) const {
  std::vector<std::string> names;
  for (const ManifestBuffer &buffer : buffers)
    if (buffer.kind == kind)
      names.push_back(buffer.name);
  return names;
}

std::vector<std::string>
energy::gradientsToReport(const Manifest &manifest,
                          const std::vector<std::string> &wanted) {
  if (!wanted.empty())
    return wanted;
  std::vector<std::string> names;
  for (const ManifestBuffer &buffer : manifest.buffers)
    if (isDefaultGradient(buffer))
      names.push_back(buffer.name);
  return names;
}

std::string ManifestBuffer::shapeText() const {
  std::string text = "[";
  for (size_t axis = 0; axis < shape.size(); ++axis)
    text += (axis ? ", " : "") + shape[axis].text();
  return text + "]";
}
