//===- EmitEnergyDialect.cpp - From the checked AST to the dialect --------===//
//
// Walks a checked `.energy` AST and builds the `energy` dialect: one op per
// declaration, expressions as energy ops placed where they occur (inside the
// reduction bodies that bind their indices), `fn` helpers inlined at calls,
// and the outputs a loss reads inlined at the read's indices.
//
//===----------------------------------------------------------------------===//

#include "Emitter.h"

#include "energy/Frontend/EmitEnergyDialect.h"
#include "energy/Frontend/Frontend.h"
#include "energy/Frontend/OptimizerTable.h"

#include "energy/IR/EnergyDialect.h"
#include "energy/IR/EnergyOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/DenseMap.h"

using namespace mlir;
using namespace mlir::energy;
using namespace ::energy::frontend;
using namespace ::energy::frontend::detail;

OwningOpRef<ModuleOp> Emitter::emit(const ModelSpec &model) {
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
  builder.setInsertionPointToEnd(declarations);
  emitIndexChecks(model);
  if (failed(verify(*module)))
    return nullptr;
  return module;
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

Location Emitter::loc(llvm::SMLoc where) {
  unsigned buffer = sourceMgr.FindBufferContainingLoc(where);
  if (buffer == 0)
    return UnknownLoc::get(&context);
  auto [line, column] = sourceMgr.getLineAndColumn(where, buffer);
  return FileLineColLoc::get(
      &context, sourceMgr.getMemoryBuffer(buffer)->getBufferIdentifier(), line,
      column);
}

LogicalResult Emitter::error(llvm::SMLoc where, const Twine &message) {
  return emitError(loc(where)) << message;
}

ArrayType Emitter::typeOf(const Shape &shape) {
  SmallVector<StringRef> dims(shape.dims.begin(), shape.dims.end());
  return ArrayType::get(&context, dims);
}

Value Emitter::constant(Location where, double value) {
  return ConstantOp::create(builder, where, value);
}

template <typename T>
FailureOr<T>
Emitter::foldArithmetic(const Expr &expr,
                        function_ref<FailureOr<T>(const Expr &)> leaf,
                        function_ref<T(T, T)> divide) {
  if (auto *unary = dyn_cast<UnaryExpr>(&expr)) {
    FailureOr<T> operand = foldArithmetic<T>(unary->getOperand(), leaf, divide);
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

FailureOr<DimExprAttr> Emitter::dimExpr(const Expr &expr) {
  SmallVector<StringAttr> names;
  auto leaf = [&](const Expr &e) -> FailureOr<mlir::AffineExpr> {
    if (auto *number = dyn_cast<NumberExpr>(&e); number && number->isInteger())
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
  FailureOr<mlir::AffineExpr> result = foldArithmetic<mlir::AffineExpr>(
      expr, leaf,
      [](mlir::AffineExpr a, mlir::AffineExpr b) { return a.floorDiv(b); });
  if (failed(result))
    return failure();
  return DimExprAttr::get(&context, *result, names);
}

DimExprAttr Emitter::dimExpr(const AffineExpr &affine) {
  SmallVector<StringAttr> names;
  mlir::AffineExpr result = getAffineConstantExpr(affine.constant, &context);
  for (const auto &[symbol, coefficient] : affine.terms) {
    result = result + getAffineSymbolExpr(names.size(), &context) * coefficient;
    names.push_back(StringAttr::get(&context, symbol));
  }
  return DimExprAttr::get(&context, result, names);
}

void Emitter::emitIndexChecks(const ModelSpec &model) {
  auto conditions = [&](const std::optional<std::vector<AffineExpr>> &side) {
    SmallVector<Attribute> attributes;
    if (side)
      for (const AffineExpr &condition : *side)
        attributes.push_back(dimExpr(condition));
    return side ? builder.getArrayAttr(attributes) : ArrayAttr();
  };
  for (const IndexRangeCheck &check : model.indexChecks) {
    llvm::StringRef text(check.read.Start.getPointer(),
                         check.read.End.getPointer() -
                             check.read.Start.getPointer());
    IndexCheckOp::create(builder, loc(check.read.Start), text, check.axis,
                         dimExpr(check.size), conditions(check.below),
                         conditions(check.above));
  }
}

FailureOr<double> Emitter::constantNumber(const Expr &expr) {
  auto leaf = [&](const Expr &e) -> FailureOr<double> {
    if (auto *number = dyn_cast<NumberExpr>(&e))
      return number->getValue();
    return error(e.getLoc(), "expected a constant number");
  };
  return foldArithmetic<double>(expr, leaf,
                                [](double a, double b) { return a / b; });
}

//===----------------------------------------------------------------------===//
// Declarations
//===----------------------------------------------------------------------===//

LogicalResult Emitter::emitDecl(const Decl &decl) {
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
    ConstOp::create(builder, where, builder.getStringAttr(constant->getName()),
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

LogicalResult Emitter::emitTensor(const TensorDecl &tensor, Location where) {
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

template <typename ComprehensionOp>
LogicalResult Emitter::emitComprehension(const ComprehensionDecl &decl,
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

//===----------------------------------------------------------------------===//
// Dynamics
//===----------------------------------------------------------------------===//

LogicalResult Emitter::emitDynamics(const DynamicsBlock &dynamics) {
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

LogicalResult Emitter::emitRule(const UpdateRule &rule) {
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
