// RUN: energy-opt %s --energy-plan-loop-sums | FileCheck %s

// A loop over the keys j inside a loop over the rows (b, i) that adds, at
// the key's slot [b, j], a value weighted by the row's softmax: a loop over
// the slots (b, j), ahead of the row loop, of sums over the rows i under the
// inner loop's predicate, each recomputing what the row loop's body gives it
// (the row's normaliser and query): a second derivative's column side,
// which energy-plan-softmax-contracts then takes as a contraction's parent
// side.
// CHECK-LABEL: energy.model @columns
// CHECK:       foreach (%[[B:.*]] : @B, %[[J:.*]] : @N) {
// CHECK:         %[[S:.*]] = reduce sum (%[[I:.*]] : @N) where {
// CHECK:           arith.cmpi sle, %[[J]], %[[I]]
// CHECK:         } {
// CHECK:           read @q[%[[B]], %[[I]]]
// CHECK:           reduce lse
// CHECK:           exp
// CHECK:         } : !energy.array<Y>
// CHECK-NEXT:    accumulate %[[S]] into @k[%[[B]], %[[J]]] : !energy.array<Y>
// CHECK-NEXT:  }
// CHECK:       foreach (%[[B2:.*]] : @B, %[[I2:.*]] : @N) {
// CHECK:         reduce lse
// CHECK:         accumulate {{.*}} into @q[%[[B2]], %[[I2]]]
// CHECK-NOT:     into @k
energy.model @columns {
  energy.dim @B
  energy.dim @N
  energy.dim @Y
  energy.tensor @q : input [@B, @N, @Y]
  energy.tensor @k : input [@B, @N, @Y]
  energy.gradient @q and [@k] {
    energy.foreach (%b : @B, %i : @N) {
      %qi = energy.read @q[%b, %i] : !energy.array<Y>
      %l = energy.reduce lse (%j : @N) where {
        %p = arith.cmpi sle, %j, %i : index
        energy.yield %p : i1
      } {
        %kj = energy.read @k[%b, %j] : !energy.array<Y>
        %s = energy.dot %qi, %kj : !energy.array<Y>
        energy.yield %s : !energy.array<>
      } : !energy.array<>
      energy.accumulate %qi into @q[%b, %i] : !energy.array<Y>
      energy.foreach (%j : @N) where {
        %p = arith.cmpi sle, %j, %i : index
        energy.yield %p : i1
      } {
        %kj = energy.read @k[%b, %j] : !energy.array<Y>
        %s = energy.dot %qi, %kj : !energy.array<Y>
        %d = energy.sub %s, %l : !energy.array<>, !energy.array<>
        %w = energy.exp %d : !energy.array<>
        %v = energy.mul %w, %qi : !energy.array<>, !energy.array<Y>
        energy.accumulate %v into @k[%b, %j] : !energy.array<Y>
      }
    }
  }
}

// What a loop over columns adds without a softmax stays a loop over pairs.
// CHECK-LABEL: energy.model @unweighted
// CHECK:       foreach (%{{.*}} : @B, %{{.*}} : @N) {
// CHECK:         foreach (%{{.*}} : @N) {
// CHECK:           accumulate
// CHECK:         }
// CHECK:       }
energy.model @unweighted {
  energy.dim @B
  energy.dim @N
  energy.dim @Y
  energy.tensor @q : input [@B, @N, @Y]
  energy.tensor @k : input [@B, @N, @Y]
  energy.gradient @k {
    energy.foreach (%b : @B, %i : @N) {
      %qi = energy.read @q[%b, %i] : !energy.array<Y>
      energy.foreach (%j : @N) {
        %kj = energy.read @k[%b, %j] : !energy.array<Y>
        %s = energy.dot %qi, %kj : !energy.array<Y>
        %v = energy.mul %s, %qi : !energy.array<>, !energy.array<Y>
        energy.accumulate %v into @k[%b, %j] : !energy.array<Y>
      }
    }
  }
}
