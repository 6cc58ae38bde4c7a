// RUN: energy-opt %s --pass-pipeline='builtin.module(energy.model(energy-plan-table-order))' | FileCheck %s

// A parameter's adjoint Σ_b f(s[b, μ]) ⊗ σ[b]: the table of f over (μ, b),
// nested or flat, reads the scores s[b, μ] across their rows; the products
// take the table over (b, μ) transposed instead. A table that something
// other than a product reads, and one that reads along its rows, stay.
// CHECK-LABEL: energy.model @memory_adjoint
// CHECK:       gradient @xi {
// CHECK:         %[[S:[0-9]+]] = read @s
// CHECK:         %[[NESTED:[0-9]+]] = tabulate (%[[B:.*]] : @B) {
// CHECK-NEXT:      tabulate (%[[MU:.*]] : @M) {
// CHECK-NEXT:        extract %[[S]][%[[B]], %[[MU]]]
// CHECK:         } : !energy.array<B, M>
// CHECK-NEXT:    batch_matmul %[[NESTED]] transposed, %{{.*}} : !energy.array<B, M>, !energy.array<B, D> -> !energy.array<M, D>
// CHECK:         %[[FLAT:[0-9]+]] = tabulate (%[[B2:.*]] : @B, %[[MU2:.*]] : @M) {
// CHECK-NEXT:      extract %[[S]][%[[B2]], %[[MU2]]]
// CHECK:         } : !energy.array<B, M>
// CHECK-NEXT:    batch_matmul %{{.*}} transposed, %[[FLAT]] : !energy.array<B, D>, !energy.array<B, M> -> !energy.array<D, M>
// CHECK:         tabulate (%{{.*}} : @M) {
// CHECK-NEXT:      tabulate (%{{.*}} : @B) {
// CHECK:         } : !energy.array<M, B>
// CHECK-NEXT:    reduce_elements sum
// CHECK:         tabulate (%{{.*}} : @M, %{{.*}} : @B) {
// CHECK:         } : !energy.array<M, B>
// CHECK-NEXT:    batch_matmul
energy.model @memory_adjoint {
  dim @B
  dim @M
  dim @D
  tensor @s : input [@B, @M]
  tensor @t : input [@M, @B]
  tensor @sigma : input [@B, @D]
  tensor @xi : param [@M, @D]
  term @e {
    %0 = constant 0.000000e+00
    yield %0 : !energy.array<>
  }
  gradient @xi {
    %s = read @s : !energy.array<B, M>
    %t = read @t : !energy.array<M, B>
    %sigma = read @sigma : !energy.array<B, D>
    %nested = tabulate (%mu : @M) {
      %row = tabulate (%b : @B) {
        %v = extract %s[%b, %mu] : !energy.array<B, M> -> !energy.array<>
        %r = relu %v : !energy.array<>
        yield %r : !energy.array<>
      } : !energy.array<B>
      yield %row : !energy.array<B>
    } : !energy.array<M, B>
    %p = batch_matmul %nested, %sigma : !energy.array<M, B>, !energy.array<B, D> -> !energy.array<M, D>
    accumulate %p into @xi : !energy.array<M, D>
    %flat = tabulate (%mu : @M, %b : @B) {
      %v = extract %s[%b, %mu] : !energy.array<B, M> -> !energy.array<>
      %r = heaviside %v : !energy.array<>
      yield %r : !energy.array<>
    } : !energy.array<M, B>
    %q = batch_matmul %sigma transposed, %flat transposed : !energy.array<B, D>, !energy.array<M, B> -> !energy.array<D, M>
    %qt = transpose %q : !energy.array<D, M>
    accumulate %qt into @xi : !energy.array<M, D>
    %other = tabulate (%mu : @M) {
      %row = tabulate (%b : @B) {
        %v = extract %s[%b, %mu] : !energy.array<B, M> -> !energy.array<>
        yield %v : !energy.array<>
      } : !energy.array<B>
      yield %row : !energy.array<B>
    } : !energy.array<M, B>
    %total = reduce_elements sum %other : !energy.array<M, B>
    %along = tabulate (%mu : @M, %b : @B) {
      %v = extract %t[%mu, %b] : !energy.array<M, B> -> !energy.array<>
      yield %v : !energy.array<>
    } : !energy.array<M, B>
    %u = batch_matmul %along, %sigma : !energy.array<M, B>, !energy.array<B, D> -> !energy.array<M, D>
    accumulate %u into @xi : !energy.array<M, D>
  }
}

// The same table in two nestings, over (b, μ) and over b of rows over μ:
// the later one is the earlier one, which both products then read.
// CHECK-LABEL: energy.model @two_nestings
// CHECK:         %[[ROWS:[0-9]+]] = tabulate (%{{.*}} : @B) {
// CHECK-NEXT:      tabulate (%{{.*}} : @M) {
// CHECK:         } : !energy.array<B, M>
// CHECK-NEXT:    batch_matmul %[[ROWS]] transposed, %{{.*}} summed
// CHECK-NOT:     tabulate
// CHECK:         batch_matmul %[[ROWS]] transposed, %{{.*}} summed
energy.model @two_nestings {
  dim @B
  dim @M
  dim @D
  tensor @s : input [@B, @M]
  tensor @sigma : input [@B, @D]
  tensor @tau : input [@B, @D]
  tensor @xi : param [@M, @D]
  term @e {
    %0 = constant 0.000000e+00
    yield %0 : !energy.array<>
  }
  gradient @xi {
    %s = read @s : !energy.array<B, M>
    %sigma = read @sigma : !energy.array<B, D>
    %tau = read @tau : !energy.array<B, D>
    %rows = tabulate (%b : @B) {
      %row = tabulate (%mu : @M) {
        %v = extract %s[%b, %mu] : !energy.array<B, M> -> !energy.array<>
        %r = relu %v : !energy.array<>
        yield %r : !energy.array<>
      } : !energy.array<M>
      yield %row : !energy.array<M>
    } : !energy.array<B, M>
    %p = batch_matmul %rows transposed, %sigma summed : !energy.array<B, M>, !energy.array<B, D> -> !energy.array<M, D>
    accumulate %p into @xi : !energy.array<M, D>
    %flat = tabulate (%b : @B, %mu : @M) {
      %v = extract %s[%b, %mu] : !energy.array<B, M> -> !energy.array<>
      %r = relu %v : !energy.array<>
      yield %r : !energy.array<>
    } : !energy.array<B, M>
    %q = batch_matmul %flat transposed, %tau summed : !energy.array<B, M>, !energy.array<B, D> -> !energy.array<M, D>
    accumulate %q into @xi : !energy.array<M, D>
  }
}
