//===- BuildImplicitBackward.cpp - Backward at a fixed point --------------===//
//
// `backward implicit`: the adjoints at the fixed point a run ends at, by the
// implicit function theorem, from conjugate gradients on Hessian-vector
// products, instead of the reverse sweep of every step.
//
//===----------------------------------------------------------------------===//

#include "BackwardBuilder.h"
#include "LetReads.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::energy;

Value BackwardBuilder::constant(OpBuilder &builder, double value) {
  return ConstantOp::create(builder, loc(), value);
}

Value BackwardBuilder::innerProduct(OpBuilder &builder, Value lhs, Value rhs) {
  Value product = MulOp::create(builder, loc(), lhs, rhs);
  if (cast<ArrayType>(product.getType()).isScalar())
    return product;
  return ReduceElementsOp::create(builder, loc(), ElementsKind::sum, product);
}

Value BackwardBuilder::guardedRatio(OpBuilder &builder, Value valid,
                                    Value numerator, Value denominator) {
  Value safe = SelectOp::create(builder, loc(), valid, denominator,
                                constant(builder, 1));
  Value ratio = DivOp::create(builder, loc(), numerator, safe);
  return SelectOp::create(builder, loc(), valid, ratio, constant(builder, 0));
}

Value BackwardBuilder::compare(OpBuilder &builder, CmpPredicate predicate,
                               Value lhs, Value rhs) {
  return CmpOp::create(builder, loc(), predicate, lhs, rhs);
}

LogicalResult BackwardBuilder::buildImplicitSolve(DynamicsOp dynamics,
                                                  Block &block) {
  llvm::SetVector<StringRef> solved;
  for (UpdateOp rule : dynamics.getRules().front().getOps<UpdateOp>())
    solved.insert(rule.getNode());
  if (solved.empty() || !dynamics.getRules().front().getOps<AssignOp>().empty())
    return dynamics.emitOpError()
           << "differentiates implicitly at a fixed point, which needs "
              "gradient rules and no explicit ones";
  OpBuilder builder = OpBuilder::atBlockEnd(&block);
  // The directional terms ⟨∇ₓE, c⟩ and what each of them reads.
  SmallVector<std::pair<TermOp, StringRef>> terms;
  SmallVector<llvm::SetVector<StringRef>> termReads;
  for (StringRef node : solved) {
    FailureOr<std::pair<TermOp, StringRef>> term =
        directionalTerm(node, FlatSymbolRefAttr());
    if (failed(term))
      return failure();
    terms.push_back(*term);
    termReads.push_back(readTensors(term->first.getBody(), model));
  }
  auto solverTensor = [&](StringRef node, StringRef suffix, bool scalar) {
    return auxiliaryTensor(node, suffix,
                           scalar ? builder.getArrayAttr({})
                                  : symbols.lookup<TensorOp>(node).getShape(),
                           Provenance::SolverOf);
  };
  StringRef first = solved.front();
  StringRef residualNorm = solverTensor(first, "solver_residual_norm", true);
  StringRef threshold = solverTensor(first, "solver_threshold", true);
  StringRef rounds = solverTensor(first, "solver_rounds", true);
  SmallVector<StringRef> solutions, residuals, directions;
  for (StringRef node : solved) {
    solutions.push_back(solverTensor(node, "solver_solution", false));
    residuals.push_back(solverTensor(node, "solver_residual", false));
    directions.push_back(solverTensor(node, "solver_direction", false));
  }

  // x = 0, r = p = x̄.
  Value norm;
  for (auto [k, node] : llvm::enumerate(solved)) {
    Value seed = readWhole(builder, loc(), adjointTensor(node));
    StoreOp::create(builder, loc(), zeros(builder, loc(), typeOf(node)),
                    ref(solutions[k]));
    StoreOp::create(builder, loc(), seed, ref(residuals[k]));
    StoreOp::create(builder, loc(), seed, ref(directions[k]));
    Value part = innerProduct(builder, seed, seed);
    norm = norm ? AddOp::create(builder, loc(), norm, part).getResult() : part;
  }
  double tolerance = dynamics.getImplicitTolerance()->convertToDouble();
  StoreOp::create(builder, loc(), norm, ref(residualNorm));
  StoreOp::create(builder, loc(),
                  MulOp::create(builder, loc(), norm,
                                constant(builder, tolerance * tolerance)),
                  ref(threshold));
  StoreOp::create(builder, loc(), constant(builder, 0), ref(rounds));

  int64_t iterations = int64_t(*dynamics.getImplicitIterations());
  auto loop = RepeatOp::create(builder, loc(),
                               builder.getI64IntegerAttr(iterations + 1));
  {
    OpBuilder in = OpBuilder::atBlockEnd(&loop.getBody().emplaceBlock());
    SmallVector<Value> direction;
    for (auto [k, term] : llvm::enumerate(terms)) {
      direction.push_back(readWhole(in, loc(), directions[k]));
      StoreOp::create(in, loc(), direction.back(), ref(term.second));
    }
    // H p, pᵀ H p, and the curvature below which p is taken for flat:
    // √ε · pᵀp, ε of the type the kernels compute in (along a direction
    // the energy does not curve in, such as a layer norm's scale, pᵀHp is
    // rounding noise, of either sign).
    SmallVector<Value> product;
    Value curvature, flat;
    for (Value part : direction) {
      Value square = innerProduct(in, part, part);
      flat = flat ? AddOp::create(in, loc(), flat, square).getResult() : square;
    }
    flat = MulOp::create(
        in, loc(), SqrtOp::create(in, loc(), RoundingUnitOp::create(in, loc())),
        flat);
    for (StringRef node : solved) {
      Value sum;
      for (auto [term, reads] : llvm::zip(terms, termReads)) {
        if (!reads.contains(node))
          continue;
        Value part = GradOp::create(in, loc(), typeOf(node), ref(node),
                                    ref(term.first.getSymName()))
                         ->getResult(0);
        sum = sum ? AddOp::create(in, loc(), sum, part).getResult() : part;
      }
      product.push_back(sum ? sum : zeros(in, loc(), typeOf(node)));
      Value part =
          innerProduct(in, direction[product.size() - 1], product.back());
      curvature = curvature
                      ? AddOp::create(in, loc(), curvature, part).getResult()
                      : part;
    }
    Value previous = readWhole(in, loc(), residualNorm);
    Value positive = compare(in, CmpPredicate::gt, curvature, flat);
    Value alpha = guardedRatio(in, positive, previous, curvature);
    Value norm;
    SmallVector<Value> newResiduals;
    for (size_t k = 0; k < solved.size(); ++k) {
      Value solution =
          AddOp::create(in, loc(), readWhole(in, loc(), solutions[k]),
                        MulOp::create(in, loc(), alpha, direction[k]));
      StoreOp::create(in, loc(), solution, ref(solutions[k]));
      Value residual =
          SubOp::create(in, loc(), readWhole(in, loc(), residuals[k]),
                        MulOp::create(in, loc(), alpha, product[k]));
      StoreOp::create(in, loc(), residual, ref(residuals[k]));
      newResiduals.push_back(residual);
      Value part = innerProduct(in, residual, residual);
      norm = norm ? AddOp::create(in, loc(), norm, part).getResult() : part;
    }
    Value beta = guardedRatio(in, positive, norm, previous);
    for (size_t k = 0; k < solved.size(); ++k)
      StoreOp::create(
          in, loc(),
          AddOp::create(in, loc(), newResiduals[k],
                        MulOp::create(in, loc(), beta, direction[k])),
          ref(directions[k]));
    StoreOp::create(in, loc(), norm, ref(residualNorm));
    Value round =
        AddOp::create(in, loc(), readWhole(in, loc(), rounds), constant(in, 1));
    StoreOp::create(in, loc(), round, ref(rounds));
    Value converged =
        compare(in, CmpPredicate::le, norm, readWhole(in, loc(), threshold));
    Value exhausted =
        compare(in, CmpPredicate::ge, round, constant(in, double(iterations)));
    Value stalled = compare(in, CmpPredicate::le, curvature, flat);
    Value done = arith::OrIOp::create(
        in, loc(), arith::OrIOp::create(in, loc(), converged, exhausted),
        stalled);
    YieldOp::create(in, loc(), done);
  }

  // Ȳ −= ∇_Y ⟨∇ₓE, v⟩ with c = v; x̄ = 0 for the nodes and their
  // optimizer states.
  llvm::MapVector<StringRef, Value> mixed;
  for (auto [k, term] : llvm::enumerate(terms)) {
    StoreOp::create(builder, loc(), readWhole(builder, loc(), solutions[k]),
                    ref(term.second));
    for (StringRef tensor : termReads[k]) {
      if (!differentiable.contains(tensor) || solved.contains(tensor))
        continue;
      Value part = GradOp::create(builder, loc(), typeOf(tensor), ref(tensor),
                                  ref(term.first.getSymName()))
                       ->getResult(0);
      Value &sum = mixed[tensor];
      sum = sum ? AddOp::create(builder, loc(), sum, part).getResult() : part;
    }
  }
  for (StringRef tensor : differentiable) {
    TensorOp declaration = symbols.lookup<TensorOp>(tensor);
    Value adjoint;
    if (solved.contains(tensor) || declaration.getOptimizerState())
      adjoint = zeros(builder, loc(), typeOf(tensor));
    else if (Value sum = mixed.lookup(tensor))
      adjoint =
          SubOp::create(builder, loc(),
                        readWhole(builder, loc(), adjointTensor(tensor)), sum);
    if (adjoint)
      StoreOp::create(builder, loc(), adjoint, ref(adjointTensor(tensor)));
  }
  return success();
}
