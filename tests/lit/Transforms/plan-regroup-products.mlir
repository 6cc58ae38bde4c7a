// RUN: energy-opt %s --pass-pipeline='builtin.module(energy.model(energy-plan-factor-contract-outputs))' | FileCheck %s
// RUN: energy-opt %s --pass-pipeline='builtin.module(energy.model(energy-plan-factor-contract-outputs,energy-plan-contract-tables))' | FileCheck %s --check-prefix=FORM

// A generic contraction whose sides yield products of a pair term s, a
// factor of each row m[c] and a table's row: regrouped by what the factors
// depend on. The row side's m[c] (its output position's) comes last, and is
// taken out of the sum (applied to the output after it); on the column side
// m[c] and q[c] (the summed rows') are one product, which the contraction's
// tables tabulate: the contraction is bilinear then (a term of the
// Hessian-vector product of a weighted lse, sum(c) m[c] * lse(a) ...).
// CHECK-LABEL: energy.model @row_factor
// CHECK:       %[[C:.*]]:3 = softmax_contract generic rows (%[[R:.*]] : @N) cols (%[[P:.*]] : @N) score {
// CHECK:       } row_values {
// CHECK:         %[[K:.*]] = extract %{{.*}}[%[[P]]] : !energy.array<N, D> -> !energy.array<D>
// CHECK:         %[[S:.*]] = add
// CHECK:         %[[SK:.*]] = mul %[[S]], %[[K]] : !energy.array<>, !energy.array<D>
// CHECK-NEXT:    yield %[[SK]] : !energy.array<D>
// CHECK:       } col_values {
// CHECK:         %[[M:.*]] = extract %{{.*}}[%[[R]]] : !energy.array<N> -> !energy.array<>
// CHECK-NEXT:    %[[MQ:.*]] = mul %[[M]], %{{.*}} : !energy.array<>, !energy.array<D>
// CHECK:         %[[SMQ:.*]] = mul %{{.*}}, %[[MQ]] : !energy.array<>, !energy.array<D>
// CHECK-NEXT:    yield %[[SMQ]] : !energy.array<D>
// CHECK:       %[[T:.*]] = tabulate (%[[I:.*]] : @N) {
// CHECK:         %[[O:.*]] = extract %[[C]]#1[%[[I]]] : !energy.array<N, D> -> !energy.array<D>
// CHECK:         %[[MI:.*]] = extract %{{.*}}[%[[I]]] : !energy.array<N> -> !energy.array<>
// CHECK:         mul %[[O]], %[[MI]] : !energy.array<D>, !energy.array<>
// FORM:        softmax_contract bilinear
energy.model @row_factor {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @m : input [@N]
  tensor @t : input [@N, @D]
  gradient @x {
    %q = read @x : !energy.array<N, D>
    %k = read @x : !energy.array<N, D>
    %t = read @t : !energy.array<N, D>
    %m = read @m : !energy.array<N>
    %a:3 = softmax_contract generic rows (%c : @N) cols (%p : @N) score {
      %1 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %3 = dot %1, %2 : !energy.array<D>
      yield %3 : !energy.array<>
    } row_values {
      %1 = extract %t[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %3 = dot %1, %2 : !energy.array<D>
      %4 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %5 = extract %t[%p] : !energy.array<N, D> -> !energy.array<D>
      %6 = dot %4, %5 : !energy.array<D>
      %7 = add %3, %6 : !energy.array<>, !energy.array<>
      %8 = extract %m[%c] : !energy.array<N> -> !energy.array<>
      %9 = mul %7, %8 : !energy.array<>, !energy.array<>
      %10 = mul %9, %2 : !energy.array<>, !energy.array<D>
      yield %10 : !energy.array<D>
    } col_values {
      %1 = extract %t[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %3 = dot %1, %2 : !energy.array<D>
      %4 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %5 = extract %t[%p] : !energy.array<N, D> -> !energy.array<D>
      %6 = dot %4, %5 : !energy.array<D>
      %7 = add %3, %6 : !energy.array<>, !energy.array<>
      %8 = extract %m[%c] : !energy.array<N> -> !energy.array<>
      %9 = mul %7, %8 : !energy.array<>, !energy.array<>
      %10 = mul %9, %4 : !energy.array<>, !energy.array<D>
      yield %10 : !energy.array<D>
    } : !energy.array<N>, !energy.array<N, D>, !energy.array<N, D>
    foreach (%c : @N) {
      %1 = extract %a#1[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %a#2[%c] : !energy.array<N, D> -> !energy.array<D>
      %3 = add %1, %2 : !energy.array<D>, !energy.array<D>
      accumulate %3 into @x[%c] : !energy.array<D>
    }
  }
}
