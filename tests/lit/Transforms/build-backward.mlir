// RUN: energy-opt %s -split-input-file --energy-build-updates --energy-build-backward | FileCheck %s
// The printed programs parse again, an empty `finish {}` included.
// RUN: energy-opt %s -split-input-file --energy-build-updates --energy-build-backward | energy-opt -split-input-file | FileCheck %s

// Momentum on x with a loss: every state and param gets an adjoint tensor;
// the seed is the loss's gradient (zeros where the loss does not read);
// the step reruns the forward step (each store preceded by a read of what
// it replaces), then reverses it: a store hands its adjoint to the stored
// value and is undone; the gradient's VJP stores the cotangent and takes
// the gradient of the auxiliary term <grad E, cotangent>. Here nothing reads
// the forward sweep's stores before the reverse sweep undoes them, so they
// go, and with them the step's own gradient: what is left is the reverse
// sweep.

// CHECK-LABEL: energy.model @descent
// CHECK-DAG: tensor @x.adjoint : state [@N] = zeros {adjoint_of = @x}
// CHECK-DAG: tensor @x.velocity.adjoint : state [@N] = zeros {adjoint_of = @x.velocity}
// CHECK-DAG: tensor @w.adjoint : state [@N] = zeros {adjoint_of = @w}
// CHECK-DAG: tensor @x.cotangent : state [@N] = zeros {cotangent_of = @x}
// CHECK: backward_program seed {
// CHECK:   %[[G:.*]] = grad @x of @fit
// CHECK:   store %[[G]] into @x.adjoint
// CHECK:   %[[Z:.*]] = broadcast
// CHECK:   store %[[Z]] into @x.velocity.adjoint
// CHECK: } step {
// CHECK-NOT: grad @x :
// CHECK-NOT: store %{{.*}} into @x :
// CHECK-NOT: store %{{.*}} into @x.velocity :
// CHECK:   %[[A:.*]] = read @x.adjoint
// CHECK:   store %{{.*}} into @x.cotangent
// CHECK-DAG:   grad @w of @x.backprop
// CHECK-DAG:   grad @x of @x.backprop
// CHECK:   store %{{.*}} into @x.adjoint
// CHECK:   store %{{.*}} into @x.velocity.adjoint
// CHECK:   store %{{.*}} into @w.adjoint
// CHECK: } finish {
// CHECK-NEXT: }
// CHECK: term @x.backprop auxiliary {
// CHECK:   read @x.cotangent
energy.model @descent {
  dim @N
  tensor @y : input [@N]
  tensor @x : state [@N]
  tensor @w : param [@N]
  term @e {
    %0 = reduce sum (%i : @N) {
      %1 = read @x[%i] : !energy.array<>
      %2 = read @w[%i] : !energy.array<>
      %3 = mul %1, %2 : !energy.array<>, !energy.array<>
      %4 = mul %3, %1 : !energy.array<>, !energy.array<>
      yield %4 : !energy.array<>
    } : !energy.array<>
    yield %0 : !energy.array<>
  }
  term @fit auxiliary loss {
    %0 = reduce sum (%i : @N) {
      %1 = read @x[%i] : !energy.array<>
      %2 = read @y[%i] : !energy.array<>
      %3 = sub %1, %2 : !energy.array<>, !energy.array<>
      %4 = mul %3, %3 : !energy.array<>, !energy.array<>
      yield %4 : !energy.array<>
    } : !energy.array<>
    yield %0 : !energy.array<>
  }
  dynamics steps 3 {
    update @x momentum(lr = 0.1)
  }
}

// -----

// A state initialised from a param hands its adjoint over in `finish`.

// CHECK-LABEL: energy.model @initialised
// CHECK: } finish {
// CHECK-NEXT:   %[[S:.*]] = read @x.adjoint
// CHECK-NEXT:   %[[T:.*]] = read @x0.adjoint
// CHECK-NEXT:   %[[SUM:.*]] = add %[[T]], %[[S]]
// CHECK-NEXT:   store %[[SUM]] into @x0.adjoint
energy.model @initialised {
  dim @N
  tensor @x0 : param [@N]
  tensor @x : state [@N] = @x0
  term @e {
    %0 = read @x : !energy.array<N>
    %1 = reduce_elements sqnorm %0 : !energy.array<N>
    yield %1 : !energy.array<>
  }
  term @fit auxiliary loss {
    %0 = read @x : !energy.array<N>
    %1 = reduce_elements sum %0 : !energy.array<N>
    yield %1 : !energy.array<>
  }
  dynamics steps 2 {
    update @x gd(lr = 0.1)
  }
}

// -----

// Without a loss nothing is built.

// CHECK-LABEL: energy.model @no_loss
// CHECK-NOT: backward_program
// CHECK-NOT: adjoint
energy.model @no_loss {
  dim @N
  tensor @x : state [@N]
  term @e {
    %0 = read @x : !energy.array<N>
    %1 = reduce_elements sqnorm %0 : !energy.array<N>
    yield %1 : !energy.array<>
  }
  dynamics steps 2 {
    update @x gd(lr = 0.1)
  }
}

// -----

// Heun's second stage is evaluated at the Euler point the step stores in
// x, and so is its vector-Jacobian product: that store is read (by the
// gradient of x.backprop) before the reverse sweep undoes it, so it stays
// with the first gradient it needs; the second gradient itself and the
// final store, which nothing reads, go.

// CHECK-LABEL: energy.model @heun
// CHECK: } step {
// CHECK:   grad @x :
// CHECK:   store %{{.*}} into @x :
// CHECK-NOT: grad @x :
// CHECK:   grad @x of @x.backprop
// CHECK:   store %{{.*}} into @x :
// CHECK:   grad @x of @x.backprop
// CHECK: } finish {
energy.model @heun {
  dim @N
  tensor @x : state [@N]
  tensor @w : param [@N]
  term @e {
    %0 = read @x : !energy.array<N>
    %1 = read @w : !energy.array<N>
    %2 = mul %0, %1 : !energy.array<N>, !energy.array<N>
    %3 = mul %2, %0 : !energy.array<N>, !energy.array<N>
    %4 = reduce_elements sum %3 : !energy.array<N>
    yield %4 : !energy.array<>
  }
  term @fit auxiliary loss {
    %0 = read @x : !energy.array<N>
    %1 = reduce_elements sum %0 : !energy.array<N>
    yield %1 : !energy.array<>
  }
  dynamics steps 2 {
    update @x ode(method = "heun", dt = 0.1)
  }
}
