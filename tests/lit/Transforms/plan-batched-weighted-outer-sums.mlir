// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy.model(energy-plan-batched-products))' | FileCheck %s

// An M-step's weighted second moment of the tokens, Σ_j r_j x_j ⊗ x_j, r_j
// a token's total attention (a sum of its own): one summed product of the
// table of r_j x_j and the tokens' rows, (r ∘ X)ᵀ X, not a rank-one update
// of the D × D sum per token.
// CHECK-LABEL: energy.model @weighted_moment
// CHECK:       %[[T:.*]] = tabulate (%[[J:.*]] : @N) {
// CHECK-NEXT:    %[[XJ:.*]] = read @x[%[[J]]]
// CHECK-NEXT:    %[[R:.*]] = reduce sum
// CHECK:         %[[W:.*]] = mul %[[R]], %[[XJ]]
// CHECK-NEXT:    yield %[[W]]
// CHECK:       %[[X:.*]] = read @x : !energy.array<N, D>
// CHECK-NEXT:  %[[M:.*]] = batch_matmul %[[T]] transposed, %[[X]] summed : !energy.array<N, D>, !energy.array<N, D> -> !energy.array<D, D>
// CHECK-NEXT:  store %[[M]] into @C
energy.model @weighted_moment {
  dim @N
  dim @S
  dim @D
  tensor @A : state [@N, @S]
  tensor @x : input [@N, @D]
  tensor @C : state [@D, @D]
  update_program {
    %c = reduce sum (%j : @N) {
      %xj = read @x[%j] : !energy.array<D>
      %o = outer %xj, %xj : !energy.array<D>, !energy.array<D>
      %r = reduce sum (%i : @S) {
        %a = read @A[%j, %i] : !energy.array<>
        yield %a : !energy.array<>
      } : !energy.array<>
      %s = mul %r, %o : !energy.array<>, !energy.array<D, D>
      yield %s : !energy.array<D, D>
    } : !energy.array<D, D>
    store %c into @C : !energy.array<D, D>
  }
}

// -----

// The same moment written over the pairs, Σ_(j,i) A[j, i] x_j ⊗ x_j: the
// weight varies with the slot, the rows do not, so a table of the weighted
// rows would be as large as the sum (N·S rows); left for the sum over the
// slots to come first (energy-plan-loop-sums, -linear-maps).
// CHECK-LABEL: energy.model @pair_weights
// CHECK-NOT:   batch_matmul
// CHECK:       reduce sum (%{{.*}} : @N, %{{.*}} : @S) {
// CHECK:         outer
energy.model @pair_weights {
  dim @N
  dim @S
  dim @D
  tensor @A : state [@N, @S]
  tensor @x : input [@N, @D]
  tensor @C : state [@D, @D]
  update_program {
    %c = reduce sum (%j : @N, %i : @S) {
      %a = read @A[%j, %i] : !energy.array<>
      %xj = read @x[%j] : !energy.array<D>
      %o = outer %xj, %xj : !energy.array<D>, !energy.array<D>
      %s = mul %a, %o : !energy.array<>, !energy.array<D, D>
      yield %s : !energy.array<D, D>
    } : !energy.array<D, D>
    store %c into @C : !energy.array<D, D>
  }
}
