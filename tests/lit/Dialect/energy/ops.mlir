// RUN: energy-opt %s | FileCheck %s
// RUN: energy-opt %s | energy-opt | FileCheck %s
// RUN: energy-opt %s --mlir-print-op-generic | energy-opt | FileCheck %s

// Declarations: dims (bound, defaulted, derived), tensors of every role and
// initialiser, consts.
// CHECK-LABEL: energy.model @declarations
energy.model @declarations {
  // CHECK: dim @N
  // CHECK: dim @D = 64
  // CHECK: dim @H = 4
  // CHECK: dim @Dh = @D / @H
  // CHECK: dim @T2 = @N * 2 - 1
  energy.dim @N
  energy.dim @D = 64
  energy.dim @H = 4
  energy.dim @Dh = @D / @H
  energy.dim @T2 = @N * 2 - 1
  // CHECK: tensor @x : input [@N, @D]
  // CHECK: tensor @z : state [@N, @D] = @x
  // CHECK: tensor @Wq : param [@H, @Dh, @D] = normal(0.000000e+00, 2.000000e-02)
  // CHECK: tensor @U : param [@D] = uniform(-1.000000e+00, 1.000000e+00)
  // CHECK: tensor @P : state [@H, @D, @D] = eye
  // CHECK: tensor @b : param [@D] = zeros
  // CHECK: tensor @g : param [@D] = ones
  energy.tensor @x : input [@N, @D]
  energy.tensor @z : state [@N, @D] = @x
  energy.tensor @Wq : param [@H, @Dh, @D] = normal(0.0, 0.02)
  energy.tensor @U : param [@D] = uniform(-1.0, 1.0)
  energy.tensor @P : state [@H, @D, @D] = eye
  energy.tensor @b : param [@D] = zeros
  energy.tensor @g : param [@D] = ones
  // CHECK: const @tau = 8.000000e+00
  energy.const @tau = 8.0
}

// Leaves, elementwise math and vector math, all inside one term.
// CHECK-LABEL: energy.model @expressions
energy.model @expressions {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @W : param [@D, @D]
  energy.tensor @v : param [@D]
  energy.const @beta = 2.0
  // CHECK: term @all
  energy.term @all {
    // CHECK: %[[C:.*]] = constant 1.500000e+00
    %c = energy.constant 1.5
    // CHECK: %[[BETA:.*]] = read @beta : !energy.array<>
    %beta = energy.read @beta : !energy.array<>
    // CHECK: %[[S:.*]] = step : index
    %s = energy.step : index
    // CHECK: %[[N:.*]] = size @N - 1 : index
    %n = energy.size @N - 1 : index
    // CHECK: read @x[%[[N]]] : !energy.array<D>
    %xn = energy.read @x[%n] : !energy.array<D>
    // CHECK: read @x[symbol(%[[N]]) - 1] : !energy.array<D>
    %xm = energy.read @x[symbol(%n) - 1] : !energy.array<D>
    // CHECK: read @x[%[[N]], %[[S]]] : !energy.array<>
    %xe = energy.read @x[%n, %s] : !energy.array<>
    // CHECK: rounding_unit
    %eps = energy.rounding_unit
    // CHECK: to_real %[[S]] : !energy.array<>
    %sr = energy.to_real %s : !energy.array<>
    // CHECK: eye @D : !energy.array<D, D>
    %eye = energy.eye @D : !energy.array<D, D>
    %W = energy.read @W : !energy.array<D, D>
    %v = energy.read @v : !energy.array<D>
    // CHECK: add %{{.*}}, %{{.*}} : !energy.array<D>, !energy.array<D>
    %a0 = energy.add %xn, %xm : !energy.array<D>, !energy.array<D>
    // CHECK: sub %{{.*}}, %{{.*}} : !energy.array<D>, !energy.array<>
    %a1 = energy.sub %a0, %c : !energy.array<D>, !energy.array<>
    // CHECK: mul %{{.*}}, %{{.*}} : !energy.array<>, !energy.array<D>
    %a2 = energy.mul %beta, %a1 : !energy.array<>, !energy.array<D>
    // CHECK: div
    %a3 = energy.div %a2, %sr : !energy.array<D>, !energy.array<>
    // CHECK: maximum
    %a4 = energy.maximum %a3, %v : !energy.array<D>, !energy.array<D>
    // CHECK: neg
    %u0 = energy.neg %a4 : !energy.array<D>
    // CHECK: pow %{{.*}}, -2 : !energy.array<D>
    %u1 = energy.pow %u0, -2 : !energy.array<D>
    // CHECK: exp
    %u2 = energy.exp %u1 : !energy.array<D>
    // CHECK: log
    %u3 = energy.log %u2 : !energy.array<D>
    // CHECK: tanh
    %u4 = energy.tanh %u3 : !energy.array<D>
    // CHECK: sigmoid
    %u5 = energy.sigmoid %u4 : !energy.array<D>
    // CHECK: silu {{.*}}
    %u6 = energy.silu %u5 : !energy.array<D>
    // CHECK: softplus
    %u7 = energy.softplus %u6 : !energy.array<D>
    // CHECK: gelu
    %u8 = energy.gelu %u7 : !energy.array<D>
    // CHECK: erf
    %u9 = energy.erf %u8 : !energy.array<D>
    // CHECK: relu
    %u10 = energy.relu %u9 : !energy.array<D>
    // CHECK: heaviside
    %u11 = energy.heaviside %u10 : !energy.array<D>
    // CHECK: sign
    %u12 = energy.sign %u11 : !energy.array<D>
    // CHECK: sqrt
    %u13 = energy.sqrt %u12 : !energy.array<D>
    // CHECK: abs
    %u14 = energy.abs %u13 : !energy.array<D>
    // CHECK: silu_int
    %u15 = energy.silu_int %u14 : !energy.array<D>
    // CHECK: softmax
    %u16 = energy.softmax %u15 : !energy.array<D>
    // CHECK: log_softmax
    %u17 = energy.log_softmax %u16 : !energy.array<D>
    // CHECK: rmsnorm
    %u18 = energy.rmsnorm %u17 : !energy.array<D>
    // CHECK: layernorm
    %u19 = energy.layernorm %u18 : !energy.array<D>
    // CHECK: inverse %{{.*}} : !energy.array<D, D>
    %inv = energy.inverse %W : !energy.array<D, D>
    // CHECK: matmul %{{.*}}, %{{.*}} : !energy.array<D, D>, !energy.array<D>
    %m0 = energy.matmul %inv, %u19 : !energy.array<D, D>, !energy.array<D>
    // CHECK: matmul %{{.*}}, %{{.*}} : !energy.array<D, D>, !energy.array<D, D>
    %m1 = energy.matmul %inv, %eye : !energy.array<D, D>, !energy.array<D, D>
    // CHECK: transpose %{{.*}} : !energy.array<D, D>
    %m2 = energy.transpose %m1 : !energy.array<D, D>
    // CHECK: dot %{{.*}}, %{{.*}} : !energy.array<D>
    %d0 = energy.dot %m0, %v : !energy.array<D>
    // CHECK: quad %{{.*}}, %{{.*}} : !energy.array<D>, !energy.array<D, D>
    %d1 = energy.quad %v, %m2 : !energy.array<D>, !energy.array<D, D>
    // CHECK: outer %{{.*}}, %{{.*}} : !energy.array<D>, !energy.array<D>
    %o = energy.outer %v, %m0 : !energy.array<D>, !energy.array<D>
    // CHECK: reduce_elements sum
    %r0 = energy.reduce_elements sum %o : !energy.array<D, D>
    // CHECK: reduce_elements mean
    %r1 = energy.reduce_elements mean %v : !energy.array<D>
    // CHECK: reduce_elements maxabs
    %r2 = energy.reduce_elements maxabs %v : !energy.array<D>
    // CHECK: reduce_elements lse
    %r3 = energy.reduce_elements lse %v : !energy.array<D>
    // CHECK: reduce_elements sqnorm
    %r4 = energy.reduce_elements sqnorm %v : !energy.array<D>
    // CHECK: reduce_elements norm
    %r5 = energy.reduce_elements norm %v : !energy.array<D>
    // CHECK: sum_last %{{.*}} : !energy.array<D, D>
    %sl = energy.sum_last %o : !energy.array<D, D>
    // CHECK: broadcast %{{.*}} : !energy.array<D> to !energy.array<D, D>
    %bc = energy.broadcast %sl : !energy.array<D> to !energy.array<D, D>
    // CHECK: diag %{{.*}} : !energy.array<D>
    %dg = energy.diag %v : !energy.array<D>
    // CHECK: diag_part %{{.*}} : !energy.array<D, D>
    %dp = energy.diag_part %bc : !energy.array<D, D>
    // CHECK: logdet %{{.*}} : !energy.array<D, D>
    %ld = energy.logdet %dg : !energy.array<D, D>
    // CHECK: cmp lt, %{{.*}}, %{{.*}} : !energy.array<>
    %lt = energy.cmp lt, %r0, %r1 : !energy.array<>
    %t0 = energy.add %d0, %d1 : !energy.array<>, !energy.array<>
    %t1 = energy.add %t0, %r2 : !energy.array<>, !energy.array<>
    %t2 = energy.add %t1, %r3 : !energy.array<>, !energy.array<>
    %t3 = energy.add %t2, %r4 : !energy.array<>, !energy.array<>
    %t4 = energy.add %t3, %r5 : !energy.array<>, !energy.array<>
    %t5 = energy.add %t4, %ld : !energy.array<>, !energy.array<>
    %t6 = energy.add %t5, %xe : !energy.array<>, !energy.array<>
    %t7 = energy.dot %dp, %v : !energy.array<D>
    %t8 = energy.add %t6, %t7 : !energy.array<>, !energy.array<>
    // CHECK: yield %{{.*}} : !energy.array<>
    energy.yield %t8 : !energy.array<>
  }
}

// Reductions over index domains: several indices, a predicate, a temperature,
// an affine domain size, a vector-valued body; a let and an output.
// CHECK-LABEL: energy.model @reductions
energy.model @reductions {
  energy.dim @N
  energy.dim @H
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @Wq : param [@H, @D, @D]
  energy.const @tau = 8.0
  // CHECK: let @q [%{{.*}} : @N, %{{.*}} : @H] : !energy.array<D> {
  energy.let @q [%c : @N, %h : @H] : !energy.array<D> {
    %w = energy.read @Wq[%h] : !energy.array<D, D>
    %xc = energy.read @x[%c] : !energy.array<D>
    %q = energy.matmul %w, %xc : !energy.array<D, D>, !energy.array<D>
    energy.yield %q : !energy.array<D>
  }
  // CHECK: term @causal
  energy.term @causal {
    %tau = energy.read @tau : !energy.array<>
    // CHECK: reduce sum (%[[K:.*]] : @H, %[[I:.*]] : @N) {
    %e = energy.reduce sum (%k : @H, %i : @N) {
      // CHECK: reduce lse (%[[J:.*]] : @N) where {
      // CHECK: arith.cmpi sle, %[[J]], %[[I]] : index
      // CHECK: } temp(%{{.*}} : !energy.array<>) {
      %l = energy.reduce lse (%j : @N) where {
        %ok = arith.cmpi sle, %j, %i : index
        energy.yield %ok : i1
      } temp(%tau : !energy.array<>) {
        %q = energy.read @q[%i, %k] : !energy.array<D>
        %xj = energy.read @x[%j] : !energy.array<D>
        %s = energy.dot %q, %xj : !energy.array<D>
        energy.yield %s : !energy.array<>
      } : !energy.array<>
      energy.yield %l : !energy.array<>
    } : !energy.array<>
    // CHECK: reduce mean (%[[T:.*]] : @N - 1) {
    // CHECK: read @x[%[[T]] + 1] : !energy.array<D>
    %m = energy.reduce mean (%t : @N - 1) {
      %next = energy.read @x[%t + 1] : !energy.array<D>
      energy.yield %next : !energy.array<D>
    } : !energy.array<D>
    // CHECK: reduce max
    %mx = energy.reduce max (%t : @N) {
      %xt = energy.read @x[%t, %t] : !energy.array<>
      energy.yield %xt : !energy.array<>
    } : !energy.array<>
    %mm = energy.reduce_elements sum %m : !energy.array<D>
    %s0 = energy.add %e, %mm : !energy.array<>, !energy.array<>
    %s1 = energy.add %s0, %mx : !energy.array<>, !energy.array<>
    energy.yield %s1 : !energy.array<>
  }
  // CHECK: output @F [%{{.*}} : @N, %{{.*}} : @D] : !energy.array<> {
  energy.output @F [%t : @N, %j : @D] : !energy.array<> {
    %v = energy.read @x[%t, %j] : !energy.array<>
    energy.yield %v : !energy.array<>
  }
}

// Dynamics: every rule form, options as literals, strings and bodies, a
// step count from a dim, sequential order and a stopping rule.
// CHECK-LABEL: energy.model @dynamics
energy.model @dynamics {
  energy.dim @D
  energy.dim @L = 6
  energy.tensor @a : state [@D]
  energy.tensor @b : state [@D]
  energy.tensor @c : state [@D]
  energy.tensor @d : state [@D]
  energy.tensor @e : state [@D]
  energy.tensor @f : state [@D]
  energy.tensor @h : state [@D]
  energy.tensor @m : state [@D]
  energy.tensor @u : param [@D]
  energy.term @bowl {
    %a = energy.read @a : !energy.array<D>
    %n = energy.reduce_elements sqnorm %a : !energy.array<D>
    energy.yield %n : !energy.array<>
  }
  // CHECK: dynamics steps @L order sequential {
  energy.dynamics steps @L order sequential {
    // CHECK-NEXT: update @a gd(lr = 1.000000e-01)
    energy.update @a gd(lr = 0.1)
    // CHECK-NEXT: update @b momentum(lr = 1.000000e+00, beta = 9.000000e-01)
    energy.update @b momentum(lr = 1.0, beta = 0.9)
    // CHECK-NEXT: update @c newton(lr = 1.000000e+00, taylor = 1.000000e+00)
    energy.update @c newton(lr = 1.0, taylor = 1)
    // CHECK-NEXT: update @d precond(lr = 1.000000e+00, P = {
    // CHECK: diag
    energy.update @d precond(lr = 1.0, P = {
      %u = energy.read @u : !energy.array<D>
      %p = energy.softplus %u : !energy.array<D>
      %dg = energy.diag %p : !energy.array<D>
      energy.yield %dg : !energy.array<D, D>
    })
    // CHECK: update @e ode(method = "heun", dt = 5.000000e-01)
    energy.update @e ode(method = "heun", dt = 0.5)
    // CHECK-NEXT: update @f stationary
    energy.update @f stationary
    // CHECK-NEXT: assign @h {
    energy.assign @h {
      %m = energy.read @m : !energy.array<D>
      %half = energy.constant 0.5
      %v = energy.mul %half, %m : !energy.array<>, !energy.array<D>
      energy.yield %v : !energy.array<D>
    }
  // CHECK: } until {
  } until {
    // CHECK: grad @a : !energy.array<D>
    %g = energy.grad @a : !energy.array<D>
    %n = energy.reduce_elements maxabs %g : !energy.array<D>
    %eps = energy.constant 1.0e-5
    %done = energy.cmp lt, %n, %eps : !energy.array<>
    energy.yield %done : i1
  }
}

// Gradient programs: a zero-initialised buffer, loops, accumulations.
// CHECK-LABEL: energy.model @gradients
energy.model @gradients {
  energy.dim @T
  energy.dim @D
  energy.tensor @x : state [@T, @D]
  // CHECK: gradient @x {
  energy.gradient @x {
    %two = energy.constant 2.0
    // CHECK: foreach (%[[T:.*]] : @T - 1) where {
    energy.foreach (%t : @T - 1) where {
      %c0 = arith.constant 0 : index
      %ok = arith.cmpi sgt, %t, %c0 : index
      energy.yield %ok : i1
    } {
      %xt = energy.read @x[%t + 1] : !energy.array<D>
      %g = energy.mul %two, %xt : !energy.array<>, !energy.array<D>
      // CHECK: accumulate %{{.*}} into @x[%[[T]] + 1] : !energy.array<D>
      energy.accumulate %g into @x[%t + 1] : !energy.array<D>
    }
    %x = energy.read @x : !energy.array<T, D>
    // CHECK: accumulate %{{.*}} into @x : !energy.array<T, D>
    energy.accumulate %x into @x : !energy.array<T, D>
  }
}

// Indexing computed values, and its adjoint.
// CHECK-LABEL: energy.model @extract_embed
energy.model @extract_embed {
  energy.dim @K
  energy.tensor @w : state [@K]
  energy.term @e {
    %w = energy.read @w : !energy.array<K>
    %l = energy.log_softmax %w : !energy.array<K>
    // CHECK: reduce sum (%[[K:.*]] : @K)
    %s = energy.reduce sum (%k : @K) {
      // CHECK: extract %{{.*}}[%[[K]]] : !energy.array<K> -> !energy.array<>
      %lk = energy.extract %l[%k] : !energy.array<K> -> !energy.array<>
      // CHECK: embed %{{.*}} into [%[[K]]] : !energy.array<> -> !energy.array<K>
      %z = energy.embed %lk into [%k] : !energy.array<> -> !energy.array<K>
      %t = energy.reduce_elements sum %z : !energy.array<K>
      energy.yield %t : !energy.array<>
    } : !energy.array<>
    energy.yield %s : !energy.array<>
  }
}

// Folding: x + 0, x - 0, x * 1 and a scalar x * 0 simplify; an array times 0
// keeps its op.
// RUN: energy-opt %s --canonicalize | FileCheck %s --check-prefix=FOLD
// FOLD-LABEL: energy.model @folding
// FOLD: term @e {
// FOLD-NEXT: %[[ZERO:.*]] = constant 0.000000e+00
// FOLD-NEXT: %[[X:.*]] = read @x : !energy.array<D>
// FOLD-NEXT: %[[Z:.*]] = mul %[[X]], %[[ZERO]] : !energy.array<D>, !energy.array<>
// FOLD-NEXT: %[[S:.*]] = reduce_elements sum %[[X]]
// FOLD-NEXT: %[[T:.*]] = reduce_elements sum %[[Z]]
// FOLD-NEXT: %[[U:.*]] = add %[[S]], %[[T]]
// FOLD-NEXT: yield %[[U]]
energy.model @folding {
  energy.dim @D
  energy.tensor @x : state [@D]
  energy.term @e {
    %x = energy.read @x : !energy.array<D>
    %zero = energy.constant 0.0
    %one = energy.constant 1.0
    %a = energy.add %x, %zero : !energy.array<D>, !energy.array<>
    %b = energy.sub %a, %zero : !energy.array<D>, !energy.array<>
    %c = energy.mul %one, %b : !energy.array<>, !energy.array<D>
    %z = energy.mul %c, %zero : !energy.array<D>, !energy.array<>
    %s = energy.reduce_elements sum %c : !energy.array<D>
    %t = energy.reduce_elements sum %z : !energy.array<D>
    %k = energy.mul %zero, %s : !energy.array<>, !energy.array<>
    %u = energy.add %s, %t : !energy.array<>, !energy.array<>
    %v = energy.add %u, %k : !energy.array<>, !energy.array<>
    energy.yield %v : !energy.array<>
  }
}

// Step programs: reads of the current state, gradients, stores.
// CHECK-LABEL: energy.model @step_program
energy.model @step_program {
  energy.dim @D
  energy.tensor @x : state [@D]
  // CHECK: update_program {
  energy.update_program {
    // CHECK: %[[G:.*]] = grad @x : !energy.array<D>
    %g = energy.grad @x : !energy.array<D>
    %x = energy.read @x : !energy.array<D>
    %new = energy.sub %x, %g : !energy.array<D>, !energy.array<D>
    // CHECK: store %{{.*}} into @x : !energy.array<D>
    energy.store %new into @x : !energy.array<D>
  }
}

// The kernel plan: a table over two indices, a bilinear contraction with a
// batch row index, a predicate, a temperature, row and column values, a
// generic contraction in place (no row index) with a given normaliser, and
// loops and sums marked parallel.
// CHECK-LABEL: energy.model @kernel_plan
energy.model @kernel_plan {
  energy.dim @N
  energy.dim @H
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @Wq : param [@H, @D, @D]
  energy.const @tau = 8.0
  energy.gradient @x {
    %tau = energy.read @tau : !energy.array<>
    %x = energy.read @x : !energy.array<N, D>
    // CHECK: %[[Q:.*]] = tabulate (%[[H:.*]] : @H, %[[I:.*]] : @N) {
    // CHECK-NEXT: read @Wq[%[[H]]] : !energy.array<D, D>
    // CHECK-NEXT: read @x[%[[I]]] : !energy.array<D>
    // CHECK: } : !energy.array<H, N, D>
    %q = energy.tabulate (%h : @H, %i : @N) {
      %w = energy.read @Wq[%h] : !energy.array<D, D>
      %xi = energy.read @x[%i] : !energy.array<D>
      %v = energy.matmul %w, %xi : !energy.array<D, D>, !energy.array<D>
      energy.yield %v : !energy.array<D>
    } : !energy.array<H, N, D>
    // CHECK: %[[XH:.*]] = tabulate (%[[H:.*]] : @H, %[[I:.*]] : @N) {
    // CHECK-NEXT: %[[XI:.*]] = extract %{{.*}}[%[[I]]] : !energy.array<N, D> -> !energy.array<D>
    // CHECK-NEXT: yield %[[XI]] : !energy.array<D>
    // CHECK-NEXT: } : !energy.array<H, N, D>
    %xh = energy.tabulate (%h : @H, %i : @N) {
      %xi = energy.extract %x[%i] : !energy.array<N, D> -> !energy.array<D>
      energy.yield %xi : !energy.array<D>
    } : !energy.array<H, N, D>
    // CHECK: %[[WQ:.*]] = read @Wq : !energy.array<H, D, D>
    // CHECK-NEXT: %[[QB:.*]] = batch_matmul %{{.*}}, %[[WQ]] transposed : !energy.array<N, D>, !energy.array<H, D, D> -> !energy.array<H, N, D>
    // CHECK-NEXT: batch_matmul %[[XH]] transposed, %[[QB]] summed : !energy.array<H, N, D>, !energy.array<H, N, D> -> !energy.array<D, D>
    %wq = energy.read @Wq : !energy.array<H, D, D>
    %qb = energy.batch_matmul %x, %wq transposed : !energy.array<N, D>, !energy.array<H, D, D> -> !energy.array<H, N, D>
    %g = energy.batch_matmul %xh transposed, %qb summed : !energy.array<H, N, D>, !energy.array<H, N, D> -> !energy.array<D, D>
    // Several row axes, and running sums along the leading axis.
    // CHECK-NEXT: %[[QR:.*]] = batch_matmul %[[QB]], %[[WQ]] transposed {lhs_rows = 2 : i64} : !energy.array<H, N, D>, !energy.array<H, D, D> -> !energy.array<H, H, N, D>
    // CHECK-NEXT: batch_matmul %[[QR]], %[[WQ]] summed {lhs_rows = 2 : i64} : !energy.array<H, H, N, D>, !energy.array<H, D, D> -> !energy.array<H, N, D>
    // CHECK-NEXT: batch_matmul %[[QR]] transposed, %[[QB]] {lhs_rows = 2 : i64} : !energy.array<H, H, N, D>, !energy.array<H, N, D> -> !energy.array<H, D, D>
    // CHECK-NEXT: prefix_sum %[[QB]] reverse exclusive : !energy.array<H, N, D>
    %qr = energy.batch_matmul %qb, %wq transposed {lhs_rows = 2 : i64} : !energy.array<H, N, D>, !energy.array<H, D, D> -> !energy.array<H, H, N, D>
    %qs = energy.batch_matmul %qr, %wq summed {lhs_rows = 2 : i64} : !energy.array<H, H, N, D>, !energy.array<H, D, D> -> !energy.array<H, N, D>
    %qt = energy.batch_matmul %qr transposed, %qb {lhs_rows = 2 : i64} : !energy.array<H, H, N, D>, !energy.array<H, N, D> -> !energy.array<H, D, D>
    %run = energy.prefix_sum %qb reverse exclusive : !energy.array<H, N, D>
    %scale = energy.constant 0.5
    // CHECK: %[[R:.*]]:3 = softmax_contract bilinear rows (%[[H:.*]] : @H, %[[I:.*]] : @N) cols (%[[J:.*]] : @N) where {
    // CHECK-NEXT: %[[A:.*]] = arith.cmpi sle, %[[J]], %[[I]] : index
    // CHECK-NEXT: yield %[[A]] : i1
    // CHECK-NEXT: } temp(%{{.*}} : !energy.array<>) score {
    // CHECK-NEXT: %[[QI:.*]] = extract %[[Q]][%[[H]], %[[I]]] : !energy.array<H, N, D> -> !energy.array<D>
    // CHECK-NEXT: %[[QJ:.*]] = extract %[[Q]][%[[H]], %[[J]]] : !energy.array<H, N, D> -> !energy.array<D>
    // CHECK-NEXT: %[[S:.*]] = dot %[[QI]], %[[QJ]] : !energy.array<D>
    // CHECK-NEXT: %[[T:.*]] = mul %[[S]], %{{.*}} : !energy.array<>, !energy.array<>
    // CHECK-NEXT: yield %[[T]] : !energy.array<>
    // CHECK-NEXT: } row_values {
    // CHECK-NEXT: %[[V:.*]] = extract %[[XH]][%[[H]], %[[J]]] : !energy.array<H, N, D> -> !energy.array<D>
    // CHECK-NEXT: yield %[[V]] : !energy.array<D>
    // CHECK-NEXT: } col_values {
    // CHECK-NEXT: %[[G:.*]] = extract %[[Q]][%[[H]], %[[I]]] : !energy.array<H, N, D> -> !energy.array<D>
    // CHECK-NEXT: yield %[[G]] : !energy.array<D>
    // CHECK-NEXT: } : !energy.array<H, N>, !energy.array<H, N, D>, !energy.array<H, N, D>
    %r:3 = energy.softmax_contract bilinear rows (%h : @H, %i : @N) cols (%j : @N) where {
      %ok = arith.cmpi sle, %j, %i : index
      energy.yield %ok : i1
    } temp(%tau : !energy.array<>) score {
      %qi = energy.extract %q[%h, %i] : !energy.array<H, N, D> -> !energy.array<D>
      %qj = energy.extract %q[%h, %j] : !energy.array<H, N, D> -> !energy.array<D>
      %s = energy.dot %qi, %qj : !energy.array<D>
      %t = energy.mul %s, %scale : !energy.array<>, !energy.array<>
      energy.yield %t : !energy.array<>
    } row_values {
      %xj = energy.extract %xh[%h, %j] : !energy.array<H, N, D> -> !energy.array<D>
      energy.yield %xj : !energy.array<D>
    } col_values {
      %qi = energy.extract %q[%h, %i] : !energy.array<H, N, D> -> !energy.array<D>
      energy.yield %qi : !energy.array<D>
    } : !energy.array<H, N>, !energy.array<H, N, D>, !energy.array<H, N, D>
    // CHECK: foreach parallel<2> (%[[I:.*]] : @N, %[[H:.*]] : @H) {
    // CHECK-NEXT: %[[ROW:.*]] = extract %[[R]]#1[%[[H]], %[[I]]] : !energy.array<H, N, D> -> !energy.array<D>
    // CHECK: foreach (%[[I:.*]] : @N) {
    // CHECK: %[[L:.*]] = reduce sum parallel (%{{.*}} : @H) {
    // CHECK: %[[V:.*]] = softmax_contract generic rows () cols (%[[J:.*]] : @N) lse(%[[L]] : !energy.array<>) score {
    // CHECK: } row_values {
    // CHECK: } : !energy.array<D>
    energy.foreach parallel<2> (%i : @N, %h : @H) {
      %row = energy.extract %r#1[%h, %i] : !energy.array<H, N, D> -> !energy.array<D>
      %col = energy.extract %r#2[%h, %i] : !energy.array<H, N, D> -> !energy.array<D>
      %sum = energy.add %row, %col : !energy.array<D>, !energy.array<D>
      energy.accumulate %sum into @x[%i] : !energy.array<D>
    }
    energy.foreach (%i : @N) {
      %l = energy.reduce sum parallel (%h : @H) {
        %lh = energy.extract %r#0[%h, %i] : !energy.array<H, N> -> !energy.array<>
        energy.yield %lh : !energy.array<>
      } : !energy.array<>
      %xi = energy.read @x[%i] : !energy.array<D>
      %v = energy.softmax_contract generic rows () cols (%j : @N) lse(%l : !energy.array<>) score {
        %xj = energy.read @x[%j] : !energy.array<D>
        %s = energy.dot %xi, %xj : !energy.array<D>
        energy.yield %s : !energy.array<>
      } row_values {
        %xj = energy.read @x[%j] : !energy.array<D>
        energy.yield %xj : !energy.array<D>
      } : !energy.array<D>
      energy.accumulate %v into @x[%i] : !energy.array<D>
    }
  }
}

// A quadratic contraction, a mixture's E-step and M-step moments: the
// score bias[k] − ½ quad(x[i] − mu[k], prec[k]), the column values 1, x[i],
// x[i] − mu[k] and its outer product with itself.
// CHECK-LABEL: energy.model @mixture_moments
energy.model @mixture_moments {
  energy.dim @N
  energy.dim @K
  energy.dim @D
  energy.tensor @x : input [@N, @D]
  energy.tensor @mu : state [@K, @D]
  energy.tensor @prec : state [@K, @D, @D]
  energy.tensor @w : state [@K]
  energy.term @fit {
    %half = energy.constant 5.000000e-01
    %one = energy.constant 1.000000e+00
    %X = energy.read @x : !energy.array<N, D>
    %M = energy.read @mu : !energy.array<K, D>
    %P = energy.read @prec : !energy.array<K, D, D>
    %W = energy.read @w : !energy.array<K>
    // CHECK: softmax_contract quadratic rows (%[[I:.*]] : @N) cols (%[[K:.*]] : @K) score {
    // CHECK: } col_values {
    // CHECK: outer
    // CHECK: } : !energy.array<N>, !energy.array<K>, !energy.array<K, D>, !energy.array<K, D>, !energy.array<K, D, D>
    %r:5 = energy.softmax_contract quadratic rows (%i : @N) cols (%k : @K) score {
      %p = energy.extract %P[%k] : !energy.array<K, D, D> -> !energy.array<D, D>
      %b = energy.extract %W[%k] : !energy.array<K> -> !energy.array<>
      %a = energy.extract %X[%i] : !energy.array<N, D> -> !energy.array<D>
      %m = energy.extract %M[%k] : !energy.array<K, D> -> !energy.array<D>
      %d = energy.sub %a, %m : !energy.array<D>, !energy.array<D>
      %q = energy.quad %d, %p : !energy.array<D>, !energy.array<D, D>
      %h = energy.mul %q, %half : !energy.array<>, !energy.array<>
      %s = energy.sub %b, %h : !energy.array<>, !energy.array<>
      energy.yield %s : !energy.array<>
    } col_values {
      %a = energy.extract %X[%i] : !energy.array<N, D> -> !energy.array<D>
      %m = energy.extract %M[%k] : !energy.array<K, D> -> !energy.array<D>
      %d = energy.sub %a, %m : !energy.array<D>, !energy.array<D>
      %o = energy.outer %d, %d : !energy.array<D>, !energy.array<D>
      energy.yield %one, %a, %d, %o : !energy.array<>, !energy.array<D>, !energy.array<D>, !energy.array<D, D>
    } : !energy.array<N>, !energy.array<K>, !energy.array<K, D>, !energy.array<K, D>, !energy.array<K, D, D>
    %t = energy.reduce_elements sum %r#0 : !energy.array<N>
    energy.yield %t : !energy.array<>
  }
}
