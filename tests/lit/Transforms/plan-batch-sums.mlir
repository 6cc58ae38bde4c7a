// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy.model(energy-plan-batched-products))' | FileCheck %s

// Each head's rows times its matrix, read only summed over the heads (a
// multi-head attention's back-projection into the tokens): one product
// summed over the batch, read at the token, with no sum over the heads
// left in the loop.
// CHECK-LABEL: energy.model @heads
// CHECK:       %[[P:.*]] = batch_matmul %{{.*}}, %{{.*}} summed : !energy.array<H, N, Y>, !energy.array<H, Y, D> -> !energy.array<N, D>
// CHECK:       foreach (%[[N:.*]] : @N) {
// CHECK-NOT:     reduce
// CHECK:         %[[ROW:.*]] = extract %[[P]][%[[N]]] : !energy.array<N, D> -> !energy.array<D>
// CHECK:         accumulate %[[ROW]] into @x[%[[N]]]
energy.model @heads {
  dim @H
  dim @N
  dim @Y
  dim @D
  tensor @y : input [@H, @N, @Y]
  tensor @W : param [@H, @Y, @D]
  tensor @x : state [@N, @D]
  gradient @x {
    %y = read @y : !energy.array<H, N, Y>
    %w = read @W : !energy.array<H, Y, D>
    %p = batch_matmul %y, %w : !energy.array<H, N, Y>, !energy.array<H, Y, D> -> !energy.array<H, N, D>
    foreach (%n : @N) {
      %s = reduce sum (%h : @H) {
        %r = extract %p[%h, %n] : !energy.array<H, N, D> -> !energy.array<D>
        yield %r : !energy.array<D>
      } : !energy.array<D>
      accumulate %s into @x[%n] : !energy.array<D>
    }
  }
}

// -----

// A product of rows with no batch axis that only a sum over every row
// reads: Σ_n (y W)[n] is (Σ_n y[n]) W, the rows summed and one
// matrix-vector product, no N × D product.
// CHECK-LABEL: energy.model @rows
// CHECK:       %[[Y:.*]] = read @y : !energy.array<N, Y>
// CHECK:       %[[W:.*]] = read @W : !energy.array<Y, D>
// CHECK-NOT:   batch_matmul
// CHECK:       %[[S:.*]] = reduce sum (%[[N:.*]] : @N) {
// CHECK:         %[[R:.*]] = extract %[[Y]][%[[N]]] : !energy.array<N, Y> -> !energy.array<Y>
// CHECK:         yield %[[R]] : !energy.array<Y>
// CHECK:       %[[T:.*]] = transpose %[[W]] : !energy.array<Y, D>
// CHECK:       %[[V:.*]] = matmul %[[T]], %[[S]] : !energy.array<D, Y>, !energy.array<Y>
// CHECK:       accumulate %[[V]] into @x : !energy.array<D>
energy.model @rows {
  dim @N
  dim @Y
  dim @D
  tensor @y : input [@N, @Y]
  tensor @W : param [@Y, @D]
  tensor @x : state [@D]
  gradient @x {
    %y = read @y : !energy.array<N, Y>
    %w = read @W : !energy.array<Y, D>
    %p = batch_matmul %y, %w : !energy.array<N, Y>, !energy.array<Y, D> -> !energy.array<N, D>
    %s = reduce sum (%n : @N) {
      %r = extract %p[%n] : !energy.array<N, D> -> !energy.array<D>
      yield %r : !energy.array<D>
    } : !energy.array<D>
    accumulate %s into @x : !energy.array<D>
  }
}

// -----

// Each head's back-projection summed over the heads, read only summed over
// every token of every sequence (a bias's gradient after a layer norm):
// per head, the tokens' rows summed, times its matrix transposed as a
// matrix-vector product, added over the heads.
// CHECK-LABEL: energy.model @bias
// CHECK:       %[[U:.*]] = read @u : !energy.array<H, B, N, Y>
// CHECK:       %[[W:.*]] = read @W : !energy.array<H, Y, D>
// CHECK-NOT:   batch_matmul
// CHECK:       %[[S:.*]] = reduce sum (%[[H:.*]] : @H) {
// CHECK:         %[[ROWS:.*]] = reduce sum (%[[B:.*]] : @B, %[[N:.*]] : @N) {
// CHECK:           extract %[[U]][%[[H]], %[[B]], %[[N]]] : !energy.array<H, B, N, Y> -> !energy.array<Y>
// CHECK:         %[[M:.*]] = extract %[[W]][%[[H]]] : !energy.array<H, Y, D> -> !energy.array<Y, D>
// CHECK:         %[[T:.*]] = transpose %[[M]] : !energy.array<Y, D>
// CHECK:         %[[V:.*]] = matmul %[[T]], %[[ROWS]] : !energy.array<D, Y>, !energy.array<Y>
// CHECK:         yield %[[V]] : !energy.array<D>
// CHECK:       accumulate %[[S]] into @delta : !energy.array<D>
energy.model @bias {
  dim @H
  dim @B
  dim @N
  dim @Y
  dim @D
  tensor @u : input [@H, @B, @N, @Y]
  tensor @W : param [@H, @Y, @D]
  tensor @delta : param [@D]
  gradient @delta {
    %u = read @u : !energy.array<H, B, N, Y>
    %w = read @W : !energy.array<H, Y, D>
    %p = batch_matmul %u, %w summed {lhs_rows = 2 : i64} : !energy.array<H, B, N, Y>, !energy.array<H, Y, D> -> !energy.array<B, N, D>
    %s = reduce sum (%b : @B, %n : @N) {
      %r = extract %p[%b, %n] : !energy.array<B, N, D> -> !energy.array<D>
      yield %r : !energy.array<D>
    } : !energy.array<D>
    accumulate %s into @delta : !energy.array<D>
  }
}

// -----

// A sum over some of the rows only, or a product read elsewhere too: the
// product stays.
// CHECK-LABEL: energy.model @partial
// CHECK-COUNT-2: batch_matmul
energy.model @partial {
  dim @B
  dim @N
  dim @Y
  dim @D
  tensor @y : input [@B, @N, @Y]
  tensor @W : param [@Y, @D]
  tensor @x : state [@N, @D]
  tensor @z : state [@B, @N, @D]
  gradient @x {
    %y = read @y : !energy.array<B, N, Y>
    %w = read @W : !energy.array<Y, D>
    %p = batch_matmul %y, %w {lhs_rows = 2 : i64} : !energy.array<B, N, Y>, !energy.array<Y, D> -> !energy.array<B, N, D>
    foreach (%n : @N) {
      %s = reduce sum (%b : @B) {
        %r = extract %p[%b, %n] : !energy.array<B, N, D> -> !energy.array<D>
        yield %r : !energy.array<D>
      } : !energy.array<D>
      accumulate %s into @x[%n] : !energy.array<D>
    }
  }
  gradient @z {
    %y = read @y : !energy.array<B, N, Y>
    %w = read @W : !energy.array<Y, D>
    %p = batch_matmul %y, %w {lhs_rows = 2 : i64} : !energy.array<B, N, Y>, !energy.array<Y, D> -> !energy.array<B, N, D>
    %s = reduce sum (%b : @B, %n : @N) {
      %r = extract %p[%b, %n] : !energy.array<B, N, D> -> !energy.array<D>
      yield %r : !energy.array<D>
    } : !energy.array<D>
    accumulate %p into @z : !energy.array<B, N, D>
    foreach (%b : @B, %n : @N) {
      accumulate %s into @z[%b, %n] : !energy.array<D>
    }
  }
}

// -----

// A matrix per sequence (its slots mu[b]) times a vector per token of the
// sequence, in a loop over (b, j): one batch of GEMMs over the sequences,
// the tokens' rows times the slots transposed, read at (b, j).
// CHECK-LABEL: energy.model @slots
// CHECK:       %[[X:.*]] = read @x : !energy.array<B, N, D>
// CHECK:       %[[MU:.*]] = read @mu : !energy.array<B, S, D>
// CHECK:       %[[P:.*]] = batch_matmul %[[X]], %[[MU]] transposed : !energy.array<B, N, D>, !energy.array<B, S, D> -> !energy.array<B, N, S>
// CHECK:       foreach (%[[B:.*]] : @B, %[[J:.*]] : @N) {
// CHECK-NOT:     matmul
// CHECK:         %[[L:.*]] = extract %[[P]][%[[B]], %[[J]]] : !energy.array<B, N, S> -> !energy.array<S>
// CHECK:         accumulate %[[L]] into @l[%[[B]], %[[J]]]
energy.model @slots {
  dim @B
  dim @N
  dim @S
  dim @D
  tensor @x : input [@B, @N, @D]
  tensor @mu : input [@B, @S, @D]
  tensor @l : state [@B, @N, @S]
  gradient @l {
    foreach (%b : @B, %j : @N) {
      %m = read @mu[%b] : !energy.array<S, D>
      %v = read @x[%b, %j] : !energy.array<D>
      %p = matmul %m, %v : !energy.array<S, D>, !energy.array<D>
      accumulate %p into @l[%b, %j] : !energy.array<S>
    }
  }
}
