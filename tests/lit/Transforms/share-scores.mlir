// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy.model(energy-share-scores))' | FileCheck %s

// Column sums kept apart with the normaliser of an earlier contraction of
// the same scores (and no pair terms in either) may read its scores.
// CHECK-LABEL: energy.model @same
// CHECK:       %[[A:.*]]:2 = softmax_contract bilinear
// CHECK:       } : !energy.array<N>, !energy.array<N, D>
// CHECK:       softmax_contract bilinear rows ({{.*}}) cols ({{.*}}) lse(%[[A]]#0 : !energy.array<N>) score {
// CHECK:       } {reuses_scores} : !energy.array<N, D>
energy.model @same {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @y : state [@N, @D]
  gradient @x {
    %q = read @x : !energy.array<N, D>
    %k = read @y : !energy.array<N, D>
    %a:2 = softmax_contract bilinear rows (%c : @N) cols (%p : @N) score {
      %1 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %3 = dot %1, %2 : !energy.array<D>
      yield %3 : !energy.array<>
    } row_values {
      %1 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      yield %1 : !energy.array<D>
    } : !energy.array<N>, !energy.array<N, D>
    %b = softmax_contract bilinear rows (%c : @N) cols (%p : @N) lse(%a#0 : !energy.array<N>) score {
      %1 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %3 = dot %1, %2 : !energy.array<D>
      yield %3 : !energy.array<>
    } col_values {
      %1 = extract %a#1[%c] : !energy.array<N, D> -> !energy.array<D>
      yield %1 : !energy.array<D>
    } : !energy.array<N, D>
    accumulate %b into @x : !energy.array<N, D>
  }
}

// -----

// Another score table: the scores differ, nothing is marked.
// CHECK-LABEL: energy.model @other_score
// CHECK-NOT:   reuses_scores
energy.model @other_score {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @y : state [@N, @D]
  gradient @x {
    %q = read @x : !energy.array<N, D>
    %k = read @y : !energy.array<N, D>
    %a:2 = softmax_contract bilinear rows (%c : @N) cols (%p : @N) score {
      %1 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %3 = dot %1, %2 : !energy.array<D>
      yield %3 : !energy.array<>
    } row_values {
      %1 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      yield %1 : !energy.array<D>
    } : !energy.array<N>, !energy.array<N, D>
    %b = softmax_contract bilinear rows (%c : @N) cols (%p : @N) lse(%a#0 : !energy.array<N>) score {
      %1 = extract %k[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %3 = dot %1, %2 : !energy.array<D>
      yield %3 : !energy.array<>
    } col_values {
      %1 = extract %a#1[%c] : !energy.array<N, D> -> !energy.array<D>
      yield %1 : !energy.array<D>
    } : !energy.array<N, D>
    accumulate %b into @x : !energy.array<N, D>
  }
}

// -----

// The later one weighs its sums by a pair term that the earlier one does
// not compute: nothing is marked.
// CHECK-LABEL: energy.model @other_pair_terms
// CHECK-NOT:   reuses_scores
energy.model @other_pair_terms {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @y : state [@N, @D]
  gradient @x {
    %q = read @x : !energy.array<N, D>
    %k = read @y : !energy.array<N, D>
    %a:2 = softmax_contract bilinear rows (%c : @N) cols (%p : @N) score {
      %1 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %3 = dot %1, %2 : !energy.array<D>
      yield %3 : !energy.array<>
    } row_values {
      %1 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      yield %1 : !energy.array<D>
    } : !energy.array<N>, !energy.array<N, D>
    %b = softmax_contract bilinear rows (%c : @N) cols (%p : @N) lse(%a#0 : !energy.array<N>) score {
      %1 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %3 = dot %1, %2 : !energy.array<D>
      yield %3 : !energy.array<>
    } col_values {
      %1 = extract %a#1[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %3 = extract %a#1[%p] : !energy.array<N, D> -> !energy.array<D>
      %4 = dot %2, %3 : !energy.array<D>
      %5 = mul %4, %1 : !energy.array<>, !energy.array<D>
      yield %5 : !energy.array<D>
    } : !energy.array<N, D>
    accumulate %b into @x : !energy.array<N, D>
  }
}

// -----

// The later one weighs its sums by one of the earlier one's two pair terms
// (the second): it may read the earlier one's tiles.
// CHECK-LABEL: energy.model @some_pair_terms
// CHECK:       softmax_contract bilinear rows ({{.*}}) cols ({{.*}}) lse(
// CHECK:       } {reuses_scores} : !energy.array<N, D>
energy.model @some_pair_terms {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @y : state [@N, @D]
  tensor @u : state [@N, @D]
  tensor @v : state [@N, @D]
  gradient @x {
    %q = read @x : !energy.array<N, D>
    %k = read @y : !energy.array<N, D>
    %r = read @u : !energy.array<N, D>
    %s = read @v : !energy.array<N, D>
    %a:2 = softmax_contract bilinear rows (%c : @N) cols (%p : @N) score {
      %1 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %3 = dot %1, %2 : !energy.array<D>
      yield %3 : !energy.array<>
    } row_values {
      %1 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %s[%p] : !energy.array<N, D> -> !energy.array<D>
      %3 = dot %1, %2 : !energy.array<D>
      %4 = extract %r[%c] : !energy.array<N, D> -> !energy.array<D>
      %5 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %6 = dot %4, %5 : !energy.array<D>
      %7 = add %3, %6 : !energy.array<>, !energy.array<>
      %8 = mul %7, %5 : !energy.array<>, !energy.array<D>
      yield %8 : !energy.array<D>
    } : !energy.array<N>, !energy.array<N, D>
    %b = softmax_contract bilinear rows (%c : @N) cols (%p : @N) lse(%a#0 : !energy.array<N>) score {
      %1 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %3 = dot %1, %2 : !energy.array<D>
      yield %3 : !energy.array<>
    } col_values {
      %1 = extract %r[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %3 = dot %1, %2 : !energy.array<D>
      %4 = extract %a#1[%c] : !energy.array<N, D> -> !energy.array<D>
      %5 = mul %3, %4 : !energy.array<>, !energy.array<D>
      yield %5 : !energy.array<D>
    } : !energy.array<N, D>
    accumulate %b into @x : !energy.array<N, D>
  }
}
