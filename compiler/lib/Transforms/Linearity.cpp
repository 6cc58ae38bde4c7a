//===- Linearity.cpp - Which values are linear maps of which --------------===//
//
// The linearity of each op, in one table, and the decomposition of a value
// into linear maps of the values it is built from.
//
//===----------------------------------------------------------------------===//

#include "Linearity.h"

#include "mlir/IR/Builders.h"
#include "mlir/Transforms/RegionUtils.h"

using namespace mlir;
using namespace mlir::energy;

Linearity mlir::energy::linearityOf(Operation *op) {
  if (isa<AddOp, SubOp, NegOp, TransposeOp, SumLastOp, BroadcastOp, DiagOp,
          DiagPartOp, ExtractOp, EmbedOp>(op))
    return Linearity::Joint;
  if (auto elements = dyn_cast<ReduceElementsOp>(op))
    return elements.getKind() == ElementsKind::sum ||
                   elements.getKind() == ElementsKind::mean
               ? Linearity::Joint
               : Linearity::None;
  if (isa<MulOp, MatmulOp, DotOp, OuterOp, DivOp>(op))
    return Linearity::Separate;
  return Linearity::None;
}

bool mlir::energy::isLinearInOperand(Operation *op, unsigned index) {
  switch (linearityOf(op)) {
  case Linearity::None:
    return false;
  case Linearity::Joint:
    return isa<ArrayType>(op->getOperand(index).getType());
  case Linearity::Separate:
    // A quotient is linear in its dividend only.
    return !isa<DivOp>(op) || index == 0;
  }
  return false;
}

namespace {
class Decomposer {
public:
  Decomposer(Block &body, function_ref<bool(Value)> invariant)
      : body(body), invariant(invariant) {}

  void visit(Value value) {
    Operation *op = value.getDefiningOp();
    if (invariant(value) || !op || op->getBlock() != &body ||
        op->getNumResults() != 1) {
      result.atoms.insert(value);
      return;
    }
    // The operands that vary: the op is a linear map of them when it is
    // linear in all of them together, or in the one that varies alone.
    SmallVector<unsigned> varying;
    for (auto [index, operand] : llvm::enumerate(op->getOperands()))
      if (!invariant(operand))
        varying.push_back(index);
    Linearity linearity = linearityOf(op);
    bool linear = !varying.empty() && llvm::all_of(varying, [&](unsigned i) {
      return isLinearInOperand(op, i);
    }) && (linearity == Linearity::Joint || varying.size() == 1);
    if (!linear) {
      result.atoms.insert(value);
      return;
    }
    if (!result.maps.insert(op))
      return;
    for (unsigned index : varying)
      visit(op->getOperand(index));
    // Joint maps add their fixed array operands (x + c): those are summed
    // as terms of their own.
    if (linearity == Linearity::Joint)
      for (Value operand : op->getOperands())
        if (invariant(operand) && isa<ArrayType>(operand.getType()))
          result.atoms.insert(operand);
  }

  LinearDecomposition result;

private:
  Block &body;
  function_ref<bool(Value)> invariant;
};
} // namespace

LinearDecomposition
mlir::energy::decomposeLinearly(Value value, Block &body,
                                function_ref<bool(Value)> invariant) {
  Decomposer decomposer(body, invariant);
  decomposer.visit(value);
  return std::move(decomposer.result);
}

bool mlir::energy::dependsOnAnyOf(Value value, ArrayRef<Value> roots,
                                  Block &body,
                                  llvm::DenseMap<Value, bool> &memo) {
  if (llvm::is_contained(roots, value))
    return true;
  Operation *op = value.getDefiningOp();
  if (!op || op->getBlock() != &body)
    return false;
  if (auto found = memo.find(value); found != memo.end())
    return found->second;
  llvm::SetVector<Value> used;
  getUsedValuesDefinedAbove(op->getRegions(), used);
  used.insert(op->operand_begin(), op->operand_end());
  bool depends = llvm::any_of(used, [&](Value operand) {
    return dependsOnAnyOf(operand, roots, body, memo);
  });
  memo[value] = depends;
  return depends;
}

namespace {
class LinearPart {
public:
  LinearPart(Block &body, ArrayRef<Value> rows, OpBuilder &builder,
             SmallVectorImpl<Operation *> &built)
      : body(body), rows(rows), builder(builder), built(built) {}

  std::optional<Value> visit(Value value) {
    if (auto found = parts.find(value); found != parts.end())
      return found->second;
    std::optional<Value> part = compute(value);
    parts[value] = part;
    return part;
  }

private:
  bool varies(Value value) {
    return dependsOnAnyOf(value, rows, body, varying);
  }

  /// `op` with operand `index` replaced by `part` (its result where that is
  /// the operand itself).
  Value withOperand(Operation *op, unsigned index, Value part) {
    if (part == op->getOperand(index))
      return op->getResult(0);
    Operation *copy = builder.clone(*op);
    copy->setOperand(index, part);
    built.push_back(copy);
    return copy->getResult(0);
  }

  std::optional<Value> compute(Value value) {
    if (llvm::is_contained(rows, value))
      return value;
    if (!varies(value))
      return Value();
    Operation *op = value.getDefiningOp();
    if (!op || op->getBlock() != &body || op->getNumResults() != 1 ||
        op->getNumRegions() != 0)
      return std::nullopt;
    SmallVector<unsigned> moving;
    for (auto [index, operand] : llvm::enumerate(op->getOperands()))
      if (varies(operand))
        moving.push_back(index);
    if (!llvm::all_of(moving,
                      [&](unsigned i) { return isLinearInOperand(op, i); }))
      return std::nullopt;
    Type type = value.getType();
    if (isa<AddOp, SubOp>(op)) {
      std::optional<Value> lhs = visit(op->getOperand(0));
      std::optional<Value> rhs = visit(op->getOperand(1));
      if (!lhs || !rhs)
        return std::nullopt;
      if (*lhs && *rhs) {
        if (*lhs == op->getOperand(0) && *rhs == op->getOperand(1))
          return value;
        Operation *copy = builder.clone(*op);
        copy->setOperands({*lhs, *rhs});
        built.push_back(copy);
        return copy->getResult(0);
      }
      if (*lhs)
        return lhs->getType() == type ? std::optional<Value>(*lhs)
                                      : std::nullopt;
      if (!*rhs)
        return Value();
      if (rhs->getType() != type)
        return std::nullopt;
      if (isa<AddOp>(op))
        return *rhs;
      auto neg = NegOp::create(builder, op->getLoc(), *rhs);
      built.push_back(neg);
      return neg.getResult();
    }
    // Any other map takes one varying operand, and no fixed term that
    // leaving the others out would drop.
    if (moving.size() != 1)
      return std::nullopt;
    if (linearityOf(op) == Linearity::Joint &&
        llvm::any_of(op->getOperands(), [&](Value operand) {
          return !varies(operand) && isa<ArrayType>(operand.getType());
        }))
      return std::nullopt;
    std::optional<Value> part = visit(op->getOperand(moving.front()));
    if (!part || !*part)
      return part;
    return withOperand(op, moving.front(), *part);
  }

  Block &body;
  ArrayRef<Value> rows;
  OpBuilder &builder;
  SmallVectorImpl<Operation *> &built;
  llvm::DenseMap<Value, std::optional<Value>> parts;
  llvm::DenseMap<Value, bool> varying;
};
} // namespace

std::optional<Value>
mlir::energy::linearPart(Value value, Block &body, ArrayRef<Value> rows,
                         OpBuilder &builder,
                         SmallVectorImpl<Operation *> &built) {
  return LinearPart(body, rows, builder, built).visit(value);
}

namespace {
/// The degree of a value in each varying leaf it is built from.
using Degrees = llvm::SmallDenseMap<Value, int, 4>;

class ScaledDecomposer {
public:
  ScaledDecomposer(Block &body, function_ref<bool(Value)> invariant)
      : body(body), invariant(invariant) {}

  /// The degrees of `value` in the leaves, or nullopt when the value is not
  /// a multilinear map of them.
  std::optional<Degrees> visit(Value value) {
    if (invariant(value))
      return Degrees();
    if (auto found = memo.find(value); found != memo.end())
      return found->second;
    std::optional<Degrees> degrees = compute(value);
    memo[value] = degrees;
    return degrees;
  }

  llvm::SetVector<Operation *> maps;

  /// The maps `value` is computed by (after visit(value)), down to its
  /// leaves, into `reached`.
  void collectMaps(Value value, llvm::SetVector<Operation *> &reached) {
    if (invariant(value))
      return;
    auto found = memo.find(value);
    if (found == memo.end() || !found->second || found->second->count(value))
      return;
    Operation *op = value.getDefiningOp();
    if (!reached.insert(op))
      return;
    for (Value operand : op->getOperands())
      collectMaps(operand, reached);
  }

private:
  std::optional<Degrees> leaf(Value value) {
    Degrees degrees;
    degrees[value] = 1;
    return degrees;
  }

  std::optional<Degrees> compute(Value value) {
    Operation *op = value.getDefiningOp();
    if (!op || op->getBlock() != &body || op->getNumResults() != 1)
      return leaf(value);
    SmallVector<unsigned> varying;
    for (auto [index, operand] : llvm::enumerate(op->getOperands()))
      if (!invariant(operand))
        varying.push_back(index);
    Linearity linearity = linearityOf(op);
    if (linearity == Linearity::None || varying.empty() ||
        !llvm::all_of(varying,
                      [&](unsigned i) { return isLinearInOperand(op, i); }))
      return leaf(value);
    Degrees degrees;
    if (linearity == Linearity::Joint) {
      // A sum of homogeneous terms: every array operand varies, with the
      // same degrees (x + c is affine, not a map of x).
      std::optional<Degrees> first;
      for (Value operand : op->getOperands()) {
        if (!isa<ArrayType>(operand.getType()))
          continue;
        if (invariant(operand))
          return leaf(value);
        std::optional<Degrees> next = visit(operand);
        if (!next)
          return leaf(value);
        if (first && *first != *next)
          return leaf(value);
        first = next;
      }
      if (!first)
        return leaf(value);
      degrees = *first;
    } else {
      // A product: the degrees add up.
      for (unsigned index : varying) {
        std::optional<Degrees> operand = visit(op->getOperand(index));
        if (!operand)
          return leaf(value);
        for (auto [leafValue, degree] : *operand)
          degrees[leafValue] += degree;
      }
    }
    maps.insert(op);
    return degrees;
  }

  Block &body;
  function_ref<bool(Value)> invariant;
  llvm::DenseMap<Value, std::optional<Degrees>> memo;
};
} // namespace

std::optional<ScaledDecomposition>
mlir::energy::decomposeScaled(Value value, Block &body,
                              function_ref<bool(Value)> invariant) {
  ScaledDecomposer decomposer(body, invariant);
  std::optional<Degrees> degrees = decomposer.visit(value);
  if (!degrees || degrees->empty())
    return std::nullopt;
  ScaledDecomposition result;
  for (auto [leafValue, degree] : *degrees) {
    if (degree != 1)
      return std::nullopt;
    if (cast<ArrayType>(leafValue.getType()).isScalar()) {
      result.scalars.push_back(leafValue);
    } else {
      if (result.vector)
        return std::nullopt;
      result.vector = leafValue;
    }
  }
  // In the body's order, so that rewrites are deterministic.
  auto position = [&](Value leafValue) {
    Operation *def = leafValue.getDefiningOp();
    return def && def->getBlock() == &body ? def : nullptr;
  };
  llvm::sort(result.scalars, [&](Value a, Value b) {
    Operation *x = position(a), *y = position(b);
    if (!x || !y)
      return x == nullptr && y != nullptr;
    return x->isBeforeInBlock(y);
  });
  // Only the maps the value reaches through its leaves.
  decomposer.collectMaps(value, result.maps);
  return result;
}

namespace {
/// summedWidth's recursion: `steady` values need nothing added.
class SummedWidth {
public:
  SummedWidth(Block &body, function_ref<bool(Value)> steady)
      : body(body), steady(steady) {}

  int64_t of(Value value) {
    if (steady(value))
      return 0;
    Operation *op = value.getDefiningOp();
    int64_t rank = cast<ArrayType>(value.getType()).getRank();
    if (!op || op->getBlock() != &body || op->getNumResults() != 1)
      return rank;
    if (isa<AddOp, SubOp>(op))
      return std::max(of(op->getOperand(0)), of(op->getOperand(1)));
    if (isa<NegOp, TransposeOp>(op))
      return of(op->getOperand(0));
    if (auto div = dyn_cast<DivOp>(op))
      return steady(div.getRhs()) ? of(div.getLhs()) : rank;
    if (isa<MulOp, MatmulOp, DotOp, OuterOp>(op))
      return ofProduct(op->getOperand(0), op->getOperand(1), rank);
    return rank;
  }

private:
  /// The factor that `value` scales by scalars (a product with a scalar,
  /// a negation, a quotient by a scalar).
  Value unscaled(Value value) {
    Operation *op = value.getDefiningOp();
    if (!op || op->getBlock() != &body)
      return value;
    if (auto mul = dyn_cast<MulOp>(op)) {
      if (isScalarArray(mul.getLhs()) && !isScalarArray(mul.getRhs()))
        return unscaled(mul.getRhs());
      if (isScalarArray(mul.getRhs()) && !isScalarArray(mul.getLhs()))
        return unscaled(mul.getLhs());
    }
    if (auto div = dyn_cast<DivOp>(op); div && isScalarArray(div.getRhs()))
      return unscaled(div.getLhs());
    if (auto neg = dyn_cast<NegOp>(op))
      return unscaled(neg.getOperand());
    return value;
  }

  static bool isScalarArray(Value value) {
    return cast<ArrayType>(value.getType()).isScalar();
  }

  /// A bilinear product of `lhs` and `rhs` of rank `rank`, distributed over
  /// the sums its operands are.
  int64_t ofProduct(Value lhs, Value rhs, int64_t rank) {
    Value left = unscaled(lhs), right = unscaled(rhs);
    for (auto [side, other, first] :
         {std::tuple(left, right, true), std::tuple(right, left, false)}) {
      Operation *op = side.getDefiningOp();
      if (op && op->getBlock() == &body && !steady(side) &&
          isa<AddOp, SubOp>(op))
        return std::max(first ? ofProduct(op->getOperand(0), other, rank)
                              : ofProduct(other, op->getOperand(0), rank),
                        first ? ofProduct(op->getOperand(1), other, rank)
                              : ofProduct(other, op->getOperand(1), rank));
    }
    if (steady(left))
      return of(right);
    if (steady(right))
      return of(left);
    if (isScalarArray(left))
      return of(right);
    if (isScalarArray(right))
      return of(left);
    return rank;
  }

  Block &body;
  function_ref<bool(Value)> steady;
};
} // namespace

int64_t mlir::energy::summedWidth(Value value, Block &body,
                                  function_ref<bool(Value)> steady) {
  return SummedWidth(body, steady).of(value);
}
