//===- Manifest.h - What an artifact says about its model -------*- C++ -*-===//
//
// Every artifact carries a JSON manifest (docs/api.md, "Artifacts"): its
// dims, consts and buffers in the order its kernels take them, their shapes
// as integer expressions over the dims, the tensors' roles and
// initialisers, and the names of its kernels. Manifest::parse reads and
// checks it, so that nothing a session does later can index out of it.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_RUNTIME_MANIFEST_H
#define ENERGY_RUNTIME_MANIFEST_H

#include "energy/Runtime/IndexArithmetic.h"
#include "energy/Runtime/Initializer.h"
#include "energy/Runtime/Status.h"
#include "energy/Runtime/Tensor.h"
#include "energy/Runtime/TensorRole.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace energy {

/// An integer expression over dims, written in reverse Polish notation: how
/// a manifest gives derived dims, shape axes and step counts. ["T", 1, "-"]
/// is T - 1.
class DimExpr {
public:
  /// The operators, evaluated as IndexArithmetic.h says: `/` is exact
  /// division (a remainder is an error), floordiv and ceildiv round down and
  /// up, mod takes the sign of the divisor.
  using Op = IndexOp;
  /// "+", "-", "*", "/", "floordiv", "ceildiv", "mod".
  static std::string_view opName(Op op);
  static std::optional<Op> opFromName(std::string_view name);

  struct Token {
    enum class Kind { Dim, Literal, Operator };
    Kind kind = Kind::Literal;
    std::string dim;
    int64_t literal = 0;
    Op op = Op::Add;
  };

  DimExpr() = default;
  /// The expression of `tokens`, which must be well-formed (see
  /// wellFormed).
  explicit DimExpr(std::vector<Token> tokens) : exprTokens(std::move(tokens)) {}
  /// Whether `tokens` are one expression: every operator finds two operands
  /// and exactly one value is left.
  static bool wellFormed(const std::vector<Token> &tokens);

  const std::vector<Token> &tokens() const { return exprTokens; }
  /// The dim the expression is when it is just one dim's name.
  std::optional<std::string> singleDim() const;
  /// The names of the dims it uses, in order of appearance.
  std::vector<std::string> dimNames() const;
  /// The expression in infix: "N", "T - 1", "(N + 1) * 2".
  std::string text() const;

  /// The value, with each dim's value from `lookup`. Errors: a dim `lookup`
  /// has no value for, division by zero, an inexact `/` ("65 is not
  /// divisible by 2"), overflow.
  Expected<int64_t> evaluate(
      const std::function<std::optional<int64_t>(const std::string &)> &lookup)
      const;

private:
  std::vector<Token> exprTokens;
};

/// A dim: free (bound by the user, inferred from a tensor or defaulted) or
/// derived from the dims before it.
struct ManifestDim {
  std::string name;
  std::optional<int64_t> defaultValue;
  std::optional<DimExpr> derived;
};

/// An index that the compiler could not prove in range without the dims
/// (energy.index_check): index `index` of the read `read` (its source text)
/// at `where`, on an axis of size `size`. Each side lists the conditions
/// (each `c ≥ 0`, over dims and `step`) under which some index of the read
/// is negative (`below`) or reaches `size` (`above`); a side the compiler
/// proved is absent.
struct ManifestIndexCheck {
  std::string read;
  std::string where;
  int64_t index = 0;
  DimExpr size;
  std::optional<std::vector<DimExpr>> below, above;

  /// Whether a condition reads the dynamics step (`step`), so that the
  /// answer depends on the step a kernel is called at.
  bool usesStep() const;
  /// An error naming the read, when with the dims of `dims` (and, for a
  /// check that uses it, the dynamics step `step`) every condition of a
  /// side holds.
  Status
  check(const std::function<std::optional<int64_t>(const std::string &)> &dims,
        std::optional<int64_t> step = std::nullopt) const;
};

/// A named constant and its value in the source (sessions may override it).
struct ManifestConst {
  std::string name;
  double value = 0;
};

/// What a buffer holds: a tensor of the model, the gradient of the energy
/// with respect to one, or an output.
enum class BufferKind { Tensor, Gradient, Output };

/// One buffer the kernels take, in manifest order.
struct ManifestBuffer {
  std::string name;
  BufferKind kind = BufferKind::Tensor;
  /// One expression per axis.
  std::vector<DimExpr> shape;
  /// Tensors only: the role, the initialiser, and the tensor whose
  /// optimizer state this one is.
  TensorRole role = TensorRole::State;
  std::optional<InitSpec> init;
  std::optional<std::string> optimizerStateOf;
  /// Tensors a backward program adds: the adjoint of a tensor (the
  /// derivative of the loss with respect to it), the scratch where a
  /// cotangent is stored, the vectors of the implicit solve, or a sum over
  /// the backward steps that the finish multiplies into an adjoint. None is
  /// part of the forward state.
  std::optional<std::string> adjointOf, cotangentOf, solverOf, deferredOf;
  /// Scratch the kernels keep within one call of the runtime (an
  /// `energy.once`): a value's cache names its flag, the flag its cache.
  /// The runtime clears the flags when a call begins.
  std::optional<std::string> cacheFlag, flagOf;
  /// An input holding the caller's cotangent of a state's final value or of
  /// an output, the seed of the backward program of a model compiled for
  /// caller cotangents (energy-caller-cotangents).
  std::optional<std::string> incomingOf;
  /// A forward state that neither a step nor the end of a run stores (a
  /// constant state, or one that only the start of a run computes): the
  /// backward pass need not keep it per step.
  bool runConstant = false;
  /// A forward state that holds nothing between calls of the runtime (a
  /// change of variables' optimizer state, which each call's `run_begin`
  /// computes from the state): in the backward pass's forward state, not
  /// a tensor a user sees.
  bool perCall = false;
  /// Gradients only: the tensor it is the gradient of.
  std::string gradientOf;

  /// The declared shape: "[N, T - 1, 4]".
  std::string shapeText() const;
};

/// Whether `buffer` is a value the kernels keep within one call of the
/// runtime, or its flag: scratch, not a tensor of the model.
inline bool isKeptValue(const ManifestBuffer &buffer) {
  return buffer.cacheFlag || buffer.flagOf;
}

/// Whether `buffer` is a tensor a user sees (reads, lists, writes): not a
/// kept value nor an adjoint's deferred sum, which the backward program adds
/// into its adjoint before anything reads it.
inline bool isModelTensor(const ManifestBuffer &buffer) {
  return buffer.kind == BufferKind::Tensor && !isKeptValue(buffer) &&
         !buffer.deferredOf && !buffer.perCall;
}

/// Whether `buffer` is part of the forward state: a state tensor
/// (optimizer state included) that the backward program did not add.
inline bool isForwardState(const ManifestBuffer &buffer) {
  return buffer.kind == BufferKind::Tensor &&
         buffer.role == TensorRole::State && !buffer.adjointOf &&
         !buffer.cotangentOf && !buffer.solverOf && !buffer.deferredOf &&
         !isKeptValue(buffer);
}

/// Whether `--eval grad` (and any tool asked for gradients without a list)
/// reports `buffer`'s gradient: a forward state that is not optimizer state.
inline bool isDefaultGradient(const ManifestBuffer &buffer) {
  return isForwardState(buffer) && !buffer.optimizerStateOf;
}

/// The kernels' symbol names.
struct ManifestKernels {
  /// Writes the global energy to *result.
  std::string energy;
  /// Energy term name to the kernel that writes its energy to *result (the
  /// energy kernel itself for a model of one term); empty in artifacts from
  /// before terms were listed.
  std::map<std::string, std::string> terms;
  /// Tensor name to the kernel that writes its gradient buffer.
  std::map<std::string, std::string> gradients;
  /// Kernels that write the gradient buffers of several tensors at once (a
  /// sharded tensor's and its gathered copy's, sharing their work).
  struct JointGradient {
    std::vector<std::string> tensors;
    std::string kernel;
  };
  std::vector<JointGradient> jointGradients;
  /// Output name to the kernel that writes that output buffer.
  std::map<std::string, std::string> outputs;
  /// One step of the dynamics; none without dynamics.
  std::optional<std::string> step;
  /// The stopping rule (*result = 1 to stop); none when there is no rule.
  std::optional<std::string> until;
  /// Run once per call before its first step and after its last (a change
  /// of the state's variables); none when the dynamics have none.
  std::optional<std::string> runBegin, runFinish;
  /// Loss name to the kernel that writes that loss to *result.
  std::map<std::string, std::string> losses;
  /// The backward program's parts (Backprop.h); none without a loss.
  struct Backward {
    std::string seed, step, finish;
    /// The part of `step` that stores its cotangents, run ahead of it (one
    /// rank's model of a sharded run); none otherwise.
    std::optional<std::string> cotangents;
    /// At the fixed point the run ends at: `step` never runs and `finish`
    /// solves for the adjoints ("mode": "implicit"; else "unrolled").
    bool implicit = false;
  };
  std::optional<Backward> backward;
};

/// What the kernels were compiled for: the manifest's `target` object.
struct ManifestTarget {
  /// The architecture, as in LLVM's triples: "x86_64".
  std::string arch;
  /// The CPU given to energyc --cpu: "native", "x86-64-v2", "x86-64-v3",
  /// "x86-64-v4".
  std::string cpu;
  /// The CPU features the code may use, LLVM's names, each one the runtime
  /// can check (see CpuFeatures.h): "avx2", "fma", ...
  std::vector<std::string> features;
  /// The device the kernels also run on: empty (the CPU alone) or "cuda".
  std::string device;
  /// For "cuda": the GPU architectures whose code the artifact carries
  /// ("sm_80", "sm_90").
  std::vector<std::string> deviceArchs;
};

/// A plugin whose run-time code the kernels call (`plugins`): the runtime
/// opens its library and stores each symbol's address in the artifact's
/// slot for it (ArtifactABI.h).
struct ManifestPlugin {
  std::string name, version;
  /// The run-time library the compiler used (absolute path).
  std::string library;
  std::vector<std::string> symbols;
};

/// A parsed and checked manifest.
struct Manifest {
  int64_t formatVersion = 0;
  std::string model;
  /// The element type of every buffer.
  DType dtype = DType::F32;
  /// What the kernels were compiled for (the `target` object); none for a
  /// manifest without one, whose code the runtime cannot check.
  std::optional<ManifestTarget> target;
  /// A manifest whose `target` is a string (what older compilers wrote, a
  /// description only): that string.
  std::string targetDescription;
  /// The .energy file the artifact was compiled from, and its text.
  std::string sourceName;
  std::string source;
  std::vector<ManifestDim> dims;
  std::vector<ManifestConst> consts;
  std::vector<ManifestBuffer> buffers;
  ManifestKernels kernels;
  std::vector<ManifestPlugin> plugins;
  /// The default number of dynamics steps; none without dynamics.
  std::optional<DimExpr> steps;
  /// The indices the runtime checks before it calls a kernel.
  std::vector<ManifestIndexCheck> indexChecks;

  /// Reads and checks the manifest text `json`. Errors name the field
  /// ("buffer 'x': init: missing field \"kind\"") or the inconsistency
  /// ("buffer 'y': shape uses dim K, which is not declared").
  static Expected<Manifest> parse(std::string_view json);

  /// Positions in dims, consts and buffers; nothing for an unknown name.
  std::optional<size_t> findDim(std::string_view name) const;
  std::optional<size_t> findConst(std::string_view name) const;
  std::optional<size_t> findBuffer(std::string_view name) const;
  /// The position of the gradient buffer of tensor `tensor`.
  std::optional<size_t> findGradientBuffer(std::string_view tensor) const;
  /// The names of the buffers of `kind`, in manifest order.
  std::vector<std::string> bufferNames(BufferKind kind) const;
};

/// The gradients a tool reports: `wanted` when it names any, else every
/// default gradient (isDefaultGradient) of `manifest` in buffer order.
std::vector<std::string>
gradientsToReport(const Manifest &manifest,
                  const std::vector<std::string> &wanted);

} // namespace energy

#endif // ENERGY_RUNTIME_MANIFEST_H
