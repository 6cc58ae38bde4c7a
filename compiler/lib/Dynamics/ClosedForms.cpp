//===- ClosedForms.cpp - The EM M-step of stationary rules ----------------===//
//
// For an energy −Σ_i lse_k e(i, k), holding the responsibilities
// r_ik = softmax_k e(i, ·) at their entry values makes the energy
// −Σ_i Σ_k r_ik e(i, k) + const, and three shapes of e have closed-form
// minimisers in a node θ read as θ[k]:
//   c · quad(a_i − θ[k], M), c < 0   θ[k] = Σ_i r_ik a_i / Σ_i r_ik
//     (M depending on i: θ[k] = (Σ_i r_ik M̄_i)⁻¹ Σ_i r_ik M̄_i a_i,
//      M̄ = (M + Mᵀ)/2, a linear solve per row)
//   c · logdet(θ[k]) − c · quad(v_i, θ[k]), c > 0
//                                     θ[k] = (Σ_i r_ik v_i v_iᵀ / Σ_i r_ik
//                                             + ridge I)⁻¹
//   c · log_softmax(θ)[k], c > 0      θ = log Σ_i r_ik
// A row whose total responsibility is zero keeps its value.
//
//===----------------------------------------------------------------------===//

#include "energy/Dynamics/ClosedForms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::energy;

namespace {
/// One summand c · leaf of the lse body.
struct Summand {
  double coefficient;
  Value leaf;
};

/// Splits `value` into summands through + − and products with constants.
void collectSummands(Value value, double coefficient,
                     SmallVectorImpl<Summand> &summands) {
  Operation *op = value.getDefiningOp();
  // Constants as emitted (before canonicalisation): `-0.5` is neg(0.5).
  std::function<std::optional<double>(Value)> constantOf =
      [&](Value v) -> std::optional<double> {
    if (auto constant = v.getDefiningOp<ConstantOp>())
      return constant.getValue().convertToDouble();
    if (auto neg = v.getDefiningOp<NegOp>())
      if (std::optional<double> inner = constantOf(neg.getOperand()))
        return -*inner;
    return std::nullopt;
  };
  if (auto add = dyn_cast_or_null<AddOp>(op)) {
    collectSummands(add.getLhs(), coefficient, summands);
    collectSummands(add.getRhs(), coefficient, summands);
  } else if (auto sub = dyn_cast_or_null<SubOp>(op)) {
    collectSummands(sub.getLhs(), coefficient, summands);
    collectSummands(sub.getRhs(), -coefficient, summands);
  } else if (auto neg = dyn_cast_or_null<NegOp>(op)) {
    collectSummands(neg.getOperand(), -coefficient, summands);
  } else if (auto mul = dyn_cast_or_null<MulOp>(op);
             mul && constantOf(mul.getLhs())) {
    collectSummands(mul.getRhs(), coefficient * *constantOf(mul.getLhs()),
                    summands);
  } else if (mul && constantOf(mul.getRhs())) {
    collectSummands(mul.getLhs(), coefficient * *constantOf(mul.getRhs()),
                    summands);
  } else {
    summands.push_back({coefficient, value});
  }
}

/// Whether the computation of `value` reads tensor `name`.
bool readsTensor(Value value, StringRef name) {
  Operation *op = value.getDefiningOp();
  if (!op)
    return false;
  bool found = false;
  op->walk([&](ReadOp read) { found |= read.getSource() == name; });
  return found || llvm::any_of(op->getOperands(), [&](Value operand) {
           return readsTensor(operand, name);
         });
}

/// Whether the computation of `value` uses `index`.
bool dependsOn(Value value, Value index) {
  if (value == index)
    return true;
  Operation *op = value.getDefiningOp();
  if (!op)
    return false;
  bool found = false;
  op->walk([&](Operation *nested) {
    found |= llvm::is_contained(nested->getOperands(), index);
  });
  return found || llvm::any_of(op->getOperands(), [&](Value operand) {
           return dependsOn(operand, index);
         });
}

/// The energy −Σ_i lse_k e(i, k) of a model, as the ops that hold it.
struct MixtureEnergy {
  TermOp term;
  ReduceOp children; ///< the sum over i
  ReduceOp parents;  ///< the lse over k
  Value body;        ///< e(i, k)
  StringAttr childDim, parentDim;
};

FailureOr<MixtureEnergy> findMixtureEnergy(ModelOp model, UpdateOp rule) {
  auto unsupported = [&]() {
    return rule.emitError()
           << "no closed form for stationary node " << rule.getNodeAttr()
           << ": the M-step is built for energies -sum(i: N) lse(k: K) e "
              "(no predicate or temperature) so far";
  };
  std::optional<MixtureEnergy> found;
  for (TermOp term : model.getBody().front().getOps<TermOp>()) {
    if (term.getAuxiliary())
      continue;
    Value energy =
        cast<YieldOp>(term.getBody().front().getTerminator()).getValues()[0];
    if (!readsTensor(energy, rule.getNode()))
      continue;
    if (found)
      return unsupported();
    auto neg = energy.getDefiningOp<NegOp>();
    auto children = neg ? neg.getOperand().getDefiningOp<ReduceOp>() : nullptr;
    if (!children || children.getKind() != ReduceKind::sum ||
        children.getSizes().size() != 1 || children.hasPredicate())
      return unsupported();
    auto parents = children.getBodyValue().getDefiningOp<ReduceOp>();
    if (!parents || parents.getKind() != ReduceKind::lse ||
        parents.getSizes().size() != 1 || parents.hasPredicate() ||
        parents.getTemperature())
      return unsupported();
    auto childDim = cast<DimExprAttr>(children.getSizes()[0]).getDimName();
    auto parentDim = cast<DimExprAttr>(parents.getSizes()[0]).getDimName();
    if (!childDim || !parentDim)
      return unsupported();
    MLIRContext *context = model.getContext();
    found = MixtureEnergy{term,
                          children,
                          parents,
                          parents.getBodyValue(),
                          StringAttr::get(context, *childDim),
                          StringAttr::get(context, *parentDim)};
  }
  if (!found)
    return unsupported();
  return *found;
}

/// Builds, inside one step program, the pieces of the closed forms.
class MStepBuilder {
public:
  MStepBuilder(OpBuilder &builder, MixtureEnergy energy, Location loc)
      : builder(builder), energy(energy), loc(loc),
        context(builder.getContext()) {}

  ArrayType type(ArrayRef<StringAttr> dims) {
    return ArrayType::get(context, dims);
  }
  ArrayType scalar() { return ArrayType::getScalar(context); }
  AffineMapAttr indexMap(unsigned count) {
    SmallVector<AffineExpr> dims;
    for (unsigned i = 0; i < count; ++i)
      dims.push_back(getAffineDimExpr(i, context));
    return AffineMapAttr::get(AffineMap::get(count, 0, dims, context));
  }
  ArrayAttr domain(ArrayRef<StringAttr> dims) {
    SmallVector<Attribute> sizes;
    for (StringAttr dim : dims)
      sizes.push_back(DimExprAttr::getDim(context, dim.getValue()));
    return builder.getArrayAttr(sizes);
  }

  /// A `reduce sum` over `dims`, built at `at`, whose body `buildBody`
  /// fills, given the body's builder and index values.
  Value sumOver(OpBuilder &at, ArrayRef<StringAttr> dims, Type resultType,
                function_ref<Value(OpBuilder &, ValueRange)> buildBody) {
    auto reduce = ReduceOp::create(at, loc, resultType, ReduceKind::sum,
                                   domain(dims), Value());
    Block &block = reduce.getBody().emplaceBlock();
    for (size_t i = 0; i < dims.size(); ++i)
      block.addArgument(at.getIndexType(), loc);
    OpBuilder inner = OpBuilder::atBlockEnd(&block);
    YieldOp::create(inner, loc, buildBody(inner, block.getArguments()));
    return reduce;
  }

  /// Clones the computation of `value` (a value of the energy's term) at
  /// `at`, with the child index and, when given, the parent index. (The
  /// lse itself is cloned without a parent index: region cloning drops
  /// block arguments that are already mapped.)
  Value cloneAt(OpBuilder &at, Value value, Value child, Value parent = {}) {
    IRMapping mapping;
    mapping.map(energy.children.getBody().getArgument(0), child);
    if (parent)
      mapping.map(energy.parents.getBody().getArgument(0), parent);
    return cloneSlice(at, value, mapping);
  }

  /// The responsibilities r[i, k] at the current values, as an [N, K]
  /// array: exp(e(i, k) − lse_k' e(i, k')).
  Value responsibilities() {
    return sumOver(
        builder, {energy.childDim, energy.parentDim},
        type({energy.childDim, energy.parentDim}),
        [&](OpBuilder &at, ValueRange indices) -> Value {
          Value e = cloneAt(at, energy.body, indices[0], indices[1]);
          Value lse = cloneAt(at, energy.parents, indices[0]);
          Value r = ExpOp::create(at, loc, scalar(),
                                  SubOp::create(at, loc, e, lse).getResult());
          return EmbedOp::create(at, loc,
                                 type({energy.childDim, energy.parentDim}), r,
                                 indexMap(2), indices);
        });
  }

  /// r[i, k] read from the responsibilities array.
  Value responsibility(OpBuilder &at, Value all, Value child, Value parent) {
    return ExtractOp::create(at, loc, scalar(), all, indexMap(2),
                             ValueRange{child, parent});
  }

private:
  Value cloneSlice(OpBuilder &at, Value value, IRMapping &mapping) {
    if (Value mapped = mapping.lookupOrNull(value))
      return mapped;
    Operation *op = value.getDefiningOp();
    assert(op && "block arguments of the energy are mapped");
    for (Value operand : op->getOperands())
      cloneSlice(at, operand, mapping);
    // Values a nested region uses from outside it.
    op->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        if (operand.getParentRegion() &&
            !op->isProperAncestor(operand.getParentRegion()->getParentOp()) &&
            operand.getParentRegion()->getParentOp() != op)
          cloneSlice(at, operand, mapping);
    });
    at.clone(*op, mapping);
    return mapping.lookup(value);
  }

  OpBuilder &builder;
  MixtureEnergy energy;
  Location loc;
  MLIRContext *context;
};

/// Whether `value` is `read @node[k]` with k the parent index.
bool isNodeRow(Value value, StringRef node, MixtureEnergy energy) {
  auto read = value.getDefiningOp<ReadOp>();
  if (!read || read.getSource() != node || read.getIndices().size() != 1)
    return false;
  AffineMap map = read.getMap();
  return map.getNumResults() == 1 && map.getResult(0).isFunctionOfDim(0) &&
         isa<AffineDimExpr>(map.getResult(0)) &&
         read.getIndices()[0] == energy.parents.getBody().getArgument(0);
}
} // namespace

LogicalResult mlir::energy::buildStationaryGroup(OpBuilder &builder,
                                                 ArrayRef<UpdateOp> rules,
                                                 ModelOp model) {
  if (rules.empty())
    return success();
  UpdateOp first = rules.front();
  Location loc = first.getLoc();
  FailureOr<MixtureEnergy> energy = findMixtureEnergy(model, first);
  if (failed(energy))
    return failure();
  MStepBuilder m(builder, *energy, loc);
  MLIRContext *context = builder.getContext();
  Value responsibilities = m.responsibilities();
  SmallVector<Summand> summands;
  collectSummands(energy->body, 1.0, summands);
  StringAttr childDim = energy->childDim, parentDim = energy->parentDim;

  for (UpdateOp rule : rules) {
    StringRef node = rule.getNode();
    if (failed(findMixtureEnergy(model, rule)) ||
        findMixtureEnergy(model, rule)->term != energy->term)
      return rule.emitError() << "the stationary rules of one group must "
                                 "share one mixture energy";
    auto tensor = SymbolTable::lookupSymbolIn(model, node);
    ArrayType nodeType = cast<TensorOp>(tensor).getArrayType();
    ArrayRef<StringAttr> rowDims = nodeType.getShape().drop_front();
    ArrayType rowType = ArrayType::get(context, rowDims);
    FlatSymbolRefAttr nodeRef = FlatSymbolRefAttr::get(context, node);

    // Each closed form is θ[k] = f_k / n_k built from weighted sums over i;
    // `rowValue` builds f_k / n_k at one parent k.
    std::function<Value(OpBuilder &, Value, Value)> rowValue;
    const Summand *logWeights = nullptr, *quadratic = nullptr,
                  *logDet = nullptr;
    for (const Summand &summand : summands) {
      Operation *leaf = summand.leaf.getDefiningOp();
      if (auto extract = dyn_cast_or_null<ExtractOp>(leaf)) {
        auto softmax = extract.getSource().getDefiningOp<LogSoftmaxOp>();
        auto read =
            softmax ? softmax.getOperand().getDefiningOp<ReadOp>() : nullptr;
        if (read && read.getSource() == node && read.getIndices().empty() &&
            extract.getIndices().size() == 1 &&
            extract.getIndices()[0] == energy->parents.getBody().getArgument(0))
          logWeights = &summand;
      } else if (auto quad = dyn_cast_or_null<QuadOp>(leaf)) {
        if (isNodeRow(quad.getMatrix(), node, *energy) ||
            readsTensor(quad.getVector(), node))
          quadratic = &summand;
      } else if (auto det = dyn_cast_or_null<LogDetOp>(leaf)) {
        if (isNodeRow(det.getOperand(), node, *energy))
          logDet = &summand;
      } else if (readsTensor(summand.leaf, node)) {
        return rule.emitError()
               << "no closed form for stationary node " << nodeRef
               << ": with responsibilities fixed its energy is not one of "
                  "the closed forms (quadratic, Gaussian precision, "
                  "log_softmax weights)";
      }
    }

    Value newValue;
    if (logWeights && logWeights->coefficient > 0 && !quadratic && !logDet &&
        nodeType.getRank() == 1) {
      // θ = log Σ_i r_ik (log_softmax is blind to a constant shift).
      Value counts = m.sumOver(builder, {childDim}, nodeType,
                               [&](OpBuilder &at, ValueRange indices) -> Value {
                                 return ExtractOp::create(
                                     at, loc, nodeType, responsibilities,
                                     m.indexMap(1), indices);
                               });
      newValue = LogOp::create(builder, loc, nodeType, counts);
      StoreOp::create(builder, loc, newValue, nodeRef);
      continue;
    }
    auto quad = quadratic ? quadratic->leaf.getDefiningOp<QuadOp>() : QuadOp();
    if (quad && logDet && isNodeRow(quad.getMatrix(), node, *energy) &&
        !readsTensor(quad.getVector(), node) && logDet->coefficient > 0 &&
        std::abs(logDet->coefficient + quadratic->coefficient) <=
            1e-12 * std::abs(logDet->coefficient)) {
      // θ[k] = (Σ_i r v vᵀ / Σ_i r + ridge I)⁻¹.
      Value vector = quad.getVector();
      rowValue = [&, vector](OpBuilder &at, Value k, Value count) -> Value {
        Value scatter = m.sumOver(
            at, {childDim}, rowType, [&](OpBuilder &in, ValueRange i) -> Value {
              Value v = m.cloneAt(in, vector, i[0], k);
              Value r = m.responsibility(in, responsibilities, i[0], k);
              return MulOp::create(in, loc, r,
                                   OuterOp::create(in, loc, v, v).getResult());
            });
        Value covariance = DivOp::create(at, loc, scatter, count);
        Value ridge = MulOp::create(
            at, loc, ConstantOp::create(at, loc, kScatterRidge).getResult(),
            EyeOp::create(at, loc, rowType,
                          FlatSymbolRefAttr::get(rowDims.back()))
                .getResult());
        Value regularised = AddOp::create(at, loc, covariance, ridge);
        return InverseOp::create(at, loc, rowType, regularised);
      };
    } else if (quad && !logDet && quadratic->coefficient < 0 &&
               !isNodeRow(quad.getMatrix(), node, *energy) &&
               !readsTensor(quad.getMatrix(), node)) {
      // quad(a − θ[k], M) or quad(θ[k] − a, M): θ[k] = Σ_i r a / Σ_i r.
      auto difference = quad.getVector().getDefiningOp<SubOp>();
      Value data;
      if (difference && isNodeRow(difference.getRhs(), node, *energy) &&
          !readsTensor(difference.getLhs(), node))
        data = difference.getLhs();
      else if (difference && isNodeRow(difference.getLhs(), node, *energy) &&
               !readsTensor(difference.getRhs(), node))
        data = difference.getRhs();
      Value matrix = quad.getMatrix();
      if (data && !dependsOn(matrix, energy->children.getBody().getArgument(0)))
        rowValue = [&, data](OpBuilder &at, Value k, Value count) -> Value {
          Value weighted = m.sumOver(at, {childDim}, rowType,
                                     [&](OpBuilder &in, ValueRange i) -> Value {
                                       Value a = m.cloneAt(in, data, i[0], k);
                                       Value r = m.responsibility(
                                           in, responsibilities, i[0], k);
                                       return MulOp::create(in, loc, r, a);
                                     });
          return DivOp::create(at, loc, weighted, count);
        };
      else if (data && rowType.getRank() == 1)
        // M depends on i: θ[k] = (Σ_i r M̄_i)⁻¹ Σ_i r M̄_i a_i, M̄ = (M + Mᵀ)/2.
        rowValue = [&, data, matrix](OpBuilder &at, Value k, Value) -> Value {
          ArrayType matrixType = cast<ArrayType>(matrix.getType());
          auto symmetric = [&](OpBuilder &in, Value i) -> Value {
            Value mi = m.cloneAt(in, matrix, i, k);
            Value sum = AddOp::create(
                in, loc, mi, TransposeOp::create(in, loc, mi).getResult());
            return MulOp::create(
                in, loc, ConstantOp::create(in, loc, 0.5).getResult(), sum);
          };
          Value system =
              m.sumOver(at, {childDim}, matrixType,
                        [&](OpBuilder &in, ValueRange i) -> Value {
                          Value r =
                              m.responsibility(in, responsibilities, i[0], k);
                          return MulOp::create(in, loc, r, symmetric(in, i[0]));
                        });
          Value rhs =
              m.sumOver(at, {childDim}, rowType,
                        [&](OpBuilder &in, ValueRange i) -> Value {
                          Value r =
                              m.responsibility(in, responsibilities, i[0], k);
                          Value a = m.cloneAt(in, data, i[0], k);
                          return MulOp::create(
                              in, loc, r,
                              MatmulOp::create(in, loc, symmetric(in, i[0]), a)
                                  .getResult());
                        });
          return MatmulOp::create(
              at, loc,
              InverseOp::create(at, loc, matrixType, system).getResult(), rhs);
        };
    }
    if (!rowValue)
      return rule.emitError()
             << "no closed form for stationary node " << nodeRef
             << ": with responsibilities fixed its energy is not one of the "
                "closed forms (quadratic, Gaussian precision, log_softmax "
                "weights)";

    // θ = Σ_k embed(row_k into [k]), a row with no responsibility kept.
    newValue = m.sumOver(
        builder, {parentDim}, nodeType,
        [&](OpBuilder &at, ValueRange k) -> Value {
          Value count = m.sumOver(at, {childDim}, m.scalar(),
                                  [&](OpBuilder &in, ValueRange i) -> Value {
                                    return m.responsibility(
                                        in, responsibilities, i[0], k[0]);
                                  });
          Value positive =
              CmpOp::create(at, loc, CmpPredicate::gt, count,
                            ConstantOp::create(at, loc, 0.0).getResult());
          Value safeCount =
              SelectOp::create(at, loc, positive, count,
                               ConstantOp::create(at, loc, 1.0).getResult());
          Value current =
              ReadOp::create(at, loc, rowType, nodeRef, m.indexMap(1), k);
          Value solved = rowValue(at, k[0], safeCount);
          Value row = SelectOp::create(at, loc, positive, solved, current);
          return EmbedOp::create(at, loc, nodeType, row, m.indexMap(1), k)
              .getResult();
        });
    StoreOp::create(builder, loc, newValue, nodeRef);
  }
  return success();
}
