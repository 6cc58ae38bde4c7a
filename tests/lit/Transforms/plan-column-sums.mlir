// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy.model(energy-plan-loop-sums))' | FileCheck %s

// A mixture's weights, Σ_i R[i, k] / N for each component k: the column
// sums of R are one sum of its whole rows, in R's order, ahead of the
// table, which reads its element k.
// CHECK-LABEL: energy.model @weights
// CHECK:       %[[ROWS:.*]] = reduce sum (%[[I:.*]] : @N) {
// CHECK-NEXT:    %[[ROW:.*]] = read @R[%[[I]]] : !energy.array<K>
// CHECK-NEXT:    yield %[[ROW]]
// CHECK:       tabulate (%[[K:.*]] : @K) {
// CHECK-NOT:     reduce
// CHECK:         %[[C:.*]] = extract %[[ROWS]][%[[K]]]
// CHECK:         div %[[C]]
energy.model @weights {
  dim @N
  dim @K
  tensor @R : state [@N, @K]
  tensor @pi : state [@K]
  update_program {
    %n = size @N : index
    %count = to_real %n : !energy.array<>
    %w = tabulate (%k : @K) {
      %s = reduce sum (%i : @N) {
        %r = read @R[%i, %k] : !energy.array<>
        yield %r : !energy.array<>
      } : !energy.array<>
      %m = div %s, %count : !energy.array<>, !energy.array<>
      yield %m : !energy.array<>
    } : !energy.array<K>
    store %w into @pi : !energy.array<K>
  }
}

// -----

// A sum over the columns of a row (R[i, k] summed over k for each i) is a
// row's own sum already: left as it is.
// CHECK-LABEL: energy.model @rows
// CHECK:       tabulate (%[[I:.*]] : @N) {
// CHECK-NEXT:    reduce sum
energy.model @rows {
  dim @N
  dim @K
  tensor @R : state [@N, @K]
  tensor @t : state [@N]
  update_program {
    %w = tabulate (%i : @N) {
      %s = reduce sum (%k : @K) {
        %r = read @R[%i, %k] : !energy.array<>
        yield %r : !energy.array<>
      } : !energy.array<>
      yield %s : !energy.array<>
    } : !energy.array<N>
    store %w into @t : !energy.array<N>
  }
}
