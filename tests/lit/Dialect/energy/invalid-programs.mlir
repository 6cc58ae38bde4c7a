// RUN: energy-opt %s -split-input-file -verify-diagnostics

// Update rules, gradient programs and their loops, update programs: repeat,
// store, grad, accumulate, foreach, once. (invalid.mlir has the first cases
// of each.)

energy.model @m {
  energy.dim @N
  energy.tensor @x : param [@N]
  energy.dynamics steps 1 {
    // expected-error @below {{'energy.update' op updates @x, which is a param; only state tensors are updated by dynamics}}
    energy.update @x gd(lr = 0.1)
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.dynamics steps 1 {
    // expected-error @below {{'energy.update' op updates @w, which is not a tensor of the model}}
    energy.update @w gd(lr = 0.1)
  }
}

// -----

// The custom syntax pairs each option name with its body; the generic one
// need not.
energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.dynamics steps 1 {
    // expected-error @below {{'energy.update' op has 1 option names for 0 option bodies}}
    "energy.update"() <{node = @x, optimizer = "gd", option_names = ["lr"], string_options = {}}> : () -> ()
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.dynamics steps 1 {
    // expected-error @below {{'energy.update' op expects option 'lr' to yield one energy array}}
    energy.update @x gd(lr = {
      %t = arith.constant true
      energy.yield %t : i1
    })
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    // expected-error @below {{'energy.repeat' op repeats only inside an 'energy.update_program' or 'energy.backward_program'}}
    energy.repeat max 10 {
      %t = arith.constant true
      energy.yield %t : i1
    }
    %x = energy.read @x : !energy.array<N>
    %s = energy.reduce_elements sum %x : !energy.array<N>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.update_program {
    // expected-error @below {{'energy.repeat' op needs a positive iteration limit}}
    energy.repeat max 0 {
      %t = arith.constant true
      energy.yield %t : i1
    }
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.update_program {
    // expected-error @below {{'energy.repeat' op expects its body (whether to stop) to yield 'i1', found '!energy.array<>'}}
    energy.repeat max 10 {
      %c = energy.constant 1.0
      energy.yield %c : !energy.array<>
    }
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    %x = energy.read @x : !energy.array<N>
    // expected-error @below {{'energy.store' op stores only inside an 'energy.update_program' or 'energy.backward_program'}}
    energy.store %x into @x : !energy.array<N>
    %s = energy.reduce_elements sum %x : !energy.array<N>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N]
  energy.tensor @y : state [@D]
  energy.backward_program seed {
    %y = energy.read @y : !energy.array<D>
    // expected-error @below {{'energy.store' op stores a value of type '!energy.array<D>' into @x of type '!energy.array<N>'}}
    energy.store %y into @x : !energy.array<D>
  } step {
  } finish {
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.update_program {
    // expected-error @below {{'energy.grad' op has 2 'into' entries for the gradients of 1 tensors}}
    %g = energy.grad @x {into = [unit, unit]} : !energy.array<N>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.tensor @a : state [@N]
  energy.term @e {
    // expected-error @below {{'energy.grad' op adds gradients 'into' tensors only inside an 'energy.update_program' or 'energy.backward_program'}}
    %g = energy.grad @x and [@a] {into = [unit, @a]} : !energy.array<N>
    %x = energy.read @x : !energy.array<N>
    %s = energy.reduce_elements sum %x : !energy.array<N>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.tensor @y : state [@N]
  energy.update_program {
    // expected-error @below {{'energy.grad' op has 'into' entry 3 : i64, neither a tensor nor unit}}
    %g = energy.grad @x and [@y] {into = [unit, 3]} : !energy.array<N>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.update_program {
    // expected-error @below {{'energy.grad' op takes the gradient with respect to @w, which is not a tensor}}
    %g = energy.grad @w : !energy.array<N>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.tensor @y : state [@N]
  energy.update_program {
    // expected-error @below {{'energy.grad' op adds the gradient of @y into @w, which is not a tensor}}
    %g = energy.grad @x and [@y] {into = [unit, @w]} : !energy.array<N>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.update_program {
    // expected-error @below {{'energy.grad' op names @x twice}}
    %g:2 = energy.grad @x and [@x] : !energy.array<N>, !energy.array<N>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.update_program {
    // expected-error @below {{'energy.grad' op is the gradient of @x, which is not an energy term}}
    %g = energy.grad @x of @x : !energy.array<N>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  // expected-error @below {{'energy.gradient' op is the gradient of @t, which is not an energy term}}
  energy.gradient @x of @t {
  }
}

// -----

// The gradient's own check (its tensors are tensors) comes first, so the
// accumulation's only fails for a name the gradient resolved when a symbol
// table between them hides it: here an unnamed module in the gradient's
// body.
energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.gradient @x {
    builtin.module {
      %c = energy.constant 1.0
      // expected-error @below {{'energy.accumulate' op accumulates into @x, which is not a tensor}}
      energy.accumulate %c into @x : !energy.array<>
    }
  }
}

// -----

// The custom syntax gives an affine map as many inputs as index operands;
// the generic one need not.
energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.gradient @x {
    %c = energy.constant 1.0
    %s = energy.step : index
    // expected-error @below {{'energy.accumulate' op has 1 index operands for a map of 0 inputs}}
    "energy.accumulate"(%c, %s) <{map = affine_map<() -> (0)>, tensor = @x}> : (!energy.array<>, index) -> ()
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.gradient @x {
    // expected-error @below {{'energy.foreach' op expects at least one index in its domain}}
    energy.foreach () {
      %c = energy.constant 1.0
    }
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.gradient @x {
    // expected-error @below {{'energy.foreach' op expects its predicate to yield 'i1', found 'index'}}
    energy.foreach (%i : @N) where {
      energy.yield %i : index
    } {
      %c = energy.constant 1.0
      energy.accumulate %c into @x[%i] : !energy.array<>
    }
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.gradient @x {
    // expected-error @below {{'energy.foreach' op expects 1 index arguments in its body, found 0}}
    "energy.foreach"() <{sizes = [#energy.dim<@N>]}> ({
    }, {
      %c = energy.constant 1.0
      energy.accumulate %c into @x : !energy.array<>
    }) : () -> ()
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.gradient @x {
    // expected-error @below {{'energy.foreach' op refers to '@Q', which is not a dim}}
    energy.foreach (%i : @Q) {
      %c = energy.constant 1.0
      energy.accumulate %c into @x[%i] : !energy.array<>
    }
  }
}

// -----

// energy.once: its body, then the tensors that keep its value.

energy.model @m {
  energy.dim @N
  energy.tensor @x : input [@N]
  energy.tensor @c : state [@N]
  energy.tensor @v : state []
  energy.term @e {
    // expected-error @below {{'energy.once' op expects a body without arguments}}
    %k = energy.once @c valid @v {
    ^bb0(%i: index):
      %x = energy.read @x : !energy.array<N>
      energy.yield %x : !energy.array<N>
    } : !energy.array<N>
    %s = energy.reduce_elements sum %k : !energy.array<N>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : input [@N]
  energy.tensor @c : state [@N]
  energy.tensor @v : state []
  energy.term @e {
    // expected-error @below {{'energy.once' op expects its body to yield one '!energy.array<N>'}}
    %k = energy.once @c valid @v {
      %x = energy.read @x : !energy.array<N>
      %s = energy.reduce_elements sum %x : !energy.array<N>
      energy.yield %s : !energy.array<>
    } : !energy.array<N>
    %s = energy.reduce_elements sum %k : !energy.array<N>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : input [@N]
  energy.tensor @c : state [@N]
  energy.term @e {
    // expected-error @below {{'energy.once' op keeps its value in @c and @v, which must be tensors}}
    %k = energy.once @c valid @v {
      %x = energy.read @x : !energy.array<N>
      energy.yield %x : !energy.array<N>
    } : !energy.array<N>
    %s = energy.reduce_elements sum %k : !energy.array<N>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : input [@N]
  energy.tensor @c : param [@N]
  energy.tensor @v : state []
  energy.term @e {
    // expected-error @below {{'energy.once' op expects state tensors to keep its value in}}
    %k = energy.once @c valid @v {
      %x = energy.read @x : !energy.array<N>
      energy.yield %x : !energy.array<N>
    } : !energy.array<N>
    %s = energy.reduce_elements sum %k : !energy.array<N>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : input [@N]
  energy.tensor @c : state []
  energy.tensor @v : state []
  energy.term @e {
    // expected-error @below {{'energy.once' op expects an array to keep, not a scalar}}
    %k = energy.once @c valid @v {
      %x = energy.read @x : !energy.array<N>
      %s = energy.reduce_elements sum %x : !energy.array<N>
      energy.yield %s : !energy.array<>
    } : !energy.array<>
    energy.yield %k : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @S
  energy.tensor @x : input [@N]
  energy.tensor @c : state [@S, @N]
  energy.tensor @v : state []
  energy.term @e {
    // expected-error @below {{'energy.once' op expects a flag per step, but @v is '!energy.array<>'}}
    %k = energy.once per_step @c valid @v {
      %x = energy.read @x : !energy.array<N>
      energy.yield %x : !energy.array<N>
    } : !energy.array<N>
    %s = energy.reduce_elements sum %k : !energy.array<N>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @S
  energy.tensor @x : input [@N]
  energy.tensor @c : state [@N]
  energy.tensor @v : state [@S]
  energy.term @e {
    // expected-error @below {{'energy.once' op expects a scalar flag, but @v is '!energy.array<S>'}}
    %k = energy.once @c valid @v {
      %x = energy.read @x : !energy.array<N>
      energy.yield %x : !energy.array<N>
    } : !energy.array<N>
    %s = energy.reduce_elements sum %k : !energy.array<N>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @S
  energy.tensor @x : input [@N]
  energy.tensor @c : state [@N]
  energy.tensor @v : state [@S]
  energy.term @e {
    // expected-error @below {{'energy.once' op keeps a '!energy.array<N>' per step but its cache @c is '!energy.array<N>'}}
    %k = energy.once per_step @c valid @v {
      %x = energy.read @x : !energy.array<N>
      energy.yield %x : !energy.array<N>
    } : !energy.array<N>
    %s = energy.reduce_elements sum %k : !energy.array<N>
    energy.yield %s : !energy.array<>
  }
}
