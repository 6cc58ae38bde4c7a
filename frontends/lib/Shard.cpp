//===- Shard.cpp - One rank's model of a run sharded along a dim ----------===//
//
// The rewrite behind `energy-run --shard N`: each term's outermost sum over
// N in a linear position runs over the rank's rows; everything else reads
// the whole length from gathered copies and counts on the first rank only.
//
//===----------------------------------------------------------------------===//

#include "ShardRewriter.h"

#include "energy/Frontend/Frontend.h"
#include "energy/Frontend/OptimizerTable.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <map>

using namespace energy::frontend;
using namespace energy::frontend::shard;

namespace energy {
namespace frontend {
namespace shard {

std::string applyEdits(const char *begin, const char *end,
                       std::vector<Edit> edits) {
  auto covered = [&](const Edit &wrap) {
    return wrap.wrapBegin && llvm::any_of(edits, [&](const Edit &replacement) {
             return replacement.order == Edit::Replacement &&
                    replacement.begin <= wrap.wrapBegin &&
                    wrap.wrapEnd <= replacement.end &&
                    replacement.begin < replacement.end;
           });
  };
  std::vector<Edit> kept;
  for (const Edit &edit : edits)
    if (!covered(edit))
      kept.push_back(edit);
  edits = std::move(kept);
  std::vector<size_t> order(edits.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Edit &x = edits[a], &y = edits[b];
    if (x.begin != y.begin)
      return x.begin < y.begin;
    return x.order != y.order ? x.order < y.order : a < b;
  });
  std::string text;
  const char *cursor = begin;
  for (size_t index : order) {
    const Edit &edit = edits[index];
    if (edit.begin < cursor || edit.end > end)
      continue; // inside an earlier replacement: never made
    text.append(cursor, edit.begin);
    text += edit.text;
    cursor = edit.end;
  }
  text.append(cursor, end);
  return text;
}

std::string quoted(StringRef name) { return "`" + name.str() + "`"; }

std::string ShardRewriter::fresh(const std::string &base) {
  std::string name = base;
  for (int suffix = 2; names.count(name); ++suffix)
    name = base + std::to_string(suffix);
  names.insert(name);
  return name;
}

std::optional<size_t>
ShardRewriter::shardedPosition(const ComprehensionDecl &decl) const {
  const std::vector<IndexBinding> &bindings = decl.getDomain().bindings;
  for (size_t i = 0; i < bindings.size(); ++i)
    if (isShardedBinding(bindings[i]))
      return i;
  return std::nullopt;
}

bool ShardRewriter::declMentionsShard(const Decl &decl) {
  if (auto it = mentions.find(&decl); it != mentions.end())
    return it->second;
  mentions[&decl] = false; // lets are acyclic; this ends any recursion
  bool result = false;
  if (const auto *tensor = dyn_cast<TensorDecl>(&decl))
    result = axes.count(tensor);
  else if (const auto *comprehension = dyn_cast<ComprehensionDecl>(&decl)) {
    result = shardedPosition(*comprehension).has_value() ||
             mentionsShard(comprehension->getBody());
    for (const IndexBinding &binding : comprehension->getDomain().bindings)
      result = result || mentionsShard(*binding.size);
    if (const Expr *predicate = comprehension->getDomain().predicate.get())
      result = result || mentionsShard(*predicate);
  } else if (const auto *fn = dyn_cast<FnDecl>(&decl)) {
    result = mentionsShard(fn->getBody()) || signatureAlongDim(*fn);
  } else if (const auto *dimDecl = dyn_cast<DimDecl>(&decl))
    result = dimDecl->getName() == dim;
  mentions[&decl] = result;
  return result;
}

bool ShardRewriter::mentionsShard(const Expr &expr) {
  if (const auto *name = dyn_cast<NameExpr>(&expr)) {
    if (Decl *decl = name->getDecl())
      return declMentionsShard(*decl);
    return false;
  }
  if (const auto *call = dyn_cast<CallExpr>(&expr))
    if (call->getFn() && declMentionsShard(*call->getFn()))
      return true;
  if (const auto *reduction = dyn_cast<ReductionExpr>(&expr))
    for (const IndexBinding &binding : reduction->getDomain().bindings)
      if (isShardedBinding(binding))
        return true;
  bool found = false;
  forEachChild(
      expr, [&](const Expr &child) { found = found || mentionsShard(child); });
  return found;
}

bool ShardRewriter::signatureAlongDim(const FnDecl &fn) const {
  auto alongDim = [&](const std::vector<DimRef> &dims) {
    return llvm::any_of(dims,
                        [&](const DimRef &ref) { return ref.name == dim; });
  };
  return alongDim(fn.getResultDims()) ||
         llvm::any_of(fn.getParams(), [&](const FnParam &param) {
           return alongDim(param.dims);
         });
}

bool ShardRewriter::reads(const Expr &expr, const TensorDecl &tensor) {
  if (const auto *name = dyn_cast<NameExpr>(&expr)) {
    if (name->getDecl() == &tensor)
      return true;
    if (const auto *let = llvm::dyn_cast_or_null<LetDecl>(name->getDecl()))
      return reads(let->getBody(), tensor);
    return false;
  }
  if (const auto *call = dyn_cast<CallExpr>(&expr))
    if (call->getFn() && reads(call->getFn()->getBody(), tensor))
      return true;
  bool found = false;
  forEachChild(
      expr, [&](const Expr &child) { found = found || reads(child, tensor); });
  return found;
}

std::string ShardRewriter::gatheredName(const TensorDecl &tensor) {
  std::string &name = gathered[&tensor];
  if (name.empty())
    name = fresh(tensor.getName().str() + "__all");
  return name;
}

void ShardRewriter::visit(const Expr &expr) {
  switch (expr.getKind()) {
  case Expr::Kind::Name:
    return visitName(cast<NameExpr>(expr));
  case Expr::Kind::Index:
    return visitRead(cast<IndexExpr>(expr));
  case Expr::Kind::Reduction:
    return visitReduction(cast<ReductionExpr>(expr), nullptr);
  default:
    break;
  }
  forEachChild(expr, [&](const Expr &child) { visit(child); });
}

void ShardRewriter::visitName(const NameExpr &name) {
  switch (name.getSymbolKind()) {
  case SymbolKind::IndexVar:
    if (ring && column && name.getBinding() == column) {
      edit(name, "(" + name.getName().str() +
                     (ranks > 1 ? " * " + std::to_string(ranks) : "") + " + " +
                     blockOffsetDim + ")");
      blockOffsetUsed = true;
      return;
    }
    if (name.getBinding() == row) {
      edit(name, "(" + name.getName().str() +
                     (ranks > 1 ? " * " + std::to_string(ranks) : "") + " + " +
                     offsetDim + ")");
      offsetUsed = true;
    }
    return;
  case SymbolKind::Dim:
    if (name.getName() == dim && sizingBlock) {
      edit(name, blockDim);
    } else if (name.getName() == dim) {
      edit(name, wholeDim);
      wholeUsed = true;
    }
    return;
  case SymbolKind::Tensor:
    if (const TensorDecl *tensor = shardedTensor(name);
        tensor && ringRead(name, nullptr))
      edit(name, gatheredName(*tensor));
    return;
  case SymbolKind::Let:
    return visitLetRead(name, *cast<LetDecl>(name.getDecl()), nullptr);
  default:
    return;
  }
}

void ShardRewriter::visitRead(const IndexExpr &read) {
  const auto *base = dyn_cast<NameExpr>(&read.getBase());
  const std::vector<ExprPtr> &indices = read.getIndices();
  if (base && base->getSymbolKind() == SymbolKind::Let)
    return visitLetRead(*base, *cast<LetDecl>(base->getDecl()), &indices);
  const TensorDecl *tensor = shardedTensor(read.getBase());
  if (!tensor) {
    forEachChild(read, [&](const Expr &child) { visit(child); });
    return;
  }
  unsigned axis = axes.lookup(tensor);
  if (indices.size() > axis && isRowIndex(*indices[axis])) {
    for (size_t i = 0; i < indices.size(); ++i)
      if (i != axis)
        visit(*indices[i]);
    return;
  }
  // Any other read (another index, a shifted one `t - 1`, a constant, the
  // whole axis) reads the gathered copy, at global positions.
  if (!ringRead(read, indices.size() > axis ? indices[axis].get() : nullptr))
    return;
  edit(*base, gatheredName(*tensor));
  for (size_t i = 0; i < indices.size(); ++i)
    if (i != axis || !isColumnIndex(*indices[i])) // a ring's block: local
      visit(*indices[i]);
}

void ShardRewriter::visitLetRead(const NameExpr &base, const LetDecl &let,
                                 const std::vector<ExprPtr> *indices) {
  std::optional<size_t> position = shardedPosition(let);
  if (!position) {
    // A let without an index over the dim is evaluated whole on every rank.
    if (!wholeLetNames.count(&let)) {
      wholeLetNames[&let] = let.getName().str();
    }
    if (indices)
      for (const ExprPtr &index : *indices)
        visit(*index);
    return;
  }
  bool rankRows = indices && indices->size() > *position &&
                  isRowIndex(*(*indices)[*position]);
  if (rankRows) {
    rankLets.insert(&let);
    for (size_t i = 0; i < indices->size(); ++i)
      if (i != *position)
        visit(*(*indices)[i]);
    return;
  }
  if (!ringRead(base, indices && indices->size() > *position
                          ? (*indices)[*position].get()
                          : nullptr))
    return;
  std::string &name = wholeLetNames[&let];
  if (name.empty()) {
    name = fresh(let.getName().str() + "__all");
  }
  edit(base, name);
  if (indices)
    for (size_t i = 0; i < indices->size(); ++i)
      if (i != *position || !isColumnIndex(*(*indices)[i]))
        visit(*(*indices)[i]);
}

void ShardRewriter::visitSize(const IndexBinding &binding) {
  if (!isShardedBinding(binding) && mentionsShard(*binding.size)) {
    fail(*binding.size, "index " + quoted(binding.name) + " ranges over " +
                            quoted(binding.sizeSymbol) + "; --shard " + dim +
                            " shards indices over " + quoted(dim) + " alone");
    return;
  }
  visit(*binding.size);
}

void ShardRewriter::visitReduction(const ReductionExpr &reduction,
                                   const IndexBinding *rowBinding) {
  const IndexDomain &domain = reduction.getDomain();
  if (ring && row && !rowBinding &&
      reduction.getReductionKind() == ReductionKind::Lse)
    for (const IndexBinding &binding : domain.bindings)
      if (isShardedBinding(binding))
        return visitRingSite(reduction, binding);
  for (const IndexBinding &binding : domain.bindings)
    if (&binding != rowBinding) // its size stays the rank's row count
      visitSize(binding);
  const IndexBinding *saved = row;
  if (rowBinding)
    row = rowBinding;
  if (domain.predicate)
    visit(*domain.predicate);
  if (const Expr *temperature = reduction.getTemperature())
    visit(*temperature);
  for (const IndexBinding &binding : domain.bindings)
    scope.push_back(&binding);
  visit(reduction.getBody());
  scope.resize(scope.size() - domain.bindings.size());
  row = saved;
}

/// The row binding of `reduction` when it sums over the dim in a way the
/// ranks' partial sums add up to: a sum, or a mean without a predicate.
static const IndexBinding *rowBindingOf(const ReductionExpr &reduction,
                                        StringRef dim) {
  ReductionKind kind = reduction.getReductionKind();
  bool mean = kind == ReductionKind::Mean;
  if (kind != ReductionKind::Sum && !mean)
    return nullptr;
  if (mean && reduction.getDomain().predicate)
    return nullptr;
  for (const IndexBinding &binding : reduction.getDomain().bindings)
    if (binding.sizeSymbol == dim)
      return &binding;
  return nullptr;
}

bool ShardRewriter::probe(const Expr &expr) const {
  if (const auto *unary = dyn_cast<UnaryExpr>(&expr))
    return probe(unary->getOperand());
  if (const auto *binary = dyn_cast<BinaryExpr>(&expr)) {
    switch (binary->getOp()) {
    case BinaryOp::Add:
    case BinaryOp::Sub:
      return probe(binary->getLhs()) || probe(binary->getRhs());
    case BinaryOp::Mul:
      return probe(binary->getLhs()) != probe(binary->getRhs());
    case BinaryOp::Div:
      return probe(binary->getLhs());
    default:
      return false;
    }
  }
  if (const auto *reduction = dyn_cast<ReductionExpr>(&expr)) {
    if (rowBindingOf(*reduction, dim))
      return true;
    ReductionKind kind = reduction->getReductionKind();
    if (kind != ReductionKind::Sum && kind != ReductionKind::Mean)
      return false;
    for (const IndexBinding &binding : reduction->getDomain().bindings)
      if (binding.sizeSymbol == dim)
        return false; // a mean over the dim with a predicate
    return probe(reduction->getBody());
  }
  return false;
}

void ShardRewriter::wholeOnFirstRank(const Expr &expr) {
  visit(expr);
  wrap(expr, "(" + firstRankConst + " * (", "))");
  firstRankUsed = true;
}

bool ShardRewriter::linear(const Expr &expr) {
  if (!probe(expr))
    return false;
  if (const auto *unary = dyn_cast<UnaryExpr>(&expr))
    return linear(unary->getOperand());
  if (const auto *binary = dyn_cast<BinaryExpr>(&expr)) {
    for (const Expr *operand : {&binary->getLhs(), &binary->getRhs()}) {
      bool additive =
          binary->getOp() == BinaryOp::Add || binary->getOp() == BinaryOp::Sub;
      if (probe(*operand))
        linear(*operand);
      else if (additive)
        wholeOnFirstRank(*operand);
      else
        visit(*operand); // a factor, the same on every rank
    }
    return true;
  }
  const auto &reduction = cast<ReductionExpr>(expr);
  const IndexBinding *rowBinding = rowBindingOf(reduction, dim);
  if (!rowBinding) {
    // A sum or mean over other indices of row sums.
    const IndexDomain &domain = reduction.getDomain();
    for (const IndexBinding &binding : domain.bindings)
      visitSize(binding);
    if (domain.predicate)
      visit(*domain.predicate);
    for (const IndexBinding &binding : domain.bindings)
      scope.push_back(&binding);
    linear(reduction.getBody());
    scope.resize(scope.size() - domain.bindings.size());
    return true;
  }
  if (reduction.getReductionKind() == ReductionKind::Mean) {
    wrap(reduction, "((" + dim + " / " + wholeDim + ") * ", ")");
    wholeUsed = true;
  }
  visitReduction(reduction, rowBinding);
  return true;
}

std::string ShardRewriter::renderLet(const LetDecl &let, bool whole) {
  std::vector<Edit> letEdits;
  std::vector<Edit> *savedEdits = edits;
  const IndexBinding *savedRow = row;
  edits = &letEdits;
  row = nullptr;
  std::optional<size_t> position = shardedPosition(let);
  const char *begin = let.getRange().Start.getPointer();
  if (whole && position)
    letEdits.push_back({let.getNameRange().Start.getPointer(),
                        let.getNameRange().End.getPointer(), Edit::Replacement,
                        wholeLetNames.lookup(&let)});
  const IndexDomain &domain = let.getDomain();
  const IndexBinding *savedColumn = column;
  bool blockCopy = ring && whole && position;
  for (size_t i = 0; i < domain.bindings.size(); ++i) {
    if (!whole && position && i == *position)
      continue;
    sizingBlock = blockCopy && i == *position;
    visitSize(domain.bindings[i]);
    sizingBlock = false;
  }
  if (!whole && position)
    row = &domain.bindings[*position];
  if (blockCopy)
    column = &domain.bindings[*position];
  if (domain.predicate)
    visit(*domain.predicate);
  visit(let.getBody());
  edits = savedEdits;
  row = savedRow;
  column = savedColumn;
  return applyEdits(begin, let.getRange().End.getPointer(),
                    std::move(letEdits));
}

std::optional<ShardedModel> ShardRewriter::run() {
  const DimDecl *dimDecl = nullptr;
  for (const DeclPtr &decl : model.decls) {
    names.insert(decl->getName());
    if (const auto *d = dyn_cast<DimDecl>(decl.get()); d && d->getName() == dim)
      dimDecl = d;
  }
  if (!dimDecl) {
    diagnostics.error(model.nameRange.Start, "--shard " + dim + ": model " +
                                                 quoted(model.name) +
                                                 " has no dim " + quoted(dim));
    return std::nullopt;
  }
  if (dimDecl->isDerived()) {
    diagnostics.error(dimDecl->getNameRange().Start,
                      "--shard " + dim + ": dim " + quoted(dim) +
                          " is derived from other dims; shard one of those");
    return std::nullopt;
  }
  wholeDim = fresh(dim + "__all");
  offsetDim = fresh(dim + "__offset");
  firstRankConst = fresh("shard__first");
  if (ring) {
    blockDim = fresh(dim + "__blk");
    blockOffsetDim = fresh(dim + "__blkoff");
  }

  ShardedModel result;
  std::vector<Edit> top;
  for (const DeclPtr &decl : model.decls) {
    if (const auto *derived = dyn_cast<DimDecl>(decl.get());
        derived && derived->isDerived() && mentionsShard(*derived->getValue()))
      fail(*derived->getValue(),
           "dim " + quoted(derived->getName()) + " is derived from " +
               quoted(dim) + ", which --shard " + dim + " does not support");
    const auto *tensor = dyn_cast<TensorDecl>(decl.get());
    if (!tensor)
      continue;
    // The rank holds its rows of the first axis of the dim; other axes of
    // the dim (a [N, N] bias) it holds whole.
    std::optional<unsigned> axis;
    for (unsigned i = 0; i < tensor->getDims().size(); ++i) {
      const DimRef &ref = tensor->getDims()[i];
      if (ref.name != dim)
        continue;
      if (!axis) {
        axis = i;
        continue;
      }
      top.push_back({ref.range.Start.getPointer(), ref.range.End.getPointer(),
                     Edit::Replacement, wholeDim});
      wholeUsed = true;
    }
    if (axis)
      axes[tensor] = *axis;
  }
  edits = &top;
  // Fns see only their parameters and globals: their bodies read the whole
  // length.
  for (const DeclPtr &decl : model.decls)
    if (const auto *fn = dyn_cast<FnDecl>(decl.get())) {
      if (!signatureAlongDim(*fn)) {
        visit(fn->getBody());
        continue;
      }
      diagnostics.error(fn->getNameRange().Start,
                        "fn " + quoted(fn->getName()) +
                            " takes or gives values along dim " + quoted(dim) +
                            ", which --shard does not rewrite yet (write its "
                            "body where it is called)",
                        {fn->getNameRange()});
      ok = false;
    }
  // Outputs are evaluated whole on every rank (their reads at a row index
  // become reads at its global position).
  for (const DeclPtr &decl : model.decls)
    if (const auto *output = dyn_cast<OutputDecl>(decl.get())) {
      for (const IndexBinding &binding : output->getDomain().bindings)
        visitSize(binding);
      if (const Expr *predicate = output->getDomain().predicate.get())
        visit(*predicate);
      visit(output->getBody());
    }
  // Terms with a part every rank evaluates whole, counted on rank 0.
  std::vector<const TermDecl *> scaledTerms;
  for (const DeclPtr &decl : model.decls)
    if (const auto *term = dyn_cast<TermDecl>(decl.get())) {
      size_t before = top.size();
      if (!linear(term->getBody()))
        wholeOnFirstRank(term->getBody());
      bool scaled = llvm::any_of(
          llvm::make_range(top.begin() + before, top.end()),
          [&](const Edit &edit) {
            return edit.text.find(firstRankConst) != std::string::npos;
          });
      if (scaled)
        scaledTerms.push_back(term);
    }
  if (const DynamicsBlock *dynamics = model.dynamics.get()) {
    for (const UpdateRule &rule : dynamics->rules) {
      if (rule.kind == UpdateRule::Kind::Explicit && rule.target &&
          axes.count(rule.target)) {
        diagnostics.error(rule.nodeRange.Start,
                          "the explicit rule of " + quoted(rule.node) +
                              " updates a tensor along dim " + quoted(dim) +
                              ", which --shard does not rewrite yet");
        ok = false;
        continue;
      }
      bool stationary =
          rule.kind == UpdateRule::Kind::Optimizer && rule.optimizerInfo &&
          rule.optimizerInfo->category == OptimizerCategory::Stationary;
      if (stationary && rule.target)
        for (const TermDecl *term : scaledTerms)
          if (reads(term->getBody(), *rule.target)) {
            diagnostics.error(
                rule.optimizerRange.Start,
                "`stationary` solves for " + quoted(rule.node) +
                    " in closed form from " + quoted(term->getName()) +
                    ", a term --shard " + dim +
                    " leaves to the first rank (it has no sum over " +
                    quoted(dim) + " for the ranks to share)",
                {rule.optimizerRange});
            ok = false;
            break;
          }
      if (stationary && rule.target && axes.count(rule.target)) {
        diagnostics.error(rule.optimizerRange.Start,
                          "`stationary` (a closed form) updates " +
                              quoted(rule.node) + ", a tensor along dim " +
                              quoted(dim) + ", which --shard does not rewrite",
                          {rule.optimizerRange});
        ok = false;
        continue;
      }
      if (rule.value)
        visit(*rule.value);
      for (const OptimizerOption &option : rule.options) {
        if (rule.target && axes.count(rule.target) &&
            mentionsShard(*option.value)) {
          fail(*option.value, "option " + quoted(option.name) +
                                  " of the rule of " + quoted(rule.node) +
                                  " reads along dim " + quoted(dim) +
                                  ", which --shard does not rewrite yet");
          continue;
        }
        visit(*option.value);
      }
    }
    if (dynamics->steps) {
      visit(*dynamics->steps->count);
      if (dynamics->steps->until)
        visit(*dynamics->steps->until);
    }
  }
  // Lets: each demanded copy, in the let's place. Rendering a copy may
  // demand copies of the lets it reads, so render until none is new.
  std::map<const LetDecl *, std::string> renderedRank, renderedWhole;
  auto renderDemanded = [&] {
    bool changed = true;
    while (changed && ok) {
      changed = false;
      for (const DeclPtr &decl : model.decls) {
        const auto *let = dyn_cast<LetDecl>(decl.get());
        if (!let)
          continue;
        if (rankLets.count(let) && !renderedRank.count(let)) {
          renderedRank[let] = renderLet(*let, false);
          changed = true;
        }
        if (wholeLetNames.count(let) && !renderedWhole.count(let)) {
          renderedWhole[let] = renderLet(*let, true);
          changed = true;
        }
      }
    }
  };
  renderDemanded();
  // A let nothing reads: whole, under its name (the shapes of the tensors
  // it reads may have changed). With a ring, the rank's model reads no
  // copies: each let over the dim has a rank copy there (the block model
  // has the whole ones too).
  for (const DeclPtr &decl : model.decls)
    if (const auto *let = dyn_cast<LetDecl>(decl.get())) {
      bool position = shardedPosition(*let).has_value();
      if (ring && position && !rankLets.count(let))
        rankLets.insert(let);
      else if (!rankLets.count(let) && !wholeLetNames.count(let))
        wholeLetNames[let] = let->getName().str();
    }
  renderDemanded();
  if (!ok)
    return std::nullopt;
  std::vector<Edit> rowsEdits, blockEdits;
  for (const DeclPtr &decl : model.decls) {
    const auto *let = dyn_cast<LetDecl>(decl.get());
    if (!let)
      continue;
    std::vector<std::string> copies;
    if (renderedRank.count(let))
      copies.push_back(renderedRank[let]);
    if (renderedWhole.count(let))
      copies.push_back(renderedWhole[let]);
    if (copies.empty())
      continue; // unread: left as it was
    std::string text = copies[0];
    for (size_t i = 1; i < copies.size(); ++i)
      text += ";\n  let " + copies[i];
    Edit edit{let->getRange().Start.getPointer(),
              let->getRange().End.getPointer(), Edit::Replacement, text};
    if (!ring || !renderedRank.count(let) || !renderedWhole.count(let)) {
      top.push_back(edit);
      continue;
    }
    // The ring's rank model reads no copies; its block model has both.
    blockEdits.push_back(edit);
    edit.text = renderedRank[let];
    rowsEdits.push_back(edit);
  }

  // The new declarations, last in the model (lines before keep their
  // numbers, so that errors in the rank's model point where they would).
  std::string declarations, blockDeclarations;
  for (const DeclPtr &decl : model.decls) {
    const auto *tensor = dyn_cast<TensorDecl>(decl.get());
    if (!tensor || !axes.count(tensor))
      continue;
    ShardedTensor entry;
    entry.name = tensor->getName().str();
    entry.axis = axes.lookup(tensor);
    entry.role = tensor->getRole();
    if (auto it = gathered.find(tensor); it != gathered.end()) {
      entry.gathered = it->second;
      wholeUsed = wholeUsed || !ring;
      std::string &text = ring ? blockDeclarations : declarations;
      text += "  param " + entry.gathered + " : [";
      // A ring's copy holds one block of the rows' axis; other axes of the
      // dim are whole.
      for (size_t i = 0; i < tensor->getDims().size(); ++i)
        text += (i ? ", " : "") + (tensor->getDims()[i].name != dim
                                       ? tensor->getDims()[i].name.str()
                                   : ring && i == entry.axis ? blockDim
                                                             : wholeDim);
      text += "] = zeros;\n";
    }
    result.tensors.push_back(std::move(entry));
  }
  if (!wholeUsed)
    wholeDim.clear();
  if (!offsetUsed)
    offsetDim.clear();
  if (!firstRankUsed)
    firstRankConst.clear();
  std::vector<std::string> dims;
  for (const std::string &name : {wholeDim, offsetDim})
    if (!name.empty())
      dims.push_back(name);
  bool striped = (offsetUsed || blockOffsetUsed) && ranks > 1;
  if (ring && !ringModels(top, rowsEdits, declarations, blockEdits,
                          blockDeclarations, result))
    return std::nullopt;
  std::string header = "  # --shard " + dim + ": this rank's rows of " + dim;
  std::string rows = striped ? "rows " +
                                   (offsetUsed ? offsetDim : std::string("r")) +
                                   " + " + std::to_string(ranks) + " * k"
                     : offsetUsed && wholeUsed ? "from row " + offsetDim
                                               : "";
  std::string whole = wholeUsed ? "of " + wholeDim : "";
  if (!whole.empty() || !rows.empty())
    header += " (" + whole + (!whole.empty() && !rows.empty() ? ", " : "") +
              rows + ")";
  header += "\n";
  if (!dims.empty())
    header += "  dim " + llvm::join(dims, ", ") + ";\n";
  if (firstRankUsed)
    header += "  const " + firstRankConst + " = 1.0;\n";
  declarations = header + declarations;
  const char *bufferEnd = buffer.data() + buffer.size();
  const char *close = model.range.End.getPointer();
  while (close > buffer.data() && close[-1] != '}')
    --close;
  if (close > buffer.data())
    top.push_back({close - 1, close - 1, Edit::Opening, declarations});

  if (ring) {
    std::vector<Edit> block = top;
    block.back().text = header + blockDeclarations;
    block.insert(block.end(), blockEdits.begin(), blockEdits.end());
    result.ring->blockSource =
        applyEdits(buffer.data(), bufferEnd, std::move(block));
    top.insert(top.end(), rowsEdits.begin(), rowsEdits.end());
  }
  result.source = applyEdits(buffer.data(), bufferEnd, std::move(top));
  result.dim = dim;
  result.wholeDim = wholeDim;
  result.offsetDim = offsetDim;
  result.stride = striped ? ranks : 1;
  result.firstRankConst = firstRankConst;
  return result;
}

} // namespace shard
} // namespace frontend
} // namespace energy

std::optional<ShardedModel>
energy::frontend::shardModel(const ModelSpec &model, StringRef buffer,
                             StringRef dim, int64_t ranks, bool ring,
                             DiagnosticEngine &diagnostics) {
  return ShardRewriter(model, buffer, dim, ranks, ring, diagnostics).run();
}

std::optional<ShardedModel> energy::frontend::shardSourceBuffer(
    llvm::SourceMgr &sourceMgr, unsigned bufferId, StringRef dim, int64_t ranks,
    DiagnosticEngine &diagnostics, unsigned &shardedBuffer, bool ring,
    unsigned *blockBuffer) {
  std::unique_ptr<ModelSpec> model =
      parseAndCheck(sourceMgr, bufferId, diagnostics);
  if (!model || diagnostics.hasErrors())
    return std::nullopt;
  const llvm::MemoryBuffer *buffer = sourceMgr.getMemoryBuffer(bufferId);
  std::optional<ShardedModel> sharded =
      shardModel(*model, buffer->getBuffer(), dim, ranks, ring, diagnostics);
  if (!sharded || diagnostics.hasErrors())
    return std::nullopt;
  auto addChecked = [&](const std::string &source, const char *what,
                        unsigned &id) {
    std::string name = (buffer->getBufferIdentifier() + " (" + what +
                        ", --shard " + dim + (ring ? " --ring" : "") + ")")
                           .str();
    id = sourceMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(source, name), llvm::SMLoc());
    diagnostics.ignoreWarnings(true);
    std::unique_ptr<ModelSpec> checked =
        parseAndCheck(sourceMgr, id, diagnostics);
    diagnostics.ignoreWarnings(false);
    return checked && !diagnostics.hasErrors();
  };
  if (!addChecked(sharded->source, "one rank's model", shardedBuffer))
    return std::nullopt;
  unsigned block = 0;
  if (sharded->ring &&
      !addChecked(sharded->ring->blockSource, "one rank's block model", block))
    return std::nullopt;
  if (blockBuffer)
    *blockBuffer = block;
  return sharded;
}
