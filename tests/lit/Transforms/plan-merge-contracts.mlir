// RUN: energy-opt %s --pass-pipeline='builtin.module(energy.model(energy-plan-merge-contracts))' | FileCheck %s

// Two column passes over the same weights, each given the same normaliser
// (the column sums a backward step's parent side left in two places), are
// one pass with both sums; a value both sum is summed once.
// CHECK-LABEL: energy.model @given
// CHECK:       %[[L:.*]] = read @l
// CHECK:       %[[C:.*]]:2 = softmax_contract {{.*}} lse(%[[L]] : !energy.array<N>) score {
// CHECK:       } col_values {
// CHECK:         yield %{{.*}}, %{{.*}} : !energy.array<D>, !energy.array<D>
// CHECK:       } : !energy.array<N, D>, !energy.array<N, D>
// CHECK-NOT:   softmax_contract
// CHECK:       extract %[[C]]#0
// CHECK-NEXT:  extract %[[C]]#1
// CHECK-NEXT:  extract %[[C]]#0
energy.model @given {
  dim @N
  dim @D
  tensor @x : state [@N, @D] = zeros
  tensor @q : input [@N, @D]
  tensor @l : input [@N]
  term @t {
    %0 = constant 0.000000e+00
    yield %0 : !energy.array<>
  }
  gradient @x {
    %q = read @q : !energy.array<N, D>
    %x = read @x : !energy.array<N, D>
    %l = read @l : !energy.array<N>
    %a = softmax_contract bilinear rows (%i : @N) cols (%j : @N) lse(%l : !energy.array<N>) score {
      %0 = extract %q[%i] : !energy.array<N, D> -> !energy.array<D>
      %1 = extract %x[%j] : !energy.array<N, D> -> !energy.array<D>
      %2 = dot %0, %1 : !energy.array<D>
      yield %2 : !energy.array<>
    } col_values {
      %0 = extract %q[%i] : !energy.array<N, D> -> !energy.array<D>
      yield %0 : !energy.array<D>
    } : !energy.array<N, D>
    %b:2 = softmax_contract bilinear rows (%i : @N) cols (%j : @N) lse(%l : !energy.array<N>) score {
      %0 = extract %q[%i] : !energy.array<N, D> -> !energy.array<D>
      %1 = extract %x[%j] : !energy.array<N, D> -> !energy.array<D>
      %2 = dot %0, %1 : !energy.array<D>
      yield %2 : !energy.array<>
    } col_values {
      %0 = extract %x[%i] : !energy.array<N, D> -> !energy.array<D>
      %1 = extract %q[%i] : !energy.array<N, D> -> !energy.array<D>
      yield %0, %1 : !energy.array<D>, !energy.array<D>
    } : !energy.array<N, D>, !energy.array<N, D>
    foreach (%i : @N) {
      %0 = extract %a[%i] : !energy.array<N, D> -> !energy.array<D>
      %1 = extract %b#0[%i] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %b#1[%i] : !energy.array<N, D> -> !energy.array<D>
      accumulate %0 into @x[%i] : !energy.array<D>
      accumulate %1 into @x[%i] : !energy.array<D>
      accumulate %2 into @x[%i] : !energy.array<D>
    }
  }
}

// Given different normalisers, the weights differ: two passes.
// CHECK-LABEL: energy.model @different
// CHECK-COUNT-2: softmax_contract
energy.model @different {
  dim @N
  dim @D
  tensor @x : state [@N, @D] = zeros
  tensor @q : input [@N, @D]
  tensor @l : input [@N]
  tensor @m : input [@N]
  term @t {
    %0 = constant 0.000000e+00
    yield %0 : !energy.array<>
  }
  gradient @x {
    %q = read @q : !energy.array<N, D>
    %x = read @x : !energy.array<N, D>
    %l = read @l : !energy.array<N>
    %m = read @m : !energy.array<N>
    %a = softmax_contract bilinear rows (%i : @N) cols (%j : @N) lse(%l : !energy.array<N>) score {
      %0 = extract %q[%i] : !energy.array<N, D> -> !energy.array<D>
      %1 = extract %x[%j] : !energy.array<N, D> -> !energy.array<D>
      %2 = dot %0, %1 : !energy.array<D>
      yield %2 : !energy.array<>
    } col_values {
      %0 = extract %q[%i] : !energy.array<N, D> -> !energy.array<D>
      yield %0 : !energy.array<D>
    } : !energy.array<N, D>
    %b = softmax_contract bilinear rows (%i : @N) cols (%j : @N) lse(%m : !energy.array<N>) score {
      %0 = extract %q[%i] : !energy.array<N, D> -> !energy.array<D>
      %1 = extract %x[%j] : !energy.array<N, D> -> !energy.array<D>
      %2 = dot %0, %1 : !energy.array<D>
      yield %2 : !energy.array<>
    } col_values {
      %0 = extract %x[%i] : !energy.array<N, D> -> !energy.array<D>
      yield %0 : !energy.array<D>
    } : !energy.array<N, D>
    foreach (%i : @N) {
      %0 = extract %a[%i] : !energy.array<N, D> -> !energy.array<D>
      %1 = extract %b[%i] : !energy.array<N, D> -> !energy.array<D>
      accumulate %0 into @x[%i] : !energy.array<D>
      accumulate %1 into @x[%i] : !energy.array<D>
    }
  }
}
