// RUN: energy-opt %s -split-input-file -verify-diagnostics --energy-build-updates

energy.model @m {
  energy.dim @D
  energy.tensor @y : state [@D]
  energy.dynamics steps 1 {
    // expected-error @below {{the optimizer table has no gradient optimizer 'adam'; it has: gd, momentum, nesterov, newton, precond, ode, stationary}}
    energy.update @y adam(lr = 1.0)
  }
}

// -----

energy.model @m {
  energy.dim @D
  energy.tensor @y : state [@D]
  energy.dynamics steps 1 {
    // expected-error @below {{optimizer 'gd' has no option 'beta'}}
    energy.update @y gd(lr = 1.0, beta = 0.5)
  }
}

// -----

energy.model @m {
  energy.dim @D
  energy.tensor @y : state [@D]
  energy.dynamics steps 1 {
    // expected-error @below {{optimizer 'momentum' needs option 'lr'}}
    energy.update @y momentum(beta = 0.5)
  }
}

// -----

energy.model @m {
  energy.dim @D
  energy.tensor @y : state [@D]
  energy.dynamics steps 1 {
    // expected-error @below {{no closed form for stationary node @y: the M-step is built for energies -sum(i: N) lse(k: K) e (no predicate or temperature) so far}}
    energy.update @y stationary
  }
}

// -----

energy.model @m {
  energy.dim @D
  energy.tensor @y : state [@D]
  energy.tensor @z : state [@D]
  energy.update_program {
    %y = energy.read @y : !energy.array<D>
    // expected-error @below {{'energy.store' op updates @w, which is not a tensor of the model}}
    energy.store %y into @w : !energy.array<D>
  }
}

// -----

energy.model @m {
  energy.dim @D
  energy.tensor @y : state [@D]
  energy.dynamics steps 1 {
    // expected-error @below {{option 'method' of optimizer 'ode' is one of euler, heun, not 'rk4'}}
    energy.update @y ode(method = "rk4", dt = 0.1)
  }
}


// -----

energy.model @m {
  energy.dim @D
  energy.tensor @y : state [@D]
  energy.const @n = 3.0
  energy.dynamics steps 1 {
    // expected-error @below {{option 'cg' must be a number}}
    energy.update @y newton(lr = 1.0, cg = {
      %n = energy.read @n : !energy.array<>
      energy.yield %n : !energy.array<>
    })
  }
}
