// RUN: energy-opt %s -split-input-file --energy-join-gradients | FileCheck %s
// RUN: energy-opt %s -split-input-file --energy-join-gradients --energy-derive-gradients --cse --canonicalize | FileCheck %s --check-prefix=JOINT

// A stopping rule over two nodes asks for both gradients at the same values:
// one grad with two results, derived as one program whose reverse sweep
// accumulates into both (the energy is recomputed once, not twice).
// CHECK-LABEL: energy.model @stopping_rule
// CHECK:       until {
// CHECK:         %[[G:.*]]:2 = grad @a and [@b] : !energy.array<D>, !energy.array<D>
// CHECK-NOT:     grad
// CHECK:         reduce_elements maxabs %[[G]]#0
// CHECK:         reduce_elements maxabs %[[G]]#1
// JOINT-LABEL: energy.model @stopping_rule
// JOINT:       gradient @a and [@b] {
// JOINT-COUNT-1: read @a : !energy.array<D>
// JOINT-DAG:     accumulate %{{.*}} into @a : !energy.array<D>
// JOINT-DAG:     accumulate %{{.*}} into @b : !energy.array<D>
// JOINT:       }
energy.model @stopping_rule {
  energy.dim @D
  energy.tensor @a : state [@D]
  energy.tensor @b : state [@D]
  energy.term @e {
    %a = energy.read @a : !energy.array<D>
    %b = energy.read @b : !energy.array<D>
    %d = energy.sub %a, %b : !energy.array<D>, !energy.array<D>
    %s = energy.mul %d, %d : !energy.array<D>, !energy.array<D>
    %t = energy.reduce_elements sum %s : !energy.array<D>
    energy.yield %t : !energy.array<>
  }
  energy.dynamics steps 3 {
    energy.update @a gd(lr = 0.1)
  } until {
    %ga = energy.grad @a : !energy.array<D>
    %ma = energy.reduce_elements maxabs %ga : !energy.array<D>
    %gb = energy.grad @b : !energy.array<D>
    %mb = energy.reduce_elements maxabs %gb : !energy.array<D>
    %m = energy.maximum %ma, %mb : !energy.array<>, !energy.array<>
    %eps = energy.constant 1.0e-6
    %done = energy.cmp lt, %m, %eps : !energy.array<>
    energy.yield %done : i1
  }
}

// -----

// A store between two gradients changes what the second sees; gradients of
// different terms are different programs; a tensor asked for twice gets one
// result.
// CHECK-LABEL: energy.model @kept_apart
// CHECK:       update_program {
// CHECK:         grad @a : !energy.array<D>
// CHECK:         store
// CHECK:         %[[BC:.*]]:2 = grad @b and [@c] : !energy.array<D>, !energy.array<D>
// CHECK:         grad @a of @e : !energy.array<D>
// CHECK:         grad @c of @f : !energy.array<D>
// CHECK-NOT:     grad
// CHECK:         add %[[BC]]#1, %[[BC]]#1
energy.model @kept_apart {
  energy.dim @D
  energy.tensor @a : state [@D]
  energy.tensor @b : state [@D]
  energy.tensor @c : state [@D]
  energy.term @e {
    %a = energy.read @a : !energy.array<D>
    %b = energy.read @b : !energy.array<D>
    %c = energy.read @c : !energy.array<D>
    %ab = energy.mul %a, %b : !energy.array<D>, !energy.array<D>
    %abc = energy.mul %ab, %c : !energy.array<D>, !energy.array<D>
    %t = energy.reduce_elements sum %abc : !energy.array<D>
    energy.yield %t : !energy.array<>
  }
  energy.term @f {
    %c = energy.read @c : !energy.array<D>
    %cc = energy.mul %c, %c : !energy.array<D>, !energy.array<D>
    %t = energy.reduce_elements sum %cc : !energy.array<D>
    energy.yield %t : !energy.array<>
  }
  energy.update_program {
    %ga = energy.grad @a : !energy.array<D>
    energy.store %ga into @a : !energy.array<D>
    %gb = energy.grad @b : !energy.array<D>
    %ge = energy.grad @a of @e : !energy.array<D>
    %gf = energy.grad @c of @f : !energy.array<D>
    %gc1 = energy.grad @c : !energy.array<D>
    %gc2 = energy.grad @c : !energy.array<D>
    %s = energy.add %gb, %ge : !energy.array<D>, !energy.array<D>
    %s2 = energy.add %s, %gf : !energy.array<D>, !energy.array<D>
    %s3 = energy.add %gc1, %gc2 : !energy.array<D>, !energy.array<D>
    %s4 = energy.add %s2, %s3 : !energy.array<D>, !energy.array<D>
    energy.store %s4 into @b : !energy.array<D>
  }
}
