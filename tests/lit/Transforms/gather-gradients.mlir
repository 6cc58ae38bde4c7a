// RUN: energy-opt %s -split-input-file --energy-gather-gradients | FileCheck %s

// An accumulation at an index the loop does not vary (c, inside the loop
// over p) becomes one accumulation of a sum over p; the loop-invariant
// matrix applied to the summand is taken out of the sum. The accumulation
// at the loop's own index (p) stays in the loop.
// CHECK-LABEL: energy.model @gather
// CHECK: gradient @x {
// CHECK:   %[[M:.*]] = read @W : !energy.array<D, D>
// CHECK:   foreach (%[[C:.*]] : @N) {
// CHECK:     %[[SUM:.*]] = reduce sum (%[[P:.*]] : @N) {
// CHECK:       %[[XP:.*]] = read @x[%[[P]]] : !energy.array<D>
// CHECK:       yield %[[XP]] : !energy.array<D>
// CHECK:     } : !energy.array<D>
// CHECK:     %[[PRODUCT:.*]] = matmul %[[M]], %[[SUM]]
// CHECK:     accumulate %[[PRODUCT]] into @x[%[[C]]]
// CHECK:     foreach (%[[Q:.*]] : @N) {
// CHECK-NOT:   into @x[%[[C]]]
// CHECK:       accumulate %{{.*}} into @x[%[[Q]]]
energy.model @gather {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @W : param [@D, @D]
  energy.gradient @x {
    %w = energy.read @W : !energy.array<D, D>
    energy.foreach (%c : @N) {
      energy.foreach (%p : @N) {
        %xp = energy.read @x[%p] : !energy.array<D>
        %g = energy.matmul %w, %xp : !energy.array<D, D>, !energy.array<D>
        energy.accumulate %g into @x[%c] : !energy.array<D>
        %xc = energy.read @x[%c] : !energy.array<D>
        energy.accumulate %xc into @x[%p] : !energy.array<D>
      }
    }
  }
}

// -----

// A loop whose every accumulation is gathered disappears.
// CHECK-LABEL: energy.model @whole
// CHECK: gradient @y {
// CHECK:   %[[S:.*]] = reduce sum (%{{.*}} : @N) {
// CHECK:   accumulate %[[S]] into @y
// CHECK-NOT: foreach
energy.model @whole {
  energy.dim @N
  energy.tensor @y : state [@N]
  energy.tensor @v : param [@N]
  energy.gradient @y {
    energy.foreach (%i : @N) {
      %v = energy.read @v : !energy.array<N>
      energy.accumulate %v into @y : !energy.array<N>
    }
  }
}

// -----

// A scatter whose slots also use an index of the loop around it (a batch b
// that rows and columns share) is gathered per (b, p): the new loop carries
// b, and the sum runs over the rest of the outer domain (c).
// CHECK-LABEL: energy.model @batched
// CHECK: gradient @x {
// CHECK:   %[[M:.*]] = read @W : !energy.array<D, D>
// CHECK:   foreach (%{{.*}} : @B, %{{.*}} : @N) {
// CHECK-NOT: foreach (%{{.*}} : @N)
// CHECK:   }
// CHECK:   foreach (%[[B:.*]] : @B, %[[P:.*]] : @N) {
// CHECK:     %[[XP:.*]] = read @x[%[[B]], %[[P]]] : !energy.array<D>
// CHECK:     %[[SUM:.*]] = reduce sum (%[[C:.*]] : @N) {
// CHECK:       %[[XC:.*]] = read @x[%[[B]], %[[C]]] : !energy.array<D>
// CHECK:       %[[D:.*]] = dot %[[XC]], %[[XP]]
// CHECK:       %[[W:.*]] = mul %[[D]], %[[XC]]
// CHECK:       yield %[[W]] : !energy.array<D>
// CHECK:     } : !energy.array<D>
// CHECK:     %[[PRODUCT:.*]] = matmul %[[M]], %[[SUM]]
// CHECK:     accumulate %[[PRODUCT]] into @x[%[[B]], %[[P]]]
energy.model @batched {
  energy.dim @B
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@B, @N, @D]
  energy.tensor @W : param [@D, @D]
  energy.gradient @x {
    %w = energy.read @W : !energy.array<D, D>
    energy.foreach (%b : @B, %c : @N) {
      %xc = energy.read @x[%b, %c] : !energy.array<D>
      energy.accumulate %xc into @x[%b, %c] : !energy.array<D>
      energy.foreach (%p : @N) {
        %xp = energy.read @x[%b, %p] : !energy.array<D>
        %d = energy.dot %xc, %xp : !energy.array<D>
        %v = energy.mul %d, %xc : !energy.array<>, !energy.array<D>
        %g = energy.matmul %w, %v : !energy.array<D, D>, !energy.array<D>
        energy.accumulate %g into @x[%b, %p] : !energy.array<D>
      }
    }
  }
}

// -----

// A scatter that adds a value computed in the outer loop's body (here a sum
// over the whole domain, the same at every position) takes that value's
// ops into the gathered sum: the outer loop, erased once it is left without
// effects, no longer defines what the gathering loop reads.
// The let of reductions the scatter reads is not made: it reads none.
// CHECK-LABEL: energy.model @outer_value
// CHECK-NOT: let
// CHECK: gradient @mu {
// CHECK:   %[[TWO:.*]] = constant 2.0
// CHECK:   foreach (%[[P:.*]] : @N) {
// CHECK:     %[[G:.*]] = reduce sum (%{{.*}} : @N) {
// CHECK:       %[[S:.*]] = reduce sum (%{{.*}} : @N) {
// CHECK:       yield %[[S]] : !energy.array<D>
// CHECK:     %[[TWICE:.*]] = mul %[[TWO]], %[[G]]
// CHECK:     accumulate %[[TWICE]] into @mu[%[[P]]]
// CHECK-NOT: foreach
energy.model @outer_value {
  energy.dim @N
  energy.dim @D
  energy.tensor @mu : state [@N, @D]
  energy.gradient @mu {
    %two = energy.constant 2.0
    energy.foreach (%j : @N) {
      %s = energy.reduce sum (%i : @N) {
        %m = energy.read @mu[%i] : !energy.array<D>
        energy.yield %m : !energy.array<D>
      } : !energy.array<D>
      %t = energy.mul %s, %two : !energy.array<D>, !energy.array<>
      energy.foreach (%p : @N) {
        energy.accumulate %t into @mu[%p] : !energy.array<D>
      }
    }
  }
}

// -----

// A pair sum added into slots that ignore the row (i) whose summand is a
// matrix per pair, outer(w_ij (q_i - x_j), x_j), is summed over the rows
// first, per column: a loop over the other indices and the columns (b, j)
// adds the sum over i, reading each row's lse from a gather let; the outer
// product with x_j then comes out of that sum in planning.
// CHECK-LABEL: energy.model @pair_outer
// CHECK: let @W.gather [%[[LB:.*]] : @B, %[[LI:.*]] : @N]
// CHECK:   reduce lse
// CHECK: gradient @W {
// CHECK:   reduce sum (%[[B:.*]] : @B, %[[J:.*]] : @N) {
// CHECK:     %[[XJ:.*]] = read @x[%[[B]], %[[J]]]
// CHECK:     reduce sum (%[[I:.*]] : @N) {
// CHECK-DAG:   read @W.gather[%[[B]], %[[I]]]
// CHECK-DAG:   %[[XI:.*]] = read @x[%[[B]], %[[I]]]
// CHECK:       outer %{{.*}}, %[[XJ]]
// CHECK-NOT: foreach
energy.model @pair_outer {
  energy.dim @B
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@B, @N, @D]
  energy.tensor @W : param [@D, @D]
  energy.gradient @W {
    energy.foreach (%b : @B, %i : @N) {
      %q = energy.read @x[%b, %i] : !energy.array<D>
      %l = energy.reduce lse (%k : @N) {
        %xk = energy.read @x[%b, %k] : !energy.array<D>
        %s = energy.dot %q, %xk : !energy.array<D>
        energy.yield %s : !energy.array<>
      } : !energy.array<>
      energy.foreach (%j : @N) {
        %xj = energy.read @x[%b, %j] : !energy.array<D>
        %s = energy.dot %q, %xj : !energy.array<D>
        %d = energy.sub %s, %l : !energy.array<>, !energy.array<>
        %w = energy.exp %d : !energy.array<>
        %diff = energy.sub %q, %xj : !energy.array<D>, !energy.array<D>
        %g = energy.mul %w, %diff : !energy.array<>, !energy.array<D>
        %o = energy.outer %g, %xj : !energy.array<D>, !energy.array<D>
        energy.accumulate %o into @W : !energy.array<D, D>
      }
    }
  }
}

// -----

// outer(q_i, w_ij x_j): the row's vector comes out of the sum over the
// columns as it is (one vector per pair), so the sums keep their order.
// CHECK-LABEL: energy.model @row_factor
// CHECK-NOT: let
// CHECK: reduce sum (%[[I:.*]] : @N) {
// CHECK:   %[[Q:.*]] = read @x[%[[I]]]
// CHECK:   reduce sum (%{{.*}} : @N) {
// CHECK:     outer %[[Q]],
energy.model @row_factor {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @W : param [@D, @D]
  energy.gradient @W {
    energy.foreach (%i : @N) {
      %q = energy.read @x[%i] : !energy.array<D>
      energy.foreach (%j : @N) {
        %xj = energy.read @x[%j] : !energy.array<D>
        %s = energy.dot %q, %xj : !energy.array<D>
        %w = energy.exp %s : !energy.array<>
        %g = energy.mul %w, %xj : !energy.array<>, !energy.array<D>
        %o = energy.outer %q, %g : !energy.array<D>, !energy.array<D>
        energy.accumulate %o into @W : !energy.array<D, D>
      }
    }
  }
}

// -----

// A sum over columns (with a predicate) that an accumulation adds, through
// a transpose and a difference, is gathered the same way: a loop over the
// head and the columns sums over the rows the predicate admits; what else
// the accumulation adds stays in the loop over rows.
// CHECK-LABEL: energy.model @summed_pairs
// CHECK: gradient @W {
// CHECK:   foreach (%[[H:.*]] : @H, %[[I:.*]] : @N) {
// CHECK:     %[[Q:.*]] = read @x[%[[I]]]
// CHECK:     %[[R:.*]] = outer %[[Q]], %[[Q]]
// CHECK:     accumulate %[[R]] into @W[%[[H]]]
// CHECK:   foreach (%[[H2:.*]] : @H, %[[J:.*]] : @N) {
// CHECK:     %[[XJ:.*]] = read @x[%[[J]]]
// CHECK:     %[[S:.*]] = reduce sum (%[[I2:.*]] : @N) where {
// CHECK:       arith.cmpi ne, %[[I2]], %[[J]]
// CHECK:     } {
// CHECK:       outer %[[XJ]],
// CHECK:       transpose
// CHECK:       neg
// CHECK:     accumulate %[[S]] into @W[%[[H2]]]
energy.model @summed_pairs {
  energy.dim @H
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @W : param [@H, @D, @D]
  energy.gradient @W {
    energy.foreach (%h : @H, %i : @N) {
      %q = energy.read @x[%i] : !energy.array<D>
      %m = energy.read @W[%h] : !energy.array<D, D>
      %p = energy.matmul %m, %q : !energy.array<D, D>, !energy.array<D>
      %s = energy.reduce sum (%j : @N) where {
        %ne = arith.cmpi ne, %i, %j : index
        energy.yield %ne : i1
      } {
        %xj = energy.read @x[%j] : !energy.array<D>
        %diff = energy.sub %p, %xj : !energy.array<D>, !energy.array<D>
        %o = energy.outer %xj, %diff : !energy.array<D>, !energy.array<D>
        energy.yield %o : !energy.array<D, D>
      } : !energy.array<D, D>
      %t = energy.transpose %s : !energy.array<D, D>
      %r = energy.outer %q, %q : !energy.array<D>, !energy.array<D>
      %a = energy.sub %r, %t : !energy.array<D, D>, !energy.array<D, D>
      energy.accumulate %a into @W[%h] : !energy.array<D, D>
    }
  }
}
