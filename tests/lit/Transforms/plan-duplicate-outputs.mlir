// RUN: energy-opt %s --pass-pipeline='builtin.module(energy.model(energy-plan-factor-contract-outputs))' | FileCheck %s

// A contraction whose row side yields the same value twice (what two
// adjoints sum over the same weights) sums it once: the second output's
// readers read the first.
// CHECK-LABEL: energy.model @twice
// CHECK:       %[[C:.*]]:3 = softmax_contract generic rows (%[[R:.*]] : @N) cols (%[[P:.*]] : @N) score {
// CHECK:       } row_values {
// CHECK-NEXT:    %[[V:.*]] = extract %{{.*}}[%[[P]]] : !energy.array<N, D> -> !energy.array<D>
// CHECK-NEXT:    %[[S:.*]] = reduce_elements sum %[[V]] : !energy.array<D>
// CHECK-NEXT:    yield %[[V]], %[[S]] : !energy.array<D>, !energy.array<>
// CHECK-NEXT:  } : !energy.array<N>, !energy.array<N, D>, !energy.array<N>
// CHECK:       extract %[[C]]#1[
// CHECK:       extract %[[C]]#1[
// CHECK:       extract %[[C]]#2[
energy.model @twice {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @y : state [@N, @D]
  gradient @x {
    %q = read @x : !energy.array<N, D>
    %k = read @y : !energy.array<N, D>
    %a:4 = softmax_contract generic rows (%c : @N) cols (%p : @N) score {
      %1 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %3 = sub %1, %2 : !energy.array<D>, !energy.array<D>
      %4 = reduce_elements sqnorm %3 : !energy.array<D>
      yield %4 : !energy.array<>
    } row_values {
      %1 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %2 = reduce_elements sum %1 : !energy.array<D>
      yield %1, %2, %1 : !energy.array<D>, !energy.array<>, !energy.array<D>
    } : !energy.array<N>, !energy.array<N, D>, !energy.array<N>, !energy.array<N, D>
    foreach (%c : @N) {
      %1 = extract %a#1[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %a#3[%c] : !energy.array<N, D> -> !energy.array<D>
      %3 = extract %a#2[%c] : !energy.array<N> -> !energy.array<>
      %4 = add %1, %2 : !energy.array<D>, !energy.array<D>
      %5 = mul %4, %3 : !energy.array<D>, !energy.array<>
      accumulate %5 into @x[%c] : !energy.array<D>
    }
  }
}
