// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy.model(energy-plan-linear-maps))' | FileCheck %s

// An M-step's weighted second moment per slot, Σ_i Σ_j A[j, i] mu_i ⊗ mu_i:
// the slot's row is read inside the sum over tokens but does not vary with
// the token, so it is read ahead of that sum and its outer product, a map
// of the summed weights, applies once per slot: Σ_j A[j, i] then one outer
// product, N + D² work per slot, not N·D².
// CHECK-LABEL: energy.model @second_moment
// CHECK:       reduce sum (%[[I:.*]] : @S) {
// CHECK-NEXT:    %[[MU:.*]] = read @mu[%[[I]]]
// CHECK-NEXT:    %[[O:.*]] = outer %[[MU]], %[[MU]]
// CHECK-NEXT:    %[[W:.*]] = reduce sum (%[[J:.*]] : @N) {
// CHECK-NEXT:      %[[A:.*]] = read @A[%[[J]], %[[I]]]
// CHECK-NEXT:      yield %[[A]] : !energy.array<>
// CHECK-NEXT:    } : !energy.array<>
// CHECK-NEXT:    %[[S:.*]] = mul %[[W]], %[[O]]
// CHECK-NEXT:    yield %[[S]]
energy.model @second_moment {
  dim @N
  dim @S
  dim @D
  tensor @A : state [@N, @S]
  tensor @mu : state [@S, @D]
  tensor @C : state [@D, @D]
  update_program {
    %c = reduce sum (%i : @S) {
      %w = reduce sum (%j : @N) {
        %a = read @A[%j, %i] : !energy.array<>
        %m = read @mu[%i] : !energy.array<D>
        %o = outer %m, %m : !energy.array<D>, !energy.array<D>
        %s = mul %a, %o : !energy.array<>, !energy.array<D, D>
        yield %s : !energy.array<D, D>
      } : !energy.array<D, D>
      yield %w : !energy.array<D, D>
    } : !energy.array<D, D>
    store %c into @C : !energy.array<D, D>
  }
}

// -----

// A read at an offset from the outer index (the next slot's row, i + 1)
// runs only where the sum's predicate lets it: it stays in the sum.
// CHECK-LABEL: energy.model @offset_read
// CHECK:       reduce sum (%[[I:.*]] : @S) {
// CHECK-NEXT:    reduce sum (%{{.*}} : @N) where {
// CHECK:         } {
// CHECK:           read @mu[%[[I]] + 1]
energy.model @offset_read {
  dim @N
  dim @S
  dim @D
  tensor @A : state [@N, @S]
  tensor @mu : state [@S, @D]
  tensor @C : state [@D, @D]
  update_program {
    %c = reduce sum (%i : @S) {
      %w = reduce sum (%j : @N) where {
        %size = size @S : index
        %one = arith.constant 1 : index
        %next = arith.addi %i, %one : index
        %in = arith.cmpi slt, %next, %size : index
        yield %in : i1
      } {
        %a = read @A[%j, %i] : !energy.array<>
        %m = read @mu[%i + 1] : !energy.array<D>
        %o = outer %m, %m : !energy.array<D>, !energy.array<D>
        %s = mul %a, %o : !energy.array<>, !energy.array<D, D>
        yield %s : !energy.array<D, D>
      } : !energy.array<D, D>
      yield %w : !energy.array<D, D>
    } : !energy.array<D, D>
    store %c into @C : !energy.array<D, D>
  }
}
