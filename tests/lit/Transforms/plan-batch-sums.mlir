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

// A product of rows with no batch axis: a sum over its rows is not a sum
// over a batch, and stays.
// CHECK-LABEL: energy.model @rows
// CHECK:       batch_matmul %{{.*}}, %{{.*}} : !energy.array<N, Y>, !energy.array<Y, D> -> !energy.array<N, D>
// CHECK:       reduce sum
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
