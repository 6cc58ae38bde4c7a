// RUN: energy-opt %s --energy-plan-loop-sums | FileCheck %s

// A loop over j inside a loop over rows (g, i) that adds, at a slot none of
// its indices choose, a value weighted by the row's softmax adds its sum
// over j: one sum where the loop was, under the loop's predicate, which the
// row's contraction then takes in (a rotated query's gradient, summed over
// the keys before its outer product with the row).
// CHECK-LABEL: energy.model @whole
// CHECK:       foreach (%[[G:.*]] : @H, %[[I:.*]] : @N) {
// CHECK:         %[[L:.*]] = reduce lse
// CHECK:         %[[S:.*]] = reduce sum (%[[J:.*]] : @N) where {
// CHECK:           arith.cmpi sle, %[[J]], %[[I]]
// CHECK:         } {
// CHECK:           exp
// CHECK:           outer
// CHECK:         } : !energy.array<Y, D>
// CHECK-NEXT:    accumulate %[[S]] into @W[%[[G]]] : !energy.array<Y, D>
// CHECK-NOT:     foreach
energy.model @whole {
  energy.dim @N
  energy.dim @H
  energy.dim @Y
  energy.dim @D
  energy.tensor @s : input [@N, @N]
  energy.tensor @k : input [@N, @Y]
  energy.tensor @x : input [@N, @D]
  energy.tensor @W : param [@H, @Y, @D]
  energy.gradient @W {
    energy.foreach (%g : @H, %i : @N) {
      %l = energy.reduce lse (%j : @N) {
        %e = energy.read @s[%i, %j] : !energy.array<>
        energy.yield %e : !energy.array<>
      } : !energy.array<>
      energy.foreach (%j : @N) where {
        %p = arith.cmpi sle, %j, %i : index
        energy.yield %p : i1
      } {
        %e = energy.read @s[%i, %j] : !energy.array<>
        %d = energy.sub %e, %l : !energy.array<>, !energy.array<>
        %w = energy.exp %d : !energy.array<>
        %kj = energy.read @k[%j] : !energy.array<Y>
        %v = energy.mul %w, %kj : !energy.array<>, !energy.array<Y>
        %xi = energy.read @x[%i] : !energy.array<D>
        %o = energy.outer %v, %xi : !energy.array<Y>, !energy.array<D>
        energy.accumulate %o into @W[%g] : !energy.array<Y, D>
      }
    }
  }
}
