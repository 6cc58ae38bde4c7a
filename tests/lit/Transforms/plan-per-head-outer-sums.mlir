// RUN: energy-opt %s --energy-plan-batched-products | FileCheck %s

// A loop over the heads g whose body sums, over the tokens (i, b) of a
// batch, a head's row of a table times the token's row of x, shared by every
// head, Σ_i Σ_b u[b, g, i] ⊗ x[b, i] (a projection's gradient per head, the
// sum nested where a factor depends on i alone), and adds it negated with
// another sum: each sum is row g of one batch of products U[g]ᵀ X over the
// tokens in x's layout (b, i), X one table for every head; the loop keeps
// what combines them.
// CHECK-LABEL: energy.model @per_head
// CHECK:       %[[U:.*]] = tabulate (%{{.*}} : @H, %{{.*}} : @B, %{{.*}} : @N)
// CHECK:       %[[X:.*]] = read @x : !energy.array<B, N, D>
// CHECK-NEXT:  %[[P:.*]] = batch_matmul %[[U]] transposed, %[[X]] {lhs_rows = 2 : i64} : !energy.array<H, B, N, Y>, !energy.array<B, N, D> -> !energy.array<H, Y, D>
// CHECK:       %[[Q:.*]] = batch_matmul %{{.*}} transposed, %{{.*}} {lhs_rows = 2 : i64} : !energy.array<H, B, N, Y>, !energy.array<B, N, D> -> !energy.array<H, Y, D>
// CHECK:       foreach (%[[G:.*]] : @H) {
// CHECK-NOT:     reduce
// CHECK:         %[[ROW:.*]] = extract %[[P]][%[[G]]] : !energy.array<H, Y, D> -> !energy.array<Y, D>
// CHECK:         %[[OTHER:.*]] = extract %[[Q]][%[[G]]]
// CHECK:         %[[SUM:.*]] = add %[[ROW]], %[[OTHER]]
// CHECK:         %[[NEG:.*]] = neg %[[SUM]]
// CHECK:         accumulate %[[NEG]] into @W[%[[G]]] : !energy.array<Y, D>
energy.model @per_head {
  energy.dim @B
  energy.dim @H
  energy.dim @N
  energy.dim @Y
  energy.dim @D
  energy.tensor @x : input [@B, @N, @D]
  energy.tensor @u : input [@B, @H, @N, @Y]
  energy.tensor @c : input [@N, @Y]
  energy.tensor @W : param [@H, @Y, @D]
  energy.gradient @W {
    energy.foreach (%g : @H) {
      %s = energy.reduce sum (%i : @N) {
        %ci = energy.read @c[%i] : !energy.array<Y>
        %t = energy.reduce sum (%b : @B) {
          %xi = energy.read @x[%b, %i] : !energy.array<D>
          %ui = energy.read @u[%b, %g, %i] : !energy.array<Y>
          %w = energy.mul %ui, %ci : !energy.array<Y>, !energy.array<Y>
          %o = energy.outer %w, %xi : !energy.array<Y>, !energy.array<D>
          energy.yield %o : !energy.array<Y, D>
        } : !energy.array<Y, D>
        energy.yield %t : !energy.array<Y, D>
      } : !energy.array<Y, D>
      %r = energy.reduce sum (%i : @N) {
        %t = energy.reduce sum (%b : @B) {
          %xi = energy.read @x[%b, %i] : !energy.array<D>
          %ui = energy.read @u[%b, %g, %i] : !energy.array<Y>
          %o = energy.outer %ui, %xi : !energy.array<Y>, !energy.array<D>
          energy.yield %o : !energy.array<Y, D>
        } : !energy.array<Y, D>
        energy.yield %t : !energy.array<Y, D>
      } : !energy.array<Y, D>
      %a = energy.add %s, %r : !energy.array<Y, D>, !energy.array<Y, D>
      %n = energy.neg %a : !energy.array<Y, D>
      energy.accumulate %n into @W[%g] : !energy.array<Y, D>
    }
  }
}
