// RUN: energy-opt %s -split-input-file --energy-plan-contract-tables | FileCheck %s --check-prefix=TABLES
// RUN: energy-opt %s -split-input-file --energy-plan-factor-contract-outputs | FileCheck %s --check-prefix=FACTOR

// A value region reads a token's row, the same for every head: read from a
// table over (b, h, j) instead, the contraction is bilinear (whose value
// tables a backend reads at every batch index).
// TABLES-LABEL: energy.model @head_broadcast
// TABLES:      %[[V:.*]] = read @v : !energy.array<B, N, D>
// TABLES:      %[[T:.*]] = tabulate (%[[B:.*]] : @B, %{{.*}} : @H, %[[J:.*]] : @N) {
// TABLES-NEXT:   extract %[[V]][%[[B]], %[[J]]]
// TABLES:      softmax_contract bilinear rows (%[[RB:.*]] : @B, %[[RH:.*]] : @H, %{{.*}} : @N) cols (%[[RJ:.*]] : @N)
// TABLES:      row_values {
// TABLES-NEXT:   extract %[[T]][%[[RB]], %[[RH]], %[[RJ]]]
energy.model @head_broadcast {
  energy.dim @B
  energy.dim @H
  energy.dim @N
  energy.dim @D
  energy.tensor @q : input [@B, @H, @N, @D]
  energy.tensor @k : input [@B, @H, @N, @D]
  energy.tensor @v : input [@B, @N, @D]
  energy.tensor @out : state [@B, @H, @N, @D]
  energy.update_program {
    %q = energy.read @q : !energy.array<B, H, N, D>
    %k = energy.read @k : !energy.array<B, H, N, D>
    %v = energy.read @v : !energy.array<B, N, D>
    %r:2 = energy.softmax_contract generic rows (%b : @B, %h : @H, %i : @N) cols (%j : @N) score {
      %qi = energy.extract %q[%b, %h, %i] : !energy.array<B, H, N, D> -> !energy.array<D>
      %kj = energy.extract %k[%b, %h, %j] : !energy.array<B, H, N, D> -> !energy.array<D>
      %s = energy.dot %qi, %kj : !energy.array<D>
      energy.yield %s : !energy.array<>
    } row_values {
      %vj = energy.extract %v[%b, %j] : !energy.array<B, N, D> -> !energy.array<D>
      energy.yield %vj : !energy.array<D>
    } : !energy.array<B, H, N>, !energy.array<B, H, N, D>
    energy.store %r#1 into @out : !energy.array<B, H, N, D>
  }
}

// -----

// A row's vector times the token's row, element-wise, is not bilinear with
// the table either: nothing changes.
// TABLES-LABEL: energy.model @not_bilinear
// TABLES-NOT:  tabulate
// TABLES:      softmax_contract generic
energy.model @not_bilinear {
  energy.dim @B
  energy.dim @H
  energy.dim @N
  energy.dim @D
  energy.tensor @q : input [@B, @H, @N, @D]
  energy.tensor @k : input [@B, @H, @N, @D]
  energy.tensor @v : input [@B, @N, @D]
  energy.tensor @out : state [@B, @H, @N, @D]
  energy.update_program {
    %q = energy.read @q : !energy.array<B, H, N, D>
    %k = energy.read @k : !energy.array<B, H, N, D>
    %v = energy.read @v : !energy.array<B, N, D>
    %r:2 = energy.softmax_contract generic rows (%b : @B, %h : @H, %i : @N) cols (%j : @N) score {
      %qi = energy.extract %q[%b, %h, %i] : !energy.array<B, H, N, D> -> !energy.array<D>
      %kj = energy.extract %k[%b, %h, %j] : !energy.array<B, H, N, D> -> !energy.array<D>
      %s = energy.dot %qi, %kj : !energy.array<D>
      energy.yield %s : !energy.array<>
    } row_values {
      %vj = energy.extract %v[%b, %j] : !energy.array<B, N, D> -> !energy.array<D>
      %qi = energy.extract %q[%b, %h, %i] : !energy.array<B, H, N, D> -> !energy.array<D>
      %e = energy.mul %vj, %qi : !energy.array<D>, !energy.array<D>
      energy.yield %e : !energy.array<D>
    } : !energy.array<B, H, N>, !energy.array<B, H, N, D>
    energy.store %r#1 into @out : !energy.array<B, H, N, D>
  }
}

// -----

// Σ_j w(i, j) (a_i ⊙ v_j) = a_i ⊙ Σ_j w(i, j) v_j: the contraction sums the
// rows of v (bilinear now) and the product with a_i applies once per row,
// after it.
// FACTOR-LABEL: energy.model @position_maps
// FACTOR:      %[[A:.*]] = read @a
// FACTOR:      %[[R:.*]]:2 = softmax_contract bilinear
// FACTOR:      row_values {
// FACTOR-NEXT:   %[[VJ:.*]] = extract
// FACTOR-NEXT:   yield %[[VJ]] : !energy.array<D>
// FACTOR:      %[[P:.*]] = tabulate (%[[B:.*]] : @B, %[[I:.*]] : @N) {
// FACTOR-DAG:    %[[S:.*]] = extract %[[R]]#1[%[[B]], %[[I]]]
// FACTOR-DAG:    %[[AI:.*]] = extract %[[A]][%[[B]], %[[I]]]
// FACTOR:        mul %[[AI]], %[[S]]
// FACTOR:      store %[[P]] into @out
energy.model @position_maps {
  energy.dim @B
  energy.dim @N
  energy.dim @D
  energy.tensor @q : input [@B, @N, @D]
  energy.tensor @k : input [@B, @N, @D]
  energy.tensor @a : input [@B, @N, @D]
  energy.tensor @v : input [@B, @N, @D]
  energy.tensor @out : state [@B, @N, @D]
  energy.update_program {
    %q = energy.read @q : !energy.array<B, N, D>
    %k = energy.read @k : !energy.array<B, N, D>
    %a = energy.read @a : !energy.array<B, N, D>
    %v = energy.read @v : !energy.array<B, N, D>
    %r:2 = energy.softmax_contract generic rows (%b : @B, %i : @N) cols (%j : @N) where {
      %ne = arith.cmpi ne, %i, %j : index
      energy.yield %ne : i1
    } score {
      %qi = energy.extract %q[%b, %i] : !energy.array<B, N, D> -> !energy.array<D>
      %kj = energy.extract %k[%b, %j] : !energy.array<B, N, D> -> !energy.array<D>
      %s = energy.dot %qi, %kj : !energy.array<D>
      energy.yield %s : !energy.array<>
    } row_values {
      %ai = energy.extract %a[%b, %i] : !energy.array<B, N, D> -> !energy.array<D>
      %vj = energy.extract %v[%b, %j] : !energy.array<B, N, D> -> !energy.array<D>
      %p = energy.mul %ai, %vj : !energy.array<D>, !energy.array<D>
      energy.yield %p : !energy.array<D>
    } : !energy.array<B, N>, !energy.array<B, N, D>
    energy.store %r#1 into @out : !energy.array<B, N, D>
  }
}

// -----

// A predicate whose offset is a dim (a rank's first row of a sharded
// sequence, N__offset in the rank's model) is a linear constraint: the
// causal contraction is bilinear, for the kernel that skips the panels no
// row admits.
// TABLES-LABEL: energy.model @offset_causal
// TABLES:      softmax_contract bilinear rows (%{{.*}} : @N) cols (%{{.*}} : @M)
energy.model @offset_causal {
  energy.dim @N
  energy.dim @M
  energy.dim @O
  energy.dim @D
  energy.tensor @q : input [@N, @D]
  energy.tensor @k : input [@M, @D]
  energy.tensor @out : state [@N]
  energy.update_program {
    %q = energy.read @q : !energy.array<N, D>
    %k = energy.read @k : !energy.array<M, D>
    %r = energy.softmax_contract generic rows (%i : @N) cols (%j : @M) where {
      %o = energy.size @O : index
      %at = arith.addi %i, %o : index
      %le = arith.cmpi sle, %j, %at : index
      energy.yield %le : i1
    } score {
      %qi = energy.extract %q[%i] : !energy.array<N, D> -> !energy.array<D>
      %kj = energy.extract %k[%j] : !energy.array<M, D> -> !energy.array<D>
      %s = energy.dot %qi, %kj : !energy.array<D>
      energy.yield %s : !energy.array<>
    } : !energy.array<N>
    energy.store %r into @out : !energy.array<N>
  }
}

// -----

// A dim times the row (a rank's rows of a striped sequence, i·N__stride +
// N__offset) is linear in the indices too, its coefficient known when the
// kernel runs: bilinear.
// TABLES-LABEL: energy.model @strided_causal
// TABLES:      softmax_contract bilinear
energy.model @strided_causal {
  energy.dim @N
  energy.dim @M
  energy.dim @S
  energy.dim @D
  energy.tensor @q : input [@N, @D]
  energy.tensor @k : input [@M, @D]
  energy.tensor @out : state [@N]
  energy.update_program {
    %q = energy.read @q : !energy.array<N, D>
    %k = energy.read @k : !energy.array<M, D>
    %r = energy.softmax_contract generic rows (%i : @N) cols (%j : @M) where {
      %s = energy.size @S : index
      %at = arith.muli %i, %s : index
      %le = arith.cmpi sle, %j, %at : index
      energy.yield %le : i1
    } score {
      %qi = energy.extract %q[%i] : !energy.array<N, D> -> !energy.array<D>
      %kj = energy.extract %k[%j] : !energy.array<M, D> -> !energy.array<D>
      %s2 = energy.dot %qi, %kj : !energy.array<D>
      energy.yield %s2 : !energy.array<>
    } : !energy.array<N>
    energy.store %r into @out : !energy.array<N>
  }
}

// -----

// A product of the row and the column is not linear: the contraction stays
// generic.
// TABLES-LABEL: energy.model @product_of_indices
// TABLES:      softmax_contract generic
energy.model @product_of_indices {
  energy.dim @N
  energy.dim @D
  energy.tensor @q : input [@N, @D]
  energy.tensor @out : state [@N]
  energy.update_program {
    %q = energy.read @q : !energy.array<N, D>
    %r = energy.softmax_contract generic rows (%i : @N) cols (%j : @N) where {
      %at = arith.muli %i, %j : index
      %le = arith.cmpi sle, %j, %at : index
      energy.yield %le : i1
    } score {
      %qi = energy.extract %q[%i] : !energy.array<N, D> -> !energy.array<D>
      %qj = energy.extract %q[%j] : !energy.array<N, D> -> !energy.array<D>
      %s = energy.dot %qi, %qj : !energy.array<D>
      energy.yield %s : !energy.array<>
    } : !energy.array<N>
    energy.store %r into @out : !energy.array<N>
  }
}
