//===- ShardRing.cpp - The ring's models: copies streamed in blocks -------===//
//
// `--shard N --ring`: the rank's model reads the merged lse of each site as
// an input; the block model gives each row's lse over one block and, from
// that lse weighted by each row's share of the site, the gradients.
//
//===----------------------------------------------------------------------===//

#include "ShardRewriter.h"

#include "llvm/ADT/StringExtras.h"

#include <map>

using namespace energy::frontend;
using namespace energy::frontend::shard;

namespace {
/// Whether `inner` lies in the source text of `term`.
bool contains(const TermDecl &term, const Expr &inner) {
  return term.getRange().Start.getPointer() <=
             inner.getRange().Start.getPointer() &&
         inner.getRange().End.getPointer() <= term.getRange().End.getPointer();
}

/// Whether `expr` reads a tensor or a let, or calls a fn (which may).
bool readsTensors(const Expr &expr) {
  if (const auto *name = dyn_cast<NameExpr>(&expr))
    return name->getSymbolKind() == SymbolKind::Tensor ||
           name->getSymbolKind() == SymbolKind::Let;
  if (isa<CallExpr>(expr) && cast<CallExpr>(expr).getFn())
    return true;
  bool found = false;
  forEachChild(
      expr, [&](const Expr &child) { found = found || readsTensors(child); });
  return found;
}
} // namespace

bool ShardRewriter::ringRead(const Expr &read, const Expr *index) {
  if (!ring || (index && isColumnIndex(*index)))
    return true;
  return fail(read, "--shard " + dim + " --ring: this reads along dim " +
                        quoted(dim) +
                        " elsewhere than at the rank's rows or at the index "
                        "of an lse over " +
                        quoted(dim) +
                        " inside a row sum, which a ring cannot stream "
                        "(shard it without --ring)");
}

void ShardRewriter::visitRingSite(const ReductionExpr &lse,
                                  const IndexBinding &binding) {
  if (column) {
    fail(lse, "--shard " + dim + " --ring: an lse over " + quoted(dim) +
                  " inside another, which a ring does not stream");
    return;
  }
  const IndexDomain &domain = lse.getDomain();
  for (const IndexBinding &each : domain.bindings) {
    sizingBlock = &each == &binding;
    visitSize(each);
    sizingBlock = false;
  }
  column = &binding;
  if (domain.predicate)
    visit(*domain.predicate);
  if (const Expr *temperature = lse.getTemperature())
    visit(*temperature);
  visit(lse.getBody());
  column = nullptr;
  sites.push_back({&lse, scope});
}

bool ShardRewriter::isSite(const Expr &expr) const {
  return llvm::any_of(sites,
                      [&](const Site &site) { return site.lse == &expr; });
}

bool ShardRewriter::containsSite(const Expr &expr) const {
  if (isSite(expr))
    return true;
  bool found = false;
  forEachChild(
      expr, [&](const Expr &child) { found = found || containsSite(child); });
  return found;
}

bool ShardRewriter::ringLinear(const Expr &expr,
                               std::vector<Edit> &blockEdits) {
  if (isSite(expr)) {
    reachedSites.insert(cast<ReductionExpr>(&expr));
    return true;
  }
  if (!containsSite(expr)) {
    blockEdits.push_back({expr.getRange().Start.getPointer(),
                          expr.getRange().End.getPointer(), Edit::Replacement,
                          "0.0"});
    return true;
  }
  auto refuse = [&](const llvm::Twine &why) {
    return fail(expr, "--shard " + dim + " --ring: " + why +
                          "; a ring merges an lse over " + quoted(dim) +
                          " only where the term adds it linearly (through "
                          "sums, `+`, `-` and constant factors)");
  };
  if (const auto *unary = dyn_cast<UnaryExpr>(&expr))
    return ringLinear(unary->getOperand(), blockEdits);
  if (const auto *binary = dyn_cast<BinaryExpr>(&expr)) {
    const Expr &lhs = binary->getLhs(), &rhs = binary->getRhs();
    switch (binary->getOp()) {
    case BinaryOp::Add:
    case BinaryOp::Sub:
      return ringLinear(lhs, blockEdits) && ringLinear(rhs, blockEdits);
    case BinaryOp::Mul: {
      bool left = containsSite(lhs);
      const Expr &factor = left ? rhs : lhs;
      if (containsSite(factor) || readsTensors(factor))
        return refuse("a factor of the lse reads tensors");
      return ringLinear(left ? lhs : rhs, blockEdits);
    }
    case BinaryOp::Div:
      if (containsSite(rhs) || readsTensors(rhs))
        return refuse("the lse is divided by what reads tensors");
      return ringLinear(lhs, blockEdits);
    default:
      return refuse("the lse is an operand of a nonlinear operation");
    }
  }
  if (const auto *reduction = dyn_cast<ReductionExpr>(&expr)) {
    ReductionKind kind = reduction->getReductionKind();
    if ((kind != ReductionKind::Sum && kind != ReductionKind::Mean) ||
        (reduction->getDomain().predicate &&
         containsSite(*reduction->getDomain().predicate)))
      return refuse("the lse is inside a reduction other than a sum");
    return ringLinear(reduction->getBody(), blockEdits);
  }
  return refuse("the lse is an operand of a nonlinear operation");
}

bool ShardRewriter::ringModels(const std::vector<Edit> &top,
                               std::vector<Edit> &rowsEdits,
                               std::string &rowsDeclarations,
                               std::vector<Edit> &blockEdits,
                               std::string &blockDeclarations,
                               ShardedModel &result) {
  auto text = [&](const Expr &expr) {
    return applyEdits(expr.getRange().Start.getPointer(),
                      expr.getRange().End.getPointer(), top);
  };
  auto replace = [](std::vector<Edit> &into, const Expr &expr,
                    std::string with) {
    into.push_back({expr.getRange().Start.getPointer(),
                    expr.getRange().End.getPointer(), Edit::Replacement,
                    std::move(with)});
  };
  // The block model evaluates the sites' weighted lse alone: every other
  // term and every loss are 0; the dynamics stay, for a loss's gradient
  // through the run (its backward steps' part of the sites).
  std::map<const ReductionExpr *, const TermDecl *> termOf;
  for (const DeclPtr &decl : model.decls) {
    const auto *term = dyn_cast<TermDecl>(decl.get());
    if (!term)
      continue;
    if (!containsSite(term->getBody())) {
      replace(blockEdits, term->getBody(), "0.0");
      continue;
    }
    if (isa<LossDecl>(term)) {
      fail(term->getBody(), "--shard " + dim + " --ring: loss " +
                                quoted(term->getName()) + " has an lse over " +
                                quoted(dim) + "; a ring streams the energy's");
      continue;
    }
    llvm::DenseSet<const ReductionExpr *> before = reachedSites;
    bool linear = ringLinear(term->getBody(), blockEdits);
    for (const Site &site : sites)
      if (linear ? reachedSites.count(site.lse) && !before.count(site.lse)
                 : contains(*term, *site.lse))
        termOf[site.lse] = term; // refused once, at the term's construct
  }
  for (const Site &site : sites) {
    if (!termOf.count(site.lse))
      fail(*site.lse, "--shard " + dim + " --ring: this lse over " +
                          quoted(dim) +
                          " is not added to an energy term's row sum, which "
                          "a ring needs to merge it");
    // The shares are constants of the gradients: a temperature with a
    // gradient of its own would lose its part.
    if (const Expr *temperature = site.lse->getTemperature();
        temperature && readsTensors(*temperature))
      fail(*temperature, "--shard " + dim +
                             " --ring: the temperature of an lse the ring "
                             "merges reads tensors; a ring takes constant "
                             "temperatures");
  }
  if (ok && sites.empty()) {
    diagnostics.error(model.nameRange.Start,
                      "--shard " + dim + " --ring: model " +
                          quoted(model.name) + " has no lse over " +
                          quoted(dim) +
                          " inside a row sum for a ring to stream; shard it "
                          "without --ring");
    ok = false;
  }
  if (!ok)
    return false;

  ShardRing &ringModel = result.ring.emplace();
  ringModel.blockDim = blockDim;
  ringModel.blockOffsetDim = blockOffsetUsed ? blockOffsetDim : "";
  blockDeclarations.insert(
      0, "  dim " + blockDim +
             (blockOffsetUsed ? ", " + blockOffsetDim : std::string()) + ";\n");
  for (const Site &site : sites) {
    std::string termName = termOf[site.lse]->getName().str();
    RingSite entry{fresh(termName + "__lse"),
                   fresh(termName + "__block_lse"),
                   "",
                   fresh(termName + "__weight"),
                   fresh(termName + "__probe"),
                   fresh(termName + "__scale")};
    std::vector<std::string> indices, domain, sizes;
    for (const IndexBinding *binding : site.scope) {
      std::string size = text(*binding->size);
      indices.push_back(binding->name.str());
      sizes.push_back(size);
      domain.push_back(binding->name.str() + ": " + size);
    }
    std::string at = "[" + llvm::join(indices, ", ") + "]";
    std::string merged = entry.merged + at;
    // Parenthesised: a reduction's body extends as far right as it can.
    std::string lse = "(" + text(*site.lse) + ")";
    const Expr *temperature = site.lse->getTemperature();
    std::string scale = temperature ? "(" + text(*temperature) + ")" : "";
    replace(rowsEdits, *site.lse,
            temperature ? "(" + scale + " * " + merged + ")" : merged);
    replace(blockEdits, *site.lse,
            "((" + entry.weight + at + " + " + entry.probe + at + ") * " + lse +
                " + " + entry.scale + at +
                (temperature ? " * " + scale : std::string()) + ")");
    const Expr *predicate = site.lse->getDomain().predicate.get();
    std::string shape = " : [" + llvm::join(sizes, ", ") + "]";
    std::string input = "  input " + entry.merged + shape + ";\n";
    rowsDeclarations += input;
    blockDeclarations += input;
    blockDeclarations += "  input " + entry.weight + shape + ";\n";
    blockDeclarations += "  param " + entry.probe + shape + " = zeros, " +
                         entry.scale + shape + " = zeros;\n";
    blockDeclarations +=
        "  output " + entry.partial + "[" + llvm::join(domain, ", ") +
        "] = " + (temperature ? lse + " / " + scale : lse) + ";\n";
    if (predicate) {
      std::vector<std::string> columns;
      for (const IndexBinding &binding : site.lse->getDomain().bindings)
        columns.push_back(binding.name.str() + ": " + text(*binding.size));
      entry.count = fresh(termName + "__block_count");
      blockDeclarations += "  output " + entry.count + "[" +
                           llvm::join(domain, ", ") + "] = sum(" +
                           llvm::join(columns, ", ") + " where " +
                           text(*predicate) + ") 1.0;\n";
    }
    ringModel.sites.push_back(std::move(entry));
  }
  return true;
}
