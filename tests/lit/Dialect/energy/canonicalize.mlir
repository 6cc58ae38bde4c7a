// RUN: energy-opt %s -split-input-file --canonicalize | FileCheck %s

// The adjoint of log_softmax applied to a one-hot (the adjoint of an
// extract): r e_k - softmax(w) sum(r e_k). sum_last of the one-hot is r, and
// the one-hot accumulates into its slot alone, so no K-vector is built per
// position of the loop.
// CHECK-LABEL: energy.model @one_hot
// CHECK:       gradient @w {
// CHECK:         %[[P:.*]] = exp
// CHECK:         foreach (%[[K:.*]] : @K) {
// CHECK:           %[[R:.*]] = read @r[%[[K]]] : !energy.array<>
// CHECK-NOT:       embed
// CHECK-NOT:       sum_last
// CHECK-DAG:       accumulate %[[R]] into @w[%[[K]]] : !energy.array<>
// CHECK-DAG:       %[[NEG:.*]] = neg %[[R]] : !energy.array<>
// CHECK-DAG:       %[[SCALED:.*]] = mul %[[NEG]], %[[P]] : !energy.array<>, !energy.array<K>
// CHECK-DAG:       accumulate %[[SCALED]] into @w : !energy.array<K>
energy.model @one_hot {
  energy.dim @K
  energy.tensor @w : state [@K]
  energy.tensor @r : input [@K]
  energy.gradient @w {
    %w = energy.read @w : !energy.array<K>
    %l = energy.log_softmax %w : !energy.array<K>
    %p = energy.exp %l : !energy.array<K>
    energy.foreach (%k : @K) {
      %r = energy.read @r[%k] : !energy.array<>
      %e = energy.embed %r into [%k] : !energy.array<> -> !energy.array<K>
      %s = energy.sum_last %e : !energy.array<K>
      %m = energy.mul %p, %s : !energy.array<K>, !energy.array<>
      %d = energy.sub %e, %m : !energy.array<K>, !energy.array<K>
      energy.accumulate %d into @w : !energy.array<K>
    }
  }
}

// -----

// An embedded slice accumulated into a slice: the embed's indices follow the
// accumulation's. A sum of two non-embedded values stays one accumulation.
// CHECK-LABEL: energy.model @nested_slices
// CHECK:       foreach (%[[I:.*]] : @N) {
// CHECK:         foreach (%[[K:.*]] : @K) {
// CHECK:           %[[V:.*]] = read @v[%[[I]], %[[K]]] : !energy.array<D>
// CHECK:           accumulate %[[V]] into @t[%[[I]], %[[K]] + 1] : !energy.array<D>
// CHECK:           %[[SUM:.*]] = add %[[V]], %[[V]] : !energy.array<D>, !energy.array<D>
// CHECK:           accumulate %[[SUM]] into @t[%[[I]], %[[K]]] : !energy.array<D>
energy.model @nested_slices {
  energy.dim @N
  energy.dim @K
  energy.dim @M
  energy.dim @D
  energy.tensor @t : state [@N, @M, @D]
  energy.tensor @v : input [@N, @K, @D]
  energy.gradient @t {
    energy.foreach (%i : @N) {
      energy.foreach (%k : @K) {
        %v = energy.read @v[%i, %k] : !energy.array<D>
        %e = energy.embed %v into [%k + 1] : !energy.array<D> -> !energy.array<M, D>
        energy.accumulate %e into @t[%i] : !energy.array<M, D>
        %s = energy.add %v, %v : !energy.array<D>, !energy.array<D>
        energy.accumulate %s into @t[%i, %k] : !energy.array<D>
      }
    }
  }
}

// -----

// sum_last of a one-hot in a matrix's row keeps its op: the folding applies
// to a vector only.
// CHECK-LABEL: energy.model @matrix_one_hot
// CHECK:         embed
// CHECK:         sum_last
energy.model @matrix_one_hot {
  energy.dim @K
  energy.dim @D
  energy.tensor @w : state [@K, @D]
  energy.tensor @r : input [@D]
  energy.gradient @w {
    energy.foreach (%k : @K) {
      %r = energy.read @r : !energy.array<D>
      %e = energy.embed %r into [%k] : !energy.array<D> -> !energy.array<K, D>
      %s = energy.sum_last %e : !energy.array<K, D>
      %t = energy.broadcast %s : !energy.array<K> to !energy.array<K, D>
      energy.accumulate %t into @w : !energy.array<K, D>
    }
  }
}

// -----

// Scalars and signs move inside matrix-vector products and gather, so that
// a matrix is applied last and scalar factors sit together (a sum takes
// both out of its summand); adding or subtracting an array of zeros is the
// array.
// CHECK-LABEL: energy.model @factors
// CHECK:       term @e {
// CHECK-DAG:     %[[HALF:.*]] = constant 5.000000e-01
// CHECK-DAG:     %[[A:.*]] = read @A : !energy.array<D, D>
// CHECK-DAG:     %[[V:.*]] = read @v : !energy.array<D>
// CHECK-DAG:     %[[S:.*]] = read @s : !energy.array<>
// CHECK:         %[[NEGV:.*]] = neg %[[V]] : !energy.array<D>
// CHECK:         %[[AV:.*]] = matmul %[[A]], %[[NEGV]]
// CHECK:         %[[SH:.*]] = mul %[[S]], %[[HALF]] : !energy.array<>, !energy.array<>
// CHECK:         %[[SHV:.*]] = mul %[[SH]], %[[V]] : !energy.array<>, !energy.array<D>
// CHECK:         %[[ASV:.*]] = matmul %[[A]], %[[SHV]]
// CHECK:         %[[NEGS:.*]] = neg %[[S]] : !energy.array<>
// CHECK:         %[[NSV:.*]] = mul %[[NEGS]], %[[V]] : !energy.array<>, !energy.array<D>
// CHECK-NOT:     broadcast
// CHECK:         add %[[AV]], %[[ASV]]
energy.model @factors {
  energy.dim @D
  energy.tensor @A : input [@D, @D]
  energy.tensor @v : input [@D]
  energy.tensor @s : input []
  energy.term @e {
    %a = energy.read @A : !energy.array<D, D>
    %v = energy.read @v : !energy.array<D>
    %s = energy.read @s : !energy.array<>
    %half = energy.constant 0.5
    // -(A v)
    %av = energy.matmul %a, %v : !energy.array<D, D>, !energy.array<D>
    %nav = energy.neg %av : !energy.array<D>
    // s (0.5 v) inside A: s (A (0.5 v))
    %hv = energy.mul %half, %v : !energy.array<>, !energy.array<D>
    %ahv = energy.matmul %a, %hv : !energy.array<D, D>, !energy.array<D>
    %sahv = energy.mul %s, %ahv : !energy.array<>, !energy.array<D>
    // -(s v)
    %sv = energy.mul %s, %v : !energy.array<>, !energy.array<D>
    %nsv = energy.neg %sv : !energy.array<D>
    // (-(A v) + s (A (0.5 v))) - 0 + (-(s v))
    %zero = energy.constant 0.0
    %zeros = energy.broadcast %zero : !energy.array<> to !energy.array<D>
    %sum = energy.add %nav, %sahv : !energy.array<D>, !energy.array<D>
    %minus = energy.sub %sum, %zeros : !energy.array<D>, !energy.array<D>
    %all = energy.add %minus, %nsv : !energy.array<D>, !energy.array<D>
    %t = energy.reduce_elements sum %all : !energy.array<D>
    energy.yield %t : !energy.array<>
  }
}

// -----

// Multiplying by an array of ones (a broadcast 1, as derived gradients
// seed a vector's adjoint) is the other factor, on either side; a broadcast
// of another number stays.
// CHECK-LABEL: energy.model @ones
// CHECK:       term @e {
// CHECK:         %[[V:.*]] = read @v : !energy.array<D>
// CHECK:         %[[TWOS:.*]] = broadcast
// CHECK-NOT:     mul %{{.*}}, %[[V]]
// CHECK-NOT:     mul %[[V]]
// CHECK:         %[[V2:.*]] = mul %[[TWOS]], %[[V]] : !energy.array<D>, !energy.array<D>
// CHECK:         add %[[V]], %[[V2]] : !energy.array<D>, !energy.array<D>
energy.model @ones {
  energy.dim @D
  energy.tensor @v : input [@D]
  energy.term @e {
    %v = energy.read @v : !energy.array<D>
    %one = energy.constant 1.0
    %two = energy.constant 2.0
    %ones = energy.broadcast %one : !energy.array<> to !energy.array<D>
    %twos = energy.broadcast %two : !energy.array<> to !energy.array<D>
    %v1 = energy.mul %ones, %v : !energy.array<D>, !energy.array<D>
    %v1b = energy.mul %v1, %ones : !energy.array<D>, !energy.array<D>
    %v2 = energy.mul %twos, %v : !energy.array<D>, !energy.array<D>
    %all = energy.add %v1b, %v2 : !energy.array<D>, !energy.array<D>
    %t = energy.reduce_elements sum %all : !energy.array<D>
    energy.yield %t : !energy.array<>
  }
}

// -----

// A transpose of a transpose is the matrix itself (the backward step's
// derivatives transpose the transposes of the energy's matrices); one
// transpose stays.
// CHECK-LABEL: energy.model @transposes
// CHECK:       term @e {
// CHECK:         %[[W:.*]] = read @w : !energy.array<N, D>
// CHECK-NEXT:    %[[T:.*]] = transpose %[[W]] : !energy.array<N, D>
// CHECK-NEXT:    %[[P:.*]] = matmul %[[T]], %[[W]] : !energy.array<D, N>, !energy.array<N, D>
// CHECK-NOT:     transpose
// CHECK:         reduce_elements sum %[[P]]
energy.model @transposes {
  energy.dim @N
  energy.dim @D
  energy.tensor @w : input [@N, @D]
  energy.term @e {
    %w = energy.read @w : !energy.array<N, D>
    %t = energy.transpose %w : !energy.array<N, D>
    %tt = energy.transpose %t : !energy.array<D, N>
    %p = energy.matmul %t, %tt : !energy.array<D, N>, !energy.array<N, D>
    %s = energy.reduce_elements sum %p : !energy.array<D, D>
    energy.yield %s : !energy.array<>
  }
}

// -----

// A slice of a slice is one slice at both sets of indices; an element of a
// table is the table's body at the element's indices; a sum of a body that
// does not depend on its indices is the body's value times the count.
// CHECK-LABEL: energy.model @slices
// CHECK:       gradient @s {
// CHECK:         %[[X:.*]] = read @x : !energy.array<N, H, D>
// CHECK:         foreach (%[[C:.*]] : @N, %[[K:.*]] : @H) {
// CHECK-NEXT:      %[[ROW:.*]] = extract %[[X]][%[[C]], %[[K]] + 1] : !energy.array<N, H, D> -> !energy.array<D>
// CHECK-NEXT:      %[[W:.*]] = read @w[%[[K]]] : !energy.array<D>
// CHECK-NEXT:      %[[P:.*]] = mul %[[W]], %[[ROW]]
// CHECK-NEXT:      accumulate %[[P]] into @s[%[[C]], %[[K]]]
// CHECK:       term @t {
// CHECK-NOT:     reduce
// CHECK:         %[[S:.*]] = size @N : index
// CHECK:         %[[R:.*]] = to_real %[[S]]
// CHECK:         mul %{{.*}}, %[[R]]
energy.model @slices {
  energy.dim @N
  energy.dim @H
  energy.dim @D
  energy.tensor @x : input [@N, @H, @D]
  energy.tensor @w : input [@H, @D]
  energy.tensor @s : state [@N, @H, @D]
  energy.gradient @s {
    %x = energy.read @x : !energy.array<N, H, D>
    energy.foreach (%c : @N, %k : @H) {
      %xc = energy.extract %x[%c] : !energy.array<N, H, D> -> !energy.array<H, D>
      %row = energy.extract %xc[%k + 1] : !energy.array<H, D> -> !energy.array<D>
      %table = energy.tabulate (%h : @H) {
        %wh = energy.read @w[%h] : !energy.array<D>
        %p = energy.mul %wh, %row : !energy.array<D>, !energy.array<D>
        energy.yield %p : !energy.array<D>
      } : !energy.array<H, D>
      %element = energy.extract %table[%k] : !energy.array<H, D> -> !energy.array<D>
      energy.accumulate %element into @s[%c, %k] : !energy.array<D>
    }
  }
  energy.term @t {
    %v = energy.read @w[0] : !energy.array<D>
    %sv = energy.sum_last %v : !energy.array<D>
    %total = energy.reduce sum (%n : @N) {
      energy.yield %sv : !energy.array<>
    } : !energy.array<>
    energy.yield %total : !energy.array<>
  }
}

// -----

// A table that only rearranges an array (its axes swapped), read in a loop
// after it, is read from the array itself; a table that computes is not
// recomputed in the loop.
// CHECK-LABEL: energy.model @rearranged
// CHECK:       gradient @s {
// CHECK:         %[[X:.*]] = read @x : !energy.array<H, N, D>
// CHECK-NEXT:    %[[T:.*]] = tabulate
// CHECK:         foreach (%[[C:.*]] : @N, %[[K:.*]] : @H) {
// CHECK-NEXT:      %[[ROW:.*]] = extract %[[X]][%[[K]], %[[C]]] : !energy.array<H, N, D> -> !energy.array<D>
// CHECK-NEXT:      %[[E:.*]] = extract %[[T]][%[[C]], %[[K]]]
// CHECK-NEXT:      %[[P:.*]] = mul %[[ROW]], %[[E]]
// CHECK-NEXT:      accumulate %[[P]] into @s[%[[C]], %[[K]]]
energy.model @rearranged {
  energy.dim @N
  energy.dim @H
  energy.dim @D
  energy.tensor @x : input [@H, @N, @D]
  energy.tensor @s : state [@N, @H, @D]
  energy.gradient @s {
    %x = energy.read @x : !energy.array<H, N, D>
    %swapped = energy.tabulate (%c : @N, %k : @H) {
      %row = energy.extract %x[%k, %c] : !energy.array<H, N, D> -> !energy.array<D>
      energy.yield %row : !energy.array<D>
    } : !energy.array<N, H, D>
    %exps = energy.tabulate (%c : @N, %k : @H) {
      %row = energy.extract %x[%k, %c] : !energy.array<H, N, D> -> !energy.array<D>
      %e = energy.exp %row : !energy.array<D>
      energy.yield %e : !energy.array<D>
    } : !energy.array<N, H, D>
    energy.foreach (%c : @N, %k : @H) {
      %element = energy.extract %swapped[%c, %k] : !energy.array<N, H, D> -> !energy.array<D>
      %e = energy.extract %exps[%c, %k] : !energy.array<N, H, D> -> !energy.array<D>
      %p = energy.mul %element, %e : !energy.array<D>, !energy.array<D>
      energy.accumulate %p into @s[%c, %k] : !energy.array<D>
    }
  }
}

// -----

// A table of the rows of a slice (the index of the table last, the others
// from outside it) is the slice: no copy per position of the loop.
// CHECK-LABEL: energy.model @slice_rows
// CHECK:       gradient @s {
// CHECK:         %[[X:.*]] = read @x : !energy.array<H, N, D>
// CHECK:         foreach (%[[C:.*]] : @N, %[[K:.*]] : @H) {
// CHECK-NEXT:      %[[SLICE:.*]] = extract %[[X]][%[[K]]] : !energy.array<H, N, D> -> !energy.array<N, D>
// CHECK-NEXT:      transpose %[[SLICE]]
// CHECK-NOT:       tabulate
energy.model @slice_rows {
  energy.dim @N
  energy.dim @H
  energy.dim @D
  energy.tensor @x : input [@H, @N, @D]
  energy.tensor @s : state [@N, @H, @D]
  energy.gradient @s {
    %x = energy.read @x : !energy.array<H, N, D>
    energy.foreach (%c : @N, %k : @H) {
      %rows = energy.tabulate (%n : @N) {
        %row = energy.extract %x[%k, %n] : !energy.array<H, N, D> -> !energy.array<D>
        energy.yield %row : !energy.array<D>
      } : !energy.array<N, D>
      %t = energy.transpose %rows : !energy.array<N, D>
      %first = energy.extract %t[0] : !energy.array<D, N> -> !energy.array<N>
      %a = energy.reduce_elements sum %first : !energy.array<N>
      %b = energy.extract %x[%k, %c] : !energy.array<H, N, D> -> !energy.array<D>
      %p = energy.mul %b, %a : !energy.array<D>, !energy.array<>
      energy.accumulate %p into @s[%c, %k] : !energy.array<D>
    }
  }
}

// -----

// A bilinear contraction per position c of a table reads its rows from a
// slice of an array (a table of a slice's rows is the slice): its rows stay
// rows of that slice, its table, not elements of the array at (c, r), which
// would leave it no table to read (the model generator's newton model).
// CHECK-LABEL: energy.model @sliced_tables
// CHECK:         %[[X:.*]] = read @x : !energy.array<N, R, D>
// CHECK:         tabulate (%[[C:.*]] : @N) {
// CHECK-NEXT:      %[[SLICE:.*]] = extract %[[X]][%[[C]]] : !energy.array<N, R, D> -> !energy.array<R, D>
// CHECK-NEXT:      softmax_contract bilinear rows (%[[I:.*]] : @R) cols (%[[J:.*]] : @R) score {
// CHECK-NEXT:        extract %[[SLICE]][%[[I]]] : !energy.array<R, D> -> !energy.array<D>
// CHECK-NEXT:        extract %[[SLICE]][%[[J]]] : !energy.array<R, D> -> !energy.array<D>
energy.model @sliced_tables {
  energy.dim @N
  energy.dim @R
  energy.dim @D
  energy.tensor @x : input [@N, @R, @D]
  energy.term @t {
    %x = energy.read @x : !energy.array<N, R, D>
    %lses = energy.tabulate (%c : @N) {
      %rows = energy.tabulate (%r : @R) {
        %row = energy.extract %x[%c, %r] : !energy.array<N, R, D> -> !energy.array<D>
        energy.yield %row : !energy.array<D>
      } : !energy.array<R, D>
      %l = energy.softmax_contract bilinear rows (%i : @R) cols (%j : @R) score {
        %a = energy.extract %rows[%i] : !energy.array<R, D> -> !energy.array<D>
        %b = energy.extract %rows[%j] : !energy.array<R, D> -> !energy.array<D>
        %s = energy.dot %a, %b : !energy.array<D>
        energy.yield %s : !energy.array<>
      } : !energy.array<R>
      energy.yield %l : !energy.array<R>
    } : !energy.array<N, R>
    %total = energy.reduce sum (%c : @N, %r : @R) {
      %e = energy.extract %lses[%c, %r] : !energy.array<N, R> -> !energy.array<>
      energy.yield %e : !energy.array<>
    } : !energy.array<>
    energy.yield %total : !energy.array<>
  }
}

// -----

// A sum or mean of zeros is zero under any predicate (differentiation
// leaves them where a body's derivative is 0); a sum of another constant
// under a predicate stays (its count is the predicate's).
// CHECK-LABEL: energy.model @zeros
// CHECK:       term @t {
// CHECK:         %[[O:.*]] = constant 1.000000e+00
// CHECK:         %[[B:.*]] = broadcast
// CHECK-NEXT:    %[[K:.*]] = reduce sum (%{{.*}} : @N) where
// CHECK:           yield %[[O]]
// CHECK:         %[[E:.*]] = reduce_elements sum %[[B]]
// CHECK-NEXT:    add %[[K]], %[[E]]
// CHECK-NOT:     reduce
energy.model @zeros {
  energy.dim @N
  energy.dim @D
  energy.term @t {
    %zero = energy.constant 0.0
    %one = energy.constant 1.0
    %zeros = energy.broadcast %zero : !energy.array<> to !energy.array<D>
    %s = energy.reduce sum (%i : @N, %j : @N) where {
      %ne = arith.cmpi ne, %i, %j : index
      energy.yield %ne : i1
    } {
      energy.yield %zero : !energy.array<>
    } : !energy.array<>
    %k = energy.reduce sum (%i : @N) where {
      %c = arith.constant 2 : index
      %lt = arith.cmpi slt, %i, %c : index
      energy.yield %lt : i1
    } {
      energy.yield %one : !energy.array<>
    } : !energy.array<>
    %m = energy.reduce mean (%i : @N) {
      energy.yield %zeros : !energy.array<D>
    } : !energy.array<D>
    %e = energy.reduce_elements sum %m : !energy.array<D>
    %t = energy.add %s, %k : !energy.array<>, !energy.array<>
    %u = energy.add %t, %e : !energy.array<>, !energy.array<>
    energy.yield %u : !energy.array<>
  }
}
