// RUN: energy-opt %s -split-input-file --energy-build-updates --energy-caller-cotangents --energy-build-backward | FileCheck %s
// The printed model parses again, the incoming_of mark included.
// RUN: energy-opt %s -split-input-file --energy-build-updates --energy-caller-cotangents | energy-opt -split-input-file | FileCheck %s --check-prefix=ROUND

// A layer of a larger program: the model's loss is replaced by <mu.incoming,
// mu> with mu.incoming an input marked as the caller's cotangent of mu, the
// seed is that loss's gradient (the cotangent itself), and the inputs x and
// t get adjoints too (the cotangent input does not); the momentum buffer,
// optimizer state, is no forward state and gets no cotangent input.

// CHECK-LABEL: energy.model @fit
// CHECK: tensor @mu.incoming : input [@D] = zeros {incoming_of = @mu}
// CHECK-NOT: tensor @mu.velocity.incoming
// CHECK-DAG: tensor @x.adjoint : state [@N, @D] = zeros {adjoint_of = @x}
// CHECK-DAG: tensor @t.adjoint : state [@D] = zeros {adjoint_of = @t}
// CHECK-DAG: tensor @W.adjoint : state [@D, @D] = zeros {adjoint_of = @W}
// CHECK-NOT: tensor @mu.incoming.adjoint
// CHECK-NOT: term @l
// CHECK: term @incoming auxiliary loss {
// CHECK-NEXT:   %[[C:.*]] = read @mu.incoming : !energy.array<D>
// CHECK-NEXT:   %[[MU:.*]] = read @mu : !energy.array<D>
// CHECK-NEXT:   %[[P:.*]] = mul %[[C]], %[[MU]]
// CHECK-NEXT:   %[[S:.*]] = reduce_elements sum %[[P]]
// CHECK-NEXT:   yield %[[S]]
// CHECK: backward_program seed {
// CHECK: grad @mu of @incoming
// CHECK: store %{{.*}} into @x.adjoint

// ROUND-LABEL: energy.model @fit
// ROUND: tensor @mu.incoming : input [@D] = zeros {incoming_of = @mu}
// ROUND: term @incoming auxiliary loss
energy.model @fit {
  dim @N
  dim @D
  tensor @x : input [@N, @D]
  tensor @t : input [@D]
  tensor @W : param [@D, @D]
  tensor @mu : state [@D]
  term @e {
    %0 = reduce sum (%i : @N) {
      %1 = constant 5.000000e-01
      %2 = read @mu : !energy.array<D>
      %3 = read @W : !energy.array<D, D>
      %4 = read @x[%i] : !energy.array<D>
      %5 = matmul %3, %4 : !energy.array<D, D>, !energy.array<D>
      %6 = sub %2, %5 : !energy.array<D>, !energy.array<D>
      %7 = reduce_elements sqnorm %6 : !energy.array<D>
      %8 = mul %1, %7 : !energy.array<>, !energy.array<>
      yield %8 : !energy.array<>
    } : !energy.array<>
    yield %0 : !energy.array<>
  }
  term @l auxiliary loss {
    %0 = read @mu : !energy.array<D>
    %1 = read @t : !energy.array<D>
    %2 = sub %0, %1 : !energy.array<D>, !energy.array<D>
    %3 = reduce_elements sqnorm %2 : !energy.array<D>
    yield %3 : !energy.array<>
  }
  dynamics steps 3 {
    update @mu momentum(lr = 1.000000e-01)
  }
}

