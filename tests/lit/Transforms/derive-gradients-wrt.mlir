// RUN: energy-opt %s --energy-derive-gradients=wrt=Wq --cse --canonicalize | FileCheck %s

// Self-attention (004 §6): x is read through the child index (c) and the
// parent index (p), so its gradient gets the "explained by its parents" term
// Wqᵀ Σ_p w k_p accumulated at c and the "explaining its children" term
// Wkᵀ Σ_c w q_c accumulated at p. The params get the sum over all pairs.
// CHECK-LABEL: energy.model @self_attention
// CHECK: gradient @x {
// CHECK:   foreach (%[[C:.*]] : @N) {
// CHECK:     foreach (%[[P:.*]] : @N) {
// CHECK:       %[[WQ:.*]] = read @Wq
// CHECK:       %[[Q:.*]] = matmul %[[WQ]]
// CHECK:       %[[WK:.*]] = read @Wk
// CHECK:       %[[K:.*]] = matmul %[[WK]]
// CHECK:       %[[GQ:.*]] = mul %[[G:.*]], %[[K]]
// CHECK:       %[[GK:.*]] = mul %[[G]], %[[Q]]
// CHECK:       %[[WKT:.*]] = transpose %[[WK]]
// CHECK:       %[[PARENT:.*]] = matmul %[[WKT]], %[[GK]]
// CHECK:       accumulate %[[PARENT]] into @x[%[[P]]]
// CHECK:       %[[WQT:.*]] = transpose %[[WQ]]
// CHECK:       %[[CHILD:.*]] = matmul %[[WQT]], %[[GQ]]
// CHECK:       accumulate %[[CHILD]] into @x[%[[C]]]
// CHECK: gradient @Wq {
// CHECK:   foreach
// CHECK:     foreach
// CHECK:       %[[DWQ:.*]] = outer %{{.*}}, %{{.*}} : !energy.array<D>, !energy.array<D>
// CHECK:       accumulate %[[DWQ]] into @Wq : !energy.array<D, D>
energy.model @self_attention {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @Wq : param [@D, @D]
  energy.tensor @Wk : param [@D, @D]
  energy.term @attn {
    %e = energy.reduce sum (%c : @N) {
      %l = energy.reduce lse (%p : @N) {
        %wq = energy.read @Wq : !energy.array<D, D>
        %xc = energy.read @x[%c] : !energy.array<D>
        %q = energy.matmul %wq, %xc : !energy.array<D, D>, !energy.array<D>
        %wk = energy.read @Wk : !energy.array<D, D>
        %xp = energy.read @x[%p] : !energy.array<D>
        %k = energy.matmul %wk, %xp : !energy.array<D, D>, !energy.array<D>
        %s = energy.dot %q, %k : !energy.array<D>
        energy.yield %s : !energy.array<>
      } : !energy.array<>
      energy.yield %l : !energy.array<>
    } : !energy.array<>
    %n = energy.neg %e : !energy.array<>
    energy.yield %n : !energy.array<>
  }
  energy.dynamics steps 12 {
    energy.update @x gd(lr = 0.1)
  }
}
