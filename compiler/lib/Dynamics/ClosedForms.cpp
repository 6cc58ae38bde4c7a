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
        at.getIndexType(),
        energy.parents.getBody().getArgument(0).getLoc());
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
          YieldOp::create(inLse, loc, cloneAtEntry(inLse, energy.body, i, other));
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
        Value row =
            indices.empty()
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
  enum class Kind { LogWeights, Precision, Mean, MeanPerPoint };
  UpdateOp rule;
  Kind kind;
  /// Precision: the quad's vector v_i; means: the data a_i.
  Value vector;
  /// MeanPerPoint: the quad's matrix M_i.
  Value matrix;
};

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
  Value childIndex = energy.children.getBody().getArgument(0);
  const Summand *logWeights = nullptr, *quadratic = nullptr, *logDet = nullptr;
  for (const Summand &summand : summands) {
    Operation *leaf = summand.leaf.getDefiningOp();
    if (auto extract = dyn_cast_or_null<ExtractOp>(leaf)) {
      auto softmax = extract.getSource().getDefiningOp<LogSoftmaxOp>();
      auto read =
          softmax ? softmax.getOperand().getDefiningOp<ReadOp>() : nullptr;
      if (read && read.getSource() == node && read.getIndices().empty() &&
          extract.getIndices().size() == 1 &&
          extract.getIndices()[0] == parentIndex)
        logWeights = &summand;
    } else if (auto quad = dyn_cast_or_null<QuadOp>(leaf)) {
      if (isNodeRow(quad.getMatrix(), node, energy) ||
          readsTensor(quad.getVector(), node))
        quadratic = &summand;
    } else if (auto det = dyn_cast_or_null<LogDetOp>(leaf)) {
      if (isNodeRow(det.getOperand(), node, energy))
        logDet = &summand;
    } else if (readsTensor(summand.leaf, node)) {
      return noClosedForm();
    }
  }
  if (logWeights && logWeights->coefficient > 0 && !quadratic && !logDet &&
      nodeType.getRank() == 1)
    return Solve{rule, Solve::Kind::LogWeights, Value(), Value()};
  auto quad = quadratic ? quadratic->leaf.getDefiningOp<QuadOp>() : QuadOp();
  if (quad && logDet && isNodeRow(quad.getMatrix(), node, energy) &&
      !readsTensor(quad.getVector(), node) && logDet->coefficient > 0 &&
      std::abs(logDet->coefficient + quadratic->coefficient) <=
          1e-12 * std::abs(logDet->coefficient))
    return Solve{rule, Solve::Kind::Precision, quad.getVector(), Value()};
  if (quad && !logDet && quadratic->coefficient < 0 &&
      !isNodeRow(quad.getMatrix(), node, energy) &&
      !readsTensor(quad.getMatrix(), node)) {
    // quad(a − θ[k], M) or quad(θ[k] − a, M).
    auto difference = quad.getVector().getDefiningOp<SubOp>();
    Value data;
    if (difference && isNodeRow(difference.getRhs(), node, energy) &&
        !readsTensor(difference.getLhs(), node))
      data = difference.getLhs();
    else if (difference && isNodeRow(difference.getLhs(), node, energy) &&
             !readsTensor(difference.getRhs(), node))
      data = difference.getRhs();
    if (data && !dependsOn(quad.getMatrix(), childIndex))
      return Solve{rule, Solve::Kind::Mean, data, Value()};
    if (data && nodeType.getRank() == 2)
      return Solve{rule, Solve::Kind::MeanPerPoint, data, quad.getMatrix()};
  }
  return noClosedForm();
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
  auto symmetric = [&](OpBuilder &at, Value matrix) -> Value {
    Value sum = AddOp::create(
        at, loc, matrix, TransposeOp::create(at, loc, matrix).getResult());
    return MulOp::create(at, loc,
                         ConstantOp::create(at, loc, 0.5).getResult(), sum);
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
    case Solve::Kind::Mean: {
      ArrayType dataType = cast<ArrayType>(solve.vector.getType());
      statistics.sums.push_back(m.weightedSums(
          builder, dataType, [&](OpBuilder &at, Value i, Value k) {
            return clone(at, solve.vector, i, k);
          }));
      break;
    }
    case Solve::Kind::MeanPerPoint: {
      ArrayType matrixType = cast<ArrayType>(solve.matrix.getType());
      statistics.sums.push_back(m.weightedSums(
          builder, matrixType, [&](OpBuilder &at, Value i, Value k) {
            return symmetric(at, clone(at, solve.matrix, i, k));
          }));
      statistics.sums.push_back(m.weightedSums(
          builder, rowType, [&](OpBuilder &at, Value i, Value k) {
            return MatmulOp::create(at, loc,
                                    symmetric(at, clone(at, solve.matrix, i, k)),
                                    clone(at, solve.vector, i, k))
                .getResult();
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
    Value reads = solve.kind == Solve::Kind::MeanPerPoint
                      ? solve.matrix
                      : solve.vector;
    bool readsEarlier =
        (reads && m.readsEarlierNode(reads, rules, solve.rule)) ||
        (solve.kind == Solve::Kind::MeanPerPoint &&
         m.readsEarlierNode(solve.vector, rules, solve.rule));
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
      case Solve::Kind::Mean:
        return DivOp::create(in, loc, at(in, statistics.sums.front(), k),
                             count);
      case Solve::Kind::MeanPerPoint: {
        Value system = at(in, statistics.sums[0], k);
        Value right = at(in, statistics.sums[1], k);
        return MatmulOp::create(in, loc,
                                InverseOp::create(in, loc, system.getType(),
                                                  system)
                                    .getResult(),
                                right);
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
          return SelectOp::create(in, loc, positive,
                                  solved(in, k, safeCount), current);
        });
    StoreOp::create(builder, loc, newValue, nodeRef);
  }
  return success();
}
