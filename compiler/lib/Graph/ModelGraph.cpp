//===- ModelGraph.cpp - A model's energy graph as Graphviz DOT ------------===//
//
// Walks the ops of an energy model as emitted from its source and writes
// what a reader of the model wants to see: which tensors there are, which
// energy terms tie them together and through which indices, and how the
// dynamics move them.
//
//===----------------------------------------------------------------------===//

#include "energy/Graph/ModelGraph.h"

#include "mlir/IR/Location.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// The name a block argument (an index) was given in the source, if any.
std::string indexName(Value index) {
  if (auto argument = dyn_cast<BlockArgument>(index)) {
    Location loc = argument.getLoc();
    if (auto name = dyn_cast<NameLoc>(loc))
      return name.getName().str();
    return "i" + std::to_string(argument.getArgNumber());
  }
  if (index.getDefiningOp<StepOp>())
    return "step";
  return "?";
}

/// `x[i, t + 1]` for a read of `x` at the read's index expressions.
std::string readText(StringRef source, AffineMap map, ValueRange indices) {
  std::string text = source.str();
  if (map.getNumResults() == 0)
    return text;
  SmallVector<std::string> dims, symbols;
  for (Value index : indices.take_front(map.getNumDims()))
    dims.push_back(indexName(index));
  for (Value index : indices.drop_front(map.getNumDims()))
    symbols.push_back(indexName(index));
  llvm::raw_string_ostream os(text);
  os << '[';
  llvm::interleave(
      map.getResults(), os,
      [&](AffineExpr expr) { printAffineText(os, expr, dims, symbols); }, ", ");
  os << ']';
  return text;
}

/// A number as a reader writes it: 0.1, 1e-06, 8.
std::string numberText(double value) {
  std::string text;
  llvm::raw_string_ostream(text) << llvm::format("%g", value);
  return text;
}

/// `[N, D]`, `[]` for a scalar.
std::string shapeText(ArrayRef<Attribute> dims) {
  SmallVector<std::string> names;
  for (Attribute dim : dims) {
    if (auto symbol = dyn_cast<FlatSymbolRefAttr>(dim))
      names.push_back(symbol.getValue().str());
    else
      names.push_back(dimExprText(cast<DimExprAttr>(dim)));
  }
  return "[" + llvm::join(names, ", ") + "]";
}

/// `(i: N, t: T - 1 where ...)`: a reduction's or loop's domain.
std::string domainText(Block &body, ArrayAttr sizes, bool predicate) {
  SmallVector<std::string> parts;
  for (auto [argument, size] : llvm::zip(body.getArguments(), sizes))
    parts.push_back(indexName(argument) + ": " +
                    dimExprText(cast<DimExprAttr>(size)));
  std::string text = llvm::join(parts, ", ");
  if (predicate)
    text += " where ...";
  return text;
}

/// `text` as a double-quoted DOT string, its newlines as line breaks.
std::string quoted(StringRef text) {
  std::string result = "\"";
  for (char c : text) {
    if (c == '\n') {
      result += "\\n";
      continue;
    }
    if (c == '"' || c == '\\')
      result += '\\';
    result += c;
  }
  return result + "\"";
}

/// An option's value as written where it is a number or a const's name,
/// else "...".
std::string optionText(Region &region) {
  Value value = cast<YieldOp>(region.front().getTerminator()).getValues()[0];
  if (auto constant = value.getDefiningOp<ConstantOp>())
    return numberText(constant.getValue().convertToDouble());
  if (auto read = value.getDefiningOp<ReadOp>();
      read && read.getIndices().empty())
    return read.getSource().str();
  return "...";
}

/// `gd(lr = 0.1)` for a gradient rule, `stationary` for an M-step.
std::string ruleText(UpdateOp update) {
  std::string text = update.getOptimizer().str();
  SmallVector<std::string> options;
  for (auto [name, region] :
       llvm::zip(update.getOptionNames(), update.getOptions()))
    options.push_back(cast<StringAttr>(name).getValue().str() + " = " +
                      optionText(region));
  for (NamedAttribute option : update.getStringOptions())
    options.push_back(option.getName().str() + " = " +
                      cast<StringAttr>(option.getValue()).getValue().str());
  if (!options.empty())
    text += "(" + llvm::join(options, ", ") + ")";
  return text;
}

class GraphWriter {
public:
  GraphWriter(ModelOp model, raw_ostream &os) : model(model), os(os) {}

  void write() {
    os << "digraph " << quoted(model.getSymName()) << " {\n"
       << "  graph [rankdir=LR, fontname=\"DejaVu Sans\", fontsize=12, "
          "labelloc=t, label="
       << quoted(graphLabel()) << "];\n"
       << "  node [fontname=\"DejaVu Sans\", fontsize=11];\n"
       << "  edge [fontname=\"DejaVu Sans\", fontsize=10, dir=none];\n";
    collectRules();
    for (TensorOp tensor : model.getOps<TensorOp>())
      writeTensor(tensor);
    // A tensor that starts as another's value.
    for (TensorOp tensor : model.getOps<TensorOp>())
      if (std::optional<StringRef> source = tensor.getInitSource())
        os << "  " << quoted("tensor:" + source->str()) << " -> "
           << quoted("tensor:" + tensor.getSymName().str())
           << " [dir=forward, style=dashed, label=\"initial value\"];\n";
    for (LetOp let : model.getOps<LetOp>()) {
      os << "  " << quoted("let:" + let.getSymName().str())
         << " [shape=ellipse, style=dashed, label="
         << quoted(let.getSymName().str() + "\nlet " + shapeText(letShape(let)))
         << "];\n";
      writeReads(let.getBody(), "let:" + let.getSymName().str(),
                 /*roles=*/false);
    }
    for (TermOp term : model.getOps<TermOp>()) {
      if (term.getAuxiliary())
        continue;
      std::string node = "term:" + term.getSymName().str();
      bool hasLse = false;
      term.walk([&](ReduceOp reduce) {
        hasLse |= reduce.getKind() == ReduceKind::lse;
      });
      os << "  " << quoted(node)
         << " [shape=box, style=filled, fillcolor=\"#333333\", "
            "fontcolor=white, label="
         << quoted("energy " + term.getSymName().str() + "\n" +
                   termStructure(term))
         << "];\n";
      writeReads(term.getBody(), node, hasLse);
    }
    for (OutputOp output : model.getOps<OutputOp>()) {
      std::string node = "output:" + output.getSymName().str();
      os << "  " << quoted(node)
         << " [shape=note, style=filled, fillcolor=\"#d9ead3\", label="
         << quoted(output.getSymName().str() + "\noutput " +
                   shapeText(letShape(output)))
         << "];\n";
      writeReads(output.getBody(), node, /*roles=*/false);
    }
    // What a rule's options read (a preconditioner's factors, a learning
    // rate from a tensor) feeds the node the rule updates.
    if (DynamicsOp dynamics = model.getDynamics())
      for (UpdateOp update : dynamics.getRules().front().getOps<UpdateOp>())
        for (auto [name, region] :
             llvm::zip(update.getOptionNames(), update.getOptions()))
          writeOptionReads(region, update.getNode(),
                           cast<StringAttr>(name).getValue());
    if (DynamicsOp dynamics = model.getDynamics())
      for (AssignOp assign : dynamics.getRules().front().getOps<AssignOp>()) {
        std::string node = "rule:" + assign.getNode().str();
        os << "  " << quoted(node)
           << " [shape=cds, style=filled, fillcolor=\"#fff2cc\", label="
           << quoted(assign.getNode().str() + " <- rule") << "];\n";
        writeReads(assign.getBody(), node, /*roles=*/false);
        os << "  " << quoted(node) << " -> "
           << quoted("tensor:" + assign.getNode().str())
           << " [dir=forward, style=bold];\n";
      }
    os << "}\n";
  }

private:
  std::string graphLabel() {
    std::string label = "model " + model.getSymName().str();
    DynamicsOp dynamics = model.getDynamics();
    if (!dynamics)
      return label;
    label += "\ndynamics: steps " + dimExprText(dynamics.getSteps());
    if (dynamics.getOrder() == Order::sequential)
      label += ", order sequential";
    if (!dynamics.getUntil().empty())
      label += ", until a stopping rule holds";
    return label;
  }

  /// The domain axes of a let or output followed by its element's axes.
  template <typename OpT> SmallVector<Attribute> letShape(OpT op) {
    SmallVector<Attribute> dims(op.getDomain().begin(), op.getDomain().end());
    MLIRContext *context = op.getContext();
    for (StringAttr dim : cast<ArrayType>(op.getElementType()).getShape())
      dims.push_back(FlatSymbolRefAttr::get(context, dim));
    return dims;
  }

  void collectRules() {
    DynamicsOp dynamics = model.getDynamics();
    if (!dynamics)
      return;
    for (Operation &op : dynamics.getRules().front()) {
      if (auto update = dyn_cast<UpdateOp>(op))
        rules[update.getNode()] = ruleText(update);
      else if (auto assign = dyn_cast<AssignOp>(op))
        rules[assign.getNode()] = "explicit rule";
    }
  }

  void writeTensor(TensorOp tensor) {
    StringRef role = stringifyRole(tensor.getRole());
    const char *color = role == "state"   ? "#fce5cd"
                        : role == "input" ? "#cfe2f3"
                                          : "#e0e0e0";
    SmallVector<Attribute> shape(tensor.getShape().begin(),
                                 tensor.getShape().end());
    std::string label =
        tensor.getSymName().str() + "\n" + role.str() + " " + shapeText(shape);
    auto rule = rules.find(tensor.getSymName());
    if (rule != rules.end())
      label += "\n" + rule->second;
    os << "  " << quoted("tensor:" + tensor.getSymName().str())
       << " [shape=box, style=\"rounded,filled\", fillcolor=\"" << color
       << "\", label=" << quoted(label) << "];\n";
  }

  /// `-sum(i: N) lse(k: K)`: the reductions of a term, outermost first.
  std::string termStructure(TermOp term) {
    SmallVector<std::string> parts;
    term.getBody().walk<WalkOrder::PreOrder>([&](ReduceOp reduce) {
      std::string text = stringifyReduceKind(reduce.getKind()).str() + "(" +
                         domainText(reduce.getBody().front(), reduce.getSizes(),
                                    reduce.hasPredicate());
      if (reduce.getTemperature())
        text += "; temp";
      parts.push_back(text + ")");
    });
    return parts.empty() ? std::string("(no index domain)")
                         : llvm::join(parts, " ");
  }

  /// An edge from each tensor or let `region` reads to `node`, one per
  /// distinct read; with `roles`, labelled child or parent by whether the
  /// read's indices come from an lse's own domain.
  void writeReads(Region &region, StringRef node, bool roles) {
    SmallVector<std::pair<std::string, std::string>> edges;
    region.walk([&](ReadOp read) {
      std::string source;
      if (model.lookupSymbol<TensorOp>(read.getSourceAttr()))
        source = "tensor:" + read.getSource().str();
      else if (model.lookupSymbol<LetOp>(read.getSourceAttr()))
        source = "let:" + read.getSource().str();
      else
        return; // consts
      std::string label =
          readText(read.getSource(), read.getMap(), read.getIndices());
      if (roles) {
        bool parent = false, child = false;
        for (Value index : read.getIndices()) {
          auto argument = dyn_cast<BlockArgument>(index);
          auto owner =
              argument ? dyn_cast<ReduceOp>(argument.getOwner()->getParentOp())
                       : ReduceOp();
          if (owner && owner.getKind() == ReduceKind::lse)
            parent = true;
          else if (argument)
            child = true;
        }
        if (parent)
          label += child ? "\nchild and parent" : "\nparent";
        else if (child)
          label += "\nchild";
      }
      if (!llvm::is_contained(edges, std::make_pair(source, label)))
        edges.push_back({source, label});
    });
    for (auto &[source, label] : edges)
      os << "  " << quoted(source) << " -> " << quoted(node.str())
         << " [label=" << quoted(label) << "];\n";
  }

  /// A dashed edge, labelled by the option, from each tensor the option
  /// `region` of the rule of `node` reads.
  void writeOptionReads(Region &region, StringRef node, StringRef option) {
    SmallVector<std::string> sources;
    region.walk([&](ReadOp read) {
      if (!model.lookupSymbol<TensorOp>(read.getSourceAttr()))
        return;
      std::string source = "tensor:" + read.getSource().str();
      if (!llvm::is_contained(sources, source))
        sources.push_back(source);
    });
    for (const std::string &source : sources)
      os << "  " << quoted(source) << " -> " << quoted("tensor:" + node.str())
         << " [dir=forward, style=dashed, label="
         << quoted("option " + option.str()) << "];\n";
  }

  ModelOp model;
  raw_ostream &os;
  llvm::StringMap<std::string> rules;
};
} // namespace

void mlir::energy::writeModelGraph(ModelOp model, raw_ostream &os) {
  GraphWriter(model, os).write();
}
