//===- GeneratedContractions.cpp - Softmax contractions as loops ----------===//
//
// A softmax contraction whose engine is `loops` runs the kernel's algorithm
// as generated code: per row, panels of columns whose scores are evaluated
// pair by pair into a buffer, an online softmax (the running maximum moves
// once per panel), the vector exp over the panel, and the weighted sums;
// the column side is a second pass, parallel over columns, that reuses each
// row's normaliser. Nothing of size rows × columns is stored.
//
//===----------------------------------------------------------------------===//

#include "ContractionLowering.h"
#include "energy/Codegen/ParallelLoops.h"

#include <limits>

using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::codegen;

namespace {
/// Columns (or rows, on the column side) whose scores a generic contraction
/// evaluates before exponentiating them together.
constexpr int64_t kPanelSize = 128;
} // namespace

LogicalResult
ContractionLowering::emitGenericContract(SoftmaxContractOp contract) {
  if (contract.getNumPairSums())
    return contract.emitOpError("sums column values at its pair bias's "
                                "index, which generated loops do not do "
                                "(the \"cpu\" engine does)");
  auto typeOf = [](Value value) { return cast<ArrayType>(value.getType()); };
  Value negativeInfinity = real(-std::numeric_limits<double>::infinity());
  SmallVector<Value> rowExtents = extentsOf(contract.getRows());
  Value columns =
      extentsOf(ArrayAttr::get(contract.getContext(), {contract.getCols()}))
          .front();
  Value temperature = contract.getTemperature()
                          ? get(contract.getTemperature()).scalar
                          : Value();
  bool statement = frame.loopDepth == 0;
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
  // Outer products that a block of values only yields: their weighted sums
  // are added into the accumulator directly, accumulator[r, c] += a[r] ·
  // (weight · b[c]), each lane block of weight · b computed once and the
  // rows inner, instead of each product being built as a matrix and then
  // added.
  auto yieldedOuterProducts = [](Block &block) {
    llvm::SmallPtrSet<Operation *, 4> outers;
    for (Value value : cast<YieldOp>(block.getTerminator()).getValues())
      if (auto outer = value.getDefiningOp<OuterOp>();
          outer && outer->getBlock() == &block && value.hasOneUse())
        outers.insert(outer);
    return outers;
  };
  auto addScaledOuter = [&](Value accumulator, Value weight, OuterOp outer) {
    Lowered lhs = get(outer.getLhs()), rhs = get(outer.getRhs());
    Value rows = elementCount(typeOf(outer.getLhs()));
    Value columns = elementCount(typeOf(outer.getRhs()));
    forLanes(columns, [&](Value c, int lanes) {
      Value scaled = mul(splat(weight, lanes), lanesAt(rhs, c, lanes));
      forRange(rows, [&](Value r) {
        Value row = offsetPointer(accumulator,
                                  arith::MulIOp::create(b, loc, r, columns));
        storeLanes(add(loadLanes(row, c, lanes),
                       mul(splat(elementAt(lhs, r), lanes), scaled)),
                   row, c, lanes);
      });
    });
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
    llvm::SmallPtrSet<Operation *, 4> outers = yieldedOuterProducts(block);
    FailureOr<SmallVector<Value>> values = emitBlock(block, indices, &outers);
    if (failed(values))
      return failure();
    ValueRange yielded = cast<YieldOp>(block.getTerminator()).getValues();
    for (size_t j = 0; j < into.size(); ++j) {
      Value value = (*values)[j], accumulator = into[j];
      if (auto outer = yielded[j].getDefiningOp<OuterOp>();
          outer && outers.contains(outer))
        addScaledOuter(accumulator, weight, outer);
      else if (typeOf(yielded[j]).isScalar())
        store(add(load(accumulator, index(0)), mul(weight, value)), accumulator,
              index(0));
      else
        addScaled(accumulator, weight, value, counts[j]);
    }
    return success();
  };
  auto zeroFill = [&](ArrayRef<Value> arrays, ArrayRef<Value> counts) {
    for (size_t j = 0; j < arrays.size(); ++j)
      forElements(counts[j], [&](Value i) { store(real(0.0), arrays[j], i); });
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
          // Scores of the panel, then their maximum in vectors: a running
          // maximum would chain every pair's score to the last one's.
          bool failedScores = false;
          forRange(count, [&](Value q) {
            FailureOr<Value> score = scaledScore(indicesAt(q));
            if (failed(score))
              failedScores = true;
            else
              store(*score, panel, q);
          });
          if (failedScores)
            return failure();
          Value panelLargest = maxLanes(count, [&](Value q, int lanes) {
            return loadLanes(panel, q, lanes);
          });
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
      b.setInsertionPoint(frame.entryAnchor);
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
    for (size_t j = 0; j < partials.size(); ++j)
      sumChunks(partials[j], chunks, partialSizes[j],
                resultData[firstColOutput + j]);
    return success();
  };

  ++frame.loopDepth;
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
  --frame.loopDepth;

  for (auto [result, data] : llvm::zip(contract.getResults(), resultData))
    state.arrays[result] = typeOf(result).isScalar()
                               ? Lowered{load(data, index(0)), Value()}
                               : Lowered{Value(), data};
  return success();
}
