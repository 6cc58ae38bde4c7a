// RUN: energy-opt %s --pass-pipeline='builtin.module(energy.model(energy-plan-share-products))' | FileCheck %s

// Two tables over (b, i) whose rows compute the same (a row's rmsnorm
// backward, its ops in another order): the second reads the first's row,
// which makes it a copy of the first, and the product of the second with W
// is the product of the first, computed once. A table over (i, b) that
// computes the row at swapped indices reads the first one there; one of
// another value stays.
// CHECK-LABEL: gradient @x {
// CHECK:         %[[FIRST:[0-9]+]] = tabulate (%[[B:.*]] : @B, %[[I:.*]] : @T) {
// CHECK:         %[[P:[0-9]+]] = batch_matmul %[[FIRST]], %{{[0-9]+}} transposed
// CHECK-NEXT:    accumulate %[[P]]
// CHECK-NEXT:    accumulate %[[P]]
// CHECK-NEXT:    %[[SWAPPED:[0-9]+]] = tabulate (%[[I2:.*]] : @T, %[[B2:.*]] : @B) {
// CHECK-NEXT:      %[[ROW:[0-9]+]] = extract %[[FIRST]][%[[B2]], %[[I2]]] : !energy.array<B, T, D> -> !energy.array<D>
// CHECK-NEXT:      yield %[[ROW]]
// CHECK:         tabulate (%{{.*}} : @B, %{{.*}} : @T) {
// CHECK:           rmsnorm
// CHECK:           sub
energy.model @same_rows {
  dim @B
  dim @T
  dim @D
  tensor @x : state [@B, @T, @D]
  tensor @c : input [@B, @T, @D]
  tensor @W : param [@D, @D]
  term @e {
    %0 = constant 0.0
    yield %0 : !energy.array<>
  }
  gradient @x {
    %w = read @W : !energy.array<D, D>
    %first = tabulate (%b : @B, %i : @T) {
      %c = read @c[%b, %i] : !energy.array<D>
      %x = read @x[%b, %i] : !energy.array<D>
      %n = rmsnorm %x : !energy.array<D>
      %d = dot %c, %n : !energy.array<D>
      %m = mul %d, %n : !energy.array<>, !energy.array<D>
      %r = add %c, %m : !energy.array<D>, !energy.array<D>
      yield %r : !energy.array<D>
    } : !energy.array<B, T, D>
    %p = batch_matmul %first, %w transposed : !energy.array<B, T, D>, !energy.array<D, D> -> !energy.array<B, T, D>
    accumulate %p into @x : !energy.array<B, T, D>
    %second = tabulate (%b : @B, %i : @T) {
      %x = read @x[%b, %i] : !energy.array<D>
      %n = rmsnorm %x : !energy.array<D>
      %c = read @c[%b, %i] : !energy.array<D>
      %d = dot %n, %c : !energy.array<D>
      %m = mul %d, %n : !energy.array<>, !energy.array<D>
      %r = add %m, %c : !energy.array<D>, !energy.array<D>
      yield %r : !energy.array<D>
    } : !energy.array<B, T, D>
    %q = batch_matmul %second, %w transposed : !energy.array<B, T, D>, !energy.array<D, D> -> !energy.array<B, T, D>
    accumulate %q into @x : !energy.array<B, T, D>
    %swapped = tabulate (%i : @T, %b : @B) {
      %x = read @x[%b, %i] : !energy.array<D>
      %n = rmsnorm %x : !energy.array<D>
      %c = read @c[%b, %i] : !energy.array<D>
      %d = dot %n, %c : !energy.array<D>
      %m = mul %d, %n : !energy.array<>, !energy.array<D>
      %r = add %m, %c : !energy.array<D>, !energy.array<D>
      yield %r : !energy.array<D>
    } : !energy.array<T, B, D>
    %s = reduce sum parallel (%i : @T, %b : @B) {
      %row = extract %swapped[%i, %b] : !energy.array<T, B, D> -> !energy.array<D>
      yield %row : !energy.array<D>
    } : !energy.array<D>
    %other = tabulate (%b : @B, %i : @T) {
      %x = read @x[%b, %i] : !energy.array<D>
      %n = rmsnorm %x : !energy.array<D>
      %c = read @c[%b, %i] : !energy.array<D>
      %d = dot %n, %c : !energy.array<D>
      %m = mul %d, %n : !energy.array<>, !energy.array<D>
      %r = sub %m, %c : !energy.array<D>, !energy.array<D>
      yield %r : !energy.array<D>
    } : !energy.array<B, T, D>
    %o = batch_matmul %other, %w transposed : !energy.array<B, T, D>, !energy.array<D, D> -> !energy.array<B, T, D>
    accumulate %o into @x : !energy.array<B, T, D>
    foreach (%b : @B, %i : @T) {
      accumulate %s into @x[%b, %i] : !energy.array<D>
    }
  }
}
