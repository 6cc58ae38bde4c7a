// RUN: energy-opt %s -split-input-file -verify-diagnostics

energy.model @m {
  energy.dim @N
  // expected-error @below {{'energy.dim' op has default 0; a dim's size must be positive}}
  energy.dim @D = 0
}

// -----

energy.model @m {
  // expected-error @below {{'energy.dim' op is derived from '@D', which is not declared before it}}
  energy.dim @Dh = @D / @H
  energy.dim @D = 64
  energy.dim @H = 4
}

// -----

energy.model @m {
  energy.dim @N
  // expected-error @below {{'energy.tensor' op has shape over @K, which is not a dim}}
  energy.tensor @x : state [@N, @K]
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : input [@N, @D]
  // expected-error @below {{'energy.tensor' op of shape [D, N] is initialised from @x of shape [N, D]}}
  energy.tensor @z : state [@D, @N] = @x
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  // expected-error @below {{'energy.tensor' op initialiser 'eye' needs the last two axes to be the same dim}}
  energy.tensor @P : state [@N, @D] = eye
}

// -----

energy.model @m {
  energy.dim @D
  // expected-error @below {{'energy.tensor' op initialiser 'normal' takes 2 arguments, found 1}}
  energy.tensor @W : param [@D] = normal(0.0)
}

// -----

energy.model @m {
  energy.dim @D
  // expected-error @below {{unknown role 'output'; expected input, param or state}}
  energy.tensor @W : output [@D]
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.term @e {
    %s = energy.reduce sum (%c : @N) {
      // expected-error @below {{'energy.read' op reads @x as '!energy.array<N>' but its element at 1 indices has type '!energy.array<D>'}}
      %0 = energy.read @x[%c] : !energy.array<N>
      %r = energy.reduce_elements sum %0 : !energy.array<N>
      energy.yield %r : !energy.array<>
    } : !energy.array<>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    // expected-error @below {{'energy.read' op indexes @x of shape [N] with 2 indices}}
    %0 = energy.read @x[0, 1] : !energy.array<>
    energy.yield %0 : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  // expected-error @below {{'energy.term' op expects its body (an energy is a scalar) to yield '!energy.array<>', found '!energy.array<N>'}}
  energy.term @e {
    %0 = energy.read @x : !energy.array<N>
    energy.yield %0 : !energy.array<N>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N]
  energy.tensor @y : state [@D]
  energy.term @e {
    %x = energy.read @x : !energy.array<N>
    %y = energy.read @y : !energy.array<D>
    // expected-error @below {{shape mismatch: elementwise operands must have equal shapes or one must be a scalar, found [N] and [D]}}
    %s = energy.add %x, %y : !energy.array<N>, !energy.array<D>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N]
  energy.tensor @y : state [@D]
  energy.term @e {
    %x = energy.read @x : !energy.array<N>
    %y = energy.read @y : !energy.array<D>
    // expected-error @below {{shape mismatch in '@': expected [m, n] @ [n] or [m, n] @ [n, k], found [N] and [D]}}
    %s = energy.matmul %x, %y : !energy.array<N>, !energy.array<D>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @W : param [@N, @D]
  energy.term @e {
    %w = energy.read @W : !energy.array<N, D>
    // expected-error @below {{logdet expects a square matrix, found [N, D]}}
    %l = energy.logdet %w : !energy.array<N, D>
    energy.yield %l : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.const @T = 2.0
  energy.term @e {
    %t = energy.read @T : !energy.array<>
    // expected-error @below {{'energy.reduce' op takes a temperature only as 'lse', not as 'sum'}}
    %s = energy.reduce sum (%i : @N) temp(%t : !energy.array<>) {
      %xi = energy.read @x[%i] : !energy.array<>
      energy.yield %xi : !energy.array<>
    } : !energy.array<>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    // expected-error @below {{'energy.reduce' op expects its predicate to yield 'i1', found '!energy.array<>'}}
    %s = energy.reduce lse (%i : @N) where {
      %xi = energy.read @x[%i] : !energy.array<>
      energy.yield %xi : !energy.array<>
    } {
      %xi = energy.read @x[%i] : !energy.array<>
      energy.yield %xi : !energy.array<>
    } : !energy.array<>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    // expected-error @below {{'energy.reduce' op refers to '@K', which is not a dim}}
    %s = energy.reduce sum (%i : @K) {
      %xi = energy.read @x[%i] : !energy.array<>
      energy.yield %xi : !energy.array<>
    } : !energy.array<>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    %x = energy.read @x : !energy.array<N>
    %s = energy.reduce_elements sum %x : !energy.array<N>
    energy.yield %s : !energy.array<>
  }
  energy.output @F [%i : @N] : !energy.array<> {
    // expected-error @below {{'energy.read' op reads @e; energy and output names cannot be read}}
    %e = energy.read @e : !energy.array<>
    energy.yield %e : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : input [@N]
  energy.dynamics steps 3 {
    // expected-error @below {{'energy.update' op updates @x, which is an input; only state tensors are updated by dynamics}}
    energy.update @x gd(lr = 0.1)
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.dynamics steps 3 {
    // expected-note @below {{first rule here}}
    energy.update @x gd(lr = 0.1)
    // expected-error @below {{'energy.update' op is a second rule for @x; a node has at most one rule}}
    energy.update @x momentum(lr = 0.1)
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  // expected-error @below {{'energy.dynamics' op takes 0 steps; the step count must be positive}}
  energy.dynamics steps 0 {
    energy.update @x gd(lr = 0.1)
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N]
  energy.tensor @y : state [@D]
  energy.dynamics steps 1 {
    // expected-error @below {{'energy.assign' op expects its body (the node's new value) to yield '!energy.array<N>', found '!energy.array<D>'}}
    energy.assign @x {
      %y = energy.read @y : !energy.array<D>
      energy.yield %y : !energy.array<D>
    }
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.dynamics steps 1 {
    // expected-error @below {{'energy.update' op sets option 'lr' twice}}
    energy.update @x gd(lr = 0.1, lr = 0.2)
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.term @e {
    %c = energy.constant 1.0
    // expected-error @below {{'energy.broadcast' op uses the type '!energy.array<Q>' over 'Q', which is not a dim of the model}}
    %b = energy.broadcast %c : !energy.array<> to !energy.array<Q>
    %s = energy.reduce_elements sum %b : !energy.array<Q>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dynamics steps 1 {
  }
  // expected-error @below {{'energy.dynamics' op is the second dynamics of the model; a model has at most one}}
  energy.dynamics steps 1 {
  }
}

// -----

energy.model @m {
  energy.dim @N
  // expected-error @below {{'energy.constant' op cannot appear in a model; a model holds dims, tensors, consts, lets, terms, outputs, dynamics, gradients and update programs}}
  %c = energy.constant 1.0
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  // expected-error @below {{'energy.let' op expects its body to yield '!energy.array<D>', found '!energy.array<>'}}
  energy.let @q [%i : @N] : !energy.array<D> {
    %c = energy.constant 1.0
    energy.yield %c : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.tensor @y : state [@N]
  energy.gradient @x {
    %y = energy.read @y : !energy.array<N>
    // expected-error @below {{'energy.accumulate' op accumulates into @y inside the gradient of @x}}
    energy.accumulate %y into @y : !energy.array<N>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.gradient @x {
    energy.foreach (%i : @N) {
      %c = energy.constant 1.0
      // expected-error @below {{'energy.accumulate' op accumulates into @x as '!energy.array<>' but its element at 1 indices has type '!energy.array<D>'}}
      energy.accumulate %c into @x[%i] : !energy.array<>
    }
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    %x = energy.read @x : !energy.array<N>
    // expected-error @below {{'energy.accumulate' op accumulates only inside an 'energy.gradient'}}
    energy.accumulate %x into @x : !energy.array<N>
    %s = energy.reduce_elements sum %x : !energy.array<N>
    energy.yield %s : !energy.array<>
  }
}
