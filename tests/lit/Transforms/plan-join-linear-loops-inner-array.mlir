// RUN: energy-opt %s --pass-pipeline='builtin.module(energy.model(energy-plan-join-linear-loops))' | FileCheck %s

// Two loops add the same map (a division and a scale) of rows into @p's
// diagonal; the second loop's row is an element of an array it computes
// itself (a scalar times a vector from outside, at each position). That
// array is no whole array to add ahead of the loop: the first loop's row is
// computed in the second, at its start, and the rows added there.
// CHECK-LABEL: energy.model @inner_array
// CHECK:       gradient @p {
// CHECK-NOT:     foreach
// CHECK:         %[[V:[0-9]+]] = mul %{{.*}}, %{{.*}} : !energy.array<>, !energy.array<E>
// CHECK:         foreach (%[[I:.*]] : @E) {
// CHECK-NEXT:      %[[R1:[0-9]+]] = extract %[[V]][%[[I]]]
// CHECK:           %[[A:[0-9]+]] = mul %{{.*}}, %{{.*}} : !energy.array<>, !energy.array<E>
// CHECK-NEXT:      %[[R2:[0-9]+]] = extract %[[A]][%[[I]]]
// CHECK-NEXT:      %[[S:[0-9]+]] = add %[[R2]], %[[R1]]
// CHECK:           accumulate %{{.*}} into @p[%[[I]], %[[I]]]
// CHECK-NEXT:    }
// CHECK-NEXT:  }
energy.model @inner_array {
  dim @E
  dim @K
  tensor @p : param [@E, @E]
  tensor @s : state [@E]
  tensor @u : state [@E]
  tensor @c : state []
  gradient @p {
    %half = constant 5.000000e-01
    %s = read @s : !energy.array<E>
    %u = read @u : !energy.array<E>
    %c = read @c : !energy.array<>
    %v = mul %c, %s : !energy.array<>, !energy.array<E>
    %k = size @K : index
    %n = to_real %k : !energy.array<>
    %scale = mul %n, %half : !energy.array<>, !energy.array<>
    foreach (%i : @E) {
      %r = extract %v[%i] : !energy.array<E> -> !energy.array<>
      %d = div %r, %n : !energy.array<>, !energy.array<>
      %m = mul %d, %scale : !energy.array<>, !energy.array<>
      accumulate %m into @p[%i, %i] : !energy.array<>
    }
    foreach (%i : @E) {
      %w = mul %c, %u : !energy.array<>, !energy.array<E>
      %r = extract %w[%i] : !energy.array<E> -> !energy.array<>
      %d = div %r, %n : !energy.array<>, !energy.array<>
      %m = mul %d, %scale : !energy.array<>, !energy.array<>
      accumulate %m into @p[%i, %i] : !energy.array<>
    }
  }
}
