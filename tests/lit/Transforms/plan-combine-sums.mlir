// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy.model(energy-plan-combine-products{sums=true}),cse)' | FileCheck %s

// A scale's gradient through a row normalisation adds Σ_i A_k[i] ∘ n[i] for
// the rows A_k = X_k W of each term: one sum, of the same map of the rows
// of (X_1 + X_2) W. What a loop adds of A_1 + A_2 is that same product;
// A_1 and A_2 are computed no more.
// CHECK-LABEL: energy.model @map_sums
// CHECK:         %[[W:.*]] = read @W
// CHECK-NEXT:    %[[P:.*]] = read @p
// CHECK-NEXT:    %[[Q:.*]] = read @q
// CHECK-NEXT:    %[[PQ:.*]] = add %[[P]], %[[Q]]
// CHECK-NEXT:    %[[S:.*]] = batch_matmul %[[PQ]], %[[W]]
// CHECK-NEXT:    accumulate %[[S]] into @x
// CHECK-NOT:     batch_matmul
// CHECK:         reduce sum
// CHECK-NEXT:      extract %[[S]]
// CHECK:         accumulate %{{.*}} into @g
// CHECK-NOT:     into @g
// CHECK:       }
energy.model @map_sums {
  dim @N
  dim @D
  tensor @x : state [@N, @D] = zeros
  tensor @p : input [@N, @D]
  tensor @q : input [@N, @D]
  tensor @n : input [@N, @D]
  tensor @g : param [@D]
  tensor @W : param [@D, @D]
  term @t {
    %0 = constant 0.000000e+00
    yield %0 : !energy.array<>
  }
  gradient @x and [@g] of @t {
    %w = read @W : !energy.array<D, D>
    %p = read @p : !energy.array<N, D>
    %q = read @q : !energy.array<N, D>
    %a = batch_matmul %p, %w : !energy.array<N, D>, !energy.array<D, D> -> !energy.array<N, D>
    %b = batch_matmul %q, %w : !energy.array<N, D>, !energy.array<D, D> -> !energy.array<N, D>
    %ga = reduce sum (%i : @N) {
      %r = extract %a[%i] : !energy.array<N, D> -> !energy.array<D>
      %m = read @n[%i] : !energy.array<D>
      %v = mul %r, %m : !energy.array<D>, !energy.array<D>
      yield %v : !energy.array<D>
    } : !energy.array<D>
    accumulate %ga into @g : !energy.array<D>
    %gb = reduce sum (%i : @N) {
      %m = read @n[%i] : !energy.array<D>
      %r = extract %b[%i] : !energy.array<N, D> -> !energy.array<D>
      %v = mul %m, %r : !energy.array<D>, !energy.array<D>
      yield %v : !energy.array<D>
    } : !energy.array<D>
    accumulate %gb into @g : !energy.array<D>
    %s = add %a, %b : !energy.array<N, D>, !energy.array<N, D>
    foreach (%i : @N) {
      %r = extract %s[%i] : !energy.array<N, D> -> !energy.array<D>
      accumulate %r into @x[%i] : !energy.array<D>
    }
  }
}

// -----

// Not joined: sums of different maps (a product by n in one, by m in the
// other).
// CHECK-LABEL: energy.model @other_maps
// CHECK-COUNT-2: reduce sum
// CHECK-NOT:     reduce sum
energy.model @other_maps {
  dim @N
  dim @D
  tensor @x : state [@N, @D] = zeros
  tensor @p : input [@N, @D]
  tensor @q : input [@N, @D]
  tensor @n : input [@N, @D]
  tensor @m : input [@N, @D]
  tensor @g : param [@D]
  tensor @W : param [@D, @D]
  term @t {
    %0 = constant 0.000000e+00
    yield %0 : !energy.array<>
  }
  gradient @x and [@g] of @t {
    %w = read @W : !energy.array<D, D>
    %p = read @p : !energy.array<N, D>
    %q = read @q : !energy.array<N, D>
    %a = batch_matmul %p, %w : !energy.array<N, D>, !energy.array<D, D> -> !energy.array<N, D>
    %b = batch_matmul %q, %w : !energy.array<N, D>, !energy.array<D, D> -> !energy.array<N, D>
    %ga = reduce sum (%i : @N) {
      %r = extract %a[%i] : !energy.array<N, D> -> !energy.array<D>
      %k = read @n[%i] : !energy.array<D>
      %v = mul %r, %k : !energy.array<D>, !energy.array<D>
      yield %v : !energy.array<D>
    } : !energy.array<D>
    accumulate %ga into @g : !energy.array<D>
    %gb = reduce sum (%i : @N) {
      %r = extract %b[%i] : !energy.array<N, D> -> !energy.array<D>
      %k = read @m[%i] : !energy.array<D>
      %v = mul %r, %k : !energy.array<D>, !energy.array<D>
      yield %v : !energy.array<D>
    } : !energy.array<D>
    accumulate %gb into @g : !energy.array<D>
  }
}
