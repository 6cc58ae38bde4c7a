//===- Manifest.cpp - The JSON manifest an artifact embeds ----------------===//
//
// Describes the dims, consts, buffers and kernels of an artifact so that the
// runtime can bind, allocate and call them without the compiler, and the
// CPU they were compiled for, so that it can refuse a CPU that lacks a
// feature they use. Dim expressions are written in reverse Polish notation.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/Manifest.h"
#include "energy/Codegen/Artifact.h"
#include "energy/IR/IndexArithmetic.h"
#include "energy/IR/PluginCode.h"
#include "energy/Plugin/FunctionTable.h"
#include "energy/Runtime/ArtifactABI.h"

#include "mlir/IR/AffineExpr.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace mlir::energy;
namespace json = llvm::json;

namespace {

/// An affine expression over named dims as RPN tokens.
void appendRpn(AffineExpr expr, ArrayRef<StringAttr> names,
               std::vector<::energy::DimExpr::Token> &out) {
  using Token = ::energy::DimExpr::Token;
  Token token;
  if (auto constant = dyn_cast<AffineConstantExpr>(expr)) {
    token.kind = Token::Kind::Literal;
    token.literal = constant.getValue();
    out.push_back(token);
    return;
  }
  if (auto symbol = dyn_cast<AffineSymbolExpr>(expr)) {
    token.kind = Token::Kind::Dim;
    token.dim = names[symbol.getPosition()].getValue().str();
    out.push_back(token);
    return;
  }
  auto binary = cast<AffineBinaryOpExpr>(expr);
  appendRpn(binary.getLHS(), names, out);
  appendRpn(binary.getRHS(), names, out);
  token.kind = Token::Kind::Operator;
  // A dim expression's `/` is exact division.
  token.op = indexOpOf(binary.getKind(), /*exactDivision=*/true);
  out.push_back(token);
}

json::Array rpn(DimExprAttr expr) {
  json::Array out;
  ::energy::DimExpr tokens = runtimeDimExpr(expr);
  for (const ::energy::DimExpr::Token &token : tokens.tokens()) {
    switch (token.kind) {
    case ::energy::DimExpr::Token::Kind::Dim:
      out.push_back(token.dim);
      break;
    case ::energy::DimExpr::Token::Kind::Literal:
      out.push_back(token.literal);
      break;
    case ::energy::DimExpr::Token::Kind::Operator:
      out.push_back(std::string(::energy::DimExpr::opName(token.op)));
      break;
    }
  }
  return out;
}

json::Array shapeOf(ArrayType type) {
  json::Array shape;
  for (StringAttr name : type.getShape())
    shape.push_back(json::Array{name.getValue()});
  return shape;
}

json::Value initOf(TensorOp tensor) {
  std::optional<InitKind> kind = tensor.getInit();
  if (!kind)
    return nullptr;
  json::Object init{{"kind", stringifyInitKind(*kind)}};
  if (*kind == InitKind::copy) {
    init["source"] = *tensor.getInitSource();
    return init;
  }
  json::Array args;
  if (std::optional<ArrayRef<double>> values = tensor.getInitArgs())
    for (double value : *values)
      args.push_back(value);
  init["args"] = std::move(args);
  return init;
}

/// The CPU the kernels are compiled for and the features they may use.
json::Object targetOf(const ArtifactTarget &target, StringRef dtype) {
  json::Array features;
  for (const std::string &feature : target.features)
    features.push_back(feature);
  json::Object object{{"arch", target.arch},
                      {"cpu", target.cpu},
                      {"features", std::move(features)}};
  if (!target.device.empty()) {
    object["device"] = target.device;
    json::Array archs;
    for (const std::string &arch : target.deviceArchs)
      archs.push_back(arch);
    object["device_archs"] = std::move(archs);
    // The tensors are f32; the products take bf16 operands.
    if (dtype == "bf16")
      object["device_products"] = "bf16";
  }
  return object;
}

/// The plugins whose run-time code the model calls: name, version, library
/// and the symbols whose slots the runtime fills.
json::Array pluginsOf(ModelOp model) {
  namespace plugin = ::energy::plugin;
  std::vector<const plugin::RuntimeCode *> used;
  auto use = [&](const plugin::RuntimeCode &code) {
    if (!llvm::is_contained(used, &code))
      used.push_back(&code);
  };
  model.walk([&](Operation *op) {
    if (const plugin::RuntimeCode *code = getPluginCode(op))
      use(*code);
  });
  json::Array plugins;
  for (const plugin::RuntimeCode *code : used) {
    auto same = llvm::find_if(plugins, [&](const json::Value &entry) {
      return *entry.getAsObject()->getString("name") == code->plugin;
    });
    if (same == plugins.end()) {
      plugins.push_back(json::Object{{"name", code->plugin},
                                     {"version", code->version},
                                     {"library", code->library},
                                     {"symbols", json::Array()}});
      same = std::prev(plugins.end());
    }
    json::Array &symbols = *same->getAsObject()->getArray("symbols");
    for (const std::string &symbol : code->symbols)
      symbols.push_back(symbol);
  }
  return plugins;
}

} // namespace

::energy::DimExpr mlir::energy::runtimeDimExpr(DimExprAttr expr) {
  std::vector<::energy::DimExpr::Token> tokens;
  appendRpn(expr.getExpr(), expr.getNames(), tokens);
  return ::energy::DimExpr(std::move(tokens));
}

::energy::ManifestBuffer mlir::energy::describeTensor(TensorOp tensor) {
  ::energy::ManifestBuffer buffer;
  buffer.name = tensor.getSymName().str();
  buffer.kind = ::energy::BufferKind::Tensor;
  for (StringAttr dim : tensor.getArrayType().getShape())
    buffer.shape.push_back(::energy::DimExpr({::energy::DimExpr::Token{
        ::energy::DimExpr::Token::Kind::Dim, dim.getValue().str()}}));
  buffer.role = toTensorRole(tensor.getRole());
  std::pair<std::optional<StringRef>, std::optional<std::string> *> marks[] = {
      {tensor.getOptimizerState(), &buffer.optimizerStateOf},
      {tensor.getAdjointOf(), &buffer.adjointOf},
      {tensor.getCotangentOf(), &buffer.cotangentOf},
      {tensor.getSolverOf(), &buffer.solverOf},
      {tensor.getDeferredOf(), &buffer.deferredOf},
      {tensor.getCacheFlag(), &buffer.cacheFlag},
      {tensor.getFlagOf(), &buffer.flagOf},
      {tensor.getIncomingOf(), &buffer.incomingOf}};
  for (auto [of, field] : marks)
    if (of)
      *field = of->str();
  buffer.perCall = tensor.getPerCall();
  return buffer;
}

::energy::Manifest mlir::energy::describeDimsAndTensors(ModelOp model) {
  ::energy::Manifest manifest;
  manifest.model = model.getSymName().str();
  for (DimOp dim : model.getBody().front().getOps<DimOp>()) {
    ::energy::ManifestDim entry{dim.getSymName().str(), std::nullopt,
                                std::nullopt};
    if (dim.getDefaultValue())
      entry.defaultValue = *dim.getDefaultValue();
    if (dim.getDerived())
      entry.derived = runtimeDimExpr(*dim.getDerived());
    manifest.dims.push_back(std::move(entry));
  }
  for (TensorOp tensor : model.getBody().front().getOps<TensorOp>())
    manifest.buffers.push_back(describeTensor(tensor));
  return manifest;
}

std::string mlir::energy::buildManifest(ModelOp model,
                                        const ArtifactLayout &layout,
                                        const ArtifactOptions &options) {
  json::Array dims;
  for (DimOp dim : layout.dims) {
    json::Object entry{{"name", dim.getSymName()}};
    entry["default"] = dim.getDefaultValue()
                           ? json::Value(*dim.getDefaultValue())
                           : json::Value(nullptr);
    entry["derived"] = dim.getDerived() ? json::Value(rpn(*dim.getDerived()))
                                        : json::Value(nullptr);
    dims.push_back(std::move(entry));
  }
  json::Array consts;
  for (ConstOp constant : layout.consts)
    consts.push_back(
        json::Object{{"name", constant.getSymName()},
                     {"value", constant.getValue().convertToDouble()}});
  // The tensors a step or the end of a run stores.
  llvm::StringSet<> changing;
  for (UpdateProgramOp program :
       model.getBody().front().getOps<UpdateProgramOp>())
    for (Region *part : {&program.getBody(), &program.getFinish()})
      part->walk([&](Operation *op) {
        if (auto store = dyn_cast<StoreOp>(op))
          changing.insert(store.getTensor());
        else if (auto grad = dyn_cast<GradOp>(op))
          for (FlatSymbolRefAttr into : grad.getIntoTensors())
            if (into)
              changing.insert(into.getValue());
      });
  json::Array buffers;
  for (const ArtifactLayout::Buffer &buffer : layout.buffers) {
    json::Object entry{{"name", buffer.name}};
    switch (buffer.kind) {
    case ArtifactLayout::BufferKind::Tensor: {
      auto tensor = cast<TensorOp>(buffer.op);
      ::energy::ManifestBuffer described = describeTensor(tensor);
      entry["kind"] = "tensor";
      entry["role"] = std::string(::energy::tensorRoleName(described.role));
      entry["shape"] = shapeOf(tensor.getArrayType());
      entry["init"] = initOf(tensor);
      entry["optimizer_state"] = described.optimizerStateOf
                                     ? json::Value(*described.optimizerStateOf)
                                     : json::Value(nullptr);
      std::pair<StringRef, const std::optional<std::string> *> marks[] = {
          {"adjoint_of", &described.adjointOf},
          {"cotangent_of", &described.cotangentOf},
          {"solver_of", &described.solverOf},
          {"deferred_of", &described.deferredOf},
          {OnceOp::kCacheFlagAttr, &described.cacheFlag},
          {OnceOp::kFlagOfAttr, &described.flagOf},
          {"incoming_of", &described.incomingOf}};
      for (auto [mark, of] : marks)
        if (*of)
          entry[mark] = **of;
      if (tensor.getRole() == Role::state && !described.adjointOf &&
          !described.cotangentOf && !described.solverOf &&
          !described.deferredOf && !described.cacheFlag && !described.flagOf &&
          !changing.contains(tensor.getSymName()))
        entry["run_constant"] = true;
      if (described.perCall)
        entry["per_call"] = true;
      break;
    }
    case ArtifactLayout::BufferKind::Gradient: {
      auto gradient = cast<GradientOp>(buffer.op);
      auto tensor = model.lookupSymbol<TensorOp>(gradient.getTensorAttr());
      entry["kind"] = "gradient";
      entry["tensor"] = gradient.getTensor();
      entry["shape"] = shapeOf(tensor.getArrayType());
      break;
    }
    case ArtifactLayout::BufferKind::Output: {
      auto output = cast<OutputOp>(buffer.op);
      json::Array shape;
      for (Attribute size : output.getDomain())
        shape.push_back(rpn(cast<DimExprAttr>(size)));
      for (StringAttr name :
           cast<ArrayType>(output.getElementType()).getShape())
        shape.push_back(json::Array{name.getValue()});
      entry["kind"] = "output";
      entry["shape"] = std::move(shape);
      break;
    }
    }
    buffers.push_back(std::move(entry));
  }
  auto kernelMap = [](ArrayRef<ArtifactLayout::NamedKernel> kernels) {
    json::Object map;
    for (const ArtifactLayout::NamedKernel &kernel : kernels)
      map[kernel.name] = kernel.symbol;
    return map;
  };
  auto optionalName = [](const std::string &name) {
    return name.empty() ? json::Value(nullptr) : json::Value(name);
  };
  json::Object kernels{{"energy", layout.energyKernel},
                       {"terms", kernelMap(layout.termKernels)},
                       {"gradients", kernelMap(layout.gradientKernels)},
                       {"outputs", kernelMap(layout.outputKernels)},
                       {"step", optionalName(layout.stepKernel)},
                       {"until", optionalName(layout.untilKernel)},
                       {"run_begin", optionalName(layout.runBeginKernel)},
                       {"run_finish", optionalName(layout.runFinishKernel)},
                       {"losses", kernelMap(layout.lossKernels)}};
  if (!layout.jointGradientKernels.empty()) {
    json::Array joints;
    for (const ArtifactLayout::JointKernel &joint :
         layout.jointGradientKernels) {
      json::Array tensors;
      for (const std::string &tensor : joint.tensors)
        tensors.push_back(tensor);
      joints.push_back(json::Object{{"tensors", std::move(tensors)},
                                    {"kernel", joint.symbol}});
    }
    kernels["joint_gradients"] = std::move(joints);
  }
  if (!layout.backwardKernels.empty()) {
    json::Object backward{
        {"seed", layout.backwardKernels[0]},
        {"step", layout.backwardKernels[1]},
        {"finish", layout.backwardKernels[2]},
        {"mode", layout.implicitBackward ? "implicit" : "unrolled"}};
    if (!layout.backwardCotangentsKernel.empty())
      backward["cotangents"] = layout.backwardCotangentsKernel;
    kernels["backward"] = std::move(backward);
  }
  json::Value dynamics = nullptr;
  if (DynamicsOp op = model.getDynamics(); op && !layout.stepKernel.empty())
    dynamics = json::Object{{"steps", rpn(op.getSteps())}};
  json::Array indexChecks;
  for (IndexCheckOp check : model.getBody().front().getOps<IndexCheckOp>()) {
    json::Object entry{{"read", check.getRead()},
                       {"index", check.getIndex()},
                       {"size", rpn(check.getSize())}};
    if (auto where = dyn_cast<FileLineColLoc>(check.getLoc()))
      entry["where"] = llvm::formatv("{0}:{1}:{2}", where.getFilename(),
                                     where.getLine(), where.getColumn())
                           .str();
    for (auto [key, conditions] : {std::pair{"below", check.getBelowAttr()},
                                   std::pair{"above", check.getAboveAttr()}}) {
      if (!conditions)
        continue;
      json::Array side;
      for (Attribute condition : conditions)
        side.push_back(rpn(cast<DimExprAttr>(condition)));
      entry[key] = std::move(side);
    }
    indexChecks.push_back(std::move(entry));
  }
  json::Object manifest{
      {"format", "energy-artifact"},
      {"format_version", ENERGY_ARTIFACT_FORMAT_VERSION},
      {"model", model.getSymName()},
      {"dtype", options.dtype == "bf16" ? "f32" : options.dtype},
      {"target", targetOf(options.target, options.dtype)},
      {"source_name", options.sourceName},
      {"source", options.sourceText},
      {"dims", std::move(dims)},
      {"consts", std::move(consts)},
      {"buffers", std::move(buffers)},
      {"kernels", std::move(kernels)},
      {"plugins", pluginsOf(model)},
      {"dynamics", std::move(dynamics)}};
  if (!indexChecks.empty())
    manifest["index_checks"] = std::move(indexChecks);
  return llvm::formatv("{0}", json::Value(std::move(manifest))).str();
}
