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

// A difference of scaled products added into a tensor: each product adds
// in place, its sign and scalar factors in its operand of fewer elements
// (the rows [N, D] rather than the result [D, D]); where both operands
// have more elements than the result, the scaled product is added as a
// value of its own.
// CHECK-LABEL: energy.model @scaled
// CHECK:       gradient @W {
// CHECK:         %[[C:.*]] = read @c : !energy.array<>
// CHECK:         %[[X:.*]] = read @x : !energy.array<N, D>
// CHECK:         %[[Y:.*]] = read @y : !energy.array<N, D>
// CHECK:         %[[XC:.*]] = mul %[[X]], %[[C]] : !energy.array<N, D>, !energy.array<>
// CHECK-NEXT:    %[[P:.*]] = batch_matmul %[[XC]] transposed, %[[Y]] summed
// CHECK-NEXT:    accumulate %[[P]] into @W : !energy.array<D, D>
// CHECK-NEXT:    %[[YN:.*]] = neg %[[Y]] : !energy.array<N, D>
// CHECK-NEXT:    %[[Q:.*]] = batch_matmul %[[YN]] transposed, %[[X]] summed
// CHECK-NEXT:    accumulate %[[Q]] into @W : !energy.array<D, D>
// CHECK:       gradient @v {
// CHECK:         %[[R:.*]] = batch_matmul %{{.*}}, %{{.*}} : !energy.array<M, N>
// CHECK-NEXT:    %[[RC:.*]] = mul %[[R]], %{{.*}} : !energy.array<M, M>, !energy.array<>
// CHECK-NEXT:    accumulate %[[RC]] into @v
// CHECK-NEXT:    %[[UU:.*]] = batch_matmul %{{.*}} transposed, %{{.*}} summed
// CHECK-NEXT:    accumulate %[[UU]] into @v
energy.model @scaled {
  dim @N = 8
  dim @D = 64
  dim @M = 4
  tensor @x : input [@N, @D]
  tensor @y : input [@N, @D]
  tensor @c : input []
  tensor @W : param [@D, @D]
  tensor @v : param [@M, @M]
  tensor @A : input [@M, @N]
  tensor @u : input [@N, @M]
  term @t {
    %0 = constant 0.000000e+00
    yield %0 : !energy.array<>
  }
  gradient @W {
    %c = read @c : !energy.array<>
    %x = read @x : !energy.array<N, D>
    %y = read @y : !energy.array<N, D>
    %p = batch_matmul %x transposed, %y summed : !energy.array<N, D>, !energy.array<N, D> -> !energy.array<D, D>
    %q = batch_matmul %y transposed, %x summed : !energy.array<N, D>, !energy.array<N, D> -> !energy.array<D, D>
    %pc = mul %p, %c : !energy.array<D, D>, !energy.array<>
    %d = sub %pc, %q : !energy.array<D, D>, !energy.array<D, D>
    accumulate %d into @W : !energy.array<D, D>
  }
  gradient @v {
    %c = read @c : !energy.array<>
    %a = read @A : !energy.array<M, N>
    %u = read @u : !energy.array<N, M>
    %r = batch_matmul %a, %u : !energy.array<M, N>, !energy.array<N, M> -> !energy.array<M, M>
    %rc = mul %c, %r : !energy.array<>, !energy.array<M, M>
    %z = batch_matmul %u transposed, %u summed : !energy.array<N, M>, !energy.array<N, M> -> !energy.array<M, M>
    %s = add %rc, %z : !energy.array<M, M>, !energy.array<M, M>
    accumulate %s into @v : !energy.array<M, M>
  }
}
