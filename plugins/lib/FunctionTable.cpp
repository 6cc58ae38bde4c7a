//===- FunctionTable.cpp - Built-in functions and aggregations ------------===//
//
// The built-in entries of the function and aggregation tables, the tables
// every layer reads, and resolving a plugin's run-time code.
//
//===----------------------------------------------------------------------===//

#include "energy/Plugin/FunctionTable.h"
#include "energy/Plugin/RuntimeLibrary.h"

using namespace energy::plugin;

namespace {
template <typename Entry>
const Entry *findByName(const std::vector<Entry> &entries,
                        llvm::StringRef name) {
  for (const Entry &entry : entries)
    if (entry.name == name)
      return &entry;
  return nullptr;
}

/// Code given with its addresses (linked into the registering binary) needs
/// no library to be opened.
bool hasAddresses(const RuntimeCode &code) {
  return !code.addresses.empty() &&
         code.addresses.size() == code.symbols.size();
}

llvm::Error registeredTwice(llvm::StringRef what, llvm::StringRef name) {
  return llvm::createStringError(what + " '" + name +
                                 "' is registered twice (a plugin's name "
                                 "must be new)");
}
} // namespace

llvm::Error FunctionTable::add(FunctionInfo function) {
  if (lookup(function.name))
    return registeredTwice("function", function.name);
  size_t symbols = function.code.symbols.size();
  switch (function.kind) {
  case FunctionKind::Builtin:
    break;
  case FunctionKind::Elementwise:
    function.arity = 1;
    function.rule = ShapeRule::Elementwise;
    if (symbols < 2 || symbols > 3)
      return llvm::createStringError(
          "element-wise function '" + function.name +
          "' needs run-time code for its value and first derivative (and "
          "optionally its second)");
    break;
  case FunctionKind::Similarity:
    function.arity = 2;
    function.rule = ShapeRule::Dot;
    if (symbols != 2)
      return llvm::createStringError("similarity '" + function.name +
                                     "' needs run-time code for its value "
                                     "and its gradient");
    break;
  }
  if (function.isPlugin()) {
    function.id = BuiltinId::None;
    if (!hasAddresses(function.code))
      if (llvm::Error error = loadRuntimeCode(function.code))
        return error;
  }
  functions.push_back(std::move(function));
  return llvm::Error::success();
}

const FunctionInfo *FunctionTable::lookup(llvm::StringRef name) const {
  return findByName(functions, name);
}

static FunctionTable builtinFunctionTable() {
  struct Builtin {
    const char *name;
    BuiltinId id;
    unsigned arity;
    ShapeRule rule;
    const char *summary = "";
  };
  using R = ShapeRule;
  static const Builtin builtins[] = {
      {"exp", BuiltinId::Exp, 1, R::Elementwise},
      {"log", BuiltinId::Log, 1, R::Elementwise},
      {"tanh", BuiltinId::Tanh, 1, R::Elementwise},
      {"sigmoid", BuiltinId::Sigmoid, 1, R::Elementwise},
      {"silu", BuiltinId::Silu, 1, R::Elementwise},
      {"softplus", BuiltinId::Softplus, 1, R::Elementwise},
      {"gelu", BuiltinId::Gelu, 1, R::Elementwise},
      {"relu", BuiltinId::Relu, 1, R::Elementwise},
      {"sqrt", BuiltinId::Sqrt, 1, R::Elementwise},
      {"abs", BuiltinId::Abs, 1, R::Elementwise},
      {"silu_int", BuiltinId::SiluInt, 1, R::Elementwise},
      {"sin", BuiltinId::Sin, 1, R::Elementwise},
      {"cos", BuiltinId::Cos, 1, R::Elementwise},
      {"elu", BuiltinId::Elu, 1, R::Elementwise},
      {"leaky_relu", BuiltinId::LeakyRelu, 2, R::ElementwiseWithScalar,
       "leaky_relu(x, a) is x where x > 0 and a * x elsewhere, a a scalar "
       "(PyTorch's default slope is 0.01: `leaky_relu(x, 0.01)`)"},
      {"sum", BuiltinId::Sum, 1, R::ReduceAll},
      {"mean", BuiltinId::Mean, 1, R::ReduceAll},
      {"maxabs", BuiltinId::Maxabs, 1, R::ReduceAll},
      {"lse", BuiltinId::Lse, 1, R::ReduceAll},
      {"sqnorm", BuiltinId::Sqnorm, 1, R::ReduceAll},
      {"norm", BuiltinId::Norm, 1, R::ReduceAll},
      {"softmax", BuiltinId::Softmax, 1, R::LastAxis},
      {"log_softmax", BuiltinId::LogSoftmax, 1, R::LastAxis},
      {"rmsnorm", BuiltinId::Rmsnorm, 1, R::LastAxis},
      {"layernorm", BuiltinId::Layernorm, 1, R::LastAxis},
      {"softmax_rows", BuiltinId::SoftmaxRows, 1, R::Rows},
      {"dot", BuiltinId::Dot, 2, R::Dot},
      {"quad", BuiltinId::Quad, 2, R::Quad},
      {"outer", BuiltinId::Outer, 2, R::Outer},
      {"diag", BuiltinId::Diag, 1, R::Diag},
      {"eye", BuiltinId::Eye, 1, R::Eye},
      {"logdet", BuiltinId::Logdet, 1, R::SquareToScalar},
      {"inverse", BuiltinId::Inverse, 1, R::Square},
  };
  FunctionTable table;
  for (const Builtin &builtin : builtins) {
    FunctionInfo info;
    info.name = builtin.name;
    info.id = builtin.id;
    info.arity = builtin.arity;
    info.rule = builtin.rule;
    info.summary = builtin.summary;
    llvm::cantFail(table.add(std::move(info)));
  }
  return table;
}

FunctionTable &energy::plugin::getFunctionTable() {
  static FunctionTable table = builtinFunctionTable();
  return table;
}

llvm::Error AggregationTable::add(AggregationInfo aggregation) {
  if (lookup(aggregation.name))
    return registeredTwice("aggregation", aggregation.name);
  if (aggregation.kind == AggregationKind::Plugin &&
      aggregation.code.symbols.size() != 2)
    return llvm::createStringError("aggregation '" + aggregation.name +
                                   "' needs run-time code for its value and "
                                   "its gradient weights");
  if (aggregation.kind == AggregationKind::Plugin &&
      !hasAddresses(aggregation.code))
    if (llvm::Error error = loadRuntimeCode(aggregation.code))
      return error;
  aggregations.push_back(std::move(aggregation));
  return llvm::Error::success();
}

const AggregationInfo *AggregationTable::lookup(llvm::StringRef name) const {
  return findByName(aggregations, name);
}

AggregationTable &energy::plugin::getAggregationTable() {
  static AggregationTable table = [] {
    AggregationTable builtins;
    auto add = [&](const char *name, const char *summary,
                   AggregationKind kind) {
      llvm::cantFail(builtins.add({name, summary, kind}));
    };
    add("sum", "Σ_p e", AggregationKind::Sum);
    add("mean", "Σ_p e / |domain|", AggregationKind::Mean);
    add("max", "max_p e", AggregationKind::Max);
    add("min", "min_p e", AggregationKind::Min);
    add("lse", "log Σ_p exp(e), or T log Σ_p exp(e / T) with a temp",
        AggregationKind::Lse);
    return builtins;
  }();
  return table;
}

llvm::Error energy::plugin::loadRuntimeCode(RuntimeCode &code) {
  std::string error;
  void *handle =
      openRuntimeLibrary(code.library, code.plugin, code.version, error);
  if (!handle)
    return llvm::createStringError(error);
  code.addresses.clear();
  for (const std::string &symbol : code.symbols) {
    void *address = runtimeSymbol(handle, symbol, code.library, error);
    if (!address)
      return llvm::createStringError("plugin '" + code.plugin + "': " + error);
    code.addresses.push_back(address);
  }
  return llvm::Error::success();
}
