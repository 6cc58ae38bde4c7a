// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy.model(energy-plan-factor-contract-outputs))' | FileCheck %s
// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy.model(energy-plan-factor-contract-outputs))' | FileCheck %s --check-prefix=MERGE

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

// -----

// Row outputs that one table only adds up, scaled by numbers known ahead of
// the contraction (a constant, a param read before it), are one output
// summing the scaled values; the output scaled by another output's element
// (not known ahead) stays an output of its own, added in the table.
// MERGE-LABEL: energy.model @scaled_sum
// MERGE:       %[[S:.*]] = read @s : !energy.array<>
// MERGE:       %[[C:.*]]:4 = softmax_contract generic
// MERGE:       } row_values {
// MERGE:         %[[U:.*]] = extract %{{.*}}[%{{.*}}] : !energy.array<N, D> -> !energy.array<D>
// MERGE:         %[[V:.*]] = mul %{{.*}}, %{{.*}} : !energy.array<D>, !energy.array<D>
// MERGE:         %[[K:.*]] = constant -1.000000e+00
// MERGE-NEXT:    %[[UK:.*]] = mul %[[U]], %[[K]] : !energy.array<D>, !energy.array<>
// MERGE-NEXT:    %[[VS:.*]] = div %[[V]], %[[S]] : !energy.array<D>, !energy.array<>
// MERGE-NEXT:    %[[W:.*]] = add %[[UK]], %[[VS]] : !energy.array<D>, !energy.array<D>
// MERGE-NEXT:    yield %{{.*}}, %{{.*}}, %[[W]] : !energy.array<>, !energy.array<D>, !energy.array<D>
// MERGE-NEXT:  } : !energy.array<N>, !energy.array<N>, !energy.array<N, D>, !energy.array<N, D>
// MERGE:       tabulate (%[[R:.*]] : @N) {
// MERGE-NEXT:    %[[M:.*]] = extract %[[C]]#3[%[[R]]] : !energy.array<N, D> -> !energy.array<D>
// MERGE:         %[[O:.*]] = extract %[[C]]#2[%[[R]]]
// MERGE:         add %[[M]], %{{.*}} : !energy.array<D>, !energy.array<D>
energy.model @scaled_sum {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @y : state [@N, @D]
  tensor @s : param []
  gradient @x {
    %s = read @s : !energy.array<>
    %q = read @x : !energy.array<N, D>
    %k = read @y : !energy.array<N, D>
    %a:5 = softmax_contract generic rows (%c : @N) cols (%p : @N) score {
      %1 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %3 = sub %1, %2 : !energy.array<D>, !energy.array<D>
      %4 = reduce_elements sqnorm %3 : !energy.array<D>
      yield %4 : !energy.array<>
    } row_values {
      %1 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %2 = mul %1, %1 : !energy.array<D>, !energy.array<D>
      %3 = reduce_elements sum %1 : !energy.array<D>
      %4 = sub %2, %1 : !energy.array<D>, !energy.array<D>
      yield %1, %3, %2, %4 : !energy.array<D>, !energy.array<>, !energy.array<D>, !energy.array<D>
    } : !energy.array<N>, !energy.array<N, D>, !energy.array<N>, !energy.array<N, D>, !energy.array<N, D>
    %t = tabulate (%r : @N) {
      %minus = constant -1.000000e+00
      %1 = extract %a#1[%r] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %a#3[%r] : !energy.array<N, D> -> !energy.array<D>
      %3 = extract %a#2[%r] : !energy.array<N> -> !energy.array<>
      %4 = extract %a#4[%r] : !energy.array<N, D> -> !energy.array<D>
      %5 = mul %1, %minus : !energy.array<D>, !energy.array<>
      %6 = div %2, %s : !energy.array<D>, !energy.array<>
      %7 = mul %4, %3 : !energy.array<D>, !energy.array<>
      %8 = add %5, %6 : !energy.array<D>, !energy.array<D>
      %9 = add %8, %7 : !energy.array<D>, !energy.array<D>
      yield %9 : !energy.array<D>
    } : !energy.array<N, D>
    accumulate %t into @x : !energy.array<N, D>
  }
}

// -----

// Duplicates on both sides: which results are the column side's is read
// before the row side drops its duplicate (the column side's duplicate
// then went to the wrong result, of another type).
// CHECK-LABEL: energy.model @both_sides
// CHECK:       %[[C:.*]]:4 = softmax_contract generic
// CHECK:       } row_values {
// CHECK:         yield %{{.*}} : !energy.array<D>
// CHECK-NEXT:  } col_values {
// CHECK:         yield %{{.*}}, %{{.*}} : !energy.array<>, !energy.array<D>
// CHECK-NEXT:  } : !energy.array<N>, !energy.array<N, D>, !energy.array<N>, !energy.array<N, D>
// CHECK:       accumulate %[[C]]#1 into @x
// CHECK:       accumulate %[[C]]#1 into @x
// CHECK:       accumulate %[[C]]#2 into @s
// CHECK:       accumulate %[[C]]#3 into @y
// CHECK:       accumulate %[[C]]#3 into @y
energy.model @both_sides {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @y : state [@N, @D]
  tensor @s : state [@N]
  gradient @x and [@y, @s] {
    %q = read @x : !energy.array<N, D>
    %k = read @y : !energy.array<N, D>
    %a:6 = softmax_contract generic rows (%c : @N) cols (%p : @N) score {
      %1 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %3 = dot %1, %2 : !energy.array<D>
      %4 = exp %3 : !energy.array<>
      yield %4 : !energy.array<>
    } row_values {
      %1 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      yield %1, %2 : !energy.array<D>, !energy.array<D>
    } col_values {
      %1 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = dot %1, %1 : !energy.array<D>
      %3 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      yield %2, %1, %3 : !energy.array<>, !energy.array<D>, !energy.array<D>
    } : !energy.array<N>, !energy.array<N, D>, !energy.array<N, D>, !energy.array<N>, !energy.array<N, D>, !energy.array<N, D>
    accumulate %a#1 into @x : !energy.array<N, D>
    accumulate %a#2 into @x : !energy.array<N, D>
    accumulate %a#3 into @s : !energy.array<N>
    accumulate %a#4 into @y : !energy.array<N, D>
    accumulate %a#5 into @y : !energy.array<N, D>
  }
}

// -----

// A side that yields a row of a table and a row of the table's negation
// (a cotangent table and −1 times it, tabulated apart) sums the row once:
// the second output is the first's times −1, after the contraction.
// CHECK-LABEL: energy.model @negated
// CHECK:         %[[M:.*]] = constant -1.000000e+00
// CHECK:         %[[C:.*]]:3 = softmax_contract generic
// CHECK:         } row_values {
// CHECK-NEXT:      %[[V:.*]] = extract %{{.*}}[%{{.*}}] : !energy.array<N, D> -> !energy.array<D>
// CHECK-NEXT:      %[[S:.*]] = reduce_elements sum %[[V]]
// CHECK:           yield %[[V]], %[[S]] : !energy.array<D>, !energy.array<>
// CHECK:         %[[N:.*]] = mul %[[C]]#1, %[[M]] : !energy.array<N, D>, !energy.array<>
// CHECK:         add %[[C]]#1, %[[N]]
energy.model @negated {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @y : state [@N, @D]
  gradient @x {
    %q = read @x : !energy.array<N, D>
    %k = read @y : !energy.array<N, D>
    %minus = constant -1.000000e+00
    %m = mul %k, %minus : !energy.array<N, D>, !energy.array<>
    %t = tabulate (%i : @N) {
      %r = extract %m[%i] : !energy.array<N, D> -> !energy.array<D>
      yield %r : !energy.array<D>
    } : !energy.array<N, D>
    %a:4 = softmax_contract generic rows (%c : @N) cols (%p : @N) score {
      %1 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %3 = dot %1, %2 : !energy.array<D>
      yield %3 : !energy.array<>
    } row_values {
      %1 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %2 = reduce_elements sum %1 : !energy.array<D>
      %3 = extract %t[%p] : !energy.array<N, D> -> !energy.array<D>
      yield %1, %2, %3 : !energy.array<D>, !energy.array<>, !energy.array<D>
    } : !energy.array<N>, !energy.array<N, D>, !energy.array<N>, !energy.array<N, D>
    %s = add %a#1, %a#3 : !energy.array<N, D>, !energy.array<N, D>
    accumulate %s into @x : !energy.array<N, D>
  }
}
