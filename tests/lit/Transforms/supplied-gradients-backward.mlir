// RUN: energy-opt %s --energy-exchanged-tensors="copies=z=z__all" --energy-build-updates --energy-join-gradients --energy-build-backward --energy-supplied-gradients="rows-dim=N copies=z=z__all" | FileCheck %s

// One rank of a sharded run with a loss: the rank holds its rows of z (N of
// N__all) and every rank's rows in the gathered copy z__all (set by the
// runtime, so `exchanged`); mu, a state without an axis of N, is held whole
// by every rank. The backward step's Hessian-vector product pairs the
// cotangents of the stepped states and of the copy (which the runtime
// gathers, @z__all.cotangent) with their gradients, in one term; the
// cotangents are stored in a part of their own that runs first, and what
// the rank's energy gives mu goes to @mu.rank_adjoint (the runtime sums it
// over the ranks into @mu.adjoint).

// CHECK: tensor @z__all : param [@N__all, @D] = zeros {exchanged}
// CHECK: tensor @mu.supplied_gradient : input [@S, @D] = zeros {exchanged}
// CHECK: tensor @z.supplied_gradient : input [@N, @D] = zeros {exchanged}
// CHECK: tensor @z__all.cotangent : state [@N__all, @D] = zeros {cotangent_of = @z__all}
// CHECK: tensor @mu.rank_adjoint : state [@S, @D] = zeros {cotangent_of = @mu}
// CHECK: backward_program seed {
// CHECK: } cotangents {
// CHECK-NOT: grad
// CHECK: store %{{.*}} into @mu.cotangent
// CHECK: store %{{.*}} into @z.cotangent
// CHECK-NEXT: } step {
// CHECK-NOT: into @mu.cotangent
// CHECK-NOT: into @z.cotangent
// CHECK: %[[MU:.*]] = grad @mu of @mu.z.z__all.backprop
// CHECK: %[[ZERO:.*]] = broadcast
// CHECK: store %[[MU]] into @mu.rank_adjoint
// CHECK: %[[COPY:.*]] = grad @z__all of @mu.z.z__all.backprop
// CHECK: %[[SUM:.*]] = add %{{.*}}, %[[COPY]]
// CHECK: add %[[ZERO]], %{{.*}} : !energy.array<S, D>
// CHECK: store %[[SUM]] into @z__all.adjoint
// CHECK: } finish {
// CHECK: term @mu.z.z__all.backprop auxiliary
// CHECK-DAG: read @z__all.cotangent
// CHECK-DAG: read @z.cotangent
// CHECK-DAG: read @mu.cotangent

energy.model @rank {
  dim @N
  dim @S
  dim @D
  dim @N__all
  tensor @x : input [@N, @D]
  tensor @W : param [@D, @D]
  tensor @mu0 : param [@S, @D]
  tensor @mu : state [@S, @D] = @mu0
  tensor @z : state [@N, @D]
  tensor @z__all : param [@N__all, @D] = zeros
  term @slots {
    %0 = reduce sum (%j : @N) {
      %2 = reduce lse (%i : @S) {
        %3 = read @W : !energy.array<D, D>
        %4 = read @x[%j] : !energy.array<D>
        %5 = matmul %3, %4 : !energy.array<D, D>, !energy.array<D>
        %6 = read @mu[%i] : !energy.array<D>
        %7 = dot %5, %6 : !energy.array<D>
        yield %7 : !energy.array<>
      } : !energy.array<>
      yield %2 : !energy.array<>
    } : !energy.array<>
    %1 = neg %0 : !energy.array<>
    yield %1 : !energy.array<>
  }
  term @pairs {
    %0 = reduce sum (%j : @N) {
      %2 = reduce lse (%a : @N__all) {
        %3 = read @z[%j] : !energy.array<D>
        %4 = read @z__all[%a] : !energy.array<D>
        %5 = dot %3, %4 : !energy.array<D>
        yield %5 : !energy.array<>
      } : !energy.array<>
      yield %2 : !energy.array<>
    } : !energy.array<>
    %1 = neg %0 : !energy.array<>
    yield %1 : !energy.array<>
  }
  term @l auxiliary loss {
    %0 = reduce sum (%j : @N) {
      %1 = read @z[%j] : !energy.array<D>
      %2 = reduce_elements sqnorm %1 : !energy.array<D>
      %3 = read @mu : !energy.array<S, D>
      %4 = reduce_elements sqnorm %3 : !energy.array<S, D>
      %5 = add %2, %4 : !energy.array<>, !energy.array<>
      yield %5 : !energy.array<>
    } : !energy.array<>
    yield %0 : !energy.array<>
  }
  dynamics steps 2 {
    update @mu gd(lr = 1.000000e-01)
    update @z gd(lr = 1.000000e-01)
  }
}
