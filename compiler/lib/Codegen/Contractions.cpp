//===- Contractions.cpp - Tables and softmax contractions in kernels ------===//
//
// Lowers the kernel plan's ops. A table is a comprehension into scratch. A
// bilinear softmax contraction is a call of the support library's blocked
// kernel (SoftmaxContract.h) for all positions of its batch indices, with
// the coefficients of its values' factors in its pair terms computed here
// from the factors' ops (second derivatives weigh their sums by the score's
// derivative in a direction, itself a dot product of table rows) and, for
// one whose scores a later contraction reuses (`reuses_scores`), room for
// the tiles it keeps, freed after that one's call; a quadratic
// one (a mixture's E-step and moments), in CUDA artifacts, a call of its
// mixture kernel (QuadraticContract.h). A generic one (and a quadratic one
// on a CPU) runs the same algorithm as generated code: per row, panels of
// columns whose scores are evaluated pair by pair into a buffer, an online
// softmax (the running maximum moves once per panel), the vector exp over
// the panel, and the weighted sums; the column side is a second pass,
// parallel over columns, that reuses each row's normaliser. Nothing of size
// rows × columns is stored.
//
//===----------------------------------------------------------------------===//

#include "KernelFunction.h"
#include "energy/Codegen/ParallelLoops.h"
#include "energy/KernelSupport/KernelSupport.h"
#include "energy/KernelSupport/QuadraticContract.h"
#include "energy/KernelSupport/SoftmaxContract.h"
#include "energy/Runtime/ArtifactABI.h"

#include <functional>
#include <limits>

using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::codegen;

namespace {
/// Columns (or rows, on the column side) whose scores a generic contraction
/// evaluates before exponentiating them together.
constexpr int64_t kPanelSize = 128;

/// The slots of energy_softmax_contract_args (SoftmaxContract.h).
enum ContractSlot : unsigned {
  kRows = 0,
  kCols,
  kDepth,
  kRowFeatures,
  kColFeatures,
  kScale,
  kTemperature,
  kNumConstraints,
  kConstraints,
  kLse,
  kGivenLse,
  kNumRowOutputs,
  kColValues,
  kRowOutputWidths,
  kRowOutputs,
  kNumColOutputs,
  kRowValues,
  kColOutputWidths,
  kColOutputs,
  kBatch,
  kNumPairTerms,
  kPairDepths,
  kPairRowFeatures,
  kPairColFeatures,
  kRowOutputWeights,
  kColOutputWeights,
  kKeptTiles,
  kKeptTilesMode,
  kSlotCount
};
static_assert(kSlotCount * 8 == sizeof(energy_softmax_contract_args),
              "one slot per field of energy_softmax_contract_args");
/// The slots of energy_quadratic_contract_args (QuadraticContract.h).
constexpr unsigned kQuadraticSlotCount = 12;
} // namespace

FailureOr<Lowered> KernelFunction::emitTabulate(TabulateOp table) {
  Value data = allocate(cast<ArrayType>(table.getType()));
  if (failed(emitComprehension(table.getSizes(),
                               cast<ArrayType>(table.getBodyValue().getType()),
                               table.getBody().front(), data)))
    return failure();
  return Lowered{Value(), data};
}

void KernelFunction::expInPlace(Value values, Value count) {
  // Weights below the smallest normal number become 0 (they would cost a
  // microcode assist each and weigh under 2^-126 of the largest).
  callSupport(singlePrecision() ? ENERGY_SUPPORT_SOFTMAX_WEIGHTS_F32
                                : ENERGY_SUPPORT_SOFTMAX_WEIGHTS_F64,
              {toI64(count), values, values});
}

LogicalResult KernelFunction::emitSoftmaxContract(SoftmaxContractOp contract) {
  if (contract.getEngine().value_or(kLoopsEngine) == kLoopsEngine)
    return emitGenericContract(contract);
  if (contract.getForm() == ContractForm::bilinear) {
    std::string reason;
    FailureOr<BilinearContract> form = contract.matchBilinear(reason);
    if (failed(form))
      return contract.emitOpError() << "is marked bilinear but " << reason;
    // One that reads another's kept tiles takes that one's pair terms, in
    // its order: its own are among them (the verifier checks it).
    if (SoftmaxContractOp source = contract.getScoresSource();
        source && contract.getReusesScores()) {
      FailureOr<BilinearContract> sourceForm = source.matchBilinear(reason);
      if (failed(sourceForm))
        return source.emitOpError() << "is marked bilinear but " << reason;
      for (auto &[dot, term] : form->pairTermOfDot)
        term = *findPairTerm(sourceForm->pairTerms, form->pairTerms[term]);
      form->pairTerms = sourceForm->pairTerms;
    }
    return emitBilinearContract(contract, *form);
  }
  if (contract.getForm() == ContractForm::quadratic) {
    std::string reason;
    FailureOr<QuadraticContract> form = contract.matchQuadratic(reason);
    if (failed(form))
      return contract.emitOpError() << "is marked quadratic but " << reason;
    return emitQuadraticContract(contract, *form);
  }
  return emitGenericContract(contract);
}

/// The support function that computes a bilinear contraction on `engine`
/// (a kernel's engine, not loops) with elements of single or double
/// precision. Tensor cores and cuDNN take single precision only; double
/// runs on the GPU's kernel of its own.
static StringRef bilinearKernelOf(StringRef engine, bool single) {
  if (engine == kCpuEngine)
    return single ? ENERGY_SUPPORT_SOFTMAX_CONTRACT_F32
                  : ENERGY_SUPPORT_SOFTMAX_CONTRACT_F64;
  if (!single)
    return ENERGY_SUPPORT_CUDA_SOFTMAX_CONTRACT_F64;
  if (engine == kCudnnEngine)
    return ENERGY_SUPPORT_CUDA_FUSED_ATTENTION_BF16;
  if (engine == kCudaTensorCoresEngine)
    return ENERGY_SUPPORT_CUDA_SOFTMAX_CONTRACT_BF16;
  return ENERGY_SUPPORT_CUDA_SOFTMAX_CONTRACT_F32;
}

//===----------------------------------------------------------------------===//
// Bilinear: the support library's kernel
//===----------------------------------------------------------------------===//

LogicalResult
KernelFunction::emitBilinearContract(SoftmaxContractOp contract,
                                     const BilinearContract &form) {
  unsigned rowCount = contract.getNumRowIndices();
  SmallVector<Value> rowExtents = extentsOf(contract.getRows());
  Value columns =
      extentsOf(ArrayAttr::get(contract.getContext(), {contract.getCols()}))
          .front();
  Value rows = rowExtents.back();
  ArrayRef<Value> batchExtents = ArrayRef<Value>(rowExtents).drop_back();
  auto typeOf = [](Value value) { return cast<ArrayType>(value.getType()); };
  Value depth = dim(typeOf(form.rowTable).getShape().back().getValue());
  // The width of a table's rows: the elements after its leading indices.
  auto widthOf = [&](Value table) {
    Value width = index(1);
    SmallVector<Value> extents = shape(typeOf(table));
    for (Value extent : ArrayRef<Value>(extents).drop_front(rowCount))
      width = arith::MulIOp::create(b, loc, width, extent);
    return width;
  };

  // Results.
  for (Value result : contract.getResults())
    arrays[result] = Lowered{Value(), allocate(typeOf(result))};
  std::optional<SmallVector<LinearConstraint>> constraints =
      contract.getLinearConstraints();

  Value args = allocateSlots(kSlotCount);
  auto storeSlot = [&](unsigned position, Value value) {
    storeInSlot(args, position, value);
  };
  auto storeIn = [&](Value array, unsigned position, Value value) {
    storeInSlot(array, position, value);
  };
  Value null = LLVM::ZeroOp::create(b, loc, pointerType());
  storeSlot(kRows, rows);
  storeSlot(kCols, columns);
  storeSlot(kDepth, depth);
  storeSlot(kScale, form.scale ? toF64(get(form.scale).scalar)
                               : arith::ConstantOp::create(
                                     b, loc, b.getF64FloatAttr(1.0))
                                     .getResult());
  Value temperature = contract.getTemperature();
  storeSlot(kTemperature, temperature ? toF64(get(temperature).scalar)
                                      : arith::ConstantOp::create(
                                            b, loc, b.getF64FloatAttr(1.0))
                                            .getResult());
  Value constraintArray =
      allocateSlots(std::max<unsigned>(1, 4 * constraints->size()));
  for (auto [i, constraint] : llvm::enumerate(*constraints)) {
    auto constant = [&](int64_t value) {
      return arith::ConstantIntOp::create(b, loc, b.getI64Type(), value)
          .getResult();
    };
    storeIn(constraintArray, 4 * i, constant(constraint.rowCoefficient));
    storeIn(constraintArray, 4 * i + 1, constant(constraint.colCoefficient));
    storeIn(constraintArray, 4 * i + 2, constant(constraint.offset));
    storeIn(constraintArray, 4 * i + 3,
            constant(constraint.notEqual ? ENERGY_CONSTRAINT_NE
                                         : ENERGY_CONSTRAINT_GE));
  }
  storeSlot(kNumConstraints, index(constraints->size()));
  storeSlot(kConstraints, constraintArray);

  // A value that is a factor alone sums a table of ones over the batch
  // and the columns (for the rows' sums) or the rows (for the columns').
  auto tableData = [&](Value table, bool overRows) {
    if (table)
      return get(table).data;
    SmallVector<StringAttr> dims;
    ArrayRef<Attribute> sizes = contract.getRows().getValue();
    for (Attribute size : overRows ? sizes : sizes.drop_back())
      dims.push_back(StringAttr::get(contract.getContext(),
                                     *cast<DimExprAttr>(size).getDimName()));
    if (!overRows)
      dims.push_back(
          StringAttr::get(contract.getContext(),
                          *cast<DimExprAttr>(contract.getCols()).getDimName()));
    auto type = ArrayType::get(contract.getContext(), dims);
    Value ones = allocate(type);
    forRange(elementCount(type), [&](Value i) { store(real(1.0), ones, i); });
    return ones;
  };
  unsigned rowOutputs = form.rowValueTables.size();
  unsigned colOutputs = form.colValueTables.size();
  Value colValues = allocateSlots(std::max(1u, rowOutputs));
  Value rowOutputWidths = allocateSlots(std::max(1u, rowOutputs));
  Value rowOutputArray = allocateSlots(std::max(1u, rowOutputs));
  Value rowValues = allocateSlots(std::max(1u, colOutputs));
  Value colOutputWidths = allocateSlots(std::max(1u, colOutputs));
  Value colOutputArray = allocateSlots(std::max(1u, colOutputs));
  SmallVector<Value> rowWidths, colWidths;
  for (auto [j, table] : llvm::enumerate(form.rowValueTables)) {
    rowWidths.push_back(table ? widthOf(table) : index(1));
    storeIn(rowOutputWidths, j, rowWidths.back());
  }
  for (auto [j, table] : llvm::enumerate(form.colValueTables)) {
    colWidths.push_back(table ? widthOf(table) : index(1));
    storeIn(colOutputWidths, j, colWidths.back());
  }
  storeSlot(kNumRowOutputs, index(rowOutputs));
  storeSlot(kColValues, colValues);
  storeSlot(kRowOutputWidths, rowOutputWidths);
  storeSlot(kRowOutputs, rowOutputArray);
  storeSlot(kNumColOutputs, index(colOutputs));
  storeSlot(kRowValues, rowValues);
  storeSlot(kColOutputWidths, colOutputWidths);
  storeSlot(kColOutputs, colOutputArray);

  // One call for every position of the batch indices: the tables hold one
  // problem per position, back to back.
  Value batchCount = index(1);
  for (Value extent : batchExtents)
    batchCount = arith::MulIOp::create(b, loc, batchCount, extent);
  storeSlot(kBatch, batchCount);
  if (form.rowBias || form.colBias) {
    // The biases as features: rows [scale · A, 1, R], columns [B, C, 1]
    // (each pair of columns only where its bias is given), scale 1.
    Value extra = index(form.rowBias && form.colBias ? 2 : 1);
    Value widened = arith::AddIOp::create(b, loc, depth, extra);
    Value scale = form.scale ? get(form.scale).scalar : real(1.0);
    // The copies' sizes, from the dims alone (scratch is allocated at the
    // kernel's entry).
    Value rowTotal, colTotal;
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(entryAnchor);
      SmallVector<Value> extents = extentsOf(contract.getRows());
      Value width = arith::AddIOp::create(
          b, loc, dim(typeOf(form.rowTable).getShape().back().getValue()),
          index(form.rowBias && form.colBias ? 2 : 1));
      Value positions = width;
      for (Value extent : ArrayRef<Value>(extents).drop_back())
        positions = arith::MulIOp::create(b, loc, positions, extent);
      rowTotal = arith::MulIOp::create(b, loc, positions, extents.back());
      colTotal = arith::MulIOp::create(
          b, loc, positions,
          extentsOf(ArrayAttr::get(contract.getContext(), {contract.getCols()}))
              .front());
    }
    auto widen = [&](Value table, Value count, Value total, Value factor,
                     Value rowBias, Value colBias, bool rowSide) {
      Value source = get(table).data;
      Value features = allocateElements(total);
      forRange(count, [&](Value position) {
        Value from = arith::MulIOp::create(b, loc, position, depth);
        Value to = arith::MulIOp::create(b, loc, position, widened);
        forRange(depth, [&](Value k) {
          Value element = load(source, arith::AddIOp::create(b, loc, from, k));
          store(factor ? mul(element, factor) : element, features,
                arith::AddIOp::create(b, loc, to, k));
        });
        Value next = arith::AddIOp::create(b, loc, to, depth);
        auto put = [&](Value value) {
          store(value, features, next);
          next = arith::AddIOp::create(b, loc, next, index(1));
        };
        if (colBias)
          put(rowSide ? real(1.0) : load(get(colBias).data, position));
        if (rowBias)
          put(rowSide ? load(get(rowBias).data, position) : real(1.0));
      });
      return features;
    };
    Value rowPositions = arith::MulIOp::create(b, loc, batchCount, rows);
    Value colPositions = arith::MulIOp::create(b, loc, batchCount, columns);
    storeSlot(kRowFeatures, widen(form.rowTable, rowPositions, rowTotal, scale,
                                  form.rowBias, form.colBias, true));
    storeSlot(kColFeatures, widen(form.colTable, colPositions, colTotal,
                                  Value(), form.rowBias, form.colBias, false));
    storeSlot(kDepth, widened);
    storeSlot(
        kScale,
        arith::ConstantOp::create(b, loc, b.getF64FloatAttr(1.0)).getResult());
  } else {
    storeSlot(kRowFeatures, get(form.rowTable).data);
    storeSlot(kColFeatures, get(form.colTable).data);
  }
  Value lse = contract.getLse();
  storeSlot(kLse, lse ? get(lse).data : null);
  Value given = contract.getGivenLse();
  storeSlot(kGivenLse, given ? get(given).data : null);
  for (auto [j, table] : llvm::enumerate(form.rowValueTables)) {
    storeIn(colValues, j, tableData(table, /*overRows=*/false));
    storeIn(rowOutputArray, j, get(contract.getRowOutputs()[j]).data);
  }
  for (auto [j, table] : llvm::enumerate(form.colValueTables)) {
    storeIn(rowValues, j, tableData(table, /*overRows=*/true));
    storeIn(colOutputArray, j, get(contract.getColOutputs()[j]).data);
  }
  // The pair terms, and each output's weights (κ, α₁ … αₘ): its weight at a
  // pair is w · (κ + Σ_j α_j t_j).
  unsigned terms = form.pairTerms.size();
  Value pairDepths = allocateSlots(std::max(1u, terms));
  Value pairRowFeatures = allocateSlots(std::max(1u, terms));
  Value pairColFeatures = allocateSlots(std::max(1u, terms));
  for (auto [j, term] : llvm::enumerate(form.pairTerms)) {
    storeIn(pairDepths, j, widthOf(term.rowTable));
    storeIn(pairRowFeatures, j, get(term.rowTable).data);
    storeIn(pairColFeatures, j, get(term.colTable).data);
  }
  storeSlot(kNumPairTerms, index(terms));
  storeSlot(kPairDepths, pairDepths);
  storeSlot(kPairRowFeatures, pairRowFeatures);
  storeSlot(kPairColFeatures, pairColFeatures);
  auto weightsOf = [&](ArrayRef<Value> factors) -> FailureOr<Value> {
    if (llvm::all_of(factors, [](Value factor) { return !factor; }))
      return null;
    Value weights =
        allocateSlots(std::max<size_t>(1, factors.size()) * (1 + terms));
    for (auto [k, factor] : llvm::enumerate(factors)) {
      FailureOr<SmallVector<Value>> coefficients =
          factorCoefficients(factor, form);
      if (failed(coefficients))
        return failure();
      for (auto [j, coefficient] : llvm::enumerate(*coefficients))
        storeIn(weights, k * (1 + terms) + j, coefficient);
    }
    return weights;
  };
  FailureOr<Value> rowWeights = weightsOf(form.rowValueFactors);
  FailureOr<Value> colWeights = weightsOf(form.colValueFactors);
  if (failed(rowWeights) || failed(colWeights))
    return failure();
  storeSlot(kRowOutputWeights, *rowWeights);
  storeSlot(kColOutputWeights, *colWeights);
  // Tiles kept for a later contraction that reuses these scores, or read
  // from the earlier one's (freed after this, their last use).
  auto mode = [&](int64_t value) {
    return arith::ConstantIntOp::create(b, loc, b.getI64Type(), value)
        .getResult();
  };
  Value tiles = null, tilesMode = mode(ENERGY_CONTRACT_TILES_NONE);
  Value reusedTiles;
  if (SoftmaxContractOp source = contract.getScoresSource();
      source && contract.getReusesScores())
    reusedTiles = keptTiles.lookup(source);
  if (reusedTiles) {
    tiles = reusedTiles;
    tilesMode = mode(ENERGY_CONTRACT_TILES_REUSE);
  } else if (contract.getEngine() == kCpuEngine && lse &&
             llvm::any_of(lse.getUsers(), [&](Operation *user) {
               auto reader = dyn_cast<SoftmaxContractOp>(user);
               return reader && reader.getReusesScores() &&
                      reader.getScoresSource() == contract;
             })) {
    tiles = callSupport(ENERGY_SUPPORT_SOFTMAX_CONTRACT_TILES,
                        {toI64(batchCount), toI64(rows), toI64(columns),
                         toI64(index(terms)), mode(singlePrecision() ? 4 : 8)})
                .getResult(0);
    tilesMode = mode(ENERGY_CONTRACT_TILES_KEEP);
    keptTiles[contract] = tiles;
  }
  storeSlot(kKeptTiles, tiles);
  storeSlot(kKeptTilesMode, tilesMode);
  func::CallOp call = callSupport(
      bilinearKernelOf(*contract.getEngine(), singlePrecision()), {args});
  reportContractStatus(call.getResult(0));
  if (reusedTiles)
    func::CallOp::create(
        b, loc,
        context.target.lookupSymbol<func::FuncOp>(ENERGY_SUPPORT_SCRATCH_FREE),
        ValueRange{reusedTiles});
  return success();
}

FailureOr<SmallVector<Value>>
KernelFunction::factorCoefficients(Value factor, const BilinearContract &form) {
  auto f64 = [&](double value) {
    return arith::ConstantOp::create(b, loc, b.getF64FloatAttr(value))
        .getResult();
  };
  // Coefficients with null for a known 0, so that a product's invariant
  // operand is the one whose α are all null.
  std::function<FailureOr<SmallVector<Value>>(Value)> coefficientsOf =
      [&](Value value) -> FailureOr<SmallVector<Value>> {
    SmallVector<Value> result(1 + form.pairTerms.size());
    Operation *def = value.getDefiningOp();
    if (auto constant = dyn_cast_or_null<ConstantOp>(def)) {
      result[0] = f64(constant.getValue().convertToDouble());
      return result;
    }
    // Computed outside the contraction: κ alone.
    if (arrays.count(value) && get(value).scalar) {
      result[0] = toF64(get(value).scalar);
      return result;
    }
    if (!def)
      return emitError(value.getLoc(), "is not affine in the contraction's "
                                       "pair terms, which its weights need");
    if (auto term = form.pairTermOfDot.find(def);
        term != form.pairTermOfDot.end()) {
      result[1 + term->second] = f64(1.0);
      return result;
    }
    SmallVector<SmallVector<Value>> operands;
    for (Value operand : def->getOperands()) {
      FailureOr<SmallVector<Value>> inner = coefficientsOf(operand);
      if (failed(inner))
        return failure();
      operands.push_back(std::move(*inner));
    }
    auto invariant = [](ArrayRef<Value> c) {
      return llvm::all_of(c.drop_front(), [](Value v) { return !v; });
    };
    auto binary = [&](auto create, Value lhs, Value rhs) -> Value {
      if (!lhs || !rhs)
        return Value();
      return decltype(create)::create(b, loc, lhs, rhs).getResult();
    };
    for (unsigned j = 0; j < result.size(); ++j) {
      Value lhs = operands[0][j];
      if (isa<NegOp>(def)) {
        result[j] = lhs ? arith::NegFOp::create(b, loc, lhs).getResult() : lhs;
      } else if (isa<AddOp, SubOp>(def)) {
        Value rhs = operands[1][j];
        if (rhs && isa<SubOp>(def))
          rhs = arith::NegFOp::create(b, loc, rhs);
        result[j] = !lhs ? rhs
                    : !rhs
                        ? lhs
                        : arith::AddFOp::create(b, loc, lhs, rhs).getResult();
      } else if (isa<DivOp>(def) && invariant(operands[1])) {
        result[j] = binary(arith::DivFOp(), lhs, operands[1][0]);
      } else if (isa<MulOp>(def) && invariant(operands[1])) {
        result[j] = binary(arith::MulFOp(), lhs, operands[1][0]);
      } else if (isa<MulOp>(def) && invariant(operands[0])) {
        result[j] = binary(arith::MulFOp(), operands[0][0], operands[1][j]);
      } else {
        return def->emitOpError("is not affine in the contraction's pair "
                                "terms, which its weights need");
      }
    }
    return result;
  };
  if (!factor) {
    SmallVector<Value> plain(1 + form.pairTerms.size(), f64(0.0));
    plain[0] = f64(1.0);
    return plain;
  }
  FailureOr<SmallVector<Value>> coefficients = coefficientsOf(factor);
  if (failed(coefficients))
    return failure();
  for (Value &coefficient : *coefficients)
    if (!coefficient)
      coefficient = f64(0.0);
  return coefficients;
}

void KernelFunction::storeInSlot(Value slots, unsigned position, Value value) {
  if (value.getType().isIndex())
    value = toI64(value);
  Value at = LLVM::GEPOp::create(
      b, loc, pointerType(), b.getI64Type(), slots,
      ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(position)});
  LLVM::StoreOp::create(b, loc, value, at);
}

void KernelFunction::reportContractStatus(Value code) {
  // The kernels' codes: OK, an invalid argument (a temperature that is
  // not positive), out of memory, a device failure (the GPU's versions).
  auto i32 = [&](int32_t value) {
    return arith::ConstantIntOp::create(b, loc, b.getI32Type(), value);
  };
  auto codeIs = [&](int32_t value) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, code,
                                 i32(value));
  };
  Value failedCode = select(codeIs(ENERGY_CONTRACT_OUT_OF_MEMORY),
                            i32(ENERGY_KERNEL_OUT_OF_MEMORY),
                            select(codeIs(ENERGY_CONTRACT_DEVICE_ERROR),
                                   i32(ENERGY_KERNEL_DEVICE_ERROR),
                                   i32(ENERGY_KERNEL_INVALID_ARGUMENT)));
  reportStatus(select(codeIs(ENERGY_CONTRACT_OK), code, failedCode));
}

//===----------------------------------------------------------------------===//
// Quadratic: the support library's mixture kernel
//===----------------------------------------------------------------------===//

LogicalResult
KernelFunction::emitQuadraticContract(SoftmaxContractOp contract,
                                      const QuadraticContract &form) {
  auto typeOf = [](Value value) { return cast<ArrayType>(value.getType()); };
  for (Value result : contract.getResults())
    arrays[result] = Lowered{Value(), allocate(typeOf(result))};
  Value rows = extentsOf(contract.getRows()).front();
  Value columns =
      extentsOf(ArrayAttr::get(contract.getContext(), {contract.getCols()}))
          .front();
  Value depth = dim(typeOf(form.points).getShape().back().getValue());
  Value scale = form.scale
                    ? toF64(get(form.scale).scalar)
                    : arith::ConstantOp::create(b, loc, b.getF64FloatAttr(1.0))
                          .getResult();
  if (form.negated)
    scale = arith::NegFOp::create(b, loc, scale);
  Value null = LLVM::ZeroOp::create(b, loc, pointerType());
  Value lse = contract.getLse();
  // The row values' sums need each row's L (scratch when it is not a
  // result).
  Value lseData = lse                       ? get(lse).data
                  : form.rowScalars.empty() ? null
                                            : allocateElements(rows);
  unsigned outputs = form.moments.size();
  Value kinds = allocateSlots(std::max(1u, outputs));
  Value outputArray = allocateSlots(std::max(1u, outputs));
  for (auto [j, moment] : llvm::enumerate(form.moments)) {
    int64_t kind = moment == QuadraticMoment::Weight  ? ENERGY_MOMENT_WEIGHT
                   : moment == QuadraticMoment::Point ? ENERGY_MOMENT_POINT
                   : moment == QuadraticMoment::Centred
                       ? ENERGY_MOMENT_CENTRED
                       : ENERGY_MOMENT_CENTRED_OUTER;
    storeInSlot(kinds, j,
                arith::ConstantIntOp::create(b, loc, b.getI64Type(), kind));
    storeInSlot(outputArray, j, get(contract.getColOutputs()[j]).data);
  }
  Value args = allocateSlots(kQuadraticSlotCount);
  const Value slots[kQuadraticSlotCount] = {rows,
                                            columns,
                                            depth,
                                            get(form.points).data,
                                            get(form.means).data,
                                            get(form.precisions).data,
                                            form.bias ? get(form.bias).data
                                                      : null,
                                            scale,
                                            lseData,
                                            index(outputs),
                                            kinds,
                                            outputArray};
  for (auto [position, value] : llvm::enumerate(slots))
    storeInSlot(args, position, value);
  // The verifier admits quadratic contractions on the GPU's engine only.
  reportContractStatus(
      callSupport(singlePrecision()
                      ? ENERGY_SUPPORT_CUDA_QUADRATIC_CONTRACT_F32
                      : ENERGY_SUPPORT_CUDA_QUADRATIC_CONTRACT_F64,
                  {args})
          .getResult(0));
  // Σ_c w(r, c) · v = v for a row whose weights sum to 1; 0 for a row
  // without weights (no columns, or every score −∞).
  for (auto [j, value] : llvm::enumerate(form.rowScalars)) {
    Value scalar = get(value).scalar;
    Value output = get(contract.getRowOutputs()[j]).data;
    Value hasColumns = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt,
                                             columns, index(0));
    Value negativeInfinity = real(-std::numeric_limits<double>::infinity());
    forRange(rows, [&](Value r) {
      Value weighted = arith::AndIOp::create(
          b, loc, hasColumns,
          cmp(arith::CmpFPredicate::OGT, load(lseData, r), negativeInfinity));
      store(select(weighted, scalar, real(0.0)), output, r);
    });
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Generic: generated code
//===----------------------------------------------------------------------===//

LogicalResult KernelFunction::emitGenericContract(SoftmaxContractOp contract) {
  auto typeOf = [](Value value) { return cast<ArrayType>(value.getType()); };
  Value negativeInfinity = real(-std::numeric_limits<double>::infinity());
  SmallVector<Value> rowExtents = extentsOf(contract.getRows());
  Value columns =
      extentsOf(ArrayAttr::get(contract.getContext(), {contract.getCols()}))
          .front();
  Value temperature = contract.getTemperature()
                          ? get(contract.getTemperature()).scalar
                          : Value();
  bool statement = loopDepth == 0;
  Block &scoreBlock = contract.getScore().front();
  Block &rowBlock = contract.getRowSums().front();
  Block &colBlock = contract.getColSums().front();
  Value given = contract.getGivenLse();

  // Results: with rows, tables over them; without, one value each.
  SmallVector<Value> resultData;
  for (Value result : contract.getResults())
    resultData.push_back(typeOf(result).isScalar() ? allocateElements(1)
                                                   : allocate(typeOf(result)));
  Value lseData = contract.getLse() ? resultData.front() : Value();
  unsigned firstRowOutput = contract.getLse() ? 1 : 0;
  SmallVector<Value> rowElementCounts, colElementCounts;
  for (Value value : contract.getRowValues())
    rowElementCounts.push_back(elementCount(typeOf(value)));
  for (Value value : contract.getColValues())
    colElementCounts.push_back(elementCount(typeOf(value)));
  // Each pass has scratch of its own, so that each of its parallel loops
  // gets a private copy per chunk: a panel of scores, and accumulators.
  Value panel = allocateElements(kPanelSize);
  Value columnPanel = allocateElements(kPanelSize);
  // The row accumulators, one array of each value's size.
  SmallVector<Value> accumulators;
  for (Value count : rowElementCounts)
    accumulators.push_back(allocateElements(count));
  SmallVector<Value> columnAccumulators;
  for (Value count : colElementCounts)
    columnAccumulators.push_back(allocateElements(count));

  // Whether the predicate admits (indices...); true without one.
  auto admits = [&](ValueRange indices) -> FailureOr<Value> {
    if (!contract.hasPredicate())
      return arith::ConstantIntOp::create(b, loc, 1, 1).getResult();
    FailureOr<SmallVector<Value>> admitted =
        emitBlock(contract.getPredicate().front(), indices);
    if (failed(admitted))
      return failure();
    return admitted->front();
  };
  // The score at (indices...) divided by the temperature, or −∞ where the
  // predicate excludes the pair.
  auto scaledScore = [&](ValueRange indices) -> FailureOr<Value> {
    FailureOr<Value> admitted = admits(indices);
    if (failed(admitted))
      return failure();
    auto branch = scf::IfOp::create(b, loc, TypeRange{context.elementType},
                                    *admitted, /*withElse=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(branch.thenBlock());
      FailureOr<SmallVector<Value>> score = emitBlock(scoreBlock, indices);
      if (failed(score))
        return failure();
      Value value = score->front();
      if (temperature)
        value = div(value, temperature);
      scf::YieldOp::create(b, loc, value);
      b.setInsertionPointToStart(branch.elseBlock());
      scf::YieldOp::create(b, loc, negativeInfinity);
    }
    return branch.getResult(0);
  };
  // Adds weight · value_j(indices...) into accumulator j for every value of
  // `block`, where the predicate admits the pair.
  auto accumulateValues = [&](Block &block, ValueRange indices, Value weight,
                              ArrayRef<Value> into,
                              ArrayRef<Value> counts) -> LogicalResult {
    if (into.empty())
      return success();
    FailureOr<Value> admitted = admits(indices);
    if (failed(admitted))
      return failure();
    auto branch = scf::IfOp::create(b, loc, TypeRange{}, *admitted,
                                    /*withElse=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(branch.thenBlock());
    FailureOr<SmallVector<Value>> values = emitBlock(block, indices);
    if (failed(values))
      return failure();
    ValueRange yielded = cast<YieldOp>(block.getTerminator()).getValues();
    for (size_t j = 0; j < into.size(); ++j) {
      Value value = (*values)[j], accumulator = into[j];
      if (typeOf(yielded[j]).isScalar())
        store(add(load(accumulator, index(0)), mul(weight, value)), accumulator,
              index(0));
      else
        addScaled(accumulator, weight, value, counts[j]);
    }
    return success();
  };
  auto zeroFill = [&](ArrayRef<Value> arrays, ArrayRef<Value> counts) {
    for (size_t j = 0; j < arrays.size(); ++j)
      forRange(counts[j], [&](Value i) { store(real(0.0), arrays[j], i); });
  };
  // The row-major offset of a position of `extents`.
  auto positionOf = [&](ValueRange indices, ArrayRef<Value> extents) {
    return sliceOffset(SmallVector<Value>(indices), extents);
  };

  // Child side then column side, for any number of columns.
  auto twoPasses = [&]() -> LogicalResult {
    // Child side: per row, an online softmax over panels of columns.
    if (!given || !contract.getRowOutputs().empty()) {
      Region none;
      auto childRow = [&](ValueRange rowIndices,
                          ValueRange) -> FailureOr<SmallVector<Value>> {
        zeroFill(accumulators, rowElementCounts);
        Value rowPosition = positionOf(rowIndices, rowExtents);
        // With a given normaliser the weights need no running maximum.
        Value givenShift;
        if (given) {
          givenShift = load(get(given).data, rowPosition);
          if (temperature)
            givenShift = div(givenShift, temperature);
        }
        auto panels =
            scf::ForOp::create(b, loc, index(0), columns, index(kPanelSize),
                               ValueRange{negativeInfinity, real(0.0)});
        dropImplicitYield(panels);
        {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToEnd(panels.getBody());
          Value start = panels.getInductionVar();
          Value largest = panels.getRegionIterArgs()[0];
          Value total = panels.getRegionIterArgs()[1];
          Value count = arith::MinSIOp::create(
              b, loc, index(kPanelSize),
              arith::SubIOp::create(b, loc, columns, start));
          auto indicesAt = [&](Value q) {
            SmallVector<Value> indices(rowIndices);
            indices.push_back(arith::AddIOp::create(b, loc, start, q));
            return indices;
          };
          // Scores of the panel and their maximum.
          bool failedScores = false;
          Value panelLargest =
              forRange(count, {negativeInfinity}, [&](Value q, ValueRange acc) {
                FailureOr<Value> score = scaledScore(indicesAt(q));
                if (failed(score)) {
                  failedScores = true;
                  return SmallVector<Value>{acc[0]};
                }
                store(*score, panel, q);
                return SmallVector<Value>{maximum(acc[0], *score)};
              })[0];
          if (failedScores)
            return failure();
          Value newLargest = largest, rescale = real(1.0), shift = givenShift;
          if (!given) {
            newLargest = maximum(largest, panelLargest);
            // exp(m − m') rescales what was summed (0 before anything was);
            // a shift of 0 while everything so far is −∞ keeps exp at 0.
            Value nothingYet =
                cmp(arith::CmpFPredicate::OEQ, newLargest, negativeInfinity);
            Value wasEmpty =
                cmp(arith::CmpFPredicate::OEQ, largest, negativeInfinity);
            rescale =
                select(wasEmpty, real(0.0), exp(sub(largest, newLargest)));
            shift = select(nothingYet, real(0.0), newLargest);
          }
          forRange(count, [&](Value q) {
            store(sub(load(panel, q), shift), panel, q);
          });
          expInPlace(panel, count);
          Value panelTotal =
              forRange(count, {real(0.0)}, [&](Value q, ValueRange acc) {
                return SmallVector<Value>{add(acc[0], load(panel, q))};
              })[0];
          if (!given)
            for (size_t j = 0; j < accumulators.size(); ++j)
              forLanes(rowElementCounts[j], [&](Value i, int lanes) {
                storeLanes(mul(loadLanes(accumulators[j], i, lanes),
                               splat(rescale, lanes)),
                           accumulators[j], i, lanes);
              });
          bool failedValues = false;
          forRange(count, [&](Value q) {
            failedValues |=
                failed(accumulateValues(rowBlock, indicesAt(q), load(panel, q),
                                        accumulators, rowElementCounts));
          });
          if (failedValues)
            return failure();
          scf::YieldOp::create(
              b, loc,
              ValueRange{newLargest, add(mul(total, rescale), panelTotal)});
        }
        Value largest = panels.getResult(0), total = panels.getResult(1);
        // A row with nothing admitted has L = 0 and sums 0.
        Value empty =
            given ? arith::ConstantIntOp::create(b, loc, 0, 1)
                  : cmp(arith::CmpFPredicate::OEQ, largest, negativeInfinity);
        if (lseData) {
          Value lse = add(largest, log(total));
          if (temperature)
            lse = mul(lse, temperature);
          store(select(empty, real(0.0), lse), lseData, rowPosition);
        }
        for (size_t j = 0; j < accumulators.size(); ++j) {
          Value accumulator = accumulators[j], elements = rowElementCounts[j];
          Value base = offsetPointer(
              resultData[firstRowOutput + j],
              arith::MulIOp::create(b, loc, rowPosition, elements));
          forRange(elements, [&](Value i) {
            Value sum = load(accumulator, i);
            if (!given)
              sum = div(sum, total);
            store(select(empty, real(0.0), sum), base, i);
          });
        }
        return SmallVector<Value>();
      };
      if (failed(forDomain(contract.getRows(), none, {}, childRow,
                           FirstAxis::whole(statement))))
        return failure();
    }

    // Column side: per (batch, column), the rows' weights with their final
    // normalisers.
    if (!contract.getColOutputs().empty()) {
      SmallVector<Attribute> sizes(contract.getRows().getValue());
      sizes.back() = contract.getCols();
      ArrayAttr columnDomain = ArrayAttr::get(contract.getContext(), sizes);
      SmallVector<Value> columnExtents = extentsOf(columnDomain);
      Value rows = rowExtents.back();
      Value normalisers = given ? get(given).data : lseData;
      unsigned firstColOutput =
          firstRowOutput + contract.getRowOutputs().size();
      Region none;
      auto column = [&](ValueRange columnIndices,
                        ValueRange) -> FailureOr<SmallVector<Value>> {
        zeroFill(columnAccumulators, colElementCounts);
        ValueRange batch = columnIndices.drop_back();
        Value col = columnIndices.back();
        bool failedPanel = false;
        forSteps(index(0), rows, index(kPanelSize), [&](Value start) {
          Value count = arith::MinSIOp::create(
              b, loc, index(kPanelSize),
              arith::SubIOp::create(b, loc, rows, start));
          auto indicesAt = [&](Value q) {
            SmallVector<Value> indices(batch);
            indices.push_back(arith::AddIOp::create(b, loc, start, q));
            indices.push_back(col);
            return indices;
          };
          forRange(count, [&](Value q) {
            SmallVector<Value> indices = indicesAt(q);
            FailureOr<Value> score = scaledScore(indices);
            if (failed(score)) {
              failedPanel = true;
              return;
            }
            Value normaliser = load(
                normalisers,
                positionOf(ArrayRef<Value>(indices).drop_back(), rowExtents));
            if (temperature)
              normaliser = div(normaliser, temperature);
            store(sub(*score, normaliser), columnPanel, q);
          });
          expInPlace(columnPanel, count);
          forRange(count, [&](Value q) {
            failedPanel |= failed(
                accumulateValues(colBlock, indicesAt(q), load(columnPanel, q),
                                 columnAccumulators, colElementCounts));
          });
        });
        if (failedPanel)
          return failure();
        Value columnPosition = positionOf(columnIndices, columnExtents);
        for (size_t j = 0; j < columnAccumulators.size(); ++j) {
          Value accumulator = columnAccumulators[j];
          Value elements = colElementCounts[j];
          Value base = offsetPointer(
              resultData[firstColOutput + j],
              arith::MulIOp::create(b, loc, columnPosition, elements));
          forRange(elements,
                   [&](Value i) { store(load(accumulator, i), base, i); });
        }
        return SmallVector<Value>();
      };
      if (failed(forDomain(columnDomain, none, {}, column,
                           FirstAxis::whole(statement))))
        return failure();
    }
    return success();
  };

  // Both sides in one pass over the rows, for contractions whose columns
  // fit one panel (an M-step's components): each row's weights are final
  // once its panel is done, so the column sums take them at once, into
  // partial sums per fixed chunk of rows that are added in chunk order
  // afterwards (the same bits on any number of threads). The scores are
  // evaluated once instead of twice.
  auto onePass = [&]() -> LogicalResult {
    constexpr int64_t kMinRowsPerChunk = 64, kMaxChunks = 64;
    Value rows = rowExtents.front();
    Value chunks, rowsPerChunk;
    SmallVector<Value> partials, partialSizes;
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(entryAnchor);
      Value rowCount = arith::MaxSIOp::create(
          b, loc, dimExpr(cast<DimExprAttr>(contract.getRows()[0])), index(0));
      Value columnCount =
          arith::MaxSIOp::create(b, loc, dimExpr(contract.getCols()), index(0));
      chunks =
          arith::CeilDivSIOp::create(b, loc, rowCount, index(kMinRowsPerChunk));
      chunks = arith::MinSIOp::create(b, loc, chunks, index(kMaxChunks));
      chunks = arith::MaxSIOp::create(b, loc, chunks, index(1));
      for (Value count : colElementCounts) {
        Value size = arith::MulIOp::create(b, loc, columnCount, count);
        partialSizes.push_back(size);
        partials.push_back(
            allocateElements(arith::MulIOp::create(b, loc, chunks, size)));
      }
    }
    rowsPerChunk = arith::CeilDivSIOp::create(b, loc, rows, chunks);
    Value fusedPanel = allocateElements(kPanelSize);
    SmallVector<Value> fusedAccumulators;
    for (Value count : rowElementCounts)
      fusedAccumulators.push_back(allocateElements(count));
    auto chunkLoop = scf::ForOp::create(b, loc, index(0), chunks, index(1));
    if (statement)
      markParallel(chunkLoop);
    bool failedRows = false;
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(chunkLoop.getBody()->getTerminator());
      Value chunk = chunkLoop.getInductionVar();
      SmallVector<Value> mine;
      for (auto [partial, size] : llvm::zip(partials, partialSizes)) {
        Value base =
            offsetPointer(partial, arith::MulIOp::create(b, loc, chunk, size));
        forLanes(size, [&](Value i, int lanes) {
          storeLanes(splat(real(0.0), lanes), base, i, lanes);
        });
        mine.push_back(base);
      }
      Value start = arith::MinSIOp::create(
          b, loc, arith::MulIOp::create(b, loc, chunk, rowsPerChunk), rows);
      Value end = arith::MinSIOp::create(
          b, loc, arith::AddIOp::create(b, loc, start, rowsPerChunk), rows);
      forSteps(start, end, index(1), [&](Value row) {
        Value largest =
            forRange(columns, {negativeInfinity}, [&](Value c, ValueRange acc) {
              FailureOr<Value> score = scaledScore({row, c});
              if (failed(score)) {
                failedRows = true;
                return SmallVector<Value>{acc[0]};
              }
              store(*score, fusedPanel, c);
              return SmallVector<Value>{maximum(acc[0], *score)};
            })[0];
        Value empty = cmp(arith::CmpFPredicate::OEQ, largest, negativeInfinity);
        Value shift = select(empty, real(0.0), largest);
        forRange(columns, [&](Value c) {
          store(sub(load(fusedPanel, c), shift), fusedPanel, c);
        });
        expInPlace(fusedPanel, columns);
        Value total =
            forRange(columns, {real(0.0)}, [&](Value c, ValueRange acc) {
              return SmallVector<Value>{add(acc[0], load(fusedPanel, c))};
            })[0];
        if (lseData) {
          Value lse = add(largest, log(total));
          if (temperature)
            lse = mul(lse, temperature);
          store(select(empty, real(0.0), lse), lseData, row);
        }
        zeroFill(fusedAccumulators, rowElementCounts);
        // A row with nothing admitted contributes nothing.
        auto admitted = scf::IfOp::create(
            b, loc, TypeRange{},
            arith::XOrIOp::create(b, loc, empty,
                                  arith::ConstantIntOp::create(b, loc, 1, 1)),
            /*withElse=*/false);
        {
          OpBuilder::InsertionGuard inRow(b);
          b.setInsertionPointToStart(admitted.thenBlock());
          Value inverse = div(real(1.0), total);
          forRange(columns, [&](Value c) {
            Value weight = mul(load(fusedPanel, c), inverse);
            failedRows |=
                failed(accumulateValues(rowBlock, {row, c}, weight,
                                        fusedAccumulators, rowElementCounts));
            SmallVector<Value> slots;
            for (auto [base, count] : llvm::zip(mine, colElementCounts))
              slots.push_back(
                  offsetPointer(base, arith::MulIOp::create(b, loc, c, count)));
            failedRows |= failed(accumulateValues(colBlock, {row, c}, weight,
                                                  slots, colElementCounts));
          });
        }
        for (size_t j = 0; j < fusedAccumulators.size(); ++j) {
          Value base = offsetPointer(
              resultData[firstRowOutput + j],
              arith::MulIOp::create(b, loc, row, rowElementCounts[j]));
          forLanes(rowElementCounts[j], [&](Value i, int lanes) {
            storeLanes(loadLanes(fusedAccumulators[j], i, lanes), base, i,
                       lanes);
          });
        }
      });
    }
    if (failedRows)
      return failure();
    // The column sums: the chunks' partial sums in chunk order.
    unsigned firstColOutput = firstRowOutput + contract.getRowOutputs().size();
    for (size_t j = 0; j < partials.size(); ++j) {
      Value out = resultData[firstColOutput + j];
      forLanes(partialSizes[j], [&](Value i, int lanes) {
        storeLanes(splat(real(0.0), lanes), out, i, lanes);
      });
      forRange(chunks, [&](Value chunk) {
        Value base = offsetPointer(
            partials[j], arith::MulIOp::create(b, loc, chunk, partialSizes[j]));
        addScaled(out, real(1.0), base, partialSizes[j]);
      });
    }
    return success();
  };

  ++loopDepth;
  LogicalResult done = success();
  if (!given && contract.getNumRowIndices() == 1 &&
      !contract.getColOutputs().empty()) {
    Value small = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ule,
                                        columns, index(kPanelSize));
    auto branch = scf::IfOp::create(b, loc, TypeRange{}, small,
                                    /*withElse=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(branch.thenBlock());
    done = onePass();
    b.setInsertionPointToStart(branch.elseBlock());
    if (succeeded(done))
      done = twoPasses();
  } else {
    done = twoPasses();
  }
  if (failed(done))
    return failure();
  --loopDepth;

  for (auto [result, data] : llvm::zip(contract.getResults(), resultData))
    arrays[result] = typeOf(result).isScalar()
                         ? Lowered{load(data, index(0)), Value()}
                         : Lowered{Value(), data};
  return success();
}
