//===- ShardRewriter.h - The rewrite behind --shard, shared by its parts -===//
//
// The rewriter of Shard.cpp (each term's row sums over the rank's rows, the
// rest over gathered copies) and ShardRing.cpp (copies streamed in blocks).
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_FRONTEND_LIB_SHARDREWRITER_H
#define ENERGY_FRONTEND_LIB_SHARDREWRITER_H

#include "energy/Frontend/Shard.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"

#include <optional>
#include <string>
#include <vector>

namespace energy {
namespace frontend {
namespace shard {

using llvm::cast;
using llvm::dyn_cast;
using llvm::isa;
using llvm::StringRef;

/// A change of the source text: a replacement of [begin, end), or an
/// insertion (begin == end). At one position, text closing an expression
/// goes before text opening one, and both before a replacement. The two
/// halves of a wrap name the expression they wrap ([wrapBegin, wrapEnd)):
/// a replacement that covers it drops both.
struct Edit {
  enum Order { Closing = 0, Opening = 1, Replacement = 2 };
  const char *begin;
  const char *end;
  Order order;
  std::string text;
  const char *wrapBegin = nullptr, *wrapEnd = nullptr;
};

/// The text of [begin, end) with `edits` made (those inside it).
std::string applyEdits(const char *begin, const char *end,
                       std::vector<Edit> edits);

/// `name` in backquotes, as diagnostics quote names.
std::string quoted(StringRef name);

class ShardRewriter {
public:
  ShardRewriter(const ModelSpec &model, StringRef buffer, StringRef dim,
                int64_t ranks, bool ring, DiagnosticEngine &diagnostics)
      : model(model), buffer(buffer), dim(dim), ranks(ranks), ring(ring),
        diagnostics(diagnostics) {}

  std::optional<ShardedModel> run();

private:
  /// A name no declaration of the model has, from `base`.
  std::string fresh(const std::string &base);
  bool fail(const Expr &where, const llvm::Twine &message) {
    diagnostics.error(where.getLoc(), message, {where.getRange()});
    ok = false;
    return false;
  }

  bool isShardedBinding(const IndexBinding &binding) const {
    return binding.sizeSymbol == dim;
  }
  /// The position of the sharded index in `decl`'s domain, if it has one.
  std::optional<size_t> shardedPosition(const ComprehensionDecl &decl) const;
  /// Whether `expr` reads along the sharded dim (its tensors, lets over it,
  /// the dim itself, sums over it), directly or through lets and fns.
  bool mentionsShard(const Expr &expr);
  bool declMentionsShard(const Decl &decl);
  /// Whether a parameter or the result of `fn` has an axis of the dim.
  bool signatureAlongDim(const FnDecl &fn) const;
  /// Whether `expr` reads `tensor`, directly or through lets and fns.
  bool reads(const Expr &expr, const TensorDecl &tensor);

  // The rewrite of one expression, in the current mode: inside the body of
  // a row sum (`row` set) reads at the row index read the rank's rows.
  void visit(const Expr &expr);
  void visitName(const NameExpr &name);
  void visitRead(const IndexExpr &read);
  void visitReduction(const ReductionExpr &reduction,
                      const IndexBinding *rowBinding);
  /// The size of an index outside the rank's rows: the dim's whole length;
  /// any other size that mentions the dim (`N - 1`) is refused.
  void visitSize(const IndexBinding &binding);
  /// A read of a let: the rank's copy at the row index, the whole one
  /// elsewhere. `indices` is null for a bare name.
  void visitLetRead(const NameExpr &base, const LetDecl &let,
                    const std::vector<ExprPtr> *indices);

  // The linear walk of a term: whether `expr` is (a sum of) row sums in
  // linear positions; `linear` also rewrites them, `probe` only tells.
  bool probe(const Expr &expr) const;
  bool linear(const Expr &expr);
  /// `expr` evaluated whole, counted on the first rank.
  void wholeOnFirstRank(const Expr &expr);

  void edit(const Expr &expr, std::string text) {
    edits->push_back({expr.getRange().Start.getPointer(),
                      expr.getRange().End.getPointer(), Edit::Replacement,
                      std::move(text)});
  }
  void wrap(const Expr &expr, std::string opening, std::string closing) {
    const char *begin = expr.getRange().Start.getPointer();
    const char *end = expr.getRange().End.getPointer();
    edits->push_back(
        {begin, begin, Edit::Opening, std::move(opening), begin, end});
    edits->push_back({end, end, Edit::Closing, std::move(closing), begin, end});
  }
  bool isRowIndex(const Expr &index) const {
    const auto *name = dyn_cast<NameExpr>(&index);
    return name && row && name->getSymbolKind() == SymbolKind::IndexVar &&
           name->getBinding() == row;
  }
  const TensorDecl *shardedTensor(const Expr &expr) const {
    const auto *name = dyn_cast<NameExpr>(&expr);
    if (!name || name->getSymbolKind() != SymbolKind::Tensor)
      return nullptr;
    const auto *tensor = cast<TensorDecl>(name->getDecl());
    return axes.count(tensor) ? tensor : nullptr;
  }
  std::string gatheredName(const TensorDecl &tensor);
  /// The text of `let`'s declaration (from its name to its end) as the
  /// rank's copy (`whole` false) or the whole copy.
  std::string renderLet(const LetDecl &let, bool whole);

  // The ring (ShardRing.cpp): the copies hold one block of the dim at a
  // time, and each lse over the dim inside a row sum (a site) is the merge
  // of its lse over every block.
  struct Site {
    const ReductionExpr *lse;
    /// The indices bound around it, outermost first (the row's among them).
    std::vector<const IndexBinding *> scope;
  };
  bool isColumnIndex(const Expr &index) const {
    const auto *name = dyn_cast<NameExpr>(&index);
    return name && column && name->getSymbolKind() == SymbolKind::IndexVar &&
           name->getBinding() == column;
  }
  /// Whether `read` (of a gathered copy, at axis position `index`) is one a
  /// ring streams: at the column index of a site. Refuses it otherwise.
  bool ringRead(const Expr &read, const Expr *index);
  /// Visits a site's domain, temperature and body with its binding over
  /// the dim as the block's column.
  void visitRingSite(const ReductionExpr &lse, const IndexBinding &binding);
  bool isSite(const Expr &expr) const;
  bool containsSite(const Expr &expr) const;
  /// Walks a term's body down to its sites, which must be added linearly
  /// (through sums, `+`, `-` and constant factors); every additive part
  /// without a site becomes 0 in the block model.
  bool ringLinear(const Expr &expr, std::vector<Edit> &blockEdits);
  /// The ring's two models: the rows model (each site replaced by the read
  /// of its merged lse, an input), its edits into `rowsEdits`, and the block
  /// model (each site its lse over one block weighted by an input, the
  /// rows' shares of the site's gradient) into result.ring. `top` holds the
  /// edits both share.
  bool ringModels(const std::vector<Edit> &top, std::vector<Edit> &rowsEdits,
                  std::string &rowsDeclarations, std::vector<Edit> &blockEdits,
                  std::string &blockDeclarations, ShardedModel &result);

  const ModelSpec &model;
  StringRef buffer;
  std::string dim;
  /// The rank count: above 1, a model that uses its rows' positions as
  /// numbers gets every `ranks`-th row (striped), which balances a causal
  /// predicate's work across the ranks.
  int64_t ranks;
  bool ring;
  DiagnosticEngine &diagnostics;
  bool ok = true;
  bool wholeUsed = false, offsetUsed = false, firstRankUsed = false;

  std::string wholeDim, offsetDim, firstRankConst;
  llvm::StringSet<> names;
  llvm::DenseMap<const TensorDecl *, unsigned> axes;
  llvm::DenseMap<const TensorDecl *, std::string> gathered;
  llvm::DenseMap<const Decl *, bool> mentions;
  llvm::DenseMap<const LetDecl *, std::string> wholeLetNames;
  llvm::DenseSet<const LetDecl *> rankLets;

  std::vector<Edit> *edits = nullptr;
  const IndexBinding *row = nullptr;

  std::string blockDim, blockOffsetDim;
  bool blockOffsetUsed = false;
  /// The binding of the site (or whole let) being visited, over the block.
  const IndexBinding *column = nullptr;
  /// Whether the dim's name being visited sizes a block (the ring's copies).
  bool sizingBlock = false;
  std::vector<const IndexBinding *> scope;
  std::vector<Site> sites;
  llvm::DenseSet<const ReductionExpr *> reachedSites;
};

} // namespace shard
} // namespace frontend
} // namespace energy

#endif // ENERGY_FRONTEND_LIB_SHARDREWRITER_H
