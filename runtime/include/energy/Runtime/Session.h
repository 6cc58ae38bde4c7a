//===- Session.h - A model's values, and running it -------------*- C++ -*-===//
//
// An energy::Session holds one set of values for a Model's buffers: the
// tensors the caller binds, the others from their initialisers, and the
// gradient and output buffers the kernels write. It evaluates the energy,
// gradients and outputs and runs the dynamics step by step.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_RUNTIME_SESSION_H
#define ENERGY_RUNTIME_SESSION_H

#include "energy/Runtime/ArtifactABI.h"
#include "energy/Runtime/Backprop.h"
#include "energy/Runtime/Model.h"
#include "energy/Runtime/Status.h"
#include "energy/Runtime/Tensor.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace energy {

/// What a session starts from besides bound tensors.
struct SessionOptions {
  /// Values of free dims (what `--dim N=...` gives).
  std::map<std::string, int64_t> dims;
  /// Values replacing the source's consts.
  std::map<std::string, double> consts;
  /// The seed of `--init random:SEED`: tensors without an initialiser get
  /// random values, and normal/uniform initialisers draw from it (0 when
  /// there is none).
  std::optional<uint64_t> seed;
  /// The most bytes the session's buffers may take together; by default
  /// the machine's memory (machineMemoryBytes). Buffers beyond it are an
  /// error naming the one that does not fit, before any is allocated.
  std::optional<uint64_t> memoryLimit = std::nullopt;
};

/// How a run goes.
struct RunOptions {
  /// How many steps at most; the manifest's step count when absent.
  std::optional<int64_t> steps;
  /// Called after each step with the step's number and the energy after it
  /// (NaN when `trace` is off).
  std::function<void(int64_t step, double energy)> onStep;
  /// Whether the energy is evaluated after every step, for `trace` and
  /// onStep. Without it, only after the run (RunResult::energy), and the
  /// trace stays empty; the states are checked finite after every step
  /// either way.
  bool trace = true;
  /// Whether the energy is evaluated after the run for RunResult::energy
  /// (with `trace` off; NaN without it): a caller that wants the states
  /// alone, as a benchmark of the dynamics, saves that evaluation.
  bool finalEnergy = true;
};

/// What a run did.
struct RunResult {
  /// Steps taken (fewer than asked when the stopping rule fired).
  int64_t steps = 0;
  /// The energy at the end (NaN where RunOptions::finalEnergy and trace
  /// were off).
  double energy = 0;
  /// The energy after each step (none when RunOptions::trace is off).
  std::vector<double> trace;
};

/// What a backward run found.
struct BackwardResult {
  /// Steps taken forward (fewer than asked when the stopping rule fired).
  int64_t steps = 0;
  /// The sum of the losses at the final values, and each loss.
  double loss = 0;
  std::map<std::string, double> losses;
};

/// What a caller does between the kernels of Session::backward: one rank
/// of a sharded run (ShardedSession) puts the ranks' parts together there.
/// Each does nothing by default; an error ends the backward run.
class BackwardHooks {
public:
  virtual ~BackwardHooks();
  /// Around forward step `step`'s kernel.
  virtual Status beforeForwardStep(int64_t step);
  virtual Status afterForwardStep(int64_t step);
  /// The forward state was put back from a snapshot.
  virtual Status restored();
  /// Before the losses' kernels at the final values, and after them, with
  /// what they found.
  virtual Status beforeLosses();
  virtual Status afterLosses(BackwardResult &result);
  virtual Status afterSeed();
  /// After the backward step's cotangents (when the model computes them in
  /// a kernel of their own), before the rest of backward step `step`.
  virtual Status beforeBackwardStep(int64_t step);
  virtual Status afterBackwardStep(int64_t step);
  virtual Status beforeFinish();
  virtual Status afterFinish();
};

/// How a backward run goes (Session::backward).
struct BackwardOptions {
  /// How many steps at most; the manifest's step count when absent.
  std::optional<int64_t> steps;
  BackpropStorage storage = BackpropStorage::Checkpointed;
  /// Called between the kernels; none when null.
  BackwardHooks *hooks = nullptr;
};

/// The steps a run or a backward run takes: `requested`, else the model's
/// `declared` count at the bound dims (0 for a model without one); an error
/// when that is negative. The one rule of sessions and interpreted runs.
Expected<int64_t> stepsToTake(std::optional<int64_t> requested,
                              std::optional<int64_t> declared);

/// The values of a model's buffers. Dims are resolved, and every buffer
/// allocated and initialised, at the first call that needs them (energy,
/// gradient, get, step, run, stateTensors, dims); until then set() only
/// records tensors. A failed call leaves the session as it was, except for
/// a run or step that fails midway, which keeps the steps done before.
class Session {
public:
  /// A session of `model` (Model::session calls this).
  static Expected<Session> create(const Model &model,
                                  const SessionOptions &options);

  const Model &model() const { return owner; }

  /// Binds tensor `name` to `value`: of the declared rank, and once dims
  /// are resolved, of the declared shape. A value of the other element
  /// type is converted (see notes()). An input or param whose elements are
  /// borrowed (Tensor::borrow) and of the model's element type is used in
  /// place on the CPU, without a copy: the session reads the lender's
  /// memory as it is at each call; everything else is copied. On error
  /// nothing is bound.
  Status set(const std::string &name, const Tensor &value);
  /// For a session of a CUDA artifact: binds tensor `name` to `value`, a
  /// borrowed tensor (Tensor::borrow) over GPU memory of device 0 that an
  /// application owns (a PyTorch tensor's, say), of the model's element
  /// type. Its elements are copied into the session's buffer by the
  /// driver, on the device, on the session's stream (setStream) after the
  /// work queued there, and waited for; the host never reads them, and
  /// the lender may reuse the memory once this returns (or, before the
  /// first evaluation, once that has prepared the buffers). Errors as
  /// set()'s, and for a session on the CPU or another element type.
  Status setFromDevice(const std::string &name, const Tensor &value);

  /// The value of every dim (derived ones included), resolved from the
  /// options' dims, else the shapes of bound tensors, else defaults.
  Expected<std::map<std::string, int64_t>> dims();
  /// Gives dim `name` the value `value` from the next call on: only a free
  /// dim that no tensor's shape and no other dim is derived from (an
  /// offset the kernels read, such as a sharded ring's block offset).
  Status setDim(const std::string &name, int64_t value);
  /// The bytes the session's buffers take (0 before its first evaluation).
  uint64_t bufferBytes() const;
  /// The shape tensor `name` has (or will have, from the dims given and
  /// those of the tensors bound so far), without evaluating anything.
  Expected<std::vector<int64_t>> shapeOf(const std::string &name) const;
  /// The global energy of the current values.
  Expected<double> energy();
  /// The energy of one term (see Model::termNames).
  Expected<double> termEnergy(const std::string &term);
  /// The gradient of the energy with respect to tensor `tensor` (one with a
  /// gradient kernel: see Model::gradientNames).
  Expected<Tensor> gradient(const std::string &tensor);
  /// The gradients of several tensors, in order: from one kernel where the
  /// artifact has one that writes all of these (Manifest's jointGradients:
  /// the tensors a stopping rule differentiates together, a sharded
  /// tensor's and its gathered copy's; the one writing the fewest others),
  /// else one gradient() each.
  Expected<std::vector<Tensor>>
  gradients(const std::vector<std::string> &tensors);
  /// The same computed into the session's own buffer, which it returns
  /// without copying it: on a GPU it stays in device memory (the host's
  /// reads move it, page by page), as a chain of GPU work or a benchmark
  /// wants. Valid until the next call that evaluates anything.
  Expected<const Tensor *> computeGradient(const std::string &tensor);
  /// The value of a tensor, or an output computed from the current values.
  Expected<Tensor> get(const std::string &name);
  /// For a session of a CUDA artifact: the session's own buffer of tensor
  /// or output `name` (an output computed first), in memory that the GPU
  /// and the host both address, moved to the GPU, so that an application's
  /// GPU work reads or writes it in place, without copies. Valid until the
  /// session is destroyed or `name` is bound to an array of another shape.
  /// An error for a session on the CPU (its tensors are host arrays: get).
  Expected<Tensor *> deviceBuffer(const std::string &name);
  /// For a session of a CUDA artifact: computeGradient, whose buffer is on
  /// the GPU in the memory deviceBuffer describes. An error on the CPU.
  Expected<const Tensor *> deviceGradient(const std::string &tensor);
  /// The kernels, products and copies of each evaluation go on `stream` (a
  /// CUstream or cudaStream_t; null: the legacy default stream), after the
  /// work an application queued there, so that a buffer it writes on that
  /// stream is seen; the host waits for that work only where it reads what
  /// it may write, and each call returns when its work is done. An error
  /// on the CPU.
  Status setStream(void *stream);
  /// Every state tensor (optimizer state included) by name.
  Expected<std::map<std::string, Tensor>> stateTensors();

  /// One step of the dynamics, numbered stepCount(); then stepCount()
  /// increases by one.
  Status step();
  /// Runs steps until their count is reached or the stopping rule fires.
  /// After each step it computes the energy and checks that the state and
  /// the energy are finite ("step 3 produced a non-finite value in tensor
  /// 'x'").
  Expected<RunResult> run(const RunOptions &options = {});
  /// For a model with a loss: runs the dynamics from the current state
  /// (steps numbered from 0), evaluates the losses at the final values, then
  /// runs the backward program (Backprop.h). Afterwards adjoint(X) is the
  /// derivative of the sum of the losses with respect to X (a param, or the
  /// value a state had before the run), and the state is back where the run
  /// started. Errors name the step and the kernel; a non-finite loss is an
  /// error naming the loss.
  Expected<BackwardResult> backward(const BackwardOptions &options = {});
  /// Runs the dynamics from the current state (steps numbered from 0) and
  /// evaluates the losses at the final values, with no backward pass; the
  /// state is then the final one.
  Expected<BackwardResult> evaluateLosses(const BackwardOptions &options = {});
  /// For a model whose backward step computes its cotangents apart (one
  /// compiled for a sharded run): runs the rest of one backward step at the
  /// current states with the cotangents as they are set, each adjoint
  /// gaining the step's part (the Hessian-vector product's, with the
  /// adjoints zero). A ring's block model gives its sites' part so.
  Status backwardStepAtCotangents();
  /// The adjoint of tensor `name` (see Model::adjointNames) that the last
  /// backward() left, in the session's own buffer (valid until the next
  /// call that evaluates anything).
  Expected<const Tensor *> adjoint(const std::string &name);
  /// For a session of a CUDA artifact: adjoint(name)'s buffer left on the
  /// GPU (deviceBuffer's memory), as a chain of GPU work wants it. An error
  /// on the CPU.
  Expected<const Tensor *> deviceAdjoint(const std::string &name);
  /// Sets every state tensor (optimizer state included) back to its value
  /// before any step: a copy of its source's current value for a state
  /// initialised from another tensor (`state x = h`), else the value it had
  /// when the session's buffers were set up. Then stepCount() is 0.
  Status resetStates();

  /// The number of the next step (what the kernels see as `step`); set it
  /// to resume a saved run.
  int64_t stepCount() const { return nextStep; }
  void setStepCount(int64_t step) { nextStep = step; }
  /// The step the energy, gradients and outputs see: the last step taken
  /// (0 before the first), as the language specifies for values after a
  /// run.
  int64_t evaluationStep() const { return nextStep > 0 ? nextStep - 1 : 0; }

  std::vector<std::string> tensorNames() const { return owner.tensorNames(); }
  std::vector<std::string> outputNames() const { return owner.outputNames(); }
  std::vector<std::string> gradientNames() const {
    return owner.gradientNames();
  }
  /// Things worth telling the user that are not errors, such as a tensor
  /// converted from F64 to the model's F32.
  const std::vector<std::string> &notes() const { return noteList; }

  /// stepsToTake with the manifest's step count at the bound dims; an error
  /// when that cannot be evaluated.
  Expected<int64_t> stepsToTake(std::optional<int64_t> requested);

private:
  friend class SessionBackpropTarget;
  const detail::ModelState &modelState() const { return *owner.state; }
  explicit Session(Model model) : owner(std::move(model)) {}
  /// The step count of a backward or loss run (options.steps, else the
  /// manifest's); an error without a loss.
  Expected<int64_t> lossRunSteps(const BackwardOptions &options);

  /// set() and setFromDevice() once their checks are done: `onDevice` when
  /// `value`'s elements are GPU memory.
  Status bind(const std::string &name, const Tensor &value, bool onDevice);
  /// The buffer of the adjoint of `name`.
  Expected<size_t> adjointBuffer(const std::string &name);
  /// Resolves dims and shapes, allocates and initialises every buffer;
  /// nothing when already done.
  Status prepare();
  /// Resolves the dims (into `values`).
  Status resolveDims(std::vector<int64_t> &values) const;
  /// Checks that buffers of `shapes` (in manifest order) fit in the memory
  /// limit together.
  Status checkMemory(const std::vector<std::vector<int64_t>> &shapes) const;
  /// Calls `kernel` on the buffers (moved to the GPU first, for a CUDA
  /// artifact).
  Status call(energy_kernel_fn kernel, const std::string &symbol, int64_t step,
              double *result);
  /// Prepares the buffers and calls `kernel` at the evaluation step.
  Status evaluate(const detail::Kernel &kernel, double *result = nullptr);
  /// Buffer `index`, moved to the host first for a CUDA artifact.
  const Tensor &readBuffer(size_t index);
  /// An error naming the first state tensor with a non-finite value.
  Status checkStatesFinite(const std::string &where);
  /// The program that a change of the state's variables runs before a
  /// call's first step (`runBegin`) or after its last; nothing when the
  /// model has none.
  Status runProgram(const detail::Kernel &kernel, const char *what);
  /// The step kernel once, numbered stepCount(), which then increases.
  Status stepKernel();
  /// Held by each method that calls kernels: the outermost one clears the
  /// flags of the values kernels keep (ManifestBuffer::flagOf), which stay
  /// valid until it returns, while no param or input can change; values
  /// kept per step only in a `backward` call, whose backward steps read
  /// them.
  class CallScope {
  public:
    explicit CallScope(Session &session, bool backward = false);
    ~CallScope() { --session.callDepth; }
    CallScope(const CallScope &) = delete;
    CallScope &operator=(const CallScope &) = delete;

  private:
    Session &session;
  };
  int callDepth = 0;

  Model owner;
  std::map<std::string, int64_t> givenDims;
  std::optional<uint64_t> seed;
  std::optional<uint64_t> memoryLimit;
  std::vector<double> consts;
  /// Tensors bound before prepare().
  std::map<std::string, Tensor> bound;
  /// The names in `bound` whose elements are GPU memory (setFromDevice).
  std::set<std::string> boundOnDevice;
  bool prepared = false;
  /// After prepare(): dim values, buffer shapes and buffers, in manifest
  /// order.
  std::vector<int64_t> dimValues;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<Tensor> buffers;
  /// Buffers the kernels read elsewhere for now (a backward step reading
  /// its step's snapshot in place): by buffer position, the memory.
  std::vector<std::pair<size_t, void *>> readElsewhere;
  /// For a CUDA artifact: memory both the host and the GPU reach, where the
  /// buffers live, and the kernels' arguments there (buffer pointers, dims,
  /// consts, result: 8 bytes each).
  std::optional<TensorMemory> deviceMemory;
  std::optional<Tensor> deviceArguments;
  /// For a CUDA artifact, by buffer: moved to the GPU by a call and not
  /// handed out or written by the host since (a call moves the others).
  std::vector<bool> residentOnDevice;
  /// The stream the session's GPU work goes on (setStream), and whether
  /// copies the session queued there may still run: the next call's host
  /// code, or waitForQueuedCopies, waits for them.
  void *stream = nullptr;
  bool queuedCopies = false;
  Status waitForQueuedCopies();
  int64_t nextStep = 0;
  std::vector<std::string> noteList;
  /// The states a backward call's schedule saved, by slot: kept between
  /// calls, so that the next one copies into the same memory.
  std::vector<std::vector<Tensor>> snapshots;
  /// For a CUDA artifact, by slot: its snapshots are in managed memory, on
  /// the GPU.
  std::vector<bool> snapshotsOnDevice;
  /// For a model with a loss: each state's value when the buffers were set
  /// up (resetStates), by buffer position.
  std::map<size_t, Tensor> initialStates;
  /// The buffer of tensor or output `name`, an output computed first.
  Expected<size_t> valueBuffer(const std::string &name);
  /// Copies `value` into buffer `index` (on the device for a CUDA
  /// artifact).
  void overwriteBuffer(size_t index, const Tensor &value);
};

} // namespace energy

#endif // ENERGY_RUNTIME_SESSION_H
