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
// CHECK-DAG:       %[[SCALED:.*]] = mul %[[P]], %[[R]] : !energy.array<K>, !energy.array<>
// CHECK-DAG:       %[[NEG:.*]] = neg %[[SCALED]] : !energy.array<K>
// CHECK-DAG:       accumulate %[[NEG]] into @w : !energy.array<K>
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
