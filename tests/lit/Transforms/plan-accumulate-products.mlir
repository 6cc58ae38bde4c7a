// RUN: energy-opt %s --pass-pipeline='builtin.module(energy.model(energy-plan-accumulate-products))' | FileCheck %s

// A loop that adds the rows of a product into the rows of a gradient, over
// all of them, adds the product into the whole gradient, right ahead of
// it (the GEMM adds into the gradient as it writes); a loop over part of
// the rows, or one that adds at other positions, stays.
// CHECK-LABEL: energy.model @rows
// CHECK:       gradient @x and [@y, @z] {
// CHECK:         %[[P:[0-9]+]] = batch_matmul %{{[0-9]+}}, %{{[0-9]+}} : !energy.array<N, D>, !energy.array<D, D> -> !energy.array<N, D>
// CHECK-NEXT:    accumulate %[[P]] into @x : !energy.array<N, D>
// CHECK:         foreach (%{{.*}} : @M) {
// CHECK:         foreach (%[[I:.*]] : @N) {
// CHECK-NEXT:      extract %{{.*}}[%[[I]]]
// CHECK-NEXT:      accumulate %{{.*}} into @y[%[[I]] + 1]
energy.model @rows {
  dim @N
  dim @M
  dim @D
  tensor @x : state [@N, @D] = zeros
  tensor @y : state [@N, @D] = zeros
  tensor @z : state [@M, @D] = zeros
  tensor @W : param [@D, @D]
  term @t {
    %0 = constant 0.000000e+00
    yield %0 : !energy.array<>
  }
  gradient @x and [@y, @z] {
    %w = read @W : !energy.array<D, D>
    %y = read @y : !energy.array<N, D>
    %p = batch_matmul %y, %w : !energy.array<N, D>, !energy.array<D, D> -> !energy.array<N, D>
    %q = batch_matmul %y, %w transposed : !energy.array<N, D>, !energy.array<D, D> -> !energy.array<N, D>
    foreach (%i : @N) {
      %0 = extract %p[%i] : !energy.array<N, D> -> !energy.array<D>
      accumulate %0 into @x[%i] : !energy.array<D>
    }
    foreach (%i : @M) {
      %0 = extract %q[%i] : !energy.array<N, D> -> !energy.array<D>
      accumulate %0 into @z[%i] : !energy.array<D>
    }
    foreach (%i : @N) {
      %0 = extract %q[%i] : !energy.array<N, D> -> !energy.array<D>
      accumulate %0 into @y[%i + 1] : !energy.array<D>
    }
  }
}
