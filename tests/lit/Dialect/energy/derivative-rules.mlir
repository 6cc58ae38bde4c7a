// RUN: energy-opt %s --allow-unregistered-dialect --energy-test-derivative-rules | FileCheck %s
// RUN: energy-opt %s --allow-unregistered-dialect --energy-check-differentiable | FileCheck %s --check-prefix=CLEAN

// Every differentiable op builds its adjoint rule for a seed of ones; the
// test pass checks that each adjoint has its operand's type, and the CHECK
// lines below check that each rule has the shape of its math comment.

// CLEAN-LABEL: energy.model @rules
// CHECK-LABEL: energy.model @rules
energy.model @rules {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @W : param [@D, @D]
  energy.tensor @v : param [@D]
  energy.term @e {
    %W = energy.read @W : !energy.array<D, D>
    %v = energy.read @v : !energy.array<D>
    %c = energy.constant 3.0

    // d(c * v): the scalar operand's adjoint is summed over the vector.
    // CHECK: %[[CV:.*]] = mul %[[C:.*]], %[[V:.*]] {test.adjoint}
    // CHECK: %[[SEED:.*]] = broadcast %{{.*}} : !energy.array<> to !energy.array<D>
    // CHECK: %[[GV:.*]] = mul %[[SEED]], %[[V]] : !energy.array<D>, !energy.array<D>
    // CHECK: %[[GC:.*]] = reduce_elements sum %[[GV]] : !energy.array<D>
    // CHECK: %[[GW:.*]] = mul %[[SEED]], %[[C]] : !energy.array<D>, !energy.array<>
    // CHECK: "test.adjoints"(%[[GC]], %[[GW]])
    %cv = energy.mul %c, %v {test.adjoint} : !energy.array<>, !energy.array<D>

    // d tanh(x) = (1 - tanh(x)²) dx
    // CHECK: %[[T:.*]] = tanh %[[CV]] {test.adjoint}
    // CHECK: %[[TT:.*]] = mul %[[T]], %[[T]]
    // CHECK: %[[ONEMINUS:.*]] = sub %{{.*}}, %[[TT]]
    // CHECK: %[[GT:.*]] = mul %{{.*}}, %[[ONEMINUS]]
    // CHECK: "test.adjoints"(%[[GT]])
    %t = energy.tanh %cv {test.adjoint} : !energy.array<D>

    // y = W v: dW = g vᵀ, dv = Wᵀ g
    // CHECK: %[[MV:.*]] = matmul %[[W:.*]], %[[T]] {test.adjoint}
    // CHECK: %[[DW:.*]] = outer %{{.*}}, %[[T]]
    // CHECK: %[[WT:.*]] = transpose %[[W]]
    // CHECK: %[[DV:.*]] = matmul %[[WT]], %{{.*}}
    // CHECK: "test.adjoints"(%[[DW]], %[[DV]])
    %mv = energy.matmul %W, %t {test.adjoint} : !energy.array<D, D>, !energy.array<D>

    // d (vᵀ M v) = (M + Mᵀ) v dv + v vᵀ dM
    // CHECK: quad %[[MV]], %[[W]] {test.adjoint}
    // CHECK: %[[MTT:.*]] = transpose %[[W]]
    // CHECK: %[[SYM:.*]] = add %[[W]], %[[MTT]]
    // CHECK: matmul %[[SYM]], %[[MV]]
    // CHECK: outer %[[MV]], %[[MV]]
    %q = energy.quad %mv, %W {test.adjoint} : !energy.array<D>, !energy.array<D, D>

    // y = softmax(x): dx = y (g - Σ g y)
    // CHECK: %[[S:.*]] = softmax %[[MV]] {test.adjoint}
    // CHECK: %[[GY:.*]] = mul %{{.*}}, %[[S]]
    // CHECK: %[[SUM:.*]] = sum_last %[[GY]] : !energy.array<D>
    // CHECK: %[[DIFF:.*]] = sub %{{.*}}, %[[SUM]] : !energy.array<D>, !energy.array<>
    // CHECK: mul %[[S]], %[[DIFF]]
    %s = energy.softmax %mv {test.adjoint} : !energy.array<D>

    // d log det M = M⁻ᵀ dM
    // CHECK: logdet %[[W]] {test.adjoint}
    // CHECK: %[[INV:.*]] = inverse %[[W]]
    // CHECK: %[[INVT:.*]] = transpose %[[INV]]
    // CHECK: mul %{{.*}}, %[[INVT]] : !energy.array<>, !energy.array<D, D>
    %ld = energy.logdet %W {test.adjoint} : !energy.array<D, D>

    // The rules of the normalisations and of silu_int compose from other ops.
    // CHECK: layernorm %{{.*}} {test.adjoint}
    // CHECK: sqrt
    // CHECK: "test.adjoints"
    %ln = energy.layernorm %s {test.adjoint} : !energy.array<D>
    // CHECK: silu_int %{{.*}} {test.adjoint}
    // CHECK: %[[SILU:.*]] = silu
    // CHECK: mul %{{.*}}, %[[SILU]]
    %si = energy.silu_int %ln {test.adjoint} : !energy.array<D>
    %sd = energy.dot %si, %v {test.adjoint} : !energy.array<D>

    // lse with a temperature: the temperature's adjoint is (L - Σ w e) / T,
    // with Σ w e a copy of the domain (predicate included) weighting its body.
    // CHECK: %[[L:.*]] = reduce lse (%{{.*}} : @N) where {
    // CHECK: } temp(%[[TEMP:.*]] : !energy.array<>) {
    // CHECK: } {test.adjoint} : !energy.array<>
    // CHECK: %[[WE:.*]] = reduce sum (%{{.*}} : @N) where {
    // CHECK: arith.cmpi sgt
    // CHECK: sub %{{.*}}, %[[L]]
    // CHECK: div %{{.*}}, %[[TEMP]]
    // CHECK: exp
    // CHECK: } : !energy.array<>
    // CHECK: sub %[[L]], %[[WE]]
    %l = energy.reduce lse (%i : @N) where {
      %zero = arith.constant 0 : index
      %ok = arith.cmpi sgt, %i, %zero : index
      energy.yield %ok : i1
    } temp(%c : !energy.array<>) {
      %xi = energy.read @x[%i] : !energy.array<D>
      %d = energy.dot %xi, %v : !energy.array<D>
      energy.yield %d : !energy.array<>
    } {test.adjoint} : !energy.array<>

    %a0 = energy.add %q, %ld : !energy.array<>, !energy.array<>
    %a1 = energy.add %a0, %sd : !energy.array<>, !energy.array<>
    %a2 = energy.add %a1, %l : !energy.array<>, !energy.array<>
    energy.yield %a2 : !energy.array<>
  }
}
