//===- Emitter.h - The emitter's class, shared by its files -----*- C++ -*-===//
//
// Private to frontends/lib/Emit: the Emitter class, which builds the energy
// dialect from a checked AST. EmitEnergyDialect.cpp holds the model, its
// declarations and dynamics; EmitIndices.cpp the indices and predicates;
// EmitExpressions.cpp the expressions.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_FRONTEND_LIB_EMIT_EMITTER_H
#define ENERGY_FRONTEND_LIB_EMIT_EMITTER_H

#include "energy/Frontend/AST.h"
#include "energy/Frontend/Builtins.h"

#include "energy/IR/EnergyOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/SourceMgr.h"

namespace energy {
namespace frontend {
namespace detail {

class Emitter {
public:
  Emitter(mlir::MLIRContext &context, const llvm::SourceMgr &sourceMgr)
      : context(context), sourceMgr(sourceMgr), builder(&context) {}

  mlir::OwningOpRef<mlir::ModuleOp> emit(const ModelSpec &model);

private:
  //===--------------------------------------------------------------------===//
  // Helpers (EmitEnergyDialect.cpp)
  //===--------------------------------------------------------------------===//

  mlir::Location loc(llvm::SMLoc where);
  mlir::Location loc(const Expr &expr) { return loc(expr.getLoc()); }

  mlir::LogicalResult error(llvm::SMLoc where, const llvm::Twine &message);

  mlir::energy::ArrayType typeOf(const Shape &shape);
  mlir::energy::ArrayType scalarType() {
    return mlir::energy::ArrayType::getScalar(&context);
  }

  mlir::Value constant(mlir::Location where, double value);

  /// Folds the arithmetic (`-`, `+ - * /`) of `expr` over values of type T,
  /// with `leaf` giving the value of every other node. `divide` is T's
  /// division.
  template <typename T>
  mlir::FailureOr<T>
  foldArithmetic(const Expr &expr,
                 llvm::function_ref<mlir::FailureOr<T>(const Expr &)> leaf,
                 llvm::function_ref<T(T, T)> divide);

  /// The integer dim expression `expr` (dims, integer literals, + - * /,
  /// where `/` is exact division).
  mlir::FailureOr<mlir::energy::DimExprAttr> dimExpr(const Expr &expr);
  /// The checker's affine expression over dims (and `step`) as an attribute.
  mlir::energy::DimExprAttr dimExpr(const AffineExpr &affine);
  /// An energy.index_check for each of the checker's index checks.
  void emitIndexChecks(const ModelSpec &model);

  /// A constant real number: literals, negation and arithmetic on them.
  mlir::FailureOr<double> constantNumber(const Expr &expr);

  //===--------------------------------------------------------------------===//
  // Declarations (EmitEnergyDialect.cpp)
  //===--------------------------------------------------------------------===//

  mlir::LogicalResult emitDecl(const Decl &decl);
  mlir::LogicalResult emitTensor(const TensorDecl &tensor,
                                 mlir::Location where);

  /// Emits a let or output (ComprehensionOp) with its domain and body.
  template <typename ComprehensionOp>
  mlir::LogicalResult emitComprehension(const ComprehensionDecl &decl,
                                        mlir::Location where);

  //===--------------------------------------------------------------------===//
  // Dynamics (EmitEnergyDialect.cpp)
  //===--------------------------------------------------------------------===//

  mlir::LogicalResult emitDynamics(const DynamicsBlock &dynamics);
  mlir::LogicalResult emitRule(const UpdateRule &rule);

  //===--------------------------------------------------------------------===//
  // Indices (EmitIndices.cpp)
  //===--------------------------------------------------------------------===//

  /// Creates the block of `region` with one index argument per binding and
  /// makes the bindings refer to them.
  mlir::Block *bindIndices(mlir::Region &region, const IndexDomain &domain);

  void unbindIndices(const IndexDomain &domain);

  /// The value of index `binding`: its block argument, or inside an inlined
  /// output read, the read's index.
  mlir::Value indexValue(const IndexBinding &binding, mlir::Location where);

  /// `expr` as an affine expression whose dims are `operands` (index values
  /// it appends to: domain indices, `step`, dim sizes).
  mlir::FailureOr<mlir::AffineExpr>
  affineIndex(const Expr &expr, llvm::SmallVectorImpl<mlir::Value> &operands);

  /// An affine map over `operands` for the index expressions `exprs`.
  mlir::FailureOr<mlir::AffineMap>
  affineIndices(llvm::ArrayRef<ExprPtr> exprs,
                llvm::SmallVectorImpl<mlir::Value> &operands);

  /// A predicate over indices, as `arith` ops yielding an i1.
  mlir::Value emitPredicate(const Expr &expr);

  //===--------------------------------------------------------------------===//
  // Expressions (EmitExpressions.cpp)
  //===--------------------------------------------------------------------===//

  mlir::Value emitExpr(const Expr &expr);
  mlir::Value emitName(const NameExpr &name);
  mlir::Value emitIndex(const IndexExpr &index);

  /// A read of `output` in a loss (`read` is `output[readIndices...]`, or the
  /// bare name of an output without indices): the output's body, emitted
  /// with its domain indices bound to the read's first indices, so the
  /// dialect never reads an output. Further indices extract from the body's
  /// value.
  mlir::Value emitOutputRead(const Expr &read, const OutputDecl &output,
                             llvm::ArrayRef<ExprPtr> readIndices);

  mlir::Value emitBinary(const BinaryExpr &binary);
  mlir::Value emitReduction(const ReductionExpr &reduction);
  mlir::Value emitCall(const CallExpr &call);

  /// The op `energy.NAME` of the built-in element-wise function NAME on
  /// `x`; an internal error where the dialect has no such element-wise op.
  mlir::Value emitElementwiseBuiltin(const BuiltinFunction &builtin,
                                     mlir::Value x, mlir::Location where);

  /// `maxabs(grad)`, `sqnorm(grad)`, `norm(grad)`, `sum(grad)` in a stopping
  /// rule: over the gradients of every node a gradient rule updates.
  mlir::Value emitGradientNorm(const CallExpr &call);

  mlir::MLIRContext &context;
  const llvm::SourceMgr &sourceMgr;
  mlir::OpBuilder builder;
  llvm::DenseMap<const IndexBinding *, mlir::Value> indices;
  /// An output's domain index while a read of it is inlined in a loss: the
  /// read's affine index over values of the loss (`logits[i + 1, c]` binds
  /// the first index to `d0 + 1` over `%i`).
  struct InlinedIndex {
    mlir::AffineExpr expr;
    llvm::SmallVector<mlir::Value> operands;
  };
  llvm::DenseMap<const IndexBinding *, InlinedIndex> inlinedIndices;
  llvm::DenseMap<const FnDecl *, llvm::SmallVector<mlir::Value>> fnArguments;

public:
  /// The nodes updated by optimizer rules (whose gradients `grad` in a
  /// stopping rule stands for), and the types of all tensors.
  llvm::SmallVector<llvm::StringRef> gradientNodes;
  llvm::StringMap<mlir::Type> nodeTypes;
};

} // namespace detail
} // namespace frontend
} // namespace energy

#endif // ENERGY_FRONTEND_LIB_EMIT_EMITTER_H
