//===- CheckerImpl.h - The checker's class, shared by its files -*- C++ -*-===//
//
// Private to frontends/lib: the Checker class and its scope state, so that
// its parts can live in separate files, as MLIR's AsmParser shares one
// private header. Checker.cpp holds declarations, index domains, expressions
// and dynamics; CheckLoss.cpp holds losses and the output reads they may make.
// The entry point is checkModel (energy/Frontend/Checker.h).
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_FRONTEND_LIB_CHECKERIMPL_H
#define ENERGY_FRONTEND_LIB_CHECKERIMPL_H

#include "energy/Frontend/AST.h"
#include "energy/Frontend/Affine.h"
#include "energy/Frontend/OptimizerTable.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/Twine.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace energy {
namespace frontend {

class DiagnosticEngine;

namespace detail {

/// Where an expression appears; decides which names it may use.
enum class ExprContext {
  Value,  ///< energies, lets, outputs, fn bodies, explicit rules
  Const,  ///< const values and initialiser arguments: numbers, consts, dims
  Option, ///< optimizer options: consts, params, dims
  Until,  ///< the `until` condition: may use `grad`
  Loss,   ///< a loss: as Value, and may read outputs, fully indexed
};

/// The state of a let, fn or output during the lazy, cycle-detecting check.
enum class CheckState { Unvisited, InProgress, Done, Failed };

/// Range knowledge of an index variable in scope.
struct IndexVariable {
  const IndexBinding *binding = nullptr;
  AffineExpr lower; ///< smallest admitted value
  AffineExpr upper; ///< largest admitted value
  /// False when the predicate constrains the variable in a way the bounds
  /// do not capture (`!=`, `or`, ...); then no out-of-range error is proven.
  bool exact = true;
  /// The inequalities `e ≥ 0` its domain adds to the scope: its own range,
  /// and (on the domain's last variable) the predicate's affine conjuncts.
  std::vector<AffineExpr> constraints;
  /// Whether the domain's predicate has a part the inequalities leave out
  /// (`!=`, `or`): then the scope's inequalities admit more than it does.
  bool loosePredicate = false;
  /// Whether a reduction (not a let's or output's indices) binds it.
  bool ofReduction = false;
};

class Checker {
public:
  Checker(DiagnosticEngine &diagnostics, const OptimizerTable &optimizers)
      : diagnostics(diagnostics), optimizers(optimizers) {}

  bool check(ModelSpec &model);

private:
  // Declarations.
  void declareGlobals(ModelSpec &model);
  void checkDim(DimDecl &dim);
  void checkTensor(TensorDecl &tensor);
  void checkInitializer(TensorDecl &tensor);
  bool resolveDimRefs(std::vector<DimRef> &dims);
  void checkConst(ConstDecl &decl);
  bool ensureLetChecked(LetDecl &let);
  bool ensureFnChecked(FnDecl &fn);
  bool ensureOutputChecked(OutputDecl &output);
  /// Checks the definition `decl` once, with `check`: later calls return the
  /// first result; a call while it is being checked (a cycle) or beyond the
  /// nesting limit fails.
  bool checkDefinitionOnce(Decl &decl, llvm::function_ref<bool()> check);
  /// The parameters, result dims and body of `fn`.
  bool checkFnDefinition(FnDecl &fn);
  /// The body of an energy or loss, which must be a scalar.
  void checkTerm(TermDecl &term);
  /// A loss: a term whose body may read outputs (CheckLoss.cpp).
  void checkLoss(LossDecl &loss);
  /// `name`, a read of `output` in a loss, either the base of `currentRead`
  /// or bare: all of the output's domain indices must be given
  /// (CheckLoss.cpp).
  std::optional<Shape> checkOutputRead(NameExpr &name, OutputDecl &output);
  /// The domain and body of a let or output; sets its shape.
  bool checkComprehension(ComprehensionDecl &decl);
  void checkStepsCount(DynamicsBlock &dynamics);
  void checkDynamics(DynamicsBlock &dynamics);
  void checkOptimizerRule(UpdateRule &rule);
  void checkStationaryRules(ModelSpec &model);
  /// The dynamics' `backward` statement (CheckBackward.cpp).
  void checkBackward(ModelSpec &model);
  void reportUnused(ModelSpec &model);

  // Expressions.
  std::optional<Shape> checkExpr(Expr &expr);
  std::optional<Shape> checkName(NameExpr &name);
  std::optional<Shape> checkIndex(IndexExpr &index);
  std::optional<Shape> checkCall(CallExpr &call);
  /// The error for a call of a name that is no function, with the closest
  /// names of the function table (or all of them) in a note.
  void unknownFunction(const CallExpr &call);
  std::optional<Shape> checkBinary(BinaryExpr &binary);
  std::optional<Shape> checkReduction(ReductionExpr &reduction);
  std::optional<Shape> checkScalar(Expr &expr, const llvm::Twine &what);
  bool checkCondition(Expr &expr, bool requireAffine);
  std::optional<AffineExpr> checkDomainSize(Expr &size);
  bool pushDomain(IndexDomain &domain, bool allowPredicate);
  void popDomain(const IndexDomain &domain);
  void applyPredicateBounds(Expr &predicate, size_t firstVariable);
  void checkIndexInRange(const Expr &index, const AffineExpr &value,
                         const std::string &axis);
  /// What the runtime checks of index `position` of `read` (value `value`
  /// on an axis of size `axis`), added to `indexChecks`; or the error that
  /// it is out of range for every size (CheckIndexRanges.cpp).
  void recordIndexCheck(const IndexExpr &read, unsigned position,
                        const AffineExpr &value, const std::string &axis);
  /// `affine` with every derived dim of an affine definition replaced by
  /// it.
  AffineExpr expandDerivedDims(const AffineExpr &affine) const;

  std::optional<AffineExpr> toAffine(const Expr &expr) const;
  IndexVariable *lookupIndex(llvm::StringRef name);

  DiagnosticEngine &diagnostics;
  const OptimizerTable &optimizers;

  llvm::StringMap<Decl *> globals;
  std::vector<IndexVariable> indexScope;
  FnDecl *currentFn = nullptr;
  ExprContext context = ExprContext::Value;
  llvm::DenseMap<Decl *, CheckState> definitionState;
  unsigned definitionDepth = 0;
  /// Affine meaning of every axis symbol made from a domain size.
  std::map<std::string, AffineExpr> symbolMeaning;
  /// Bounds of `step` when the step count is known.
  std::optional<AffineExpr> stepUpper;
  /// The affine definitions of derived dims, in the dims they derive from.
  std::map<std::string, AffineExpr> derivedDims;
  /// The index checks the runtime makes (ModelSpec::indexChecks).
  std::vector<IndexRangeCheck> indexChecks;
  /// The index expression whose base is being checked, so that an output
  /// read can count its indices.
  const IndexExpr *currentRead = nullptr;
};

/// `name` in backticks, as diagnostics quote source names.
inline std::string quote(llvm::StringRef name) {
  return ("`" + name + "`").str();
}

/// What a declaration is, for messages: "dim", "param", "let", ...
llvm::StringRef describeDecl(const Decl &decl);
/// The integer value of `e` when it is an integer literal, maybe negated.
std::optional<int64_t> getIntegerLiteral(const Expr &e);

} // namespace detail
} // namespace frontend
} // namespace energy

#endif // ENERGY_FRONTEND_LIB_CHECKERIMPL_H
