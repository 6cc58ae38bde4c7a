// RUN: energy-opt %s -split-input-file --energy-build-updates | FileCheck %s

// A simultaneous group: both gradients are taken after both entry values
// are read and before either node is stored; momentum's velocity becomes a
// state tensor starting at zero.
// CHECK-LABEL: energy.model @group
// CHECK: tensor @b.velocity : state [@D] = zeros {optimizer_state = @b}
// CHECK: update_program {
// CHECK:   %[[A:.*]] = read @a : !energy.array<D>
// CHECK:   %[[B:.*]] = read @b : !energy.array<D>
// CHECK:   %[[GA:.*]] = grad @a : !energy.array<D>
// CHECK:   %[[GB:.*]] = grad @b : !energy.array<D>
// CHECK-NOT: store
// CHECK:   %[[LR:.*]] = constant 1.000000e-01
// CHECK:   %[[STEP:.*]] = mul %[[LR]], %[[GA]]
// CHECK:   %[[NEWA:.*]] = sub %[[A]], %[[STEP]]
// CHECK:   store %[[NEWA]] into @a
// CHECK:   %[[BETA:.*]] = constant 5.000000e-01
// CHECK:   %[[V:.*]] = read @b.velocity
// CHECK:   %[[DECAYED:.*]] = mul %[[BETA]], %[[V]]
// CHECK:   %[[BUFFER:.*]] = add %[[DECAYED]], %[[GB]]
// CHECK:   store %[[BUFFER]] into @b.velocity
// CHECK:   store %{{.*}} into @b
energy.model @group {
  energy.dim @D
  energy.tensor @a : state [@D]
  energy.tensor @b : state [@D]
  energy.term @e {
    %a = energy.read @a : !energy.array<D>
    %b = energy.read @b : !energy.array<D>
    %d = energy.sub %a, %b : !energy.array<D>, !energy.array<D>
    %n = energy.reduce_elements sqnorm %d : !energy.array<D>
    energy.yield %n : !energy.array<>
  }
  energy.dynamics steps 3 {
    energy.update @a gd(lr = 0.1)
    energy.update @b momentum(lr = 0.2, beta = 0.5)
  }
}

// -----

// `order sequential`: each rule is its own group, so @b's gradient is taken
// after @a is stored. Nesterov stores its look-ahead before its gradient.
// An explicit rule stores its body's value where it stands.
// CHECK-LABEL: energy.model @sequential
// CHECK: update_program {
// CHECK:   grad @a
// CHECK:   store %{{.*}} into @a
// CHECK:   %[[B:.*]] = read @b : !energy.array<D>
// CHECK:   %[[V:.*]] = read @b.velocity
// CHECK:   %[[LOOK:.*]] = sub %{{.*}}, %{{.*}}
// CHECK:   store %[[LOOK]] into @b
// CHECK:   grad @b
// CHECK:   store %{{.*}} into @b.velocity
// CHECK:   %[[NEWB:.*]] = sub %[[B]], %{{.*}}
// CHECK:   store %[[NEWB]] into @b
// CHECK:   %[[HALF:.*]] = constant 5.000000e-01
// CHECK:   %[[A:.*]] = read @a
// CHECK:   %[[H:.*]] = mul %[[HALF]], %[[A]]
// CHECK:   store %[[H]] into @h
energy.model @sequential {
  energy.dim @D
  energy.tensor @a : state [@D]
  energy.tensor @b : state [@D]
  energy.tensor @h : state [@D]
  energy.term @e {
    %a = energy.read @a : !energy.array<D>
    %b = energy.read @b : !energy.array<D>
    %d = energy.sub %a, %b : !energy.array<D>, !energy.array<D>
    %n = energy.reduce_elements sqnorm %d : !energy.array<D>
    energy.yield %n : !energy.array<>
  }
  energy.dynamics steps 3 order sequential {
    energy.update @a gd(lr = 0.1)
    energy.update @b nesterov(lr = 0.1)
    energy.assign @h {
      %half = energy.constant 0.5
      %a = energy.read @a : !energy.array<D>
      %h = energy.mul %half, %a : !energy.array<>, !energy.array<D>
      energy.yield %h : !energy.array<D>
    }
  }
}

// -----

// precond applies P along the last axis (each row of a matrix times Pᵀ);
// Heun takes a second gradient at the Euler prediction and averages.
// CHECK-LABEL: energy.model @solvers
// CHECK: update_program {
// CHECK:   %[[W:.*]] = read @w : !energy.array<N, D>
// CHECK:   %[[V:.*]] = read @v : !energy.array<D>
// CHECK:   %[[GW:.*]] = grad @w : !energy.array<N, D>
// CHECK:   %[[GV:.*]] = grad @v : !energy.array<D>
// CHECK:   %[[P:.*]] = read @P : !energy.array<D, D>
// CHECK:   %[[PT:.*]] = transpose %[[P]]
// CHECK:   %[[PG:.*]] = matmul %[[GW]], %[[PT]] : !energy.array<N, D>, !energy.array<D, D>
// CHECK:   store %{{.*}} into @w
// CHECK:   %[[EULER:.*]] = sub %[[V]], %{{.*}}
// CHECK:   store %[[EULER]] into @v
// CHECK:   %[[GV2:.*]] = grad @v : !energy.array<D>
// CHECK:   %[[SUM:.*]] = add %[[GV]], %[[GV2]]
// CHECK:   store %{{.*}} into @v
energy.model @solvers {
  energy.dim @N
  energy.dim @D
  energy.tensor @w : state [@N, @D]
  energy.tensor @v : state [@D]
  energy.tensor @P : param [@D, @D]
  energy.term @e {
    %w = energy.read @w : !energy.array<N, D>
    %v = energy.read @v : !energy.array<D>
    %a = energy.reduce_elements sqnorm %w : !energy.array<N, D>
    %b = energy.reduce_elements sqnorm %v : !energy.array<D>
    %s = energy.add %a, %b : !energy.array<>, !energy.array<>
    energy.yield %s : !energy.array<>
  }
  energy.dynamics steps 2 {
    energy.update @w precond(lr = 0.5, P = {
      %p = energy.read @P : !energy.array<D, D>
      energy.yield %p : !energy.array<D, D>
    })
    energy.update @v ode(method = "heun", dt = 0.1)
  }
}

// -----

// Newton: Hessian-vector products differentiate the auxiliary term
// <grad E, v> (v a state tensor the program stores before each product);
// conjugate gradients run `cg` products; `taylor = n` takes n products.
// CHECK-LABEL: energy.model @newton
// CHECK: tensor @y.direction : state [@D] = zeros {optimizer_state = @y}
// CHECK: update_program {
// CHECK:   %[[G:.*]] = grad @y : !energy.array<D>
// CHECK:   store %[[G]] into @y.direction
// CHECK:   %[[HV:.*]] = grad @y of @y.curvature : !energy.array<D>
// CHECK:   %[[CURV:.*]] = reduce_elements sum
// CHECK:   cmp gt, %[[CURV]]
// CHECK:   store %{{.*}} into @y.direction
// CHECK:   grad @y of @y.curvature
// CHECK-NOT: grad @y of
// CHECK:   store %{{.*}} into @y :
// CHECK: gradient @y {
// CHECK: term @y.curvature auxiliary {
// CHECK:   read @y.direction
energy.model @newton {
  energy.dim @D
  energy.tensor @A : param [@D, @D]
  energy.tensor @y : state [@D]
  energy.term @bowl {
    %y = energy.read @y : !energy.array<D>
    %a = energy.read @A : !energy.array<D, D>
    %q = energy.quad %y, %a : !energy.array<D>, !energy.array<D, D>
    energy.yield %q : !energy.array<>
  }
  energy.dynamics steps 1 {
    energy.update @y newton(lr = 1.0, cg = 2)
  }
}

// -----

// ode with rtol/atol: adaptive Heun sub-steps in a `repeat` loop, the
// sub-step size and the time left carried in scalar state tensors.
// CHECK-LABEL: energy.model @adaptive
// CHECK: tensor @v.ode_remaining : state [] = zeros {optimizer_state = @v}
// CHECK: tensor @v.ode_step : state [] = zeros {optimizer_state = @v}
// CHECK: update_program {
// CHECK:   store %{{.*}} into @v.ode_remaining
// CHECK:   repeat max 100000 {
// CHECK:     grad @v
// CHECK:     store %{{.*}} into @v :
// CHECK:     grad @v
// CHECK:     %[[ACCEPT:.*]] = cmp le
// CHECK:     select %[[ACCEPT]]
// CHECK:     store %{{.*}} into @v.ode_step
// CHECK:     %[[DONE:.*]] = cmp le
// CHECK:     yield %[[DONE]] : i1
energy.model @adaptive {
  energy.dim @D
  energy.tensor @v : state [@D]
  energy.term @e {
    %v = energy.read @v : !energy.array<D>
    %n = energy.reduce_elements sqnorm %v : !energy.array<D>
    energy.yield %n : !energy.array<>
  }
  energy.dynamics steps 1 {
    energy.update @v ode(method = "heun", dt = 0.5, rtol = 1.0e-6, atol = 1.0e-6)
  }
}
