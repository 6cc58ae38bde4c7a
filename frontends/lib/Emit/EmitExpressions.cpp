//===- EmitExpressions.cpp - Expressions as energy ops --------------------===//
//
// The emitter's expressions: names, indexing, arithmetic, reductions, calls
// of built-in and `fn` functions, and the output reads a loss inlines.
//
//===----------------------------------------------------------------------===//

#include "Emitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::energy;
using namespace ::energy::frontend;
using namespace ::energy::frontend::detail;

Value Emitter::emitExpr(const Expr &expr) {
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

Value Emitter::emitName(const NameExpr &name) {
  Location where = loc(name);
  switch (name.getSymbolKind()) {
  case SymbolKind::Dim: {
    Value size = SizeOp::create(builder, where,
                                DimExprAttr::getDim(&context, name.getName()));
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

Value Emitter::emitIndex(const IndexExpr &index) {
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
  return ExtractOp::create(builder, where, type, base, AffineMapAttr::get(*map),
                           operands);
}

Value Emitter::emitOutputRead(const Expr &read, const OutputDecl &output,
                              ArrayRef<ExprPtr> readIndices) {
  const std::vector<IndexBinding> &bindings = output.getDomain().bindings;
  SmallVector<InlinedIndex> bound;
  for (const ExprPtr &index : readIndices.take_front(bindings.size())) {
    InlinedIndex inlined;
    FailureOr<mlir::AffineExpr> expr = affineIndex(*index, inlined.operands);
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

Value Emitter::emitBinary(const BinaryExpr &binary) {
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

Value Emitter::emitReduction(const ReductionExpr &reduction) {
  static constexpr ReduceKind kinds[] = {ReduceKind::sum, ReduceKind::mean,
                                         ReduceKind::max, ReduceKind::max,
                                         ReduceKind::lse, ReduceKind::custom};
  // min_p e is -max_p (-e).
  bool minimum = reduction.getReductionKind() == ReductionKind::Min;
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
  if (minimum)
    body = NegOp::create(builder, where, body.getType(), body);
  YieldOp::create(builder, loc(reduction.getBody()), body);
  if (minimum) {
    builder.setInsertionPointAfter(op);
    return NegOp::create(builder, where, op.getType(), op);
  }
  return op;
}

Value Emitter::emitCall(const CallExpr &call) {
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
  case BuiltinId::LeakyRelu: {
    // a x + (1 - a) relu(x): its derivative a + (1 - a) H(x) is a at 0, as
    // PyTorch's; a slope that is a tensor (PReLU) is learned through the
    // rules of the ops it is built from.
    Value slope = operands[1];
    Value rest = SubOp::create(builder, where, constant(where, 1.0), slope);
    Value above = ReluOp::create(builder, where, type, x);
    return AddOp::create(builder, where,
                         MulOp::create(builder, where, slope, x),
                         MulOp::create(builder, where, rest, above));
  }
  default:
    break;
  }
  llvm_unreachable("unknown builtin");
}

Value Emitter::emitElementwiseBuiltin(const BuiltinFunction &builtin, Value x,
                                      Location where) {
  std::string name = "energy." + builtin.name;
  std::optional<RegisteredOperationName> op =
      RegisteredOperationName::lookup(name, &context);
  if (!op || !op->hasInterface<ElementwiseOpInterface>()) {
    mlir::emitError(where) << "internal error: the built-in function `"
                           << builtin.name << "` has no element-wise op "
                           << name;
    return {};
  }
  OperationState state(where, *op);
  state.addOperands(x);
  state.addTypes(x.getType());
  return builder.create(state)->getResult(0);
}

Value Emitter::emitGradientNorm(const CallExpr &call) {
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
