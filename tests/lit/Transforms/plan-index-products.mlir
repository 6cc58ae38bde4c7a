// RUN: energy-opt %s --energy-plan-index-products | FileCheck %s

// Σ over (b, a) of scalars of (b, a, mu) times a row of (b, a), per memory
// mu: one summed product of the weights' table and the rows, Σ_b C[b]ᵀ G[b],
// whose row mu the loop reads.
// CHECK-LABEL: energy.model @memory_gradient
// CHECK:      %[[G:.*]] = read @g
// CHECK:      %[[S:.*]] = read @s
// CHECK:      %[[C:.*]] = tabulate (%[[B:.*]] : @B, %[[A:.*]] : @N, %[[MU:.*]] : @M) {
// CHECK-NEXT:   %[[T:.*]] = extract %[[S]][%[[B]], %[[A]], %[[MU]]]
// CHECK-DAG:    relu %[[T]]
// CHECK-DAG:    heaviside %[[T]]
// CHECK:      %[[P:.*]] = batch_matmul %[[C]] transposed, %[[G]] summed : !energy.array<B, N, M>, !energy.array<B, N, D> -> !energy.array<M, D>
// CHECK:      foreach (%[[M:.*]] : @M) {
// CHECK-NOT:    reduce
// CHECK:        extract %[[P]][%[[M]]]
energy.model @memory_gradient {
  energy.dim @B
  energy.dim @N
  energy.dim @M
  energy.dim @D
  energy.tensor @g : input [@B, @N, @D]
  energy.tensor @s : input [@B, @N, @M]
  energy.tensor @xi : param [@M, @D]
  energy.gradient @xi {
    %g = energy.read @g : !energy.array<B, N, D>
    %s = energy.read @s : !energy.array<B, N, M>
    energy.foreach (%mu : @M) {
      %x = energy.read @xi[%mu] : !energy.array<D>
      %sum = energy.reduce sum (%b : @B, %a : @N) {
        %row = energy.extract %g[%b, %a] : !energy.array<B, N, D> -> !energy.array<D>
        %t = energy.extract %s[%b, %a, %mu] : !energy.array<B, N, M> -> !energy.array<>
        %r = energy.relu %t : !energy.array<>
        %h = energy.heaviside %t : !energy.array<>
        %p = energy.mul %r, %row : !energy.array<>, !energy.array<D>
        %q = energy.mul %h, %p : !energy.array<>, !energy.array<D>
        energy.yield %q : !energy.array<D>
      } : !energy.array<D>
      %y = energy.mul %sum, %x : !energy.array<D>, !energy.array<D>
      energy.accumulate %y into @xi[%mu] : !energy.array<D>
    }
  }
}
