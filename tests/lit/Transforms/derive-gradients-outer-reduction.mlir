// RUN: energy-opt %s --energy-derive-gradients=wrt=x | FileCheck %s

// A reduction computed outside another reduction's body and read inside it
// (as the directional terms of second derivatives do with each row's lse):
// its adjoint is summed over the loop in a reduction of its own, and it is
// not recomputed at every position, so the gradient stays linear in N:
// dE/dx_k = L + (sum_i x_i) softmax_k(x) for E = (lse_j x_j) sum_i x_i.

// CHECK-LABEL: gradient @x
// CHECK:      %[[L:.*]] = reduce lse
// CHECK:      constant 1.0
// CHECK-NEXT: %[[ADJ:.*]] = reduce sum
// CHECK-NOT:    reduce lse
// CHECK:        yield
// CHECK:      foreach
// CHECK-NOT:    reduce
// CHECK:        accumulate
// CHECK:      foreach
// CHECK:        sub %{{.*}}, %[[L]]
// CHECK:        exp
// CHECK:        mul %[[ADJ]]
// CHECK:        accumulate
energy.model @outer {
  dim @N
  tensor @x : state [@N]
  term @e {
    %l = reduce lse (%j : @N) {
      %xj = read @x[%j] : !energy.array<>
      yield %xj : !energy.array<>
    } : !energy.array<>
    %s = reduce sum (%i : @N) {
      %xi = read @x[%i] : !energy.array<>
      %p = mul %xi, %l : !energy.array<>, !energy.array<>
      yield %p : !energy.array<>
    } : !energy.array<>
    yield %s : !energy.array<>
  }
}
