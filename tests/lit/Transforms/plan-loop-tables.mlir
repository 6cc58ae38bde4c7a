// RUN: energy-opt %s --split-input-file --energy-plan-loop-tables | FileCheck %s
// RUN: energy-opt %s --split-input-file --energy-plan-row-tables | FileCheck %s --check-prefix=ROWS

// In a table over (b, i), a table over j whose rows, a reconstruction's
// residual x[b, j] − Wd Σ_k a[b, j, k], depend on b and j but not on i (a
// nested sum among them): each row is computed once per (b, j), in a table
// ahead of the loop, rather than once per (b, i, j).
// CHECK-LABEL: energy.model @residual_per_slot
// CHECK:       %[[R:.*]] = tabulate (%[[B:.*]] : @B, %[[J:.*]] : @N) {
// CHECK:         reduce sum (%{{.*}} : @S)
// CHECK:         matmul
// CHECK:         sub
// CHECK:       } : !energy.array<B, N, D>
// CHECK:       tabulate (%[[B2:.*]] : @B, %[[I:.*]] : @S) {
// CHECK:         tabulate (%[[J2:.*]] : @N) {
// CHECK-NOT:       reduce
// CHECK-NOT:       matmul
// CHECK:           extract %[[R]][%[[B2]], %[[J2]]]
energy.model @residual_per_slot {
  energy.dim @B
  energy.dim @N
  energy.dim @S
  energy.dim @D
  energy.tensor @x : input [@B, @N, @D]
  energy.tensor @a : input [@B, @N, @S, @D]
  energy.tensor @w : input [@B, @N, @S]
  energy.tensor @Wd : param [@D, @D]
  energy.tensor @mu : state [@B, @S, @D]
  energy.gradient @mu {
    %wd = energy.read @Wd : !energy.array<D, D>
    %t = energy.tabulate (%b : @B, %i : @S) {
      %r = energy.tabulate (%j : @N) {
        %xj = energy.read @x[%b, %j] : !energy.array<D>
        %s = energy.reduce sum (%k : @S) {
          %ak = energy.read @a[%b, %j, %k] : !energy.array<D>
          energy.yield %ak : !energy.array<D>
        } : !energy.array<D>
        %m = energy.matmul %wd, %s : !energy.array<D, D>, !energy.array<D>
        %d = energy.sub %xj, %m : !energy.array<D>, !energy.array<D>
        energy.yield %d : !energy.array<D>
      } : !energy.array<N, D>
      %c = energy.tabulate (%j : @N) {
        %wj = energy.read @w[%b, %j, %i] : !energy.array<>
        energy.yield %wj : !energy.array<>
      } : !energy.array<N>
      %rt = energy.transpose %r : !energy.array<N, D>
      %g = energy.matmul %rt, %c : !energy.array<D, N>, !energy.array<N>
      energy.yield %g : !energy.array<D>
    } : !energy.array<B, S, D>
    energy.accumulate %t into @mu : !energy.array<B, S, D>
  }
}

// -----

// A loop over (b, j, i) that reads the softmax of row (b, j) at every slot
// i: the softmax is computed once per (b, j), in a table ahead of it
// (energy-plan-row-tables, after products are formed).
// ROWS-LABEL: energy.model @softmax_per_row
// ROWS:        %[[P:.*]] = tabulate (%{{.*}} : @B, %{{.*}} : @N) {
// ROWS:          softmax
// ROWS:        } : !energy.array<B, N, S>
// ROWS:        foreach (%[[B:.*]] : @B, %[[J:.*]] : @N, %[[I:.*]] : @S) {
// ROWS-NOT:      softmax
// ROWS:          extract %[[P]][%[[B]], %[[J]]]
// ROWS:          accumulate
energy.model @softmax_per_row {
  energy.dim @B
  energy.dim @N
  energy.dim @S
  energy.dim @D
  energy.tensor @s : input [@B, @N, @S]
  energy.tensor @mu : state [@B, @S, @D]
  energy.gradient @mu {
    energy.foreach (%b : @B, %j : @N, %i : @S) {
      %row = energy.read @s[%b, %j] : !energy.array<S>
      %p = energy.softmax %row : !energy.array<S>
      %w = energy.extract %p[%i] : !energy.array<S> -> !energy.array<>
      %m = energy.read @mu[%b, %i] : !energy.array<D>
      %v = energy.mul %w, %m : !energy.array<>, !energy.array<D>
      energy.accumulate %v into @mu[%b, %i] : !energy.array<D>
    }
  }
}
