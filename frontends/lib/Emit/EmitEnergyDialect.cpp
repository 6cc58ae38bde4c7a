//===- EmitEnergyDialect.cpp - From the checked AST to the dialect --------===//
//
// Walks a checked `.energy` AST and builds the `energy` dialect: one op per
// declaration, expressions as energy ops placed where they occur (inside the
// reduction bodies that bind their indices), `fn` helpers inlined at calls,
// and the outputs a loss reads inlined at the read's indices.
//
//===----------------------------------------------------------------------===//

#include "energy/Frontend/EmitEnergyDialect.h"
#include "energy/Frontend/Frontend.h"
#include "energy/Frontend/OptimizerTable.h"

#include "energy/IR/EnergyDialect.h"
#include "energy/IR/EnergyOps.h"
#include "energy/IR/IndexArithmetic.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/DenseMap.h"

using namespace mlir;
using namespace mlir::energy;
using namespace ::energy::frontend;

namespace {

class Emitter {
public:
  Emitter(MLIRContext &context, const llvm::SourceMgr &sourceMgr)
      : context(context), sourceMgr(sourceMgr), builder(&context) {}

  OwningOpRef<ModuleOp> emit(const ModelSpec &model) {
    OwningOpRef<ModuleOp> module = ModuleOp::create(loc(model.range.Start));
    builder.setInsertionPointToEnd(module->getBody());
    auto modelOp =
        ModelOp::create(builder, loc(model.nameRange.Start), model.name);
    Block *declarations = &modelOp.getBody().front();
    for (const DeclPtr &decl : model.decls) {
      builder.setInsertionPointToEnd(declarations);
      if (failed(emitDecl(*decl)))
        return nullptr;
    }
    if (model.dynamics) {
      builder.setInsertionPointToEnd(declarations);
      if (failed(emitDynamics(*model.dynamics)))
        return nullptr;
    }
    if (failed(verify(*module)))
      return nullptr;
    return module;
  }

private:
  //===--------------------------------------------------------------------===//
  // Helpers
  //===--------------------------------------------------------------------===//

  Location loc(llvm::SMLoc where) {
    unsigned buffer = sourceMgr.FindBufferContainingLoc(where);
    if (buffer == 0)
      return UnknownLoc::get(&context);
    auto [line, column] = sourceMgr.getLineAndColumn(where, buffer);
    return FileLineColLoc::get(
        &context, sourceMgr.getMemoryBuffer(buffer)->getBufferIdentifier(),
        line, column);
  }
  Location loc(const Expr &expr) { return loc(expr.getLoc()); }

  LogicalResult error(llvm::SMLoc where, const Twine &message) {
    return emitError(loc(where)) << message;
  }

  ArrayType typeOf(const Shape &shape) {
    SmallVector<StringRef> dims(shape.dims.begin(), shape.dims.end());
    return ArrayType::get(&context, dims);
  }
  ArrayType scalarType() { return ArrayType::getScalar(&context); }

  Value constant(Location where, double value) {
    return ConstantOp::create(builder, where, value);
  }

  /// Folds the arithmetic (`-`, `+ - * /`) of `expr` over values of type T,
  /// with `leaf` giving the value of every other node. `divide` is T's
  /// division.
  template <typename T>
  FailureOr<T> foldArithmetic(const Expr &expr,
                              function_ref<FailureOr<T>(const Expr &)> leaf,
                              function_ref<T(T, T)> divide) {
    if (auto *unary = dyn_cast<UnaryExpr>(&expr)) {
      FailureOr<T> operand =
          foldArithmetic<T>(unary->getOperand(), leaf, divide);
      if (failed(operand))
        return failure();
      return -*operand;
    }
    auto *binary = dyn_cast<BinaryExpr>(&expr);
    if (!binary)
      return leaf(expr);
    FailureOr<T> lhs = foldArithmetic<T>(binary->getLhs(), leaf, divide);
    FailureOr<T> rhs = foldArithmetic<T>(binary->getRhs(), leaf, divide);
    if (failed(lhs) || failed(rhs))
      return failure();
    switch (binary->getOp()) {
    case BinaryOp::Add:
      return *lhs + *rhs;
    case BinaryOp::Sub:
      return *lhs - *rhs;
    case BinaryOp::Mul:
      return *lhs * *rhs;
    case BinaryOp::Div:
      return divide(*lhs, *rhs);
    default:
      return leaf(expr);
    }
  }

  /// The integer dim expression `expr` (dims, integer literals, + - * /,
  /// where `/` is exact division).
  FailureOr<DimExprAttr> dimExpr(const Expr &expr) {
    SmallVector<StringAttr> names;
    auto leaf = [&](const Expr &e) -> FailureOr<AffineExpr> {
      if (auto *number = dyn_cast<NumberExpr>(&e);
          number && number->isInteger())
        return getAffineConstantExpr(static_cast<int64_t>(number->getValue()),
                                     &context);
      auto *name = dyn_cast<NameExpr>(&e);
      if (!name || name->getSymbolKind() != SymbolKind::Dim)
        return error(e.getLoc(), "expected an integer expression of dims");
      StringAttr attr = StringAttr::get(&context, name->getName());
      auto *found = llvm::find(names, attr);
      unsigned position = found - names.begin();
      if (found == names.end())
        names.push_back(attr);
      return getAffineSymbolExpr(position, &context);
    };
    FailureOr<AffineExpr> result = foldArithmetic<AffineExpr>(
        expr, leaf, [](AffineExpr a, AffineExpr b) { return a.floorDiv(b); });
    if (failed(result))
      return failure();
    return DimExprAttr::get(&context, *result, names);
  }

  /// A constant real number: literals, negation and arithmetic on them.
  FailureOr<double> constantNumber(const Expr &expr) {
    auto leaf = [&](const Expr &e) -> FailureOr<double> {
      if (auto *number = dyn_cast<NumberExpr>(&e))
        return number->getValue();
      return error(e.getLoc(), "expected a constant number");
    };
    return foldArithmetic<double>(expr, leaf,
                                  [](double a, double b) { return a / b; });
  }

  //===--------------------------------------------------------------------===//
  // Declarations
  //===--------------------------------------------------------------------===//

  LogicalResult emitDecl(const Decl &decl) {
    Location where = loc(decl.getNameRange().Start);
    if (auto *dim = dyn_cast<DimDecl>(&decl)) {
      IntegerAttr defaultValue;
      DimExprAttr derived;
      if (std::optional<int64_t> value = dim->getDefault())
        defaultValue = builder.getI64IntegerAttr(*value);
      else if (dim->getValue()) {
        FailureOr<DimExprAttr> expr = dimExpr(*dim->getValue());
        if (failed(expr))
          return failure();
        derived = *expr;
      }
      DimOp::create(builder, where, dim->getName(), defaultValue, derived);
      return success();
    }
    if (auto *tensor = dyn_cast<TensorDecl>(&decl))
      return emitTensor(*tensor, where);
    if (auto *constant = dyn_cast<ConstDecl>(&decl)) {
      FailureOr<double> value = constantNumber(constant->getValue());
      if (failed(value))
        return failure();
      ConstOp::create(builder, where,
                      builder.getStringAttr(constant->getName()),
                      builder.getF64FloatAttr(*value));
      return success();
    }
    if (auto *let = dyn_cast<LetDecl>(&decl))
      return emitComprehension<LetOp>(*let, where);
    if (auto *output = dyn_cast<OutputDecl>(&decl))
      return emitComprehension<OutputOp>(*output, where);
    if (auto *term = dyn_cast<TermDecl>(&decl)) {
      // A loss is a term outside the global energy: auxiliary.
      bool loss = isa<LossDecl>(term);
      auto op = TermOp::create(builder, where, term->getName(),
                               /*auxiliary=*/loss, /*loss=*/loss);
      OpBuilder::InsertionGuard guard(builder);
      builder.setInsertionPointToStart(&op.getBody().emplaceBlock());
      Value value = emitExpr(term->getBody());
      if (!value)
        return failure();
      YieldOp::create(builder, where, value);
      return success();
    }
    // `fn` helpers are inlined where they are called.
    return success();
  }

  LogicalResult emitTensor(const TensorDecl &tensor, Location where) {
    SmallVector<Attribute> shape;
    for (const DimRef &dim : tensor.getDims())
      shape.push_back(FlatSymbolRefAttr::get(&context, dim.name));
    const Initializer &init = tensor.getInitializer();
    InitKindAttr kind;
    DenseF64ArrayAttr args;
    FlatSymbolRefAttr source;
    switch (init.kind) {
    case Initializer::Kind::None:
      break;
    case Initializer::Kind::Zeros:
      kind = InitKindAttr::get(&context, InitKind::zeros);
      break;
    case Initializer::Kind::Ones:
      kind = InitKindAttr::get(&context, InitKind::ones);
      break;
    case Initializer::Kind::Eye:
      kind = InitKindAttr::get(&context, InitKind::eye);
      break;
    case Initializer::Kind::Normal:
    case Initializer::Kind::Uniform: {
      kind = InitKindAttr::get(&context, init.kind == Initializer::Kind::Normal
                                             ? InitKind::normal
                                             : InitKind::uniform);
      SmallVector<double> values;
      for (const ExprPtr &arg : init.args) {
        FailureOr<double> value = constantNumber(*arg);
        if (failed(value))
          return failure();
        values.push_back(*value);
      }
      args = DenseF64ArrayAttr::get(&context, values);
      break;
    }
    case Initializer::Kind::Tensor:
      kind = InitKindAttr::get(&context, InitKind::copy);
      source = FlatSymbolRefAttr::get(&context, init.tensorName);
      break;
    }
    TensorOp::create(builder, where, tensor.getName(), toRole(tensor.getRole()),
                     builder.getArrayAttr(shape), kind, args, source);
    return success();
  }

  /// Emits a let or output (ComprehensionOp) with its domain and body.
  template <typename ComprehensionOp>
  LogicalResult emitComprehension(const ComprehensionDecl &decl,
                                  Location where) {
    const IndexDomain &domain = decl.getDomain();
    const Expr &body = decl.getBody();
    auto op = ComprehensionOp::create(
        builder, where, builder.getStringAttr(decl.getName()), ArrayAttr(),
        TypeAttr::get(typeOf(body.getShape())));
    SmallVector<Attribute> sizes;
    for (const IndexBinding &binding : domain.bindings) {
      FailureOr<DimExprAttr> size = dimExpr(*binding.size);
      if (failed(size))
        return failure();
      sizes.push_back(*size);
    }
    op.setDomainAttr(builder.getArrayAttr(sizes));
    OpBuilder::InsertionGuard guard(builder);
    Block *block = bindIndices(op.getBody(), domain);
    builder.setInsertionPointToStart(block);
    Value value = emitExpr(body);
    unbindIndices(domain);
    if (!value)
      return failure();
    YieldOp::create(builder, loc(body), value);
    return success();
  }

  //===--------------------------------------------------------------------===//
  // Dynamics
  //===--------------------------------------------------------------------===//

  LogicalResult emitDynamics(const DynamicsBlock &dynamics) {
    Location where = loc(dynamics.range.Start);
    DimExprAttr steps = DimExprAttr::getConstant(&context, 1);
    if (dynamics.steps) {
      FailureOr<DimExprAttr> count = dimExpr(*dynamics.steps->count);
      if (failed(count))
        return failure();
      steps = *count;
    }
    auto op = DynamicsOp::create(builder, where, steps,
                                 dynamics.sequential ? Order::sequential
                                                     : Order::simultaneous,
                                 IntegerAttr(), FloatAttr());
    if (dynamics.backward && dynamics.backward->implicit) {
      op.setImplicitIterations(dynamics.backward->iterations);
      op.setImplicitTolerance(APFloat(dynamics.backward->tolerance));
    }
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToStart(&op.getRules().emplaceBlock());
    for (const UpdateRule &rule : dynamics.rules) {
      if (rule.kind == UpdateRule::Kind::Optimizer)
        gradientNodes.push_back(rule.node);
      if (failed(emitRule(rule)))
        return failure();
    }
    if (dynamics.steps && dynamics.steps->until) {
      builder.setInsertionPointToStart(&op.getUntil().emplaceBlock());
      Value done = emitExpr(*dynamics.steps->until);
      if (!done)
        return failure();
      YieldOp::create(builder, where, done);
    }
    return success();
  }

  LogicalResult emitRule(const UpdateRule &rule) {
    Location where = loc(rule.nodeRange.Start);
    FlatSymbolRefAttr node = FlatSymbolRefAttr::get(&context, rule.node);
    if (rule.kind == UpdateRule::Kind::Explicit) {
      auto assign = AssignOp::create(builder, where, node);
      OpBuilder::InsertionGuard guard(builder);
      builder.setInsertionPointToStart(&assign.getBody().emplaceBlock());
      Value value = emitExpr(*rule.value);
      if (!value)
        return failure();
      YieldOp::create(builder, where, value);
      return success();
    }
    SmallVector<NamedAttribute> strings;
    for (const PositionalArg &arg : rule.positional)
      strings.push_back(builder.getNamedAttr(
          rule.optimizerInfo && !rule.optimizerInfo->positionalName.empty()
              ? StringRef(rule.optimizerInfo->positionalName)
              : StringRef("method"),
          builder.getStringAttr(arg.name)));
    SmallVector<Attribute> names;
    for (const OptimizerOption &option : rule.options)
      names.push_back(builder.getStringAttr(option.name));
    OperationState state(where, UpdateOp::getOperationName());
    UpdateOp::build(builder, state, node, builder.getStringAttr(rule.optimizer),
                    builder.getArrayAttr(names),
                    builder.getDictionaryAttr(strings), rule.options.size());
    auto update = cast<UpdateOp>(builder.create(state));
    for (auto [option, region] : llvm::zip(rule.options, update.getOptions())) {
      OpBuilder::InsertionGuard guard(builder);
      builder.setInsertionPointToStart(&region.emplaceBlock());
      Value value = emitExpr(*option.value);
      if (!value)
        return failure();
      YieldOp::create(builder, loc(*option.value), value);
    }
    return success();
  }

  //===--------------------------------------------------------------------===//
  // Indices
  //===--------------------------------------------------------------------===//

  /// Creates the block of `region` with one index argument per binding and
  /// makes the bindings refer to them.
  Block *bindIndices(Region &region, const IndexDomain &domain) {
    Block *block = &region.emplaceBlock();
    for (const IndexBinding &binding : domain.bindings)
      indices[&binding] =
          block->addArgument(builder.getIndexType(),
                             NameLoc::get(builder.getStringAttr(binding.name),
                                          loc(binding.nameRange.Start)));
    return block;
  }

  void unbindIndices(const IndexDomain &domain) {
    for (const IndexBinding &binding : domain.bindings)
      indices.erase(&binding);
  }

  /// The value of index `binding`: its block argument, or inside an inlined
  /// output read, the read's index.
  Value indexValue(const IndexBinding &binding, Location where) {
    auto found = inlinedIndices.find(&binding);
    if (found == inlinedIndices.end())
      return indices.lookup(&binding);
    return materializeAffineExpr(builder, where, found->second.expr,
                                 found->second.operands, {});
  }

  /// `expr` as an affine expression whose dims are `operands` (index values
  /// it appends to: domain indices, `step`, dim sizes).
  FailureOr<AffineExpr> affineIndex(const Expr &expr,
                                    SmallVectorImpl<Value> &operands) {
    auto dimFor = [&](Value value) {
      auto *found = llvm::find(operands, value);
      unsigned position = found - operands.begin();
      if (found == operands.end())
        operands.push_back(value);
      return getAffineDimExpr(position, &context);
    };
    if (auto *number = dyn_cast<NumberExpr>(&expr)) {
      if (number->isInteger())
        return getAffineConstantExpr(static_cast<int64_t>(number->getValue()),
                                     &context);
    } else if (auto *name = dyn_cast<NameExpr>(&expr)) {
      if (name->getSymbolKind() == SymbolKind::IndexVar) {
        auto found = inlinedIndices.find(name->getBinding());
        if (found == inlinedIndices.end())
          return dimFor(indices.lookup(name->getBinding()));
        // An output's index bound by an inlined read: the read's index.
        SmallVector<AffineExpr> dims;
        for (Value operand : found->second.operands)
          dims.push_back(dimFor(operand));
        return found->second.expr.replaceDims(dims);
      }
      if (name->getSymbolKind() == SymbolKind::Dim)
        return dimFor(
            SizeOp::create(builder, loc(expr),
                           DimExprAttr::getDim(&context, name->getName())));
    } else if (isa<StepExpr>(&expr)) {
      return dimFor(StepOp::create(builder, loc(expr)));
    } else if (auto *unary = dyn_cast<UnaryExpr>(&expr)) {
      FailureOr<AffineExpr> operand =
          affineIndex(unary->getOperand(), operands);
      if (succeeded(operand))
        return -*operand;
      return failure();
    } else if (auto *binary = dyn_cast<BinaryExpr>(&expr)) {
      FailureOr<AffineExpr> lhs = affineIndex(binary->getLhs(), operands);
      FailureOr<AffineExpr> rhs = affineIndex(binary->getRhs(), operands);
      if (failed(lhs) || failed(rhs))
        return failure();
      bool constantFactor =
          isa<AffineConstantExpr>(*lhs) || isa<AffineConstantExpr>(*rhs);
      switch (binary->getOp()) {
      case BinaryOp::Add:
        return *lhs + *rhs;
      case BinaryOp::Sub:
        return *lhs - *rhs;
      case BinaryOp::Mul:
        if (constantFactor)
          return *lhs * *rhs;
        break;
      default:
        break;
      }
    }
    return error(expr.getLoc(),
                 "an index must be affine in index variables, `step` and dims");
  }

  /// An affine map over `operands` for the index expressions `exprs`.
  FailureOr<AffineMap> affineIndices(ArrayRef<ExprPtr> exprs,
                                     SmallVectorImpl<Value> &operands) {
    SmallVector<AffineExpr> results;
    for (const ExprPtr &expr : exprs) {
      FailureOr<AffineExpr> result = affineIndex(*expr, operands);
      if (failed(result))
        return failure();
      results.push_back(*result);
    }
    return AffineMap::get(operands.size(), 0, results, &context);
  }

  /// A predicate over indices, as `arith` ops yielding an i1.
  Value emitPredicate(const Expr &expr) {
    auto *binary = dyn_cast<BinaryExpr>(&expr);
    if (!binary) {
      (void)error(expr.getLoc(), "expected a comparison of indices");
      return {};
    }
    if (binary->getOp() == BinaryOp::And || binary->getOp() == BinaryOp::Or) {
      Value lhs = emitPredicate(binary->getLhs());
      Value rhs = emitPredicate(binary->getRhs());
      if (!lhs || !rhs)
        return {};
      if (binary->getOp() == BinaryOp::And)
        return arith::AndIOp::create(builder, loc(expr), lhs, rhs);
      return arith::OrIOp::create(builder, loc(expr), lhs, rhs);
    }
    static const std::pair<BinaryOp, arith::CmpIPredicate> predicates[] = {
        {BinaryOp::Eq, arith::CmpIPredicate::eq},
        {BinaryOp::Ne, arith::CmpIPredicate::ne},
        {BinaryOp::Lt, arith::CmpIPredicate::slt},
        {BinaryOp::Le, arith::CmpIPredicate::sle},
        {BinaryOp::Gt, arith::CmpIPredicate::sgt},
        {BinaryOp::Ge, arith::CmpIPredicate::sge}};
    for (auto [op, predicate] : predicates) {
      if (binary->getOp() != op)
        continue;
      SmallVector<Value> operands;
      FailureOr<AffineExpr> lhs = affineIndex(binary->getLhs(), operands);
      FailureOr<AffineExpr> rhs = affineIndex(binary->getRhs(), operands);
      if (failed(lhs) || failed(rhs))
        return {};
      Location where = loc(expr);
      Value left = materializeAffineExpr(builder, where, *lhs, operands, {});
      Value right = materializeAffineExpr(builder, where, *rhs, operands, {});
      return arith::CmpIOp::create(builder, where, predicate, left, right);
    }
    (void)error(expr.getLoc(), "expected a comparison of indices");
    return {};
  }

  //===--------------------------------------------------------------------===//
  // Expressions
  //===--------------------------------------------------------------------===//

  Value emitExpr(const Expr &expr) {
    Location where = loc(expr);
    switch (expr.getKind()) {
    case Expr::Kind::Number:
      return constant(where, cast<NumberExpr>(expr).getValue());
    case Expr::Kind::Name:
      return emitName(cast<NameExpr>(expr));
    case Expr::Kind::Index:
      return emitIndex(cast<IndexExpr>(expr));
    case Expr::Kind::Call:
      return emitCall(cast<CallExpr>(expr));
    case Expr::Kind::Transpose: {
      Value base = emitExpr(cast<TransposeExpr>(expr).getBase());
      return base ? TransposeOp::create(builder, where, base).getResult()
                  : Value();
    }
    case Expr::Kind::Unary: {
      Value operand = emitExpr(cast<UnaryExpr>(expr).getOperand());
      return operand ? NegOp::create(builder, where, operand.getType(), operand)
                           .getResult()
                     : Value();
    }
    case Expr::Kind::Binary:
      return emitBinary(cast<BinaryExpr>(expr));
    case Expr::Kind::Reduction:
      return emitReduction(cast<ReductionExpr>(expr));
    case Expr::Kind::Step:
      return ToRealOp::create(builder, where, StepOp::create(builder, where));
    }
    llvm_unreachable("unknown expression kind");
  }

  Value emitName(const NameExpr &name) {
    Location where = loc(name);
    switch (name.getSymbolKind()) {
    case SymbolKind::Dim: {
      Value size = SizeOp::create(
          builder, where, DimExprAttr::getDim(&context, name.getName()));
      return ToRealOp::create(builder, where, size);
    }
    case SymbolKind::Tensor:
    case SymbolKind::Const:
    case SymbolKind::Let:
      return ReadOp::create(builder, where, typeOf(name.getShape()),
                            FlatSymbolRefAttr::get(&context, name.getName()),
                            AffineMapAttr::get(AffineMap::get(&context)),
                            ValueRange());
    case SymbolKind::FnParam:
      return fnArguments.lookup(name.getFn())[name.getParamIndex()];
    case SymbolKind::IndexVar:
      return ToRealOp::create(builder, where,
                              indexValue(*name.getBinding(), where));
    case SymbolKind::Output:
      return emitOutputRead(name, cast<OutputDecl>(*name.getDecl()), {});
    case SymbolKind::Grad:
    case SymbolKind::Unresolved:
      break;
    }
    (void)error(name.getLoc(),
                "`" + name.getName() + "` cannot be used as a value here");
    return {};
  }

  Value emitIndex(const IndexExpr &index) {
    Location where = loc(index);
    if (auto *name = dyn_cast<NameExpr>(&index.getBase());
        name && name->getSymbolKind() == SymbolKind::Output)
      return emitOutputRead(index, cast<OutputDecl>(*name->getDecl()),
                            index.getIndices());
    SmallVector<Value> operands;
    FailureOr<AffineMap> map = affineIndices(index.getIndices(), operands);
    if (failed(map))
      return {};
    ArrayType type = typeOf(index.getShape());
    if (auto *name = dyn_cast<NameExpr>(&index.getBase());
        name && (name->getSymbolKind() == SymbolKind::Tensor ||
                 name->getSymbolKind() == SymbolKind::Let))
      return ReadOp::create(builder, where, type,
                            FlatSymbolRefAttr::get(&context, name->getName()),
                            AffineMapAttr::get(*map), operands);
    Value base = emitExpr(index.getBase());
    if (!base)
      return {};
    return ExtractOp::create(builder, where, type, base,
                             AffineMapAttr::get(*map), operands);
  }

  /// A read of `output` in a loss (`read` is `output[readIndices...]`, or the
  /// bare name of an output without indices): the output's body, emitted
  /// with its domain indices bound to the read's first indices, so the
  /// dialect never reads an output. Further indices extract from the body's
  /// value.
  Value emitOutputRead(const Expr &read, const OutputDecl &output,
                       ArrayRef<ExprPtr> readIndices) {
    const std::vector<IndexBinding> &bindings = output.getDomain().bindings;
    SmallVector<InlinedIndex> bound;
    for (const ExprPtr &index : readIndices.take_front(bindings.size())) {
      InlinedIndex inlined;
      FailureOr<AffineExpr> expr = affineIndex(*index, inlined.operands);
      if (failed(expr))
        return {};
      inlined.expr = *expr;
      bound.push_back(std::move(inlined));
    }
    for (auto [binding, inlined] : llvm::zip_equal(bindings, bound))
      inlinedIndices[&binding] = inlined;
    Value value = emitExpr(output.getBody());
    for (const IndexBinding &binding : bindings)
      inlinedIndices.erase(&binding);
    if (!value || readIndices.size() == bindings.size())
      return value;
    SmallVector<Value> operands;
    FailureOr<AffineMap> map =
        affineIndices(readIndices.drop_front(bindings.size()), operands);
    if (failed(map))
      return {};
    return ExtractOp::create(builder, loc(read), typeOf(read.getShape()), value,
                             AffineMapAttr::get(*map), operands);
  }

  Value emitBinary(const BinaryExpr &binary) {
    Location where = loc(binary);
    if (binary.getOp() == BinaryOp::Pow) {
      Value base = emitExpr(binary.getLhs());
      FailureOr<double> exponent = constantNumber(binary.getRhs());
      if (!base || failed(exponent))
        return {};
      return PowOp::create(builder, where, base.getType(), base,
                           static_cast<int64_t>(*exponent));
    }
    if (binary.getOp() == BinaryOp::And || binary.getOp() == BinaryOp::Or) {
      Value lhs = emitExpr(binary.getLhs());
      Value rhs = emitExpr(binary.getRhs());
      if (!lhs || !rhs)
        return {};
      if (binary.getOp() == BinaryOp::And)
        return arith::AndIOp::create(builder, where, lhs, rhs);
      return arith::OrIOp::create(builder, where, lhs, rhs);
    }
    Value lhs = emitExpr(binary.getLhs());
    Value rhs = emitExpr(binary.getRhs());
    if (!lhs || !rhs)
      return {};
    switch (binary.getOp()) {
    case BinaryOp::Add:
      return AddOp::create(builder, where, lhs, rhs);
    case BinaryOp::Sub:
      return SubOp::create(builder, where, lhs, rhs);
    case BinaryOp::Mul:
      return MulOp::create(builder, where, lhs, rhs);
    case BinaryOp::Div:
      return DivOp::create(builder, where, lhs, rhs);
    case BinaryOp::MatMul:
      return MatmulOp::create(builder, where, lhs, rhs);
    case BinaryOp::Eq:
      return CmpOp::create(builder, where, CmpPredicate::eq, lhs, rhs);
    case BinaryOp::Ne:
      return CmpOp::create(builder, where, CmpPredicate::ne, lhs, rhs);
    case BinaryOp::Lt:
      return CmpOp::create(builder, where, CmpPredicate::lt, lhs, rhs);
    case BinaryOp::Le:
      return CmpOp::create(builder, where, CmpPredicate::le, lhs, rhs);
    case BinaryOp::Gt:
      return CmpOp::create(builder, where, CmpPredicate::gt, lhs, rhs);
    case BinaryOp::Ge:
      return CmpOp::create(builder, where, CmpPredicate::ge, lhs, rhs);
    default:
      llvm_unreachable("handled above");
    }
  }

  Value emitReduction(const ReductionExpr &reduction) {
    static constexpr ReduceKind kinds[] = {ReduceKind::sum, ReduceKind::mean,
                                           ReduceKind::max, ReduceKind::lse,
                                           ReduceKind::custom};
    Location where = loc(reduction);
    const IndexDomain &domain = reduction.getDomain();
    SmallVector<Attribute> sizes;
    for (const IndexBinding &binding : domain.bindings) {
      FailureOr<DimExprAttr> size = dimExpr(*binding.size);
      if (failed(size))
        return {};
      sizes.push_back(*size);
    }
    Value temperature;
    if (const Expr *temp = reduction.getTemperature())
      if (!(temperature = emitExpr(*temp)))
        return {};
    auto op =
        ReduceOp::create(builder, where, typeOf(reduction.getShape()),
                         kinds[static_cast<int>(reduction.getReductionKind())],
                         builder.getArrayAttr(sizes), temperature);
    if (reduction.getReductionKind() == ReductionKind::Plugin)
      op.setAggregation(reduction.getAggregation().name);
    OpBuilder::InsertionGuard guard(builder);
    if (domain.predicate) {
      builder.setInsertionPointToStart(bindIndices(op.getPredicate(), domain));
      Value admitted = emitPredicate(*domain.predicate);
      unbindIndices(domain);
      if (!admitted)
        return {};
      YieldOp::create(builder, loc(*domain.predicate), admitted);
    }
    builder.setInsertionPointToStart(bindIndices(op.getBody(), domain));
    Value body = emitExpr(reduction.getBody());
    unbindIndices(domain);
    if (!body)
      return {};
    YieldOp::create(builder, loc(reduction.getBody()), body);
    return op;
  }

  Value emitCall(const CallExpr &call) {
    Location where = loc(call);
    if (FnDecl *fn = call.getFn()) {
      SmallVector<Value> arguments;
      for (const ExprPtr &arg : call.getArgs()) {
        Value value = emitExpr(*arg);
        if (!value)
          return {};
        arguments.push_back(value);
      }
      SmallVector<Value> saved = fnArguments.lookup(fn);
      fnArguments[fn] = arguments;
      Value result = emitExpr(fn->getBody());
      fnArguments[fn] = saved;
      return result;
    }
    const BuiltinFunction *builtin = call.getBuiltin();
    if (!builtin) {
      (void)error(call.getLoc(), "unknown function `" + call.getCallee() + "`");
      return {};
    }
    const auto &args = call.getArgs();
    if (builtin->id == BuiltinId::Eye)
      return EyeOp::create(
          builder, where, typeOf(call.getShape()),
          FlatSymbolRefAttr::get(&context, cast<NameExpr>(*args[0]).getName()));
    if (args.size() == 1)
      if (auto *name = dyn_cast<NameExpr>(args[0].get());
          name && name->getSymbolKind() == SymbolKind::Grad)
        return emitGradientNorm(call);
    SmallVector<Value> operands;
    for (const ExprPtr &arg : args) {
      Value value = emitExpr(*arg);
      if (!value)
        return {};
      operands.push_back(value);
    }
    Value x = operands[0];
    Type type = x.getType();
    StringAttr pluginName = builder.getStringAttr(builtin->name);
    if (builtin->kind == FunctionKind::Elementwise)
      return ApplyOp::create(builder, where, type, pluginName,
                             builder.getI64IntegerAttr(0), x);
    if (builtin->kind == FunctionKind::Similarity)
      return SimilarityOp::create(builder, where, pluginName, x, operands[1]);
    // A built-in element-wise function is the op of its name, which says
    // what it computes (ElementwiseOpInterface).
    if (builtin->rule == ShapeRule::Elementwise)
      return emitElementwiseBuiltin(*builtin, x, where);
    auto elements = [&](ElementsKind kind) -> Value {
      return ReduceElementsOp::create(builder, where, kind, x);
    };
    switch (builtin->id) {
    case BuiltinId::Sum:
      return elements(ElementsKind::sum);
    case BuiltinId::Mean:
      return elements(ElementsKind::mean);
    case BuiltinId::Maxabs:
      return elements(ElementsKind::maxabs);
    case BuiltinId::Lse:
      return elements(ElementsKind::lse);
    case BuiltinId::Sqnorm:
      return elements(ElementsKind::sqnorm);
    case BuiltinId::Norm:
      return elements(ElementsKind::norm);
    case BuiltinId::Softmax:
    case BuiltinId::SoftmaxRows:
      return SoftmaxOp::create(builder, where, type, x);
    case BuiltinId::LogSoftmax:
      return LogSoftmaxOp::create(builder, where, type, x);
    case BuiltinId::Rmsnorm:
      return RmsNormOp::create(builder, where, type, x);
    case BuiltinId::Layernorm:
      return LayerNormOp::create(builder, where, type, x);
    case BuiltinId::Dot:
      return DotOp::create(builder, where, x, operands[1]);
    case BuiltinId::Quad:
      return QuadOp::create(builder, where, x, operands[1]);
    case BuiltinId::Outer:
      return OuterOp::create(builder, where, x, operands[1]);
    case BuiltinId::Diag:
      return DiagOp::create(builder, where, x);
    case BuiltinId::Logdet:
      return LogDetOp::create(builder, where, x);
    case BuiltinId::Inverse:
      return InverseOp::create(builder, where, x);
    default:
      break;
    }
    llvm_unreachable("unknown builtin");
  }

  /// `maxabs(grad)`, `sqnorm(grad)`, `norm(grad)`, `sum(grad)` in a stopping
  /// rule: over the gradients of every node a gradient rule updates.
  /// The op `energy.NAME` of the built-in element-wise function NAME on
  /// `x`; an internal error where the dialect has no such element-wise op.
  Value emitElementwiseBuiltin(const BuiltinFunction &builtin, Value x,
                               Location where) {
    std::string name = "energy." + builtin.name;
    std::optional<RegisteredOperationName> op =
        RegisteredOperationName::lookup(name, &context);
    if (!op || !op->hasInterface<ElementwiseOpInterface>()) {
      mlir::emitError(where)
          << "internal error: the built-in function `" << builtin.name
          << "` has no element-wise op " << name;
      return {};
    }
    OperationState state(where, *op);
    state.addOperands(x);
    state.addTypes(x.getType());
    return builder.create(state)->getResult(0);
  }

  Value emitGradientNorm(const CallExpr &call) {
    Location where = loc(call);
    BuiltinId id = call.getBuiltin()->id;
    if (id != BuiltinId::Maxabs && id != BuiltinId::Sqnorm &&
        id != BuiltinId::Norm && id != BuiltinId::Sum) {
      (void)error(call.getLoc(), "`grad` is supported in `maxabs`, `sqnorm`, "
                                 "`norm` and `sum`");
      return {};
    }
    if (gradientNodes.empty()) {
      (void)error(call.getLoc(),
                  "`grad` needs at least one node updated by an optimizer");
      return {};
    }
    Value total;
    for (StringRef node : gradientNodes) {
      Value gradient = GradOp::create(builder, where, nodeTypes.lookup(node),
                                      FlatSymbolRefAttr::get(&context, node),
                                      FlatSymbolRefAttr())
                           ->getResult(0);
      ElementsKind kind = id == BuiltinId::Maxabs ? ElementsKind::maxabs
                          : id == BuiltinId::Sum  ? ElementsKind::sum
                                                  : ElementsKind::sqnorm;
      Value part = ReduceElementsOp::create(builder, where, kind, gradient);
      if (!total)
        total = part;
      else if (id == BuiltinId::Maxabs)
        total = MaximumOp::create(builder, where, total, part);
      else
        total = AddOp::create(builder, where, total, part);
    }
    if (id == BuiltinId::Norm)
      total = SqrtOp::create(builder, where, total.getType(), total);
    return total;
  }

  MLIRContext &context;
  const llvm::SourceMgr &sourceMgr;
  OpBuilder builder;
  llvm::DenseMap<const IndexBinding *, Value> indices;
  /// An output's domain index while a read of it is inlined in a loss: the
  /// read's affine index over values of the loss (`logits[i + 1, c]` binds
  /// the first index to `d0 + 1` over `%i`).
  struct InlinedIndex {
    AffineExpr expr;
    SmallVector<Value> operands;
  };
  llvm::DenseMap<const IndexBinding *, InlinedIndex> inlinedIndices;
  llvm::DenseMap<const FnDecl *, SmallVector<Value>> fnArguments;

public:
  /// The nodes updated by optimizer rules (whose gradients `grad` in a
  /// stopping rule stands for), and the types of all tensors.
  SmallVector<StringRef> gradientNodes;
  llvm::StringMap<Type> nodeTypes;
};
} // namespace

namespace energy::frontend {
OwningOpRef<ModuleOp> emitEnergyDialect(MLIRContext &context,
                                        const ModelSpec &model,
                                        const llvm::SourceMgr &sourceMgr) {
  context.loadDialect<EnergyDialect, arith::ArithDialect>();
  Emitter emitter(context, sourceMgr);
  for (const DeclPtr &decl : model.decls)
    if (auto *tensor = dyn_cast<TensorDecl>(decl.get())) {
      SmallVector<StringRef> dims;
      for (const DimRef &dim : tensor->getDims())
        dims.push_back(dim.name);
      emitter.nodeTypes[tensor->getName()] = ArrayType::get(&context, dims);
    }
  return emitter.emit(model);
}

OwningOpRef<ModuleOp> emitSource(MLIRContext &context,
                                 const llvm::SourceMgr &sourceMgr,
                                 unsigned bufferId,
                                 DiagnosticEngine &diagnostics) {
  std::unique_ptr<ModelSpec> model =
      parseAndCheck(sourceMgr, bufferId, diagnostics);
  if (!model || diagnostics.hasErrors())
    return nullptr;
  return emitEnergyDialect(context, *model, sourceMgr);
}
} // namespace energy::frontend
