//===- ParamOptimizer.cpp - Training updates of a model's params ----------===//
//
// The built-in optimisers compute what torch.optim computes (torch 1.13's
// single-tensor SGD, Adam and AdamW), operation for operation, in double:
// the unit tests compare their trajectories with PyTorch's to 1e-12. One
// class keeps the per-param state (its buffers, named "<param>.<buffer>" in
// checkpoints) and checks shapes for every optimiser; the update rules only
// compute on arrays of doubles, and so does a plugin's update, called
// through the C interface of its run-time library. The registry of
// optimisers by name is a process-wide map behind a mutex, holding the
// built-ins from its creation.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/ParamOptimizer.h"

#include "energy/Plugin/RuntimeLibrary.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <mutex>
#include <optional>
#include <unistd.h>
#include <utility>

using namespace energy;

ParamOptimizer::~ParamOptimizer() = default;

namespace {

/// A number for messages, as short as it can be and still read back
/// exactly ("0.001", "-1", "inf").
std::string numberText(double value) {
  char buffer[32];
  std::to_chars_result result =
      std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

/// "a, b, c".
std::string joined(const std::vector<std::string> &names) {
  std::string text;
  for (const std::string &name : names)
    text += (text.empty() ? "" : ", ") + name;
  return text;
}

/// The elements of `tensor`, widened to double.
std::vector<double> elementsOf(const Tensor &tensor) {
  std::vector<double> elements(static_cast<size_t>(tensor.elementCount()));
  for (size_t i = 0; i < elements.size(); ++i)
    elements[i] = tensor.at(static_cast<int64_t>(i));
  return elements;
}

//===----------------------------------------------------------------------===//
// The state and the checks that every optimiser shares
//===----------------------------------------------------------------------===//

/// An optimiser whose state is a fixed list of buffers per param, each of
/// the param's shape (none for plain SGD).
class BufferedOptimizer : public ParamOptimizer {
public:
  BufferedOptimizer(std::string optimizerName,
                    std::vector<std::string> bufferNames,
                    const ParamOptimizerOptions &options)
      : options(options), optimizerName(std::move(optimizerName)),
        bufferNames(std::move(bufferNames)) {}

  std::string_view name() const override { return optimizerName; }
  Status update(const std::string &param, Tensor &value, const Tensor &gradient,
                double lr, int64_t step) override;
  std::map<std::string, Tensor> state() const override;
  Status setState(const std::map<std::string, Tensor> &state) override;

protected:
  /// One update of the elements `value` of a param from `gradient`;
  /// `buffers` are the param's buffers (in the order of bufferNames), all
  /// zeros and `fresh` at its first update.
  virtual void apply(std::vector<double> &value,
                     const std::vector<double> &gradient,
                     std::vector<std::vector<double>> &buffers, bool fresh,
                     double lr, int64_t step) const = 0;

  const ParamOptimizerOptions options;

private:
  struct ParamState {
    std::vector<int64_t> shape;
    std::vector<std::vector<double>> buffers;
  };

  /// "adam: " + `message`.
  Status error(const std::string &message) const {
    return Status::error(optimizerName + ": " + message);
  }

  std::string optimizerName;
  std::vector<std::string> bufferNames;
  std::map<std::string, ParamState> params;
};

} // namespace

Status BufferedOptimizer::update(const std::string &param, Tensor &value,
                                 const Tensor &gradient, double lr,
                                 int64_t step) {
  std::string where = "param '" + param + "': ";
  if (gradient.shape() != value.shape())
    return error(where + "gradient of shape " + gradient.shapeString() +
                 " for a value of shape " + value.shapeString());
  if (step < 1)
    return error(where + "step " + std::to_string(step) +
                 ": updates count from 1");
  if (!(lr >= 0) || !std::isfinite(lr))
    return error(where + "learning rate " + numberText(lr) +
                 " is not a non-negative finite number");

  std::vector<std::vector<double>> noBuffers;
  std::vector<std::vector<double>> *buffers = &noBuffers;
  bool fresh = true;
  if (!bufferNames.empty()) {
    auto found = params.find(param);
    if (found != params.end()) {
      if (found->second.shape != value.shape())
        return error(where + "optimiser state of shape " +
                     Tensor::shapeText(found->second.shape) +
                     " for a value of shape " + value.shapeString());
      fresh = false;
    } else {
      ParamState created;
      created.shape = value.shape();
      created.buffers.assign(
          bufferNames.size(),
          std::vector<double>(static_cast<size_t>(value.elementCount())));
      found = params.emplace(param, std::move(created)).first;
    }
    buffers = &found->second.buffers;
  }

  std::vector<double> elements = elementsOf(value);
  apply(elements, elementsOf(gradient), *buffers, fresh, lr, step);
  for (size_t i = 0; i < elements.size(); ++i)
    value.set(static_cast<int64_t>(i), elements[i]);
  return Status::success();
}

std::map<std::string, Tensor> BufferedOptimizer::state() const {
  std::map<std::string, Tensor> entries;
  for (const auto &[param, paramState] : params) {
    for (size_t k = 0; k < bufferNames.size(); ++k) {
      Tensor tensor(DType::F64, paramState.shape);
      const std::vector<double> &buffer = paramState.buffers[k];
      for (size_t i = 0; i < buffer.size(); ++i)
        tensor.set(static_cast<int64_t>(i), buffer[i]);
      entries.emplace(param + "." + bufferNames[k], std::move(tensor));
    }
  }
  return entries;
}

Status BufferedOptimizer::setState(const std::map<std::string, Tensor> &state) {
  // Each entry is "<param>.<buffer>"; gather each param's buffers.
  std::map<std::string, std::vector<const Tensor *>> found;
  for (const auto &[key, tensor] : state) {
    size_t k = 0;
    while (k < bufferNames.size() &&
           !(key.size() > bufferNames[k].size() + 1 &&
             key.compare(key.size() - bufferNames[k].size() - 1,
                         std::string::npos, "." + bufferNames[k]) == 0))
      ++k;
    if (k == bufferNames.size()) {
      if (bufferNames.empty())
        return error("unexpected state entry '" + key +
                     "': this optimiser keeps no state");
      std::vector<std::string> forms;
      for (const std::string &buffer : bufferNames)
        forms.push_back("<param>." + buffer);
      return error("unexpected state entry '" + key + "': expected " +
                   joined(forms));
    }
    if (tensor.dtype() != DType::F64)
      return error("state entry '" + key + "' is " +
                   std::string(dtypeName(tensor.dtype())) +
                   "; optimiser state is F64");
    std::string param = key.substr(0, key.size() - bufferNames[k].size() - 1);
    std::vector<const Tensor *> &tensors = found[param];
    tensors.resize(bufferNames.size(), nullptr);
    tensors[k] = &tensor;
  }

  // Every param needs all its buffers, of one shape.
  std::map<std::string, ParamState> restored;
  for (const auto &[param, tensors] : found) {
    const Tensor *first = nullptr;
    std::string firstKey;
    for (size_t k = 0; k < bufferNames.size(); ++k) {
      std::string key = param + "." + bufferNames[k];
      if (!tensors[k])
        return error("state of param '" + param + "': missing entry '" + key +
                     "'");
      if (!first) {
        first = tensors[k];
        firstKey = key;
      } else if (tensors[k]->shape() != first->shape()) {
        return error("state entry '" + key + "' of shape " +
                     tensors[k]->shapeString() + " but '" + firstKey +
                     "' of shape " + first->shapeString());
      }
    }
    ParamState &paramState = restored[param];
    paramState.shape = first->shape();
    for (const Tensor *tensor : tensors)
      paramState.buffers.push_back(elementsOf(*tensor));
  }
  params = std::move(restored);
  return Status::success();
}

//===----------------------------------------------------------------------===//
// The update rules
//===----------------------------------------------------------------------===//

namespace {

/// torch.optim.SGD: plain ("sgd"), or with momentum μ, dampening 0 and no
/// Nesterov ("momentum"). Per element, with L2 weight decay wd:
///   g' = g + wd·p
///   b  = g' at the first update, else μ·b + g'   (momentum only)
///   p -= lr·b                                     (lr·g' without momentum)
class SgdOptimizer : public BufferedOptimizer {
public:
  SgdOptimizer(bool withMomentum, const ParamOptimizerOptions &options)
      : BufferedOptimizer(withMomentum ? "momentum" : "sgd",
                          withMomentum
                              ? std::vector<std::string>{"momentum_buffer"}
                              : std::vector<std::string>{},
                          options),
        withMomentum(withMomentum) {}

private:
  void apply(std::vector<double> &value, const std::vector<double> &gradient,
             std::vector<std::vector<double>> &buffers, bool fresh, double lr,
             int64_t step) const override {
    double weightDecay = options.weightDecay, momentum = options.momentum;
    for (size_t i = 0; i < value.size(); ++i) {
      double direction = gradient[i];
      // torch adds the decay only when it is not 0 (which differs from
      // adding 0·p for an infinite or NaN p).
      if (weightDecay != 0)
        direction = direction + weightDecay * value[i];
      if (withMomentum) {
        double &buffer = buffers[0][i];
        buffer = fresh ? direction : momentum * buffer + direction;
        direction = buffer;
      }
      value[i] = value[i] + -lr * direction;
    }
  }

  bool withMomentum;
};

/// torch.optim.Adam (amsgrad off) and torch.optim.AdamW. Per element, at
/// update t (from 1):
///   adam:  g' = g + wd·p              adamw: p *= 1 - lr·wd; g' = g
///   m = β1·m + (1 - β1)·g'
///   v = β2·v + (1 - β2)·g'²
///   p -= lr/(1 - β1^t) · m / (sqrt(v)/sqrt(1 - β2^t) + eps)
class AdamOptimizer : public BufferedOptimizer {
public:
  AdamOptimizer(bool decoupledWeightDecay, const ParamOptimizerOptions &options)
      : BufferedOptimizer(decoupledWeightDecay ? "adamw" : "adam",
                          {"exp_avg", "exp_avg_sq"}, options),
        decoupledWeightDecay(decoupledWeightDecay) {}

private:
  void apply(std::vector<double> &value, const std::vector<double> &gradient,
             std::vector<std::vector<double>> &buffers, bool fresh, double lr,
             int64_t step) const override {
    double beta1 = options.beta1, beta2 = options.beta2, eps = options.eps,
           weightDecay = options.weightDecay;
    // torch.optim computes these from a Python float step with `**`, which
    // is C's pow.
    double biasCorrection1 = 1 - std::pow(beta1, static_cast<double>(step));
    double biasCorrection2 = 1 - std::pow(beta2, static_cast<double>(step));
    double stepSize = lr / biasCorrection1;
    double biasCorrection2Sqrt = std::sqrt(biasCorrection2);
    double decay = 1 - lr * weightDecay;
    std::vector<double> &firstMoment = buffers[0], &secondMoment = buffers[1];
    for (size_t i = 0; i < value.size(); ++i) {
      double direction = gradient[i];
      if (decoupledWeightDecay)
        value[i] = value[i] * decay;
      else if (weightDecay != 0)
        direction = direction + weightDecay * value[i];
      firstMoment[i] = firstMoment[i] * beta1 + (1 - beta1) * direction;
      secondMoment[i] =
          secondMoment[i] * beta2 + (1 - beta2) * direction * direction;
      double denominator =
          std::sqrt(secondMoment[i]) / biasCorrection2Sqrt + eps;
      // torch's addcdiv: p + (value·m)/denominator, value = -stepSize.
      value[i] = value[i] + -stepSize * firstMoment[i] / denominator;
    }
  }

  bool decoupledWeightDecay;
};

/// The options as a plugin's code takes them.
EnergyParamOptimizerOptions pluginOptionsOf(const ParamOptimizerOptions &o) {
  return {o.momentum, o.beta1, o.beta2, o.eps, o.weightDecay};
}

/// An optimiser of a plugin's run-time library: its update rule is the
/// library's code (RuntimeCode.h), on the same arrays of doubles.
class PluginOptimizer : public BufferedOptimizer {
public:
  PluginOptimizer(std::string name, std::vector<std::string> bufferNames,
                  EnergyParamUpdateCode updateCode,
                  const ParamOptimizerOptions &options)
      : BufferedOptimizer(std::move(name), std::move(bufferNames), options),
        updateCode(updateCode), pluginOptions(pluginOptionsOf(options)) {}

private:
  void apply(std::vector<double> &value, const std::vector<double> &gradient,
             std::vector<std::vector<double>> &buffers, bool fresh, double lr,
             int64_t step) const override {
    std::vector<double *> bufferData;
    for (std::vector<double> &buffer : buffers)
      bufferData.push_back(buffer.data());
    updateCode(static_cast<int64_t>(value.size()), value.data(),
               gradient.data(), bufferData.data(), fresh ? 1 : 0, lr, step,
               &pluginOptions);
  }

  EnergyParamUpdateCode updateCode;
  EnergyParamOptimizerOptions pluginOptions;
};

//===----------------------------------------------------------------------===//
// The registry
//===----------------------------------------------------------------------===//

/// `value` is non-negative and finite, else an error naming `field`.
Status checkNonNegative(std::string_view optimizer, std::string_view field,
                        double value) {
  if (value >= 0 && std::isfinite(value))
    return Status::success();
  return Status::error(std::string(optimizer) + ": " + std::string(field) +
                       " must be non-negative and finite, got " +
                       numberText(value));
}

/// `value` is in [0, 1), else an error naming `field`.
Status checkBeta(std::string_view optimizer, std::string_view field,
                 double value) {
  if (value >= 0 && value < 1)
    return Status::success();
  return Status::error(std::string(optimizer) + ": " + std::string(field) +
                       " must be in [0, 1), got " + numberText(value));
}

/// The options the SGD optimisers read, checked as torch.optim.SGD does.
Status checkSgdOptions(std::string_view name,
                       const ParamOptimizerOptions &options) {
  if (Status status =
          checkNonNegative(name, "weightDecay", options.weightDecay);
      !status)
    return status;
  if (name == "momentum")
    return checkNonNegative(name, "momentum", options.momentum);
  return Status::success();
}

/// The options the Adam optimisers read, checked as torch.optim.Adam does.
Status checkAdamOptions(std::string_view name,
                        const ParamOptimizerOptions &options) {
  for (Status status :
       {checkBeta(name, "beta1", options.beta1),
        checkBeta(name, "beta2", options.beta2),
        checkNonNegative(name, "eps", options.eps),
        checkNonNegative(name, "weightDecay", options.weightDecay)})
    if (!status)
      return status;
  return Status::success();
}

/// A check of the options an optimiser is created with.
using OptionsCheck =
    std::function<Status(std::string_view, const ParamOptimizerOptions &)>;

struct RegistryEntry {
  ParamOptimizerFactory factory;
  /// The built-ins' and plugins' check of the options; empty for others.
  OptionsCheck checkOptions = nullptr;
};

/// The registry's entry of a built-in: an `Optimizer` made with `variant`
/// (momentum or not, decoupled decay or not).
template <typename Optimizer>
RegistryEntry builtinEntry(
    bool variant,
    Status (*checkOptions)(std::string_view, const ParamOptimizerOptions &)) {
  return {[variant](const ParamOptimizerOptions &options)
              -> std::unique_ptr<ParamOptimizer> {
            return std::make_unique<Optimizer>(variant, options);
          },
          checkOptions};
}

struct Registry {
  Registry() {
    entries["sgd"] = builtinEntry<SgdOptimizer>(false, checkSgdOptions);
    entries["momentum"] = builtinEntry<SgdOptimizer>(true, checkSgdOptions);
    entries["adam"] = builtinEntry<AdamOptimizer>(false, checkAdamOptions);
    entries["adamw"] = builtinEntry<AdamOptimizer>(true, checkAdamOptions);
  }

  std::mutex mutex;
  std::map<std::string, RegistryEntry> entries;
  /// Plugins' run-time libraries by handle, with the names they registered;
  /// loading holds `loading` (not `mutex`: a library's constructors may
  /// register).
  std::mutex loading;
  std::map<void *, std::vector<std::string>> libraries;
};

Registry &registry() {
  static Registry instance;
  return instance;
}

} // namespace

Status energy::registerParamOptimizer(const std::string &name,
                                      ParamOptimizerFactory factory) {
  if (name.empty())
    return Status::error("a param optimiser needs a name");
  if (!factory)
    return Status::error("param optimiser '" + name + "': no factory");
  Registry &instance = registry();
  std::lock_guard<std::mutex> lock(instance.mutex);
  if (!instance.entries.emplace(name, RegistryEntry{std::move(factory)}).second)
    return Status::error("param optimiser '" + name +
                         "' is already registered");
  return Status::success();
}

Expected<std::unique_ptr<ParamOptimizer>>
energy::createParamOptimizer(const std::string &name,
                             const ParamOptimizerOptions &options) {
  RegistryEntry entry;
  {
    Registry &instance = registry();
    std::lock_guard<std::mutex> lock(instance.mutex);
    auto found = instance.entries.find(name);
    if (found == instance.entries.end()) {
      std::vector<std::string> known;
      for (const auto &[knownName, knownEntry] : instance.entries)
        known.push_back(knownName);
      return Status::error("unknown param optimiser '" + name +
                           "' (known: " + joined(known) + ")");
    }
    entry = found->second;
  }
  // The factory runs outside the lock, so that it may use the registry.
  if (entry.checkOptions)
    if (Status status = entry.checkOptions(name, options); !status)
      return status;
  std::unique_ptr<ParamOptimizer> optimizer = entry.factory(options);
  if (!optimizer)
    return Status::error("param optimiser '" + name +
                         "': its factory made no optimiser");
  return optimizer;
}

std::vector<std::string> energy::paramOptimizerNames() {
  Registry &instance = registry();
  std::lock_guard<std::mutex> lock(instance.mutex);
  std::vector<std::string> names;
  for (const auto &[name, entry] : instance.entries)
    names.push_back(name);
  return names;
}

//===----------------------------------------------------------------------===//
// Parameter optimisers of plugins
//===----------------------------------------------------------------------===//

namespace {

/// The most optimisers a library may export, and buffers an optimiser may
/// keep.
constexpr int64_t kMaxPluginOptimizers = 64, kMaxBuffers = 16;
/// The longest name of an optimiser or a buffer (as plugins' names).
constexpr size_t kMaxNameBytes = 64;

/// `text` when it is a name: 1 to kMaxNameBytes letters, digits, '_', '-'
/// or '.', read without looking past its end; else nothing.
std::optional<std::string> nameOf(const char *text) {
  if (!text)
    return std::nullopt;
  size_t length = strnlen(text, kMaxNameBytes + 1);
  if (length == 0 || length > kMaxNameBytes)
    return std::nullopt;
  std::string name(text, length);
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' &&
        c != '.')
      return std::nullopt;
  return name;
}

const char *const kNameRule = "1 to 64 letters, digits, '_', '-' or '.'";

/// The registry entry of a plugin's optimiser `code`, checked.
Expected<std::pair<std::string, RegistryEntry>>
pluginEntry(const EnergyParamOptimizerCode &code, int64_t index) {
  std::optional<std::string> name = nameOf(code.name);
  if (!name)
    return Status::error("param optimiser #" + std::to_string(index + 1) +
                         ": its name is not " + kNameRule);
  std::string where = "param optimiser '" + *name + "': ";
  if (!code.update)
    return Status::error(where + "no update function");
  if (code.buffer_count < 0 || code.buffer_count > kMaxBuffers ||
      (code.buffer_count > 0 && !code.buffer_names))
    return Status::error(where + "buffer_count " +
                         std::to_string(code.buffer_count) + " is not 0 to " +
                         std::to_string(kMaxBuffers) + " named buffers");
  std::vector<std::string> buffers;
  for (int64_t k = 0; k < code.buffer_count; ++k) {
    std::optional<std::string> buffer = nameOf(code.buffer_names[k]);
    if (!buffer)
      return Status::error(where + "the name of buffer #" +
                           std::to_string(k + 1) + " is not " + kNameRule);
    if (std::find(buffers.begin(), buffers.end(), *buffer) != buffers.end())
      return Status::error(where + "buffer '" + *buffer + "' is named twice");
    buffers.push_back(*buffer);
  }
  RegistryEntry entry;
  entry.factory = [name = *name, buffers,
                   update = code.update](const ParamOptimizerOptions &options)
      -> std::unique_ptr<ParamOptimizer> {
    return std::make_unique<PluginOptimizer>(name, buffers, update, options);
  };
  if (EnergyParamOptionsCheckCode check = code.check_options)
    entry.checkOptions = [check](std::string_view optimizer,
                                 const ParamOptimizerOptions &options) {
      EnergyParamOptimizerOptions given = pluginOptionsOf(options);
      const char *problem = check(&given);
      if (!problem)
        return Status::success();
      return Status::error(std::string(optimizer) + ": " +
                           std::string(problem, strnlen(problem, 512)));
    };
  return std::make_pair(*name, std::move(entry));
}

/// Opens the library at `path`, which becomes the file opened: a bare file
/// name is looked for in the directories of ENERGY_PLUGIN_PATH first.
void *openForTraining(std::string &path, EnergyPluginRuntimeInfo &info,
                      std::string &error) {
  if (path.find('/') == std::string::npos)
    for (const std::string &directory : plugin::pluginSearchPath())
      if (std::string candidate = directory + "/" + path;
          access(candidate.c_str(), F_OK) == 0) {
        path = candidate;
        break;
      }
  return plugin::openRuntimeLibraryFile(path, info, error);
}

} // namespace

Expected<std::vector<std::string>>
energy::loadPluginParamOptimizers(const std::string &path) {
  Registry &instance = registry();
  std::lock_guard<std::mutex> loading(instance.loading);
  EnergyPluginRuntimeInfo info{};
  std::string error, opened = path;
  void *handle = openForTraining(opened, info, error);
  if (!handle)
    return Status::error(error);
  if (auto found = instance.libraries.find(handle);
      found != instance.libraries.end())
    return found->second;

  std::optional<std::string> plugin = nameOf(info.name);
  std::string label = opened + " (plugin '" + plugin.value_or("?") + "')";
  using ListFunction = EnergyParamOptimizerList (*)();
  auto list = reinterpret_cast<ListFunction>(
      dlsym(handle, "energyGetPluginParamOptimizers"));
  if (!list)
    return Status::error(label +
                         " exports no parameter optimisers (it has no entry "
                         "point energyGetPluginParamOptimizers)");
  EnergyParamOptimizerList exported = list();
  if (exported.count < 1 || exported.count > kMaxPluginOptimizers ||
      !exported.optimizers)
    return Status::error(label + ": energyGetPluginParamOptimizers gives " +
                         std::to_string(exported.count) +
                         " optimisers; expected 1 to " +
                         std::to_string(kMaxPluginOptimizers));
  std::map<std::string, RegistryEntry> entries;
  for (int64_t i = 0; i < exported.count; ++i) {
    Expected<std::pair<std::string, RegistryEntry>> entry =
        pluginEntry(exported.optimizers[i], i);
    if (!entry)
      return Status::error(label + ": " + entry.message());
    std::string name = entry->first;
    if (!entries.emplace(std::move(*entry)).second)
      return Status::error(label + ": param optimiser '" + name +
                           "' is exported twice");
  }

  std::vector<std::string> names;
  {
    std::lock_guard<std::mutex> lock(instance.mutex);
    for (const auto &[name, entry] : entries)
      if (instance.entries.count(name))
        return Status::error(label + ": param optimiser '" + name +
                             "' is already registered");
    for (auto &[name, entry] : entries) {
      names.push_back(name);
      instance.entries.emplace(name, std::move(entry));
    }
  }
  instance.libraries[handle] = names;
  return names;
}

//===----------------------------------------------------------------------===//
// Learning-rate schedules
//===----------------------------------------------------------------------===//

Status LearningRateSchedule::validate() const {
  auto fail = [](const std::string &message) {
    return Status::error("learning-rate schedule: " + message);
  };
  if (kind != "constant" && kind != "cosine" && kind != "step")
    return fail("unknown kind '" + kind + "' (known: constant, cosine, step)");
  if (!(lr >= 0) || !std::isfinite(lr))
    return fail("lr must be non-negative and finite, got " + numberText(lr));
  if (total <= 0)
    return fail("total must be positive, got " + std::to_string(total));
  if (kind == "cosine" && !(lrMin >= 0 && lrMin <= lr))
    return fail("lrMin must be in [0, lr], got " + numberText(lrMin) +
                " with lr " + numberText(lr));
  if (kind == "step") {
    if (!(gamma > 0) || !std::isfinite(gamma))
      return fail("gamma must be positive and finite, got " +
                  numberText(gamma));
    if (stepSize <= 0)
      return fail("stepSize must be positive, got " + std::to_string(stepSize));
  }
  return Status::success();
}

double LearningRateSchedule::at(int64_t step) const {
  step = std::max<int64_t>(step, 0);
  if (kind == "cosine") {
    // As torch's CosineAnnealingLR writes it: π·step/total, left to right.
    double angle = M_PI * static_cast<double>(std::min(step, total)) /
                   static_cast<double>(total);
    return lrMin + (lr - lrMin) * (1 + std::cos(angle)) / 2;
  }
  if (kind == "step")
    return lr * std::pow(gamma, static_cast<double>(step / stepSize));
  return lr;
}
