//===- ClosedForms.cpp - The EM M-step of stationary rules ----------------===//
//
// For an energy −Σ_i lse_k e(i, k), holding the responsibilities
// r_ik = softmax_k e(i, ·) at their entry values makes the energy
// −Σ_i Σ_k r_ik e(i, k) + const, with closed-form minimisers in a node θ:
//   quadratic: e is quadratic in the row θ[k] (decided by differentiating:
//     the Hessian-vector product of e in θ[k] does not depend on θ[k]):
//     with g(i, k) = ∇e at θ[k] = 0 and H(i, k) its Hessian,
//     θ[k] = −(Σ_i r_ik H)⁻¹ Σ_i r_ik g, a linear solve per row;
//   c · logdet(θ[k]) − c · quad(v_i, θ[k]), c > 0 (quad also spelt
//     dot(v, θ[k] @ v)):               θ[k] = (Σ_i r_ik v_i v_iᵀ / Σ_i r_ik
//                                              + ridge I)⁻¹
//   c · log_softmax(θ)[k], c > 0      θ = log Σ_i r_ik
// A row whose total responsibility is zero keeps its value.
//
//===----------------------------------------------------------------------===//

#include "energy/Dynamics/ClosedForms.h"
#include "LocalDerivatives.h"
#include "energy/Transforms/Dependence.h"

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

/// e(i, k) as a function of the row u = θ[k], and its derivatives, in a
/// copy of the lse body (its argument is the parent index; it also takes
/// the direction of the Hessian-vector product).
struct QuadraticForm {
  std::unique_ptr<Block> scratch;
  /// The one read of θ[k] every read of it became.
  Value row;
  /// ∇e(u), and H v for the direction v (which does not depend on u).
  Value gradient, hessianTimesDirection, direction;
};

/// Builds, inside one step program, the pieces of an M-step: the nodes'
/// values at the group's entry, responsibility-weighted sums over the points
/// (statistics), and tables over the components.
class MStepBuilder {
public:
  MStepBuilder(OpBuilder &builder, MixtureEnergy energy, Location loc,
               ModelOp model)
      : builder(builder), energy(energy), loc(loc),
        context(builder.getContext()), model(model) {}

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
  /// `shape` with the component axis in front.
  ArrayType perComponent(ArrayType shape) {
    SmallVector<StringAttr> dims = {energy.parentDim};
    llvm::append_range(dims, shape.getShape());
    return type(dims);
  }

  /// Reads the value of every node of the group now, at its entry: the
  /// responsibilities, and statistics that read a node, use these copies.
  void readEntryValues(ArrayRef<UpdateOp> rules) {
    for (UpdateOp rule : rules) {
      auto tensor = model.lookupSymbol<TensorOp>(rule.getNodeAttr());
      entryValues[rule.getNodeAttr().getAttr()] =
          ReadOp::create(builder, loc, tensor.getArrayType(),
                         rule.getNodeAttr(), indexMap(0), ValueRange());
    }
  }

  /// A table over the components whose slice k is `buildBody` at k.
  Value perComponentTable(OpBuilder &at, ArrayType elementType,
                          function_ref<Value(OpBuilder &, Value)> buildBody) {
    auto table = TabulateOp::create(at, loc, perComponent(elementType),
                                    domain({energy.parentDim}));
    Block &block = table.getBody().emplaceBlock();
    Value k = block.addArgument(
        at.getIndexType(), energy.parents.getBody().getArgument(0).getLoc());
    OpBuilder inner = OpBuilder::atBlockEnd(&block);
    YieldOp::create(inner, loc, buildBody(inner, k));
    return table;
  }

  /// Σ_i r_ik g(i, k) for every component k, where the responsibilities
  /// r_ik = exp(e(i, k) − lse_k' e(i, k')) take the nodes' entry values:
  /// an [K, shape of g] table. `g` null: the weighted counts Σ_i r_ik.
  Value weightedSums(OpBuilder &at, ArrayType gType,
                     function_ref<Value(OpBuilder &, Value, Value)> g) {
    return perComponentTable(
        at, gType, [&](OpBuilder &inComponent, Value k) -> Value {
          auto sum = ReduceOp::create(inComponent, loc, gType, ReduceKind::sum,
                                      domain({energy.childDim}), Value());
          Block &block = sum.getBody().emplaceBlock();
          Value i = block.addArgument(
              at.getIndexType(),
              energy.children.getBody().getArgument(0).getLoc());
          OpBuilder inner = OpBuilder::atBlockEnd(&block);
          Value e = cloneAtEntry(inner, energy.body, i, k);
          // The point's normaliser, recomputed where it is used: the kernel
          // plan turns these sums into the column side of one contraction.
          auto lse = ReduceOp::create(inner, loc, scalar(), ReduceKind::lse,
                                      domain({energy.parentDim}), Value());
          Block &lseBlock = lse.getBody().emplaceBlock();
          Value other = lseBlock.addArgument(
              at.getIndexType(),
              energy.parents.getBody().getArgument(0).getLoc());
          OpBuilder inLse = OpBuilder::atBlockEnd(&lseBlock);
          YieldOp::create(inLse, loc,
                          cloneAtEntry(inLse, energy.body, i, other));
          Value r = ExpOp::create(
              inner, loc, scalar(),
              SubOp::create(inner, loc, e, lse.getResult()).getResult());
          Value summand =
              g ? MulOp::create(inner, loc, r, g(inner, i, k)).getResult() : r;
          YieldOp::create(inner, loc, summand);
          return sum;
        });
  }

  /// Clones the computation of `value` (a value of the energy's lse body) at
  /// `at` with the child index `child` and the parent index `parent`, reading
  /// the nodes of the group at their entry values.
  Value cloneAtEntry(OpBuilder &at, Value value, Value child, Value parent) {
    IRMapping mapping;
    mapping.map(energy.children.getBody().getArgument(0), child);
    mapping.map(energy.parents.getBody().getArgument(0), parent);
    return cloneSlice(at, value, mapping, /*atEntry=*/true);
  }
  /// The same with the nodes' current values.
  Value cloneNow(OpBuilder &at, Value value, Value child, Value parent) {
    IRMapping mapping;
    mapping.map(energy.children.getBody().getArgument(0), child);
    if (parent)
      mapping.map(energy.parents.getBody().getArgument(0), parent);
    return cloneSlice(at, value, mapping, /*atEntry=*/false);
  }

  /// Clones `value` of the copy of the lse body in `form` (see cloneAtEntry)
  /// with the row of the node standing for `row` and the direction of the
  /// Hessian-vector product for `direction`.
  Value cloneScratch(OpBuilder &at, Value value, const QuadraticForm &form,
                     Value child, Value parent, Value row, Value direction,
                     bool atEntry) {
    IRMapping mapping;
    mapping.map(energy.children.getBody().getArgument(0), child);
    mapping.map(form.scratch->getArgument(0), parent);
    mapping.map(form.row, row);
    if (direction)
      mapping.map(form.direction, direction);
    return cloneSlice(at, value, mapping, atEntry);
  }

  /// Whether `value` reads a node the group solves before `rule`.
  bool readsEarlierNode(Value value, ArrayRef<UpdateOp> rules, UpdateOp rule) {
    for (UpdateOp earlier : rules) {
      if (earlier == rule)
        return false;
      if (readsTensor(value, earlier.getNode()))
        return true;
    }
    return false;
  }

private:
  Value cloneSlice(OpBuilder &at, Value value, IRMapping &mapping,
                   bool atEntry) {
    if (Value mapped = mapping.lookupOrNull(value))
      return mapped;
    Operation *op = value.getDefiningOp();
    assert(op && "block arguments of the energy are mapped");
    for (Value operand : op->getOperands())
      cloneSlice(at, operand, mapping, atEntry);
    // Values a nested region uses from outside it.
    op->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        if (operand.getParentRegion() &&
            !op->isProperAncestor(operand.getParentRegion()->getParentOp()) &&
            operand.getParentRegion()->getParentOp() != op)
          cloneSlice(at, operand, mapping, atEntry);
    });
    // A read of a node of the group at its entry value.
    if (auto read = dyn_cast<ReadOp>(op); read && atEntry) {
      if (Value entry = entryValues.lookup(read.getSourceAttr().getAttr())) {
        SmallVector<Value> indices;
        for (Value index : read.getIndices())
          indices.push_back(mapping.lookupOrDefault(index));
        Value row = indices.empty()
                        ? entry
                        : ExtractOp::create(at, loc, read.getType(), entry,
                                            read.getMapAttr(), indices)
                              .getResult();
        mapping.map(value, row);
        return row;
      }
    }
    at.clone(*op, mapping);
    return mapping.lookup(value);
  }

  OpBuilder &builder;
  MixtureEnergy energy;
  Location loc;
  MLIRContext *context;
  ModelOp model;
  /// The value of each node of the group at its entry.
  DenseMap<Attribute, Value> entryValues;
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

namespace {
/// How one node of an M-step is solved.
struct Solve {
  enum class Kind { LogWeights, Precision, Quadratic };
  UpdateOp rule;
  Kind kind;
  /// Precision: the quad's vector v_i.
  Value vector;
  /// Quadratic: the derivatives that give g and H.
  std::shared_ptr<QuadraticForm> quadratic;
};

/// `quad(v, M)`, `dot(v, M @ v)` or `dot(M @ v, v)`: (v, M).
std::optional<std::pair<Value, Value>> asQuadraticForm(Operation *leaf) {
  if (auto quad = dyn_cast_or_null<QuadOp>(leaf))
    return std::make_pair(quad.getVector(), quad.getMatrix());
  auto dot = dyn_cast_or_null<DotOp>(leaf);
  if (!dot)
    return std::nullopt;
  for (auto [vector, product] : {std::make_pair(dot.getLhs(), dot.getRhs()),
                                 std::make_pair(dot.getRhs(), dot.getLhs())})
    if (auto matmul = product.getDefiningOp<MatmulOp>();
        matmul && matmul.getRhs() == vector)
      return std::make_pair(vector, matmul.getLhs());
  return std::nullopt;
}

/// Decides, by differentiating e in the row θ[k], whether e is quadratic in
/// it (the Hessian-vector product does not depend on the row, and is not
/// zero); errors at `rule` say why not.
FailureOr<std::shared_ptr<QuadraticForm>>
deriveQuadraticForm(UpdateOp rule, MixtureEnergy energy, ModelOp model) {
  FlatSymbolRefAttr nodeRef = rule.getNodeAttr();
  auto noClosedForm = [&](const Twine &why) {
    return rule.emitError()
           << "no closed form for stationary node " << nodeRef
           << ": with responsibilities fixed its energy is not one of the "
              "closed forms (quadratic, Gaussian precision, log_softmax "
              "weights): "
           << why;
  };
  ArrayType nodeType = model.lookupSymbol<TensorOp>(nodeRef).getArrayType();
  if (nodeType.getRank() < 1 || nodeType.getShape()[0] != energy.parentDim)
    return noClosedForm("its rows are not indexed by the components");
  ArrayType rowType =
      ArrayType::get(model.getContext(), nodeType.getShape().drop_front());
  if (rowType.getRank() > 1)
    return noClosedForm("a matrix row is quadratic only as a precision");
  // The copy of the lse body, every read of the node a read of row k.
  auto form = std::make_shared<QuadraticForm>();
  form->scratch = std::make_unique<Block>();
  Block &scratch = *form->scratch;
  Block &body = energy.parents.getBody().front();
  IRMapping mapping;
  Value parent = scratch.addArgument(body.getArgument(0).getType(),
                                     body.getArgument(0).getLoc());
  mapping.map(body.getArgument(0), parent);
  // The block belongs to no region yet: the builder takes the context.
  OpBuilder builder(model.getContext());
  builder.setInsertionPointToEnd(&scratch);
  Location loc = rule.getLoc();
  form->row =
      ReadOp::create(builder, loc, rowType, nodeRef,
                     AffineMapAttr::get(AffineMap::getMultiDimIdentityMap(
                         1, builder.getContext())),
                     ValueRange{parent});
  bool readElsewhere = false;
  for (Operation &op : body.without_terminator()) {
    op.walk([&](ReadOp read) {
      if (read.getSource() == rule.getNode() &&
          (&op != read.getOperation() ||
           !isNodeRow(read.getResult(), rule.getNode(), energy)))
        readElsewhere = true;
    });
    if (auto read = dyn_cast<ReadOp>(op);
        read && isNodeRow(read.getResult(), rule.getNode(), energy)) {
      mapping.map(read.getResult(), form->row);
      continue;
    }
    builder.clone(op, mapping);
  }
  if (readElsewhere)
    return noClosedForm("it is read other than as its row of the lse's "
                        "component");
  Value energyValue = mapping.lookup(energy.body);
  FailureOr<Value> gradient =
      buildLocalGradient(scratch, energyValue, form->row);
  if (failed(gradient))
    return failure();
  if (!*gradient)
    return noClosedForm("the energy does not depend on it");
  form->gradient = *gradient;
  // ⟨∇e, v⟩ and its gradient in u: H v.
  form->direction = scratch.addArgument(rowType, loc);
  builder.setInsertionPointToEnd(&scratch);
  Value directional =
      rowType.isScalar()
          ? MulOp::create(builder, loc, form->gradient, form->direction)
                .getResult()
          : DotOp::create(builder, loc, form->gradient, form->direction)
                .getResult();
  FailureOr<Value> product =
      buildLocalGradient(scratch, directional, form->row);
  if (failed(product))
    return failure();
  if (!*product)
    return noClosedForm("it is linear in it (no minimum)");
  if (dependsOn(*product, form->row))
    return noClosedForm("it is not quadratic in it (its Hessian-vector "
                        "product depends on it)");
  form->hessianTimesDirection = *product;
  return form;
}

/// Classifies the closed form of `rule`'s node in the summands of the lse
/// body, or reports that it has none.
FailureOr<Solve> classify(UpdateOp rule, ArrayRef<Summand> summands,
                          MixtureEnergy energy, ModelOp model) {
  StringRef node = rule.getNode();
  FlatSymbolRefAttr nodeRef = rule.getNodeAttr();
  auto noClosedForm = [&]() {
    return rule.emitError()
           << "no closed form for stationary node " << nodeRef
           << ": with responsibilities fixed its energy is not one of the "
              "closed forms (quadratic, Gaussian precision, log_softmax "
              "weights)";
  };
  ArrayType nodeType = model.lookupSymbol<TensorOp>(nodeRef).getArrayType();
  Value parentIndex = energy.parents.getBody().getArgument(0);
  // The summands that read the node: log_softmax(θ)[k], a quadratic form
  // in θ[k] as the matrix, logdet(θ[k]), or anything else.
  const Summand *logWeights = nullptr, *precisionQuad = nullptr,
                *logDet = nullptr;
  Value precisionVector;
  bool otherReads = false;
  for (const Summand &summand : summands) {
    Operation *leaf = summand.leaf.getDefiningOp();
    if (!readsTensor(summand.leaf, node))
      continue;
    if (auto extract = dyn_cast_or_null<ExtractOp>(leaf)) {
      auto softmax = extract.getSource().getDefiningOp<LogSoftmaxOp>();
      auto read =
          softmax ? softmax.getOperand().getDefiningOp<ReadOp>() : nullptr;
      if (read && read.getSource() == node && read.getIndices().empty() &&
          extract.getIndices().size() == 1 &&
          extract.getIndices()[0] == parentIndex && !logWeights) {
        logWeights = &summand;
        continue;
      }
    }
    if (std::optional<std::pair<Value, Value>> quad = asQuadraticForm(leaf);
        quad && isNodeRow(quad->second, node, energy) &&
        !readsTensor(quad->first, node) && !precisionQuad) {
      precisionQuad = &summand;
      precisionVector = quad->first;
      continue;
    }
    if (auto det = dyn_cast_or_null<LogDetOp>(leaf);
        det && isNodeRow(det.getOperand(), node, energy) && !logDet) {
      logDet = &summand;
      continue;
    }
    otherReads = true;
  }
  if (logWeights && logWeights->coefficient > 0 && !precisionQuad && !logDet &&
      !otherReads && nodeType.getRank() == 1)
    return Solve{rule, Solve::Kind::LogWeights, Value(), nullptr};
  if (precisionQuad && logDet && !logWeights && !otherReads &&
      logDet->coefficient > 0 &&
      std::abs(logDet->coefficient + precisionQuad->coefficient) <=
          1e-12 * std::abs(logDet->coefficient))
    return Solve{rule, Solve::Kind::Precision, precisionVector, nullptr};
  if (logWeights || logDet)
    return noClosedForm();
  FailureOr<std::shared_ptr<QuadraticForm>> form =
      deriveQuadraticForm(rule, energy, model);
  if (failed(form))
    return failure();
  return Solve{rule, Solve::Kind::Quadratic, Value(), *form};
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
  SmallVector<Summand> summands;
  collectSummands(energy->body, 1.0, summands);
  // Every rule is classified before any IR is built.
  SmallVector<Solve> solves;
  for (UpdateOp rule : rules) {
    FailureOr<MixtureEnergy> own = findMixtureEnergy(model, rule);
    if (failed(own))
      return failure();
    if (own->term != energy->term)
      return rule.emitError() << "the stationary rules of one group must "
                                 "share one mixture energy";
    FailureOr<Solve> solve = classify(rule, summands, *energy, model);
    if (failed(solve))
      return failure();
    solves.push_back(*solve);
  }

  MLIRContext *context = builder.getContext();
  MStepBuilder m(builder, *energy, loc, model);
  ArrayType scalar = m.scalar();
  // Statistics are responsibility-weighted sums over the points, one
  // streaming pass each (the kernel plan fuses those of one phase into one
  // contraction). Those that read only entry values are all computed
  // first; one that reads a node solved earlier in the group is computed
  // right before its own node.
  m.readEntryValues(rules);
  Value counts = m.weightedSums(builder, scalar, nullptr);

  struct Statistics {
    SmallVector<Value> sums;
    /// Precision through moments about the entry value of b in
    /// v = ±(a_i − b_k): the entry value's clone and the sign of b.
    Value shifted;
    double sign = 0;
  };
  auto outerOf = [&](OpBuilder &at, Value v) {
    return OuterOp::create(at, loc, v, v).getResult();
  };
  auto rowTypeOf = [&](Solve solve) {
    ArrayType nodeType =
        model.lookupSymbol<TensorOp>(solve.rule.getNodeAttr()).getArrayType();
    return ArrayType::get(context, nodeType.getShape().drop_front());
  };
  // The statistics of `solve`, reading entry values or current ones.
  auto buildStatistics = [&](const Solve &solve, bool atEntry) {
    Statistics statistics;
    auto clone = [&](OpBuilder &at, Value value, Value i, Value k) {
      return atEntry ? m.cloneAtEntry(at, value, i, k)
                     : m.cloneNow(at, value, i, k);
    };
    ArrayType rowType = rowTypeOf(solve);
    switch (solve.kind) {
    case Solve::Kind::LogWeights:
      break;
    case Solve::Kind::Precision:
      // Σ_i r v vᵀ, or with v = ±(a_i − b_k) and b solved earlier, the
      // moments of v₀ = ±(a_i − b₀_k) at entry: Σ r v₀ and Σ r v₀ v₀ᵀ.
      statistics.sums.push_back(m.weightedSums(
          builder, rowType, [&](OpBuilder &at, Value i, Value k) {
            return outerOf(at, clone(at, solve.vector, i, k));
          }));
      break;
    case Solve::Kind::Quadratic: {
      // Σ_i r g (g = ∇e at θ[k] = 0) and Σ_i r H (H's row j: H e_j).
      const QuadraticForm &form = *solve.quadratic;
      auto zeroRow = [&](OpBuilder &at) -> Value {
        Value zero = ConstantOp::create(at, loc, 0.0);
        return rowType.isScalar()
                   ? zero
                   : BroadcastOp::create(at, loc, rowType, zero).getResult();
      };
      statistics.sums.push_back(m.weightedSums(
          builder, rowType, [&](OpBuilder &at, Value i, Value k) {
            return m.cloneScratch(at, form.gradient, form, i, k, zeroRow(at),
                                  Value(), atEntry);
          }));
      if (rowType.isScalar()) {
        statistics.sums.push_back(m.weightedSums(
            builder, rowType, [&](OpBuilder &at, Value i, Value k) {
              return m.cloneScratch(at, form.hessianTimesDirection, form, i, k,
                                    zeroRow(at),
                                    ConstantOp::create(at, loc, 1.0), atEntry);
            }));
        break;
      }
      StringAttr axis = rowType.getShape()[0];
      ArrayType hessianType =
          ArrayType::get(context, SmallVector<StringAttr>{axis, axis});
      statistics.sums.push_back(m.weightedSums(
          builder, hessianType, [&](OpBuilder &at, Value i, Value k) -> Value {
            auto table = TabulateOp::create(
                at, loc, hessianType,
                at.getArrayAttr(DimExprAttr::getDim(context, axis.getValue())));
            Block &block = table.getBody().emplaceBlock();
            Value j = block.addArgument(at.getIndexType(), loc);
            OpBuilder inner = OpBuilder::atBlockEnd(&block);
            Value unit = EmbedOp::create(inner, loc, rowType,
                                         ConstantOp::create(inner, loc, 1.0),
                                         m.indexMap(1), ValueRange{j});
            YieldOp::create(inner, loc,
                            m.cloneScratch(inner, form.hessianTimesDirection,
                                           form, i, k, zeroRow(inner), unit,
                                           atEntry));
            return table.getResult();
          }));
      break;
    }
    }
    return statistics;
  };

  // Which statistics can be taken at entry.
  Value childIndex = energy->children.getBody().getArgument(0);
  Value parentIndex = energy->parents.getBody().getArgument(0);
  SmallVector<std::optional<Statistics>> atEntry(solves.size());
  SmallVector<Value> shiftedParts(solves.size());
  SmallVector<double> shiftSigns(solves.size(), 0);
  for (size_t position = 0; position < solves.size(); ++position) {
    Solve &solve = solves[position];
    bool readsEarlier =
        solve.kind == Solve::Kind::Quadratic
            ? m.readsEarlierNode(solve.quadratic->gradient, rules,
                                 solve.rule) ||
                  m.readsEarlierNode(solve.quadratic->hessianTimesDirection,
                                     rules, solve.rule)
            : solve.vector &&
                  m.readsEarlierNode(solve.vector, rules, solve.rule);
    if (!readsEarlier) {
      atEntry[position] = buildStatistics(solve, /*atEntry=*/true);
      continue;
    }
    // v = ±(a_i − b_k) with a read at entry and b solved earlier: moments
    // about b's entry value, corrected once b's new value is known.
    auto difference = solve.kind == Solve::Kind::Precision
                          ? solve.vector.getDefiningOp<SubOp>()
                          : SubOp();
    if (!difference)
      continue;
    for (auto [side, sign] : {std::pair<Value, double>{difference.getRhs(), -1},
                              {difference.getLhs(), 1}}) {
      Value other = side == difference.getRhs() ? difference.getLhs()
                                                : difference.getRhs();
      if (dependsOn(side, childIndex) || dependsOn(other, parentIndex) ||
          m.readsEarlierNode(other, rules, solve.rule))
        continue;
      ArrayType rowType = rowTypeOf(solve);
      ArrayType vectorType = cast<ArrayType>(solve.vector.getType());
      Statistics statistics;
      statistics.sums.push_back(m.weightedSums(
          builder, vectorType, [&](OpBuilder &at, Value i, Value k) {
            return m.cloneAtEntry(at, solve.vector, i, k);
          }));
      statistics.sums.push_back(m.weightedSums(
          builder, rowType, [&](OpBuilder &at, Value i, Value k) {
            return outerOf(at, m.cloneAtEntry(at, solve.vector, i, k));
          }));
      statistics.shifted = side;
      statistics.sign = sign;
      atEntry[position] = statistics;
      break;
    }
  }

  for (size_t position = 0; position < solves.size(); ++position) {
    Solve &solve = solves[position];
    FlatSymbolRefAttr nodeRef = solve.rule.getNodeAttr();
    auto tensor = model.lookupSymbol<TensorOp>(nodeRef);
    ArrayType nodeType = tensor.getArrayType();
    ArrayType rowType = rowTypeOf(solve);
    if (solve.kind == Solve::Kind::LogWeights) {
      // θ = log Σ_i r_ik (log_softmax is blind to a constant shift).
      Value newValue = LogOp::create(builder, loc, nodeType, counts);
      StoreOp::create(builder, loc, newValue, nodeRef);
      continue;
    }
    Statistics statistics = atEntry[position]
                                ? *atEntry[position]
                                : buildStatistics(solve, /*atEntry=*/false);
    auto at = [&](OpBuilder &in, Value table, Value k) {
      ArrayType sliceType = ArrayType::get(
          context, cast<ArrayType>(table.getType()).getShape().drop_front());
      return ExtractOp::create(in, loc, sliceType, table, m.indexMap(1),
                               ValueRange{k})
          .getResult();
    };
    // θ[k] from the statistics at k and the count n_k > 0.
    auto solved = [&](OpBuilder &in, Value k, Value count) -> Value {
      switch (solve.kind) {
      case Solve::Kind::Precision: {
        Value scatter = at(in, statistics.sums.back(), k);
        if (statistics.shifted) {
          // Σ r v vᵀ = M2 + s (m1 dᵀ + d m1ᵀ) + n d dᵀ, d = b − b₀, for
          // v = v₀ + s d.
          Value now = m.cloneNow(in, statistics.shifted, k, k);
          Value entry = m.cloneAtEntry(in, statistics.shifted, k, k);
          Value d = SubOp::create(in, loc, now, entry);
          Value m1 = at(in, statistics.sums.front(), k);
          Value cross = AddOp::create(
              in, loc, OuterOp::create(in, loc, m1, d).getResult(),
              OuterOp::create(in, loc, d, m1).getResult());
          Value signed_ = MulOp::create(
              in, loc, ConstantOp::create(in, loc, statistics.sign).getResult(),
              cross);
          Value spread =
              MulOp::create(in, loc, count, outerOf(in, d)).getResult();
          scatter = AddOp::create(
              in, loc, AddOp::create(in, loc, scatter, signed_).getResult(),
              spread);
        }
        Value covariance = DivOp::create(in, loc, scatter, count);
        Value ridge = MulOp::create(
            in, loc, ConstantOp::create(in, loc, kScatterRidge).getResult(),
            EyeOp::create(in, loc, rowType,
                          FlatSymbolRefAttr::get(rowType.getShape().back()))
                .getResult());
        return InverseOp::create(
            in, loc, rowType,
            AddOp::create(in, loc, covariance, ridge).getResult());
      }
      case Solve::Kind::Quadratic: {
        // Σ r (g + H θ) = 0.
        Value gradient = at(in, statistics.sums[0], k);
        Value hessian = at(in, statistics.sums[1], k);
        Value step =
            rowType.isScalar()
                ? DivOp::create(in, loc, gradient, hessian).getResult()
                : MatmulOp::create(
                      in, loc,
                      InverseOp::create(in, loc, hessian.getType(), hessian)
                          .getResult(),
                      gradient)
                      .getResult();
        return NegOp::create(in, loc, step);
      }
      case Solve::Kind::LogWeights:
        break;
      }
      llvm_unreachable("log weights are solved without a table");
    };
    // θ[k], or its current value where no point is responsible for k.
    Value newValue = m.perComponentTable(
        builder, rowType, [&](OpBuilder &in, Value k) -> Value {
          Value count = at(in, counts, k);
          Value positive =
              CmpOp::create(in, loc, CmpPredicate::gt, count,
                            ConstantOp::create(in, loc, 0.0).getResult());
          Value safeCount =
              SelectOp::create(in, loc, positive, count,
                               ConstantOp::create(in, loc, 1.0).getResult());
          Value current =
              ReadOp::create(in, loc, rowType, nodeRef, m.indexMap(1), k);
          return SelectOp::create(in, loc, positive, solved(in, k, safeCount),
                                  current);
        });
    StoreOp::create(builder, loc, newValue, nodeRef);
  }
  return success();
}
