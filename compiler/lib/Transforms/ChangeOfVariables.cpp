//===- ChangeOfVariables.cpp - Descent in the image of a linear map -------===//
//
// energy-change-of-variables: a state whose energy reads it only through one
// linear map descends in that map's image, where each step costs less.
//
//===----------------------------------------------------------------------===//

#include "Linearity.h"
#include "SizeEstimates.h"

#include "energy/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::energy {
#define GEN_PASS_DEF_ENERGYCHANGEOFVARIABLES
#include "energy/Transforms/Passes.h.inc"
} // namespace mlir::energy

using namespace mlir;
using namespace mlir::energy;

namespace {

/// The param tensor that `value` reads whole, or null.
TensorOp wholeParamRead(Value value, SymbolTable &symbols) {
  auto read = value.getDefiningOp<ReadOp>();
  if (!read || read.getMap().getNumResults() != 0)
    return {};
  auto tensor = symbols.lookup<TensorOp>(read.getSource());
  return tensor && tensor.getRole() == Role::param ? tensor : TensorOp();
}

/// Whether `region` reads tensor or let `name`.
bool reads(Region &region, StringRef name) {
  bool found = false;
  region.walk([&](ReadOp read) {
    if (read.getSource() == name)
      found = true;
  });
  return found;
}

/// Whether `value` depends on no state tensor and no let (a let may read
/// one): computed from params, inputs, consts and indices alone.
bool readsNoState(Value value, SymbolTable &symbols) {
  Operation *op = value.getDefiningOp();
  if (!op)
    return true;
  bool clean = true;
  op->walk([&](ReadOp read) {
    Operation *source = symbols.lookup(read.getSource());
    auto tensor = dyn_cast_or_null<TensorOp>(source);
    clean &= !isa_and_nonnull<LetOp>(source) &&
             !(tensor && tensor.getRole() == Role::state);
  });
  return clean && llvm::all_of(op->getOperands(), [&](Value operand) {
           return readsNoState(operand, symbols);
         });
}

/// Whether the term whose body holds `value` is affine in it with
/// coefficients that read no state: every path from `value` to the term's
/// value passes only ops linear in it whose other operands read no state
/// (sums, differences, products by such factors) and sums or means over
/// indices.
bool entersAffinely(Value value, SymbolTable &symbols);

/// entersAffinely for one use of a value.
bool useEntersAffinely(OpOperand &use, SymbolTable &symbols) {
  Operation *user = use.getOwner();
  if (isa<YieldOp>(user)) {
    Operation *parent = user->getParentOp();
    if (isa<TermOp>(parent))
      return true;
    auto reduce = dyn_cast<ReduceOp>(parent);
    return reduce &&
           (reduce.getKind() == ReduceKind::sum ||
            reduce.getKind() == ReduceKind::mean) &&
           entersAffinely(reduce->getResult(0), symbols);
  }
  Linearity linearity = linearityOf(user);
  if (linearity == Linearity::None || user->getNumResults() != 1)
    return false;
  if (linearity == Linearity::Separate) {
    if (!isLinearInOperand(user, use.getOperandNumber()))
      return false;
    for (OpOperand &other : user->getOpOperands())
      if (&other != &use && isa<ArrayType>(other.get().getType()) &&
          !readsNoState(other.get(), symbols))
        return false;
  }
  return entersAffinely(user->getResult(0), symbols);
}

bool entersAffinely(Value value, SymbolTable &symbols) {
  return llvm::all_of(value.getUses(), [&](OpOperand &use) {
    return useEntersAffinely(use, symbols);
  });
}

/// Whether `use` is W @ x[r] for a whole read of the param W.
bool isMappedRow(OpOperand &use, SymbolTable &symbols) {
  auto product = dyn_cast<MatmulOp>(use.getOwner());
  return product && use.getOperandNumber() == 1 &&
         product.getLhs() != product.getRhs() &&
         wholeParamRead(product.getLhs(), symbols);
}

/// The body of option `name` of `rule`, or null.
Region *optionBody(UpdateOp rule, StringRef name) {
  for (auto [option, body] :
       llvm::zip(rule.getOptionNames(), rule.getOptions()))
    if (cast<StringAttr>(option).getValue() == name)
      return &body;
  return nullptr;
}

/// A gd rule on a state x = [R, D] that the energy terms read by rows,
/// each row through one param W = [H, D] (W @ x[r]) or where the term is
/// affine in it with coefficients that read no state, and that nothing else
/// of the dynamics reads.
struct Candidate {
  UpdateOp rule;
  TensorOp state, map;
  /// The energy terms that read the state, and its row reads in them that
  /// W maps.
  SmallVector<TermOp> terms;
  SmallVector<ReadOp> rowReads;
  /// Whether some term reads rows of the state affinely: then ∇ₓE = ∇ᵤẼ W
  /// + c with c constant.
  bool affine = false;
};

class ChangeOfVariables {
public:
  explicit ChangeOfVariables(ModelOp model) : model(model), symbols(model) {}

  /// The rewrite when the model qualifies and it saves work; the model
  /// unchanged otherwise.
  void run() {
    std::optional<Candidate> found = candidate();
    if (found && saves(*found))
      rewrite(*found);
  }

private:
  std::optional<Candidate> candidate();
  bool saves(const Candidate &candidate);
  void rewrite(Candidate &candidate);

  TensorOp addState(StringRef state, StringRef suffix,
                    ArrayRef<StringRef> dims);
  TermOp imageEnergy(Candidate &candidate, StringRef image);

  FlatSymbolRefAttr ref(StringRef name) {
    return FlatSymbolRefAttr::get(model.getContext(), name);
  }
  ArrayType arrayOf(ArrayRef<StringRef> dims) {
    return ArrayType::get(model.getContext(), dims);
  }
  Value readWhole(OpBuilder &builder, TensorOp tensor) {
    return ReadOp::create(
        builder, model.getLoc(), tensor.getArrayType(),
        ref(tensor.getSymName()),
        AffineMapAttr::get(AffineMap::get(model.getContext())), ValueRange());
  }

  ModelOp model;
  SymbolTable symbols;
};

std::optional<Candidate> ChangeOfVariables::candidate() {
  DynamicsOp dynamics = model.getDynamics();
  auto programs = model.getBody().front().getOps<UpdateProgramOp>();
  if (!dynamics || programs.empty() || !dynamics.getUntil().empty() ||
      dynamics.getImplicitIterations())
    return std::nullopt;
  UpdateProgramOp program = *programs.begin();
  if (!program.getBegin().empty() || !program.getFinish().empty())
    return std::nullopt;
  Block &rules = dynamics.getRules().front();
  if (!llvm::hasSingleElement(rules))
    return std::nullopt;
  auto rule = dyn_cast<UpdateOp>(rules.front());
  if (!rule || rule.getOptimizer() != "gd")
    return std::nullopt;
  Candidate found;
  found.rule = rule;
  found.state = symbols.lookup<TensorOp>(rule.getNode());
  if (!found.state || found.state.getShape().size() != 2)
    return std::nullopt;
  StringRef state = found.state.getSymName();

  // The step size may not read the state, nor any other state.
  Region *lr = optionBody(rule, "lr");
  if (!lr || llvm::size(rule.getOptionNames()) != 1)
    return std::nullopt;
  bool readsState = false;
  lr->walk([&](ReadOp read) {
    Operation *source = symbols.lookup(read.getSource());
    auto tensor = dyn_cast_or_null<TensorOp>(source);
    readsState |= isa_and_nonnull<LetOp>(source) ||
                  (tensor && tensor.getRole() == Role::state);
  });
  if (readsState)
    return std::nullopt;

  // Lets that read the state would hide its reads from the terms.
  for (LetOp let : model.getBody().front().getOps<LetOp>())
    if (reads(let.getBody(), state))
      return std::nullopt;

  StringRef dimD =
      cast<FlatSymbolRefAttr>(found.state.getShape()[1]).getValue();
  for (TermOp term : model.getBody().front().getOps<TermOp>()) {
    if (term.getAuxiliary() || !reads(term.getBody(), state))
      continue;
    found.terms.push_back(term);
    WalkResult walk = term.getBody().walk([&](ReadOp read) {
      if (read.getSource() != state)
        return WalkResult::advance();
      if (read.getMap().getNumResults() != 1 || read->use_empty())
        return WalkResult::interrupt();
      bool mapped = false;
      for (OpOperand &use : read->getUses()) {
        if (!isMappedRow(use, symbols)) {
          if (!useEntersAffinely(use, symbols))
            return WalkResult::interrupt();
          found.affine = true;
          continue;
        }
        TensorOp map =
            wholeParamRead(cast<MatmulOp>(use.getOwner()).getLhs(), symbols);
        if (map.getShape().size() != 2 ||
            cast<FlatSymbolRefAttr>(map.getShape()[1]).getValue() != dimD ||
            (found.map && found.map != map))
          return WalkResult::interrupt();
        found.map = map;
        mapped = true;
      }
      if (mapped)
        found.rowReads.push_back(read);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return std::nullopt;
  }
  if (!found.map || found.rowReads.empty())
    return std::nullopt;
  return found;
}

bool ChangeOfVariables::saves(const Candidate &candidate) {
  auto size = [&](TensorOp tensor, unsigned axis) {
    return estimatedDimSize(
        model, cast<FlatSymbolRefAttr>(tensor.getShape()[axis]).getValue());
  };
  double rows = size(candidate.state, 0), width = size(candidate.state, 1),
         image = size(candidate.map, 0);
  FailureOr<int64_t> steps =
      model.getDynamics().getSteps().evaluate([&](StringRef dim) {
        return std::optional<int64_t>(
            static_cast<int64_t>(estimatedDimSize(model, dim)));
      });
  if (failed(steps))
    return false;
  // A step's two products by the map (its rows and their gradients) become
  // one by the Gram matrix; each call maps the rows in and out once and
  // forms the Gram matrix once.
  double saved = *steps * rows * image * (2 * width - image);
  double added = 2 * rows * image * width + image * image * width;
  return saved > added;
}

TensorOp ChangeOfVariables::addState(StringRef state, StringRef suffix,
                                     ArrayRef<StringRef> dims) {
  OpBuilder builder(model.getContext());
  Operation *last = nullptr;
  for (TensorOp tensor : model.getBody().front().getOps<TensorOp>())
    last = tensor;
  builder.setInsertionPointAfter(last);
  SmallVector<Attribute> shape;
  for (StringRef dim : dims)
    shape.push_back(ref(dim));
  std::string name = (state + "." + suffix).str();
  auto tensor = TensorOp::create(
      builder, model.getLoc(), name, Role::state, builder.getArrayAttr(shape),
      InitKindAttr::get(model.getContext(), InitKind::zeros),
      DenseF64ArrayAttr(), FlatSymbolRefAttr());
  tensor.setOptimizerStateAttr(ref(state));
  tensor.setPerCall(true);
  symbols.insert(tensor);
  return tensor;
}

TermOp ChangeOfVariables::imageEnergy(Candidate &candidate, StringRef image) {
  OpBuilder builder(model.getContext());
  builder.setInsertionPointAfter(candidate.terms.back());
  std::string name = (candidate.state.getSymName() + ".image_energy").str();
  auto term = TermOp::create(builder, model.getLoc(), name);
  term.setAuxiliary(true);
  symbols.insert(term);
  builder.setInsertionPointToStart(&term.getBody().emplaceBlock());
  Value total;
  for (TermOp source : candidate.terms) {
    IRMapping mapping;
    Block &body = source.getBody().front();
    for (Operation &op : body.without_terminator())
      builder.clone(op, mapping);
    Value value =
        mapping.lookupOrDefault(cast<YieldOp>(body.back()).getValues().front());
    total =
        total ? AddOp::create(builder, term.getLoc(), total, value).getResult()
              : value;
    // Each W @ x[r] of the copy reads the image at r instead.
    for (ReadOp row : candidate.rowReads) {
      if (row->getParentOfType<TermOp>() != source)
        continue;
      auto copy = cast<ReadOp>(mapping.lookup(row.getResult()).getDefiningOp());
      OpBuilder at(copy);
      ArrayType imageRow = arrayOf(
          {cast<FlatSymbolRefAttr>(candidate.map.getShape()[0]).getValue()});
      Value read = ReadOp::create(at, copy.getLoc(), imageRow, ref(image),
                                  copy.getMapAttr(), copy.getIndices());
      for (OpOperand &use : llvm::make_early_inc_range(copy->getUses())) {
        if (!isMappedRow(use, symbols))
          continue;
        Operation *product = use.getOwner();
        product->getResult(0).replaceAllUsesWith(read);
        product->erase();
      }
      if (copy->use_empty())
        copy.erase();
    }
  }
  YieldOp::create(builder, term.getLoc(), total);
  // The reads of W that only the replaced products took.
  SmallVector<ReadOp> unused;
  term.getBody().walk([&](ReadOp read) {
    if (read->use_empty())
      unused.push_back(read);
  });
  for (ReadOp read : unused)
    read.erase();
  return term;
}

void ChangeOfVariables::rewrite(Candidate &candidate) {
  TensorOp state = candidate.state, map = candidate.map;
  StringRef name = state.getSymName();
  auto dimOf = [](TensorOp tensor, unsigned axis) {
    return cast<FlatSymbolRefAttr>(tensor.getShape()[axis]).getValue();
  };
  StringRef rows = dimOf(state, 0), width = dimOf(state, 1),
            imageDim = dimOf(map, 0);
  TensorOp image = addState(name, "image", {rows, imageDim});
  TensorOp descent = addState(name, "descent", {rows, imageDim});
  TensorOp gram = addState(name, "gram", {imageDim, imageDim});
  // The constant part c of the gradient, its image and Σ lr.
  TensorOp drift, driftImage, lrSum;
  if (candidate.affine) {
    drift = addState(name, "drift", {rows, width});
    driftImage = addState(name, "drift_image", {rows, imageDim});
    lrSum = addState(name, "lr_sum", {});
  }
  TermOp energy = imageEnergy(candidate, image.getSymName());

  UpdateProgramOp program =
      *model.getBody().front().getOps<UpdateProgramOp>().begin();
  Location loc = program.getLoc();
  ArrayType imageType = image.getArrayType();

  // begin: u = x Wᵀ, G = W Wᵀ, s = 0.
  OpBuilder builder = OpBuilder::atBlockEnd(&program.getBegin().emplaceBlock());
  Value rowsIn = readWhole(builder, state);
  Value weights = readWhole(builder, map);
  Value transposed = TransposeOp::create(builder, loc, weights);
  StoreOp::create(builder, loc,
                  MatmulOp::create(builder, loc, rowsIn, transposed),
                  ref(image.getSymName()));
  StoreOp::create(builder, loc,
                  MatmulOp::create(builder, loc, weights, transposed),
                  ref(gram.getSymName()));
  Value zero = ConstantOp::create(builder, loc, 0.0);
  StoreOp::create(builder, loc,
                  BroadcastOp::create(builder, loc, imageType, zero),
                  ref(descent.getSymName()));
  if (candidate.affine) {
    // c = ∇ₓẼ, which the rows W maps do not change.
    Value constant = GradOp::create(builder, loc, state.getArrayType(),
                                    ref(name), ref(energy.getSymName()))
                         ->getResult(0);
    StoreOp::create(builder, loc, constant, ref(drift.getSymName()));
    StoreOp::create(builder, loc,
                    MatmulOp::create(builder, loc, constant, transposed),
                    ref(driftImage.getSymName()));
    StoreOp::create(builder, loc, zero, ref(lrSum.getSymName()));
  }

  // The step: d = lr ∇ᵤE(u); u ← u − d G; s ← s + d.
  Block &step = program.getBody().front();
  while (!step.empty())
    step.back().erase();
  builder.setInsertionPointToEnd(&step);
  IRMapping mapping;
  Block &lrBody = optionBody(candidate.rule, "lr")->front();
  for (Operation &op : lrBody.without_terminator())
    builder.clone(op, mapping);
  Value lr =
      mapping.lookupOrDefault(cast<YieldOp>(lrBody.back()).getValues().front());
  Value gradient =
      GradOp::create(builder, loc, imageType, ref(image.getSymName()),
                     ref(energy.getSymName()))
          ->getResult(0);
  Value move = MulOp::create(builder, loc, lr, gradient);
  Value moved = MatmulOp::create(builder, loc, move, readWhole(builder, gram));
  if (candidate.affine) {
    // u also moves by lr c Wᵀ; Σ lr scales c at the finish.
    moved = AddOp::create(
        builder, loc, moved,
        MulOp::create(builder, loc, lr, readWhole(builder, driftImage)));
    StoreOp::create(builder, loc,
                    AddOp::create(builder, loc, readWhole(builder, lrSum), lr),
                    ref(lrSum.getSymName()));
  }
  StoreOp::create(builder, loc,
                  SubOp::create(builder, loc, readWhole(builder, image), moved),
                  ref(image.getSymName()));
  StoreOp::create(
      builder, loc,
      AddOp::create(builder, loc, readWhole(builder, descent), move),
      ref(descent.getSymName()));

  // finish: x ← x − s W.
  builder.setInsertionPointToEnd(&program.getFinish().emplaceBlock());
  Value back = MatmulOp::create(builder, loc, readWhole(builder, descent),
                                readWhole(builder, map));
  if (candidate.affine)
    back = AddOp::create(builder, loc, back,
                         MulOp::create(builder, loc, readWhole(builder, lrSum),
                                       readWhole(builder, drift)));
  StoreOp::create(builder, loc,
                  SubOp::create(builder, loc, readWhole(builder, state), back),
                  ref(name));
}

struct ChangeOfVariablesPass
    : public mlir::energy::impl::EnergyChangeOfVariablesBase<
          ChangeOfVariablesPass> {
  void runOnOperation() override { ChangeOfVariables(getOperation()).run(); }
};

} // namespace
