// RUN: energy-opt %s --pass-pipeline='builtin.module(energy.model(energy-plan-output-tables))' | FileCheck %s

// An output over a domain becomes one without: its body the table of the
// old body over the domain, the same array.
// CHECK-LABEL: energy.model @rows
// CHECK:       output @norms [] : !energy.array<N> {
// CHECK-NEXT:    %[[T:.*]] = tabulate (%[[I:.*]] : @N) {
// CHECK-NEXT:      %[[R:.*]] = read @x[%[[I]]] : !energy.array<D>
// CHECK-NEXT:      %[[S:.*]] = dot %[[R]], %[[R]]
// CHECK-NEXT:      yield %[[S]] : !energy.array<>
// CHECK-NEXT:    } : !energy.array<N>
// CHECK-NEXT:    yield %[[T]] : !energy.array<N>
// CHECK-NEXT:  }
// An output without a domain stays as it is.
// CHECK:       output @total [] : !energy.array<> {
// CHECK-NEXT:    constant
// CHECK-NEXT:    yield
energy.model @rows {
  dim @N
  dim @D
  tensor @x : state [@N, @D] = zeros
  term @t {
    %0 = constant 0.000000e+00
    yield %0 : !energy.array<>
  }
  output @norms [%i : @N] : !energy.array<> {
    %0 = read @x[%i] : !energy.array<D>
    %1 = dot %0, %0 : !energy.array<D>
    yield %1 : !energy.array<>
  }
  output @total [] : !energy.array<> {
    %0 = constant 1.000000e+00
    yield %0 : !energy.array<>
  }
}
