// RUN: energy-opt %s -split-input-file --energy-derive-gradients --cse --canonicalize | FileCheck %s

// Hopfield (004 §4): -∂E/∂x_i = Σ_μ softmax_μ(β x_i·m_μ) β m_μ. The lse
// becomes a loop over μ seeded with the softmax weight exp(s - L).
// CHECK-LABEL: energy.model @hopfield
// CHECK: gradient @x {
// CHECK:   %[[MINUS:.*]] = constant -1.000000e+00
// CHECK:   foreach (%[[I:.*]] : @N) {
// CHECK:     %[[L:.*]] = reduce lse (%{{.*}} : @K) {
// CHECK:     foreach (%[[MU:.*]] : @K) {
// CHECK:       %[[M:.*]] = read @m[%[[MU]]]
// CHECK:       %[[S:.*]] = mul %[[BETA:.*]], %{{.*}}
// CHECK:       %[[SHIFT:.*]] = sub %[[S]], %[[L]]
// CHECK:       %[[W:.*]] = exp %[[SHIFT]]
// CHECK:       %[[GS:.*]] = mul %[[W]], %[[MINUS]]
// CHECK:       %[[GD:.*]] = mul %[[GS]], %[[BETA]]
// CHECK:       %[[GX:.*]] = mul %[[GD]], %[[M]]
// CHECK:       accumulate %[[GX]] into @x[%[[I]]] : !energy.array<D>
energy.model @hopfield {
  energy.dim @N
  energy.dim @K
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @m : input [@K, @D]
  energy.const @beta = 1.0
  energy.term @retrieval {
    %e = energy.reduce sum (%i : @N) {
      %l = energy.reduce lse (%mu : @K) {
        %xi = energy.read @x[%i] : !energy.array<D>
        %mm = energy.read @m[%mu] : !energy.array<D>
        %d = energy.dot %xi, %mm : !energy.array<D>
        %b = energy.read @beta : !energy.array<>
        %s = energy.mul %b, %d : !energy.array<>, !energy.array<>
        energy.yield %s : !energy.array<>
      } : !energy.array<>
      energy.yield %l : !energy.array<>
    } : !energy.array<>
    %n = energy.neg %e : !energy.array<>
    energy.yield %n : !energy.array<>
  }
  energy.dynamics steps 5 {
    energy.update @x gd(lr = 1.0)
  }
}

// -----

// SLDS-style reads at an affine offset (004 §7): x[t + 1] and x[t] under
// sum(t: T - 1) accumulate at t + 1 and t; the lse weights are the
// responsibilities of the K regimes.
// CHECK-LABEL: energy.model @slds
// CHECK: gradient @x {
// CHECK:   foreach (%[[T:.*]] : @T - 1) {
// CHECK:     foreach (%{{.*}} : @K) {
// CHECK-DAG:   accumulate %{{.*}} into @x[%[[T]] + 1] : !energy.array<D>
// CHECK-DAG:   accumulate %{{.*}} into @x[%[[T]]] : !energy.array<D>
energy.model @slds {
  energy.dim @T
  energy.dim @K
  energy.dim @D
  energy.tensor @x : state [@T, @D]
  energy.tensor @A : param [@K, @D, @D]
  energy.tensor @prec : param [@K, @D, @D]
  energy.term @dyn {
    %e = energy.reduce sum (%t : @T - 1) {
      %l = energy.reduce lse (%k : @K) {
        %next = energy.read @x[%t + 1] : !energy.array<D>
        %a = energy.read @A[%k] : !energy.array<D, D>
        %cur = energy.read @x[%t] : !energy.array<D>
        %pred = energy.matmul %a, %cur : !energy.array<D, D>, !energy.array<D>
        %r = energy.sub %next, %pred : !energy.array<D>, !energy.array<D>
        %p = energy.read @prec[%k] : !energy.array<D, D>
        %q = energy.quad %r, %p : !energy.array<D>, !energy.array<D, D>
        %half = energy.constant -0.5
        %s = energy.mul %half, %q : !energy.array<>, !energy.array<>
        energy.yield %s : !energy.array<>
      } : !energy.array<>
      energy.yield %l : !energy.array<>
    } : !energy.array<>
    %n = energy.neg %e : !energy.array<>
    energy.yield %n : !energy.array<>
  }
  energy.dynamics steps 50 {
    energy.update @x gd(lr = 0.05)
  }
}

// -----

// A causal predicate and a temperature are kept in the loop that reverses
// the lse: the weight is exp((s - L) / T) over the admitted positions only.
// A let read is inlined before differentiation.
// CHECK-LABEL: energy.model @causal
// CHECK: gradient @x {
// CHECK:   foreach (%[[I:.*]] : @N) {
// CHECK:     foreach (%[[J:.*]] : @N) where {
// CHECK:       arith.cmpi sle, %[[J]], %[[I]] : index
// CHECK:     } {
// CHECK:       %[[SHIFT:.*]] = sub %{{.*}}, %{{.*}} : !energy.array<>, !energy.array<>
// CHECK:       %[[SCALED:.*]] = div %[[SHIFT]], %[[TAU:.*]] : !energy.array<>, !energy.array<>
// CHECK:       exp %[[SCALED]]
// CHECK-DAG:   accumulate %{{.*}} into @x[%[[J]]]
// CHECK-DAG:   accumulate %{{.*}} into @x[%[[I]]]
energy.model @causal {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @W : param [@D, @D]
  energy.const @tau = 8.0
  energy.let @q [%c : @N] : !energy.array<D> {
    %w = energy.read @W : !energy.array<D, D>
    %xc = energy.read @x[%c] : !energy.array<D>
    %q = energy.matmul %w, %xc : !energy.array<D, D>, !energy.array<D>
    energy.yield %q : !energy.array<D>
  }
  energy.term @attn {
    %tau = energy.read @tau : !energy.array<>
    %e = energy.reduce sum (%i : @N) {
      %l = energy.reduce lse (%j : @N) where {
        %ok = arith.cmpi sle, %j, %i : index
        energy.yield %ok : i1
      } temp(%tau : !energy.array<>) {
        %qi = energy.read @q[%i] : !energy.array<D>
        %xj = energy.read @x[%j] : !energy.array<D>
        %s = energy.dot %qi, %xj : !energy.array<D>
        energy.yield %s : !energy.array<>
      } : !energy.array<>
      energy.yield %l : !energy.array<>
    } : !energy.array<>
    %n = energy.neg %e : !energy.array<>
    energy.yield %n : !energy.array<>
  }
  energy.dynamics steps 1 {
    energy.update @x gd(lr = 1.0)
  }
}

// -----

// A term that does not read the tensor adds nothing; one value used inside
// a reduction but computed outside it is recomputed inside it.
// CHECK-LABEL: energy.model @sinking
// CHECK: gradient @x {
// CHECK-NOT: @other
// CHECK:   %[[X:.*]] = read @x : !energy.array<N>
// CHECK:   foreach (%[[I:.*]] : @N) {
// CHECK:     %[[TOTAL:.*]] = reduce_elements sum %[[X]]
// CHECK:     %[[XI:.*]] = read @x[%[[I]]] : !energy.array<>
// CHECK:     accumulate %[[TOTAL]] into @x[%[[I]]] : !energy.array<>
// CHECK:     %[[SPREAD:.*]] = broadcast %[[XI]] : !energy.array<> to !energy.array<N>
// CHECK:     accumulate %[[SPREAD]] into @x : !energy.array<N>
// CHECK:   }
energy.model @sinking {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.tensor @y : state [@N]
  energy.term @other {
    %y = energy.read @y : !energy.array<N>
    %s = energy.reduce_elements sqnorm %y : !energy.array<N>
    energy.yield %s : !energy.array<>
  }
  energy.term @coupled {
    %x = energy.read @x : !energy.array<N>
    %total = energy.reduce_elements sum %x : !energy.array<N>
    %e = energy.reduce sum (%i : @N) {
      %xi = energy.read @x[%i] : !energy.array<>
      %p = energy.mul %xi, %total : !energy.array<>, !energy.array<>
      energy.yield %p : !energy.array<>
    } : !energy.array<>
    energy.yield %e : !energy.array<>
  }
  energy.dynamics steps 1 {
    energy.update @x gd(lr = 1.0)
  }
}

// -----

// A read of a let that fixes only the first of its domain's indices is the
// slice Σ_s embed(element at s) into [s], differentiated op by op: the
// adjoint of each element is its entry of the slice's adjoint.
// CHECK-LABEL: energy.model @let_row
// CHECK: gradient @mu {
// CHECK:   foreach (%[[R:.*]] : @N) {
// CHECK:     %[[ROW:.*]] = reduce sum (%[[S:.*]] : @S) {
// CHECK:       %[[E:.*]] = dot
// CHECK:       %[[ONE:.*]] = embed %[[E]] into [%[[S]]] : !energy.array<> -> !energy.array<S>
// CHECK:       yield %[[ONE]] : !energy.array<S>
// CHECK:     foreach (%[[S2:.*]] : @S) {
// CHECK:       %[[A:.*]] = extract %{{.*}}[%[[S2]]]
// CHECK:       accumulate %{{.*}} into @mu[%[[S2]]] : !energy.array<D>
energy.model @let_row {
  energy.dim @N
  energy.dim @S
  energy.dim @D
  energy.tensor @x : input [@N, @D]
  energy.tensor @mu : state [@S, @D]
  energy.let @sc [%r : @N, %s : @S] : !energy.array<> {
    %xr = energy.read @x[%r] : !energy.array<D>
    %ms = energy.read @mu[%s] : !energy.array<D>
    %d = energy.dot %xr, %ms : !energy.array<D>
    energy.yield %d : !energy.array<>
  }
  energy.term @e {
    %0 = energy.reduce sum (%r : @N) {
      %row = energy.read @sc[%r] : !energy.array<S>
      %l = energy.reduce_elements lse %row : !energy.array<S>
      energy.yield %l : !energy.array<>
    } : !energy.array<>
    %n = energy.neg %0 : !energy.array<>
    energy.yield %n : !energy.array<>
  }
  energy.dynamics steps 1 {
    energy.update @mu gd(lr = 0.1)
  }
}
