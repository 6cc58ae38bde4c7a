// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy.model(energy-plan-batched-products))' | FileCheck %s

// Each head's back-projection, weighed by a row's array that does not vary
// with the head (a table only a sum over its whole domain reads) and summed
// over heads and rows: the heads' summed product, read at the rows.
// CHECK-LABEL: energy.model @weighed_heads
// CHECK:         %[[P:[0-9]+]] = batch_matmul %{{[0-9]+}}, %{{[0-9]+}} summed {lhs_rows = 2 : i64} : !energy.array<H, B, T, Y>, !energy.array<H, Y, D> -> !energy.array<B, T, D>
// CHECK-NEXT:    %[[S:[0-9]+]] = reduce sum (%[[B:.*]] : @B, %[[I:.*]] : @T) {
// CHECK:           extract %[[P]][%[[B]], %[[I]]]
// CHECK:         accumulate %[[S]] into @g
// CHECK-NOT:     H, B, T, D
energy.model @weighed_heads {
  dim @B
  dim @T
  dim @H
  dim @Y
  dim @D
  tensor @g : param [@D]
  tensor @n : input [@B, @T, @D]
  tensor @a : input [@H, @B, @T, @Y]
  tensor @W : param [@H, @Y, @D]
  term @e {
    %0 = constant 0.0
    yield %0 : !energy.array<>
  }
  gradient @g {
    %a = read @a : !energy.array<H, B, T, Y>
    %w = read @W : !energy.array<H, Y, D>
    %p = batch_matmul %a, %w {lhs_rows = 2 : i64} : !energy.array<H, B, T, Y>, !energy.array<H, Y, D> -> !energy.array<H, B, T, D>
    %t = tabulate (%b : @B, %h : @H, %i : @T) {
      %n = read @n[%b, %i] : !energy.array<D>
      %r = extract %p[%h, %b, %i] : !energy.array<H, B, T, D> -> !energy.array<D>
      %m = mul %r, %n : !energy.array<D>, !energy.array<D>
      yield %m : !energy.array<D>
    } : !energy.array<B, H, T, D>
    %s = reduce sum (%b : @B, %h : @H, %i : @T) {
      %r = extract %t[%b, %h, %i] : !energy.array<B, H, T, D> -> !energy.array<D>
      yield %r : !energy.array<D>
    } : !energy.array<D>
    accumulate %s into @g : !energy.array<D>
  }
}

// -----

// The same as a sum over the heads of a sum over the rows; a value that
// varies with the head (a per-head weight) keeps the batch of products and
// the nest.
// CHECK-LABEL: energy.model @nested_heads
// CHECK:         batch_matmul %{{[0-9]+}}, %{{[0-9]+}} summed {lhs_rows = 2 : i64}
// CHECK:         reduce sum (%{{.*}} : @B, %{{.*}} : @T) {
// CHECK:         accumulate
// CHECK:         batch_matmul %{{[0-9]+}}, %{{[0-9]+}} {lhs_rows = 2 : i64} : !energy.array<H, B, T, Y>, !energy.array<H, Y, D> -> !energy.array<H, B, T, D>
// CHECK-NEXT:    reduce sum (%{{.*}} : @H) {
// CHECK:           reduce sum (%{{.*}} : @B, %{{.*}} : @T) {
energy.model @nested_heads {
  dim @B
  dim @T
  dim @H
  dim @Y
  dim @D
  tensor @g : param [@D]
  tensor @n : input [@B, @T, @D]
  tensor @v : input [@H, @D]
  tensor @a : input [@H, @B, @T, @Y]
  tensor @W : param [@H, @Y, @D]
  term @e {
    %0 = constant 0.0
    yield %0 : !energy.array<>
  }
  gradient @g {
    %a = read @a : !energy.array<H, B, T, Y>
    %w = read @W : !energy.array<H, Y, D>
    %p = batch_matmul %a, %w {lhs_rows = 2 : i64} : !energy.array<H, B, T, Y>, !energy.array<H, Y, D> -> !energy.array<H, B, T, D>
    %s = reduce sum (%h : @H) {
      %dead = read @W[%h] : !energy.array<Y, D>
      %inner = reduce sum (%b : @B, %i : @T) {
        %n = read @n[%b, %i] : !energy.array<D>
        %r = extract %p[%h, %b, %i] : !energy.array<H, B, T, D> -> !energy.array<D>
        %m = mul %r, %n : !energy.array<D>, !energy.array<D>
        yield %m : !energy.array<D>
      } : !energy.array<D>
      yield %inner : !energy.array<D>
    } : !energy.array<D>
    accumulate %s into @g : !energy.array<D>
    %q = batch_matmul %a, %w {lhs_rows = 2 : i64} : !energy.array<H, B, T, Y>, !energy.array<H, Y, D> -> !energy.array<H, B, T, D>
    %u = reduce sum (%h : @H) {
      %v = read @v[%h] : !energy.array<D>
      %inner = reduce sum (%b : @B, %i : @T) {
        %r = extract %q[%h, %b, %i] : !energy.array<H, B, T, D> -> !energy.array<D>
        %m = mul %r, %v : !energy.array<D>, !energy.array<D>
        yield %m : !energy.array<D>
      } : !energy.array<D>
      yield %inner : !energy.array<D>
    } : !energy.array<D>
    accumulate %u into @g : !energy.array<D>
  }
}

// -----

// A batch of rows times one matrix (no batch of matrices) read in a sum
// over the batch's rows nested in a sum over the batch: left as it is, the
// nest too (a sum over a row's pairs that a later step makes a contraction).
// CHECK-LABEL: energy.model @rows_batch
// CHECK:         batch_matmul %{{[0-9]+}}, %{{[0-9]+}} : !energy.array<B, T, D>, !energy.array<D, D> -> !energy.array<B, T, D>
// CHECK-NEXT:    reduce sum (%{{.*}} : @B, %{{.*}} : @T) {
// CHECK:           reduce sum (%{{.*}} : @T) {
energy.model @rows_batch {
  dim @B
  dim @T
  dim @D
  tensor @g : param [@D]
  tensor @n : input [@B, @T, @D]
  tensor @W : param [@D, @D]
  term @e {
    %0 = constant 0.0
    yield %0 : !energy.array<>
  }
  gradient @g {
    %n = read @n : !energy.array<B, T, D>
    %w = read @W : !energy.array<D, D>
    %p = batch_matmul %n, %w : !energy.array<B, T, D>, !energy.array<D, D> -> !energy.array<B, T, D>
    %s = reduce sum (%b : @B, %c : @T) {
      %inner = reduce sum (%q : @T) {
        %r = extract %p[%b, %q] : !energy.array<B, T, D> -> !energy.array<D>
        yield %r : !energy.array<D>
      } : !energy.array<D>
      yield %inner : !energy.array<D>
    } : !energy.array<D>
    accumulate %s into @g : !energy.array<D>
  }
}
