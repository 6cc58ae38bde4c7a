// RUN: energy-opt %s --pass-pipeline='builtin.module(energy.model(energy-plan-linear-maps))' | FileCheck %s

// Σ_(b,h,c) n[b, c] ⊙ W[h]ᵀ u[h, b, c]: the array factor n varies with the
// rows (b, c) alone, so the sum runs over the heads first and n comes out of
// that sum: n[b, c] ⊙ Σ_h W[h]ᵀ u[h, b, c], the heads' summed
// back-projection, not a table of every head's.
// CHECK-LABEL: gradient @g
// CHECK:         reduce sum (%[[B:.*]] : @B, %[[C:.*]] : @T) {
// CHECK:           %[[N:[0-9]+]] = read @n[%[[B]], %[[C]]]
// CHECK:           %[[HEADS:[0-9]+]] = reduce sum (%[[H:.*]] : @H) {
// CHECK:             transpose
// CHECK:             matmul
// CHECK:           mul %[[HEADS]], %[[N]]
energy.model @heads_first {
  dim @B
  dim @T
  dim @H
  dim @Y
  dim @D
  tensor @g : param [@D]
  tensor @n : input [@B, @T, @D]
  tensor @u : input [@H, @B, @T, @Y]
  tensor @W : param [@H, @Y, @D]
  term @e {
    %0 = constant 0.0
    yield %0 : !energy.array<>
  }
  gradient @g {
    %s = reduce sum (%b : @B, %h : @H, %c : @T) {
      %w = read @W[%h] : !energy.array<Y, D>
      %t = transpose %w : !energy.array<Y, D>
      %u = read @u[%h, %b, %c] : !energy.array<Y>
      %p = matmul %t, %u : !energy.array<D, Y>, !energy.array<Y>
      %n = read @n[%b, %c] : !energy.array<D>
      %m = mul %p, %n : !energy.array<D>, !energy.array<D>
      yield %m : !energy.array<D>
    } : !energy.array<D>
    accumulate %s into @g : !energy.array<D>
  }
}
