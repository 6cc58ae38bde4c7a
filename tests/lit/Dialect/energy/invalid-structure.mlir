// RUN: energy-opt %s -split-input-file -verify-diagnostics

// The declarations of a model: dims, tensors, lets, terms, outputs, yields
// and the dynamics. (invalid.mlir has the first cases of each.)

energy.model @m {
  energy.dim @N
  // expected-error @below {{'energy.dim' op has both a default and a derivation}}
  energy.dim @D = 4 {derived = #energy.dim<@N>}
}

// -----

energy.model @m {
  energy.dim @N
  // expected-error @below {{'energy.dim' op is derived from '@Q', which is not a dim}}
  energy.dim @Dh = @Q / 2
}

// -----

energy.model @m {
  energy.dim @D
  // expected-error @below {{unknown initialiser 'gaussian'; expected zeros, ones, eye, normal, uniform or @tensor}}
  energy.tensor @W : param [@D] = gaussian(0.0, 1.0)
}

// -----

energy.model @m {
  energy.dim @D
  // expected-error @below {{'energy.tensor' op has initialiser arguments but no initialiser}}
  energy.tensor @W : param [@D] {init_args = array<f64: 1.0>}
}

// -----

energy.model @m {
  energy.dim @D
  energy.tensor @x : input [@D]
  // expected-error @below {{'energy.tensor' op copies a tensor only with an initialiser 'copy'}}
  energy.tensor @z : state [@D] = zeros {init_source = @x}
}

// -----

energy.model @m {
  energy.dim @D
  // expected-error @below {{'energy.tensor' op initialiser 'normal' needs a non-negative standard deviation}}
  energy.tensor @W : param [@D] = normal(0.0, -1.0)
}

// -----

energy.model @m {
  energy.dim @D
  // expected-error @below {{'energy.tensor' op initialiser 'uniform' needs low <= high}}
  energy.tensor @W : param [@D] = uniform(1.0, -1.0)
}

// -----

energy.model @m {
  energy.dim @D
  // expected-error @below {{'energy.tensor' op is initialised from @D, which is not a tensor}}
  energy.tensor @z : state [@D] = @D
}

// -----

energy.model @m {
  energy.dim @D
  energy.tensor @x : state [@D]
  // expected-error @below {{'energy.tensor' op has solver_of = @D, which is not a tensor or a let}}
  energy.tensor @x.solver : state [@D] = zeros {solver_of = @D}
}

// -----

energy.model @m {
  energy.dim @D
  energy.tensor @x : state [@D]
  // expected-error @below {{'energy.tensor' op has incoming_of = @D, which is not a tensor or an output}}
  energy.tensor @x.incoming : input [@D] = zeros {incoming_of = @D}
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  // expected-error @below {{'energy.let' op expects each index to range over a dim, found an expression}}
  energy.let @q [%i : @N - 1] : !energy.array<> {
    %c = energy.constant 1.0
    energy.yield %c : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  // expected-error @below {{'energy.let' op refers to '@Q', which is not a dim}}
  energy.let @q [%i : @Q] : !energy.array<> {
    %c = energy.constant 1.0
    energy.yield %c : !energy.array<>
  }
}

// -----

// A block that ends with another dialect's terminator (llvm.unreachable has
// no parent constraint of its own) reaches the energy op's check.
energy.model @m {
  energy.dim @N
  // expected-error @below {{'energy.let' op expects its body to end with 'energy.yield'}}
  energy.let @q [%i : @N] : !energy.array<> {
    llvm.unreachable
  }
}

// -----

energy.model @m {
  energy.dim @N
  // expected-error @below {{'energy.output' op expects each index to range over a dim, found an expression}}
  energy.output @F [%i : @N * 2] : !energy.array<> {
    %c = energy.constant 1.0
    energy.yield %c : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  // expected-error @below {{'energy.output' op refers to '@Q', which is not a dim}}
  energy.output @F [%i : @Q] : !energy.array<> {
    %c = energy.constant 1.0
    energy.yield %c : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  // expected-error @below {{'energy.term' op is a loss, so it must be auxiliary (a loss is not part of the global energy)}}
  energy.term @l loss {
    %x = energy.read @x : !energy.array<N>
    %s = energy.reduce_elements sqnorm %x : !energy.array<N>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.gradient @x {
    %c = energy.constant 1.0
    // expected-error @below {{'energy.yield' op ends the body of an energy op, not of 'energy.gradient'}}
    energy.yield %c : !energy.array<>
  }
}

// -----

// The dynamics: its parser, its attributes, its rules and its stopping rule.

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  // expected-error @below {{unknown order 'random'; expected simultaneous or sequential}}
  energy.dynamics steps 1 order random {
    energy.update @x gd(lr = 0.1)
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  // expected-error @below {{'energy.dynamics' op has implicit_iterations 0; the solver needs at least one round}}
  energy.dynamics steps 1 {
    energy.update @x gd(lr = 0.1)
  } {implicit_iterations = 0 : i64}
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  // expected-error @below {{'energy.dynamics' op has implicit_tolerance 0.000000e+00; it must be positive}}
  energy.dynamics steps 1 {
    energy.update @x gd(lr = 0.1)
  } {implicit_iterations = 10 : i64, implicit_tolerance = 0.0 : f64}
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.dynamics steps 1 {
    // expected-error @below {{'energy.constant' op cannot appear in dynamics; expected 'energy.update' or 'energy.assign'}}
    %c = energy.constant 1.0
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  // expected-error @below {{'energy.dynamics' op expects its stopping rule to yield 'i1', found '!energy.array<>'}}
  energy.dynamics steps 1 {
    energy.update @x gd(lr = 0.1)
  } until {
    %c = energy.constant 1.0
    energy.yield %c : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  // expected-error @below {{'energy.dynamics' op refers to '@T', which is not a dim}}
  energy.dynamics steps @T {
    energy.update @x gd(lr = 0.1)
  }
}
