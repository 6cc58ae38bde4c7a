// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy.model(energy-plan-factor-contract-outputs))' | FileCheck %s

// A side that sums t·y and t·(Wk y) over the same weights, Wk not square
// (the keys A < D) and t a pair's number that reads the projected row (the
// backward step of a Hopfield layer with learned projections), sums t·y
// only: the other output is that sum times Wkᵀ after the contraction.
// CHECK-LABEL: energy.model @projected
// CHECK:       %[[WK:.*]] = read @Wk : !energy.array<A, D>
// CHECK:       %[[C:.*]]:3 = softmax_contract generic
// CHECK:       } row_values {
// CHECK:         %[[Y:.*]] = extract %{{.*}}[%{{.*}}] : !energy.array<N, D> -> !energy.array<D>
// CHECK:         %[[T:.*]] = mul %{{.*}}, %{{.*}} : !energy.array<>, !energy.array<>
// CHECK:         %[[TY:.*]] = mul %[[T]], %[[Y]] : !energy.array<>, !energy.array<D>
// CHECK-NEXT:    yield %[[TY]], %{{.*}} : !energy.array<D>, !energy.array<>
// CHECK-NEXT:  } : !energy.array<N>, !energy.array<N, D>, !energy.array<N>
// CHECK-NEXT:  %[[P:.*]] = batch_matmul %[[C]]#1, %[[WK]] transposed : !energy.array<N, D>, !energy.array<A, D> -> !energy.array<N, A>
// CHECK:       extract %[[P]][
// CHECK:       extract %[[C]]#1[
energy.model @projected {
  dim @N
  dim @D
  dim @A
  tensor @x : state [@N, @A]
  tensor @y : input [@N, @D]
  tensor @Wk : param [@A, @D]
  tensor @out : state [@N, @D]
  gradient @x and [@out] {
    %q = read @x : !energy.array<N, A>
    %y = read @y : !energy.array<N, D>
    %wk = read @Wk : !energy.array<A, D>
    %k = batch_matmul %y, %wk transposed : !energy.array<N, D>, !energy.array<A, D> -> !energy.array<N, A>
    %a:4 = softmax_contract generic rows (%c : @N) cols (%p : @N) score {
      %1 = extract %q[%c] : !energy.array<N, A> -> !energy.array<A>
      %2 = extract %k[%p] : !energy.array<N, A> -> !energy.array<A>
      %3 = dot %1, %2 : !energy.array<A>
      yield %3 : !energy.array<>
    } row_values {
      %1 = extract %q[%c] : !energy.array<N, A> -> !energy.array<A>
      %2 = extract %k[%p] : !energy.array<N, A> -> !energy.array<A>
      %3 = extract %y[%p] : !energy.array<N, D> -> !energy.array<D>
      %4 = dot %1, %2 : !energy.array<A>
      %5 = constant -1.0
      %6 = mul %4, %5 : !energy.array<>, !energy.array<>
      %7 = mul %6, %2 : !energy.array<>, !energy.array<A>
      %8 = mul %6, %3 : !energy.array<>, !energy.array<D>
      yield %7, %8, %4 : !energy.array<A>, !energy.array<D>, !energy.array<>
    } : !energy.array<N>, !energy.array<N, A>, !energy.array<N, D>, !energy.array<N>
    foreach (%c : @N) {
      %1 = extract %a#1[%c] : !energy.array<N, A> -> !energy.array<A>
      accumulate %1 into @x[%c] : !energy.array<A>
      %2 = extract %a#2[%c] : !energy.array<N, D> -> !energy.array<D>
      %3 = extract %a#3[%c] : !energy.array<N> -> !energy.array<>
      %4 = mul %2, %3 : !energy.array<D>, !energy.array<>
      accumulate %4 into @out[%c] : !energy.array<D>
    }
  }
}

// -----

// Not linear in the row: t·(Wk y) ⊙ (Wk y) against t·y ⊙ y, and a number
// divided by the row, stay outputs of their own.
// CHECK-LABEL: energy.model @not_linear
// CHECK:       softmax_contract generic
// CHECK:       } row_values {
// CHECK:         yield %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : !energy.array<A>, !energy.array<D>, !energy.array<A>, !energy.array<D>
// CHECK-NOT:   batch_matmul
energy.model @not_linear {
  dim @N
  dim @D
  dim @A
  tensor @x : state [@N, @A]
  tensor @y : input [@N, @D]
  tensor @Wk : param [@A, @D]
  tensor @out : state [@N, @D]
  gradient @x and [@out] {
    %q = read @x : !energy.array<N, A>
    %y = read @y : !energy.array<N, D>
    %wk = read @Wk : !energy.array<A, D>
    %k = batch_matmul %y, %wk transposed : !energy.array<N, D>, !energy.array<A, D> -> !energy.array<N, A>
    %a:5 = softmax_contract generic rows (%c : @N) cols (%p : @N) score {
      %1 = extract %q[%c] : !energy.array<N, A> -> !energy.array<A>
      %2 = extract %k[%p] : !energy.array<N, A> -> !energy.array<A>
      %3 = dot %1, %2 : !energy.array<A>
      yield %3 : !energy.array<>
    } row_values {
      %1 = extract %q[%c] : !energy.array<N, A> -> !energy.array<A>
      %2 = extract %k[%p] : !energy.array<N, A> -> !energy.array<A>
      %3 = extract %y[%p] : !energy.array<N, D> -> !energy.array<D>
      %4 = dot %1, %2 : !energy.array<A>
      %5 = mul %2, %2 : !energy.array<A>, !energy.array<A>
      %6 = mul %3, %3 : !energy.array<D>, !energy.array<D>
      %7 = div %4, %2 : !energy.array<>, !energy.array<A>
      %8 = div %4, %3 : !energy.array<>, !energy.array<D>
      yield %5, %6, %7, %8 : !energy.array<A>, !energy.array<D>, !energy.array<A>, !energy.array<D>
    } : !energy.array<N>, !energy.array<N, A>, !energy.array<N, D>, !energy.array<N, A>, !energy.array<N, D>
    foreach (%c : @N) {
      %1 = extract %a#1[%c] : !energy.array<N, A> -> !energy.array<A>
      %2 = extract %a#3[%c] : !energy.array<N, A> -> !energy.array<A>
      %3 = add %1, %2 : !energy.array<A>, !energy.array<A>
      accumulate %3 into @x[%c] : !energy.array<A>
      %4 = extract %a#2[%c] : !energy.array<N, D> -> !energy.array<D>
      %5 = extract %a#4[%c] : !energy.array<N, D> -> !energy.array<D>
      %6 = add %4, %5 : !energy.array<D>, !energy.array<D>
      accumulate %6 into @out[%c] : !energy.array<D>
    }
  }
}
