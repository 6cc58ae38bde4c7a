// RUN: energy-opt %s --split-input-file --energy-plan-slice-tables | FileCheck %s

// A let's slice inlined by differentiation, Σ_k embed(e_k into [k]), is the
// table of e_k over k.
// CHECK-LABEL: energy.model @slice
// CHECK:       %[[T:.*]] = tabulate (%[[K:.*]] : @Y) {
// CHECK-NEXT:    %[[W:.*]] = read @W[%[[K]]] : !energy.array<D>
// CHECK-NEXT:    %[[X:.*]] = read @x : !energy.array<D>
// CHECK-NEXT:    %[[E:.*]] = dot %[[W]], %[[X]]
// CHECK-NEXT:    yield %[[E]] : !energy.array<>
// CHECK-NEXT:  } : !energy.array<Y>
// CHECK-NOT:   embed
// CHECK:       accumulate %[[T]] into @q
energy.model @slice {
  energy.dim @Y
  energy.dim @D
  energy.tensor @x : state [@D]
  energy.tensor @W : param [@Y, @D]
  energy.tensor @q : state [@Y]
  energy.gradient @q {
    %s = energy.reduce sum (%k : @Y) {
      %w = energy.read @W[%k] : !energy.array<D>
      %x = energy.read @x : !energy.array<D>
      %e = energy.dot %w, %x : !energy.array<D>
      %v = energy.embed %e into [%k] : !energy.array<> -> !energy.array<Y>
      energy.yield %v : !energy.array<Y>
    } : !energy.array<Y>
    energy.accumulate %s into @q : !energy.array<Y>
  }
}

// -----

// Sums that are no slice stay: one under a predicate (a slice's sum has
// none), and one that embeds at another index than its own.
// CHECK-LABEL: energy.model @not_slices
// CHECK-NOT:   tabulate
// CHECK:       reduce sum (%{{.*}} : @Y) where
// CHECK:         embed
// CHECK:       reduce sum (%{{.*}} : @Y)
// CHECK:         embed
energy.model @not_slices {
  energy.dim @Y
  energy.tensor @x : state [@Y]
  energy.tensor @q : state [@Y]
  energy.gradient @q {
    %s = energy.reduce sum (%k : @Y) where {
      %c = arith.constant 0 : index
      %p = arith.cmpi sgt, %k, %c : index
      energy.yield %p : i1
    } {
      %e = energy.read @x[%k] : !energy.array<>
      %v = energy.embed %e into [%k] : !energy.array<> -> !energy.array<Y>
      energy.yield %v : !energy.array<Y>
    } : !energy.array<Y>
    %t = energy.reduce sum (%k : @Y) {
      %c = arith.constant 0 : index
      %e = energy.read @x[%k] : !energy.array<>
      %v = energy.embed %e into [%c] : !energy.array<> -> !energy.array<Y>
      energy.yield %v : !energy.array<Y>
    } : !energy.array<Y>
    %u = energy.add %s, %t : !energy.array<Y>, !energy.array<Y>
    energy.accumulate %u into @q : !energy.array<Y>
  }
}
