// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy.model(energy-plan-share-products))' | FileCheck %s

// A product of a table of x's rows times -1 and a later product of x with
// the same matrix: the second moves ahead of the first, which becomes that
// product times -1.
// CHECK-LABEL: energy.model @scaled_rows
// CHECK:         %[[MINUS:[0-9]+]] = constant -1.0
// CHECK:         %[[X:[0-9]+]] = tabulate
// CHECK-NOT:     tabulate
// CHECK:         %[[P:[0-9]+]] = batch_matmul %[[X]], %{{[0-9]+}} transposed
// CHECK-NEXT:    %[[S:[0-9]+]] = mul %[[P]], %[[MINUS]]
// CHECK-NEXT:    accumulate %[[S]] into @x
// CHECK:         accumulate %[[P]] into @x
// CHECK-NOT:     batch_matmul
energy.model @scaled_rows {
  dim @B
  dim @T
  dim @D
  tensor @x : state [@B, @T, @D]
  tensor @W : param [@D, @D]
  term @e {
    %0 = constant 0.0
    yield %0 : !energy.array<>
  }
  gradient @x {
    %minus = constant -1.0
    %x = tabulate (%b : @B, %i : @T) {
      %r = read @x[%b, %i] : !energy.array<D>
      %n = rmsnorm %r : !energy.array<D>
      yield %n : !energy.array<D>
    } : !energy.array<B, T, D>
    %neg = tabulate (%b : @B, %i : @T) {
      %r = extract %x[%b, %i] : !energy.array<B, T, D> -> !energy.array<D>
      %m = mul %r, %minus : !energy.array<D>, !energy.array<>
      yield %m : !energy.array<D>
    } : !energy.array<B, T, D>
    %w = read @W : !energy.array<D, D>
    %p = batch_matmul %neg, %w transposed : !energy.array<B, T, D>, !energy.array<D, D> -> !energy.array<B, T, D>
    accumulate %p into @x : !energy.array<B, T, D>
    %w2 = read @W : !energy.array<D, D>
    %q = batch_matmul %x, %w2 transposed : !energy.array<B, T, D>, !energy.array<D, D> -> !energy.array<B, T, D>
    accumulate %q into @x : !energy.array<B, T, D>
  }
}

// -----

// Two products of the same heads' matrices with tables of the same rows,
// one scaled by -1 and laid out ahead of the other: the unscaled table moves
// ahead and one product serves both. A table of the heads' transposed
// matrices is read as the matrices transposed, so that a product with it
// is the product with the matrices.
// CHECK-LABEL: energy.model @heads
// CHECK:         %[[C:[0-9]+]] = constant 5.000000e-01
// CHECK:         %[[W:[0-9]+]] = read @W
// CHECK:         %[[U:[0-9]+]] = tabulate (%{{.*}} : @H, %{{.*}} : @B, %{{.*}} : @T) {
// CHECK-NEXT:      extract
// CHECK-NEXT:      yield
// CHECK:         %[[P:[0-9]+]] = batch_matmul %[[U]], %[[W]] summed {lhs_rows = 2 : i64}
// CHECK-NEXT:    %[[S:[0-9]+]] = mul %[[P]], %[[C]]
// CHECK-NEXT:    accumulate %[[S]] into @x
// CHECK-NEXT:    accumulate %[[P]] into @x
// CHECK:         accumulate %[[P]] into @x
// CHECK-NOT:     batch_matmul
energy.model @heads {
  dim @B
  dim @T
  dim @H
  dim @Y
  dim @D
  tensor @x : state [@B, @T, @D]
  tensor @a : input [@B, @H, @T, @Y]
  tensor @W : param [@H, @Y, @D]
  term @e {
    %0 = constant 0.0
    yield %0 : !energy.array<>
  }
  gradient @x {
    %half = constant 0.5
    %a = read @a : !energy.array<B, H, T, Y>
    %w = read @W : !energy.array<H, Y, D>
    %scaled = tabulate (%h : @H, %b : @B, %i : @T) {
      %r = extract %a[%b, %h, %i] : !energy.array<B, H, T, Y> -> !energy.array<Y>
      %m = mul %r, %half : !energy.array<Y>, !energy.array<>
      yield %m : !energy.array<Y>
    } : !energy.array<H, B, T, Y>
    %p = batch_matmul %scaled, %w summed {lhs_rows = 2 : i64} : !energy.array<H, B, T, Y>, !energy.array<H, Y, D> -> !energy.array<B, T, D>
    accumulate %p into @x : !energy.array<B, T, D>
    %u = tabulate (%h : @H, %b : @B, %i : @T) {
      %r = extract %a[%b, %h, %i] : !energy.array<B, H, T, Y> -> !energy.array<Y>
      yield %r : !energy.array<Y>
    } : !energy.array<H, B, T, Y>
    %q = batch_matmul %u, %w summed {lhs_rows = 2 : i64} : !energy.array<H, B, T, Y>, !energy.array<H, Y, D> -> !energy.array<B, T, D>
    accumulate %q into @x : !energy.array<B, T, D>
    %t = tabulate (%h : @H) {
      %m = read @W[%h] : !energy.array<Y, D>
      %tr = transpose %m : !energy.array<Y, D>
      yield %tr : !energy.array<D, Y>
    } : !energy.array<H, D, Y>
    %r = batch_matmul %u, %t transposed summed {lhs_rows = 2 : i64} : !energy.array<H, B, T, Y>, !energy.array<H, D, Y> -> !energy.array<B, T, D>
    accumulate %r into @x : !energy.array<B, T, D>
  }
}
