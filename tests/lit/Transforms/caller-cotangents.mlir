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


// -----

// An output's cotangent is paired with the output's body over its domain:
// the loss reads the caller's Ō[i, c] beside each element.

// CHECK-LABEL: energy.model @readout
// CHECK: tensor @x.incoming : input [@N, @D] = zeros {incoming_of = @x}
// CHECK: tensor @logits.incoming : input [@N, @C] = zeros {incoming_of = @logits}
// CHECK-NOT: tensor @logits.incoming.adjoint
// CHECK: tensor @W.adjoint
// CHECK: term @incoming auxiliary loss {
// CHECK:   reduce sum (%{{.*}} : @N, %{{.*}} : @C) {
// CHECK:     %[[W:.*]] = read @W[
// CHECK:     %[[X:.*]] = read @x[
// CHECK:     %[[V:.*]] = dot %[[W]], %[[X]]
// CHECK:     %[[O:.*]] = read @logits.incoming[
// CHECK:     mul %[[V]], %[[O]]
energy.model @readout {
  dim @N
  dim @D
  dim @C
  tensor @W : param [@C, @D]
  tensor @x : state [@N, @D]
  term @e {
    %0 = read @x : !energy.array<N, D>
    %1 = reduce_elements sqnorm %0 : !energy.array<N, D>
    yield %1 : !energy.array<>
  }
  output @logits [%i : @N, %c : @C] : !energy.array<> {
    %0 = read @W[%c] : !energy.array<D>
    %1 = read @x[%i] : !energy.array<D>
    %2 = dot %0, %1 : !energy.array<D>
    yield %2 : !energy.array<>
  }
  dynamics steps 1 {
    update @x gd(lr = 1.000000e-01)
  }
}
