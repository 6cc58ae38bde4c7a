//===- Contractions.cpp - Tables and softmax contractions in kernels ------===//
//
// Lowers the kernel plan's ops. A table is a comprehension into scratch. A
// softmax contraction goes to its engine: the support library's blocked
// kernel (SoftmaxContract.h) for all positions of its batch indices, with
// the coefficients of its values' factors in its pair terms computed here
// from the factors' ops (second derivatives weigh their sums by the score's
// derivative in a direction, itself a dot product of table rows) and, for
// one whose scores a later contraction reuses (`reuses_scores`), room for
// the tiles it keeps, freed after that one's call; the GPU's mixture kernel
// for a quadratic one (QuadraticContract.h); generated loops
// (GeneratedContractions.cpp) for the others.
//
//===----------------------------------------------------------------------===//

#include "ContractionLowering.h"
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
  kPairBias,
  kPairBiasLength,
  kPairBiasRowCoefficient,
  kPairBiasColCoefficient,
  kPairBiasOffset,
  kNumPairProducts,
  kPairProducts,
  kNumPairSums,
  kSlotCount
};
static_assert(kSlotCount * 8 == sizeof(energy_softmax_contract_args),
              "one slot per field of energy_softmax_contract_args");
/// The slots of energy_quadratic_contract_args (QuadraticContract.h).
constexpr unsigned kQuadraticSlotCount = 12;
} // namespace

FailureOr<Lowered> ContractionLowering::emitTabulate(TabulateOp table) {
  Value data = arrayBuffer(table);
  if (failed(emitComprehension(table.getSizes(),
                               cast<ArrayType>(table.getBodyValue().getType()),
                               table.getBody().front(), data)))
    return failure();
  return Lowered{Value(), data};
}

LogicalResult
ContractionLowering::emitSoftmaxContract(SoftmaxContractOp contract) {
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
      auto inSource = [&](unsigned term) {
        return *findPairTerm(sourceForm->pairTerms, form->pairTerms[term]);
      };
      for (auto &[dot, term] : form->pairTermOfDot)
        term = inSource(term);
      for (auto &[first, second] : form->pairProducts)
        std::tie(first, second) =
            std::minmax(inSource(first), inSource(second));
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
ContractionLowering::emitBilinearContract(SoftmaxContractOp contract,
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
    state.arrays[result] = Lowered{Value(), allocate(typeOf(result))};
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
  // A coefficient or offset that involves dims is computed when the kernel
  // runs.
  auto valueOf = [&](const DimLinear &value) {
    Value result = index(value.constant);
    for (const auto &[size, coefficient] : value.sizeTerms)
      result = arith::AddIOp::create(
          b, loc, result,
          arith::MulIOp::create(b, loc, dimExpr(size), index(coefficient)));
    return result;
  };
  for (auto [i, constraint] : llvm::enumerate(*constraints)) {
    storeIn(constraintArray, 4 * i, valueOf(constraint.rowCoefficient));
    storeIn(constraintArray, 4 * i + 1, valueOf(constraint.colCoefficient));
    storeIn(constraintArray, 4 * i + 2, valueOf(constraint.offset));
    storeIn(constraintArray, 4 * i + 3,
            arith::ConstantIntOp::create(b, loc, b.getI64Type(),
                                         constraint.notEqual
                                             ? ENERGY_CONSTRAINT_NE
                                             : ENERGY_CONSTRAINT_GE)
                .getResult());
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
    forElements(elementCount(type),
                [&](Value i) { store(real(1.0), ones, i); });
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
  // The products of the score side by side: each table's rows, the row
  // side's times the product's scale.
  SmallVector<ScoreProduct> scoreProducts = {
      ScoreProduct{form.rowTable, form.colTable, form.scale}};
  llvm::append_range(scoreProducts, form.moreProducts);
  if (form.rowBias || form.colBias || scoreProducts.size() > 1) {
    // The products and the biases as features: rows [s₁ A₁, s₂ A₂, …, 1, R],
    // columns [B₁, B₂, …, C, 1] (each pair of bias columns only where its
    // bias is given), scale 1.
    int64_t biases = (form.rowBias ? 1 : 0) + (form.colBias ? 1 : 0);
    auto depthOf = [&](const ScoreProduct &product) {
      return dim(typeOf(product.rowTable).getShape().back().getValue());
    };
    auto totalDepth = [&] {
      Value total = index(biases);
      for (const ScoreProduct &product : scoreProducts)
        total = arith::AddIOp::create(b, loc, total, depthOf(product));
      return total;
    };
    Value widened = totalDepth();
    // Each product's width and the factor of its row table, ahead of the
    // copies' loops.
    SmallVector<Value> widths, factors;
    for (const ScoreProduct &product : scoreProducts) {
      widths.push_back(depthOf(product));
      factors.push_back(product.scale ? get(product.scale).scalar : Value());
    }
    // The copies' sizes, from the dims alone (scratch is allocated at the
    // kernel's entry).
    Value rowTotal, colTotal;
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(frame.entryAnchor);
      SmallVector<Value> extents = extentsOf(contract.getRows());
      Value positions = totalDepth();
      for (Value extent : ArrayRef<Value>(extents).drop_back())
        positions = arith::MulIOp::create(b, loc, positions, extent);
      rowTotal = arith::MulIOp::create(b, loc, positions, extents.back());
      colTotal = arith::MulIOp::create(
          b, loc, positions,
          extentsOf(ArrayAttr::get(contract.getContext(), {contract.getCols()}))
              .front());
    }
    auto widen = [&](Value count, Value total, bool rowSide) {
      Value features = allocateElements(total);
      forElements(count, [&](Value position) {
        Value next = arith::MulIOp::create(b, loc, position, widened);
        for (auto [product, width, scale] :
             llvm::zip(scoreProducts, widths, factors)) {
          Value source =
              get(rowSide ? product.rowTable : product.colTable).data;
          Value factor = rowSide ? scale : Value();
          Value from = arith::MulIOp::create(b, loc, position, width);
          Value to = next;
          forRange(width, [&](Value k) {
            Value element =
                load(source, arith::AddIOp::create(b, loc, from, k));
            store(factor ? mul(element, factor) : element, features,
                  arith::AddIOp::create(b, loc, to, k));
          });
          next = arith::AddIOp::create(b, loc, next, width);
        }
        auto put = [&](Value value) {
          store(value, features, next);
          next = arith::AddIOp::create(b, loc, next, index(1));
        };
        if (form.colBias)
          put(rowSide ? real(1.0) : load(get(form.colBias).data, position));
        if (form.rowBias)
          put(rowSide ? load(get(form.rowBias).data, position) : real(1.0));
      });
      return features;
    };
    Value rowPositions = arith::MulIOp::create(b, loc, batchCount, rows);
    Value colPositions = arith::MulIOp::create(b, loc, batchCount, columns);
    storeSlot(kRowFeatures, widen(rowPositions, rowTotal, true));
    storeSlot(kColFeatures, widen(colPositions, colTotal, false));
    storeSlot(kDepth, widened);
    storeSlot(
        kScale,
        arith::ConstantOp::create(b, loc, b.getF64FloatAttr(1.0)).getResult());
  } else {
    storeSlot(kRowFeatures, get(form.rowTable).data);
    storeSlot(kColFeatures, get(form.colTable).data);
  }
  // A normaliser nothing reads is not written (on cuDNN, one kernel less).
  Value lse = contract.getLse();
  storeSlot(kLse, lse && !lse.use_empty() ? get(lse).data : null);
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
  // The pair terms, their products, and each output's weights (κ, α₁ …
  // αₘ₊q): its weight at a pair is w · (κ + Σ_j α_j t_j), t_{m+p} the
  // product p of two terms.
  unsigned terms = form.pairTerms.size();
  unsigned products = form.pairProducts.size();
  Value pairProducts = allocateSlots(std::max(1u, 2 * products));
  for (auto [p, product] : llvm::enumerate(form.pairProducts)) {
    storeIn(pairProducts, 2 * p, index(product.first));
    storeIn(pairProducts, 2 * p + 1, index(product.second));
  }
  storeSlot(kNumPairProducts, index(products));
  storeSlot(kPairProducts, pairProducts);
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
    const unsigned stride = 1 + terms + products;
    Value weights = allocateSlots(std::max<size_t>(1, factors.size()) * stride);
    for (auto [k, factor] : llvm::enumerate(factors)) {
      FailureOr<SmallVector<Value>> coefficients =
          factorCoefficients(factor, form);
      if (failed(coefficients))
        return failure();
      for (auto [j, coefficient] : llvm::enumerate(*coefficients))
        storeIn(weights, k * stride + j, coefficient);
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
    reusedTiles = state.keptTiles.lookup(source);
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
    state.keptTiles[contract] = tiles;
  }
  storeSlot(kKeptTiles, tiles);
  storeSlot(kKeptTilesMode, tilesMode);
  // The pair bias, [batch rows, L], read at a·r + b·c + offset.
  if (form.pairBias) {
    storeSlot(kPairBias, get(form.pairBias).data);
    storeSlot(kPairBiasLength,
              dim(typeOf(form.pairBias).getShape().back().getValue()));
    storeSlot(kPairBiasRowCoefficient, valueOf(form.pairBiasRowCoefficient));
    storeSlot(kPairBiasColCoefficient, valueOf(form.pairBiasColCoefficient));
    storeSlot(kPairBiasOffset, valueOf(form.pairBiasOffset));
  } else {
    storeSlot(kPairBias, null);
    for (unsigned slot : {kPairBiasLength, kPairBiasRowCoefficient,
                          kPairBiasColCoefficient, kPairBiasOffset})
      storeSlot(slot, index(0));
  }
  // The last column outputs sum at the pair bias's index.
  storeSlot(kNumPairSums, index(contract.getNumPairSums()));
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
ContractionLowering::factorCoefficients(Value factor,
                                        const BilinearContract &form) {
  auto f64 = [&](double value) {
    return arith::ConstantOp::create(b, loc, b.getF64FloatAttr(value))
        .getResult();
  };
  // Coefficients (κ, the terms', the products') with null for a known 0, so
  // that a product's invariant operand is the one whose α are all null.
  const unsigned terms = form.pairTerms.size();
  const unsigned size = 1 + terms + form.pairProducts.size();
  auto sum = [&](Value lhs, Value rhs) -> Value {
    if (!lhs || !rhs)
      return lhs ? lhs : rhs;
    return arith::AddFOp::create(b, loc, lhs, rhs);
  };
  auto product = [&](Value lhs, Value rhs) -> Value {
    if (!lhs || !rhs)
      return Value();
    return arith::MulFOp::create(b, loc, lhs, rhs);
  };
  // The coefficients of the product of two affine forms: κ·κ', the terms'
  // κ·α' + α·κ', and each product's α_a·α'_b + α_b·α'_a.
  auto affineProduct = [&](ArrayRef<Value> lhs, ArrayRef<Value> rhs) {
    SmallVector<Value> result(size);
    result[0] = product(lhs[0], rhs[0]);
    for (unsigned i = 1; i <= terms; ++i)
      result[i] = sum(product(lhs[0], rhs[i]), product(lhs[i], rhs[0]));
    for (auto [p, pair] : llvm::enumerate(form.pairProducts)) {
      auto [first, second] = pair;
      Value coefficient = product(lhs[1 + first], rhs[1 + second]);
      if (first != second)
        coefficient =
            sum(coefficient, product(lhs[1 + second], rhs[1 + first]));
      result[1 + terms + p] = coefficient;
    }
    return result;
  };
  std::function<FailureOr<SmallVector<Value>>(Value)> coefficientsOf =
      [&](Value value) -> FailureOr<SmallVector<Value>> {
    SmallVector<Value> result(size);
    Operation *def = value.getDefiningOp();
    if (auto constant = dyn_cast_or_null<ConstantOp>(def)) {
      result[0] = f64(constant.getValue().convertToDouble());
      return result;
    }
    // Computed outside the contraction: κ alone.
    if (state.arrays.count(value) && get(value).scalar) {
      result[0] = toF64(get(value).scalar);
      return result;
    }
    if (!def)
      return emitError(value.getLoc(),
                       "is not a polynomial of degree at most 2 in the "
                       "contraction's pair terms, which its weights need");
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
    auto affine = [&](ArrayRef<Value> c) {
      return llvm::all_of(c.drop_front(1 + terms), [](Value v) { return !v; });
    };
    if (isa<MulOp>(def) && !invariant(operands[0]) && !invariant(operands[1])) {
      if (!affine(operands[0]) || !affine(operands[1]))
        return def->emitOpError("is of degree above 2 in the contraction's "
                                "pair terms, which its weights need");
      return affineProduct(operands[0], operands[1]);
    }
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
        result[j] = sum(lhs, rhs);
      } else if (isa<DivOp>(def) && invariant(operands[1])) {
        result[j] = binary(arith::DivFOp(), lhs, operands[1][0]);
      } else if (isa<MulOp>(def) && invariant(operands[1])) {
        result[j] = binary(arith::MulFOp(), lhs, operands[1][0]);
      } else if (isa<MulOp>(def) && invariant(operands[0])) {
        result[j] = binary(arith::MulFOp(), operands[0][0], operands[1][j]);
      } else {
        return def->emitOpError("is not a polynomial of degree at most 2 in "
                                "the contraction's pair terms, which its "
                                "weights need");
      }
    }
    return result;
  };
  if (!factor) {
    SmallVector<Value> plain(size, f64(0.0));
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

void ContractionLowering::reportContractStatus(Value code) {
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
ContractionLowering::emitQuadraticContract(SoftmaxContractOp contract,
                                           const QuadraticContract &form) {
  auto typeOf = [](Value value) { return cast<ArrayType>(value.getType()); };
  for (Value result : contract.getResults())
    state.arrays[result] = Lowered{Value(), allocate(typeOf(result))};
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

void codegen::populateContractionLowerings(KernelLoweringPatterns &patterns) {
  patterns.addArrayOps<ContractionLowering, TabulateOp>(
      &ContractionLowering::emitTabulate);
  patterns.addStatement(&ContractionLowering::emitSoftmaxContract);
}
