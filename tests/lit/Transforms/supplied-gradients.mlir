// RUN: energy-opt %s -split-input-file --energy-build-updates --energy-supplied-gradients | FileCheck %s

// One rank of a sharded run: the momentum step reads the gradient the
// ranks put together, @x.supplied_gradient (an input, zeros until the
// runtime sets it), instead of computing it; the rest of the step is as
// it was.

// CHECK-LABEL: energy.model @sharded_momentum
// CHECK: tensor @x.supplied_gradient : input [@N, @D] = zeros
// CHECK: update_program {
// CHECK-NOT: grad @x
// CHECK: %[[G:.*]] = read @x.supplied_gradient : !energy.array<N, D>
// CHECK: add %{{.*}}, %[[G]]
// CHECK: store %{{.*}} into @x.velocity
// CHECK: store %{{.*}} into @x :
energy.model @sharded_momentum {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @W : param [@D, @D]
  term @e {
    %0 = reduce sum (%i : @N) {
      %1 = constant 5.000000e-01
      %2 = read @W : !energy.array<D, D>
      %3 = read @x[%i] : !energy.array<D>
      %4 = matmul %2, %3 : !energy.array<D, D>, !energy.array<D>
      %5 = reduce_elements sqnorm %4 : !energy.array<D>
      %6 = mul %1, %5 : !energy.array<>, !energy.array<>
      yield %6 : !energy.array<>
    } : !energy.array<>
    yield %0 : !energy.array<>
  }
  dynamics steps 2 {
    update @x momentum(lr = 1.000000e-01, beta = 9.000000e-01)
  }
}
