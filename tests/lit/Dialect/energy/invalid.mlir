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
  // expected-error @below {{'energy.constant' op cannot appear in a model; a model holds dims, tensors, consts, lets, terms, outputs, dynamics, gradients, update programs, backward programs and index checks}}
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
  // expected-error @below {{'energy.tensor' op has adjoint_of = @N, which is not a tensor}}
  energy.tensor @x.adjoint : state [@N] = zeros {adjoint_of = @N}
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  // expected-error @below {{'energy.tensor' op has cotangent_of = @y, which is not a tensor or a let}}
  energy.tensor @y.cotangent : state [@N] = zeros {cotangent_of = @y}
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.gradient @x {
    // expected-error @below {{'energy.foreach' op has 2 parallel indices but a domain of 1}}
    energy.foreach parallel<2> (%i : @N) {
      %c = energy.constant 1.0
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

// -----

// Kernel-plan ops: energy.tabulate, then energy.softmax_contract (the
// parser, the domains, the regions, the results, and each reason the
// bilinear form can fail; "its scale is not a scalar" cannot be reached,
// since a product with a non-scalar is not a scalar score).

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.term @e {
    // expected-error @below {{'energy.tabulate' op expects at least one index in its domain}}
    %t = energy.tabulate () {
      %c = energy.constant 1.0
      energy.yield %c : !energy.array<>
    } : !energy.array<>
    energy.yield %t : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.term @e {
    // expected-error @below {{'energy.tabulate' op expects each index of its domain to range over a dim, found an expression}}
    %t = energy.tabulate (%i : @N - 1) {
      %x = energy.read @x[%i] : !energy.array<D>
      %s = energy.reduce_elements sum %x : !energy.array<D>
      energy.yield %s : !energy.array<>
    } : !energy.array<N>
    %s = energy.reduce_elements sum %t : !energy.array<N>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.term @e {
    // expected-error @below {{'energy.tabulate' op expects 1 index arguments in its body, found 2}}
    %t = "energy.tabulate"() <{sizes = [#energy.dim<@N>]}> ({
    ^bb0(%i: index, %j: index):
      %x = energy.read @x[%i] : !energy.array<D>
      energy.yield %x : !energy.array<D>
    }) : () -> !energy.array<N, D>
    %s = energy.reduce_elements sum %t : !energy.array<N, D>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.term @e {
    // expected-error @below {{'energy.tabulate' op expects index arguments in its body}}
    %t = "energy.tabulate"() <{sizes = [#energy.dim<@N>]}> ({
    ^bb0(%i: i64):
      %c = energy.constant 1.0
      energy.yield %c : !energy.array<>
    }) : () -> !energy.array<N>
    %s = energy.reduce_elements sum %t : !energy.array<N>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.term @e {
    // expected-error @below {{'energy.tabulate' op expects its body to yield one array}}
    %t = energy.tabulate (%i : @N) {
      energy.yield %i : index
    } : !energy.array<N>
    %s = energy.reduce_elements sum %t : !energy.array<N>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.term @e {
    // expected-error @below {{'energy.tabulate' op has type '!energy.array<D, N>' but its domain and body give '!energy.array<N, D>'}}
    %t = energy.tabulate (%i : @N) {
      %x = energy.read @x[%i] : !energy.array<D>
      energy.yield %x : !energy.array<D>
    } : !energy.array<D, N>
    %s = energy.reduce_elements sum %t : !energy.array<D, N>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.term @e {
    // expected-error @below {{'energy.tabulate' op refers to '@Q', which is not a dim}}
    %t = energy.tabulate (%i : @Q) {
      %c = energy.constant 1.0
      energy.yield %c : !energy.array<>
    } : !energy.array<Q>
    %s = energy.reduce_elements sum %t : !energy.array<Q>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @K
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @y : state [@K, @D]
  energy.tensor @w : state [@D]
  energy.term @e {
    %X = energy.read @x : !energy.array<N, D>
    %Y = energy.read @y : !energy.array<K, D>
    // expected-error @below {{unknown contraction form 'fused'; expected generic, bilinear or quadratic}}
    %l = energy.softmax_contract fused rows (%i : @N) cols (%k : @K) score {
      %a = energy.extract %X[%i] : !energy.array<N, D> -> !energy.array<D>
      %b = energy.extract %Y[%k] : !energy.array<K, D> -> !energy.array<D>
      %s = energy.dot %a, %b : !energy.array<D>
      energy.yield %s : !energy.array<>
    } : !energy.array<N>
    %t = energy.reduce_elements sum %l : !energy.array<N>
    energy.yield %t : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @K
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @y : state [@K, @D]
  energy.tensor @w : state [@D]
  energy.term @e {
    %X = energy.read @x : !energy.array<N, D>
    %Y = energy.read @y : !energy.array<K, D>
    // expected-error @below {{expects exactly one column index}}
    %l = energy.softmax_contract generic rows (%i : @N) cols (%k : @K, %j : @K) score {
      %a = energy.extract %X[%i] : !energy.array<N, D> -> !energy.array<D>
      %b = energy.extract %Y[%k] : !energy.array<K, D> -> !energy.array<D>
      %s = energy.dot %a, %b : !energy.array<D>
      energy.yield %s : !energy.array<>
    } : !energy.array<N>
    %t = energy.reduce_elements sum %l : !energy.array<N>
    energy.yield %t : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @K
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @y : state [@K, @D]
  energy.tensor @w : state [@D]
  energy.term @e {
    %X = energy.read @x : !energy.array<N, D>
    %Y = energy.read @y : !energy.array<K, D>
    // expected-error @below {{'energy.softmax_contract' op expects each index of its rows to range over a dim, found an expression}}
    %l = energy.softmax_contract generic rows (%i : @N - 1) cols (%k : @K) score {
      %a = energy.extract %X[%i] : !energy.array<N, D> -> !energy.array<D>
      %b = energy.extract %Y[%k] : !energy.array<K, D> -> !energy.array<D>
      %s = energy.dot %a, %b : !energy.array<D>
      energy.yield %s : !energy.array<>
    } : !energy.array<N>
    %t = energy.reduce_elements sum %l : !energy.array<N>
    energy.yield %t : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @K
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @y : state [@K, @D]
  energy.tensor @w : state [@D]
  energy.term @e {
    %X = energy.read @x : !energy.array<N, D>
    %Y = energy.read @y : !energy.array<K, D>
    // expected-error @below {{'energy.softmax_contract' op expects each index of its cols to range over a dim, found an expression}}
    %l = energy.softmax_contract generic rows (%i : @N) cols (%k : @K - 1) score {
      %a = energy.extract %X[%i] : !energy.array<N, D> -> !energy.array<D>
      %b = energy.extract %Y[%k] : !energy.array<K, D> -> !energy.array<D>
      %s = energy.dot %a, %b : !energy.array<D>
      energy.yield %s : !energy.array<>
    } : !energy.array<N>
    %t = energy.reduce_elements sum %l : !energy.array<N>
    energy.yield %t : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @K
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @y : state [@K, @D]
  energy.tensor @w : state [@D]
  energy.term @e {
    %X = energy.read @x : !energy.array<N, D>
    %Y = energy.read @y : !energy.array<K, D>
    // expected-error @below {{'energy.softmax_contract' op refers to '@Q', which is not a dim}}
    %l = energy.softmax_contract generic rows (%i : @N) cols (%k : @Q) score {
      %a = energy.extract %X[%i] : !energy.array<N, D> -> !energy.array<D>
      %b = energy.extract %Y[%k] : !energy.array<K, D> -> !energy.array<D>
      %s = energy.dot %a, %b : !energy.array<D>
      energy.yield %s : !energy.array<>
    } : !energy.array<N>
    %t = energy.reduce_elements sum %l : !energy.array<N>
    energy.yield %t : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @K
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @y : state [@K, @D]
  energy.tensor @w : state [@D]
  energy.term @e {
    %X = energy.read @x : !energy.array<N, D>
    %Y = energy.read @y : !energy.array<K, D>
    // expected-error @below {{'energy.softmax_contract' op expects its predicate to yield 'i1', found 'index'}}
    %l = energy.softmax_contract generic rows (%i : @N) cols (%k : @K) where {
      energy.yield %k : index
    } score {
      %a = energy.extract %X[%i] : !energy.array<N, D> -> !energy.array<D>
      %b = energy.extract %Y[%k] : !energy.array<K, D> -> !energy.array<D>
      %s = energy.dot %a, %b : !energy.array<D>
      energy.yield %s : !energy.array<>
    } : !energy.array<N>
    %t = energy.reduce_elements sum %l : !energy.array<N>
    energy.yield %t : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @K
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @y : state [@K, @D]
  energy.tensor @w : state [@D]
  energy.term @e {
    %X = energy.read @x : !energy.array<N, D>
    %Y = energy.read @y : !energy.array<K, D>
    // expected-error @below {{'energy.softmax_contract' op expects its score to yield '!energy.array<>', found '!energy.array<D>'}}
    %l = energy.softmax_contract generic rows (%i : @N) cols (%k : @K) score {
      %a = energy.extract %X[%i] : !energy.array<N, D> -> !energy.array<D>
      energy.yield %a : !energy.array<D>
    } : !energy.array<N>
    %t = energy.reduce_elements sum %l : !energy.array<N>
    energy.yield %t : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @K
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @y : state [@K, @D]
  energy.tensor @w : state [@D]
  energy.term @e {
    %X = energy.read @x : !energy.array<N, D>
    %Y = energy.read @y : !energy.array<K, D>
    // expected-error @below {{'energy.softmax_contract' op expects 2 index arguments in its score, found 1}}
    %l = "energy.softmax_contract"() <{form = #energy<contract_form generic>, rows = [#energy.dim<@N>], cols = #energy.dim<@K>, operandSegmentSizes = array<i32: 0, 0>}> ({
    }, {
    ^bb0(%i: index):
      %c = energy.constant 1.0
      energy.yield %c : !energy.array<>
    }, {
    ^bb0(%i: index, %k: index):
      "energy.yield"() : () -> ()
    }, {
    ^bb0(%i: index, %k: index):
      "energy.yield"() : () -> ()
    }) : () -> !energy.array<N>
    %t = energy.reduce_elements sum %l : !energy.array<N>
    energy.yield %t : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @K
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @y : state [@K, @D]
  energy.tensor @w : state [@D]
  energy.term @e {
    %X = energy.read @x : !energy.array<N, D>
    %Y = energy.read @y : !energy.array<K, D>
    // expected-error @below {{'energy.softmax_contract' op expects 2 index arguments in its row values, found 1}}
    %l = "energy.softmax_contract"() <{form = #energy<contract_form generic>, rows = [#energy.dim<@N>], cols = #energy.dim<@K>, operandSegmentSizes = array<i32: 0, 0>}> ({
    }, {
    ^bb0(%i: index, %k: index):
      %c = energy.constant 1.0
      energy.yield %c : !energy.array<>
    }, {
    ^bb0(%i: index):
      "energy.yield"() : () -> ()
    }, {
    ^bb0(%i: index, %k: index):
      "energy.yield"() : () -> ()
    }) : () -> !energy.array<N>
    %t = energy.reduce_elements sum %l : !energy.array<N>
    energy.yield %t : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @K
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @y : state [@K, @D]
  energy.tensor @w : state [@D]
  energy.term @e {
    %X = energy.read @x : !energy.array<N, D>
    %Y = energy.read @y : !energy.array<K, D>
    // expected-error @below {{'energy.softmax_contract' op expects its row values to yield arrays}}
    %l, %v = energy.softmax_contract generic rows (%i : @N) cols (%k : @K) score {
      %a = energy.extract %X[%i] : !energy.array<N, D> -> !energy.array<D>
      %b = energy.extract %Y[%k] : !energy.array<K, D> -> !energy.array<D>
      %s = energy.dot %a, %b : !energy.array<D>
      energy.yield %s : !energy.array<>
    } row_values {
      energy.yield %k : index
    } : !energy.array<N>, !energy.array<N>
    %t = energy.reduce_elements sum %l : !energy.array<N>
    energy.yield %t : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @K
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @y : state [@K, @D]
  energy.tensor @w : state [@D]
  energy.term @e {
    %X = energy.read @x : !energy.array<N, D>
    %Y = energy.read @y : !energy.array<K, D>
    // expected-error @below {{'energy.softmax_contract' op expects its column values to yield arrays}}
    %l, %v = energy.softmax_contract generic rows (%i : @N) cols (%k : @K) score {
      %a = energy.extract %X[%i] : !energy.array<N, D> -> !energy.array<D>
      %b = energy.extract %Y[%k] : !energy.array<K, D> -> !energy.array<D>
      %s = energy.dot %a, %b : !energy.array<D>
      energy.yield %s : !energy.array<>
    } col_values {
      energy.yield %i : index
    } : !energy.array<N>, !energy.array<K>
    %t = energy.reduce_elements sum %l : !energy.array<N>
    energy.yield %t : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @K
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @y : state [@K, @D]
  energy.tensor @w : state [@D]
  energy.term @e {
    %X = energy.read @x : !energy.array<N, D>
    %Y = energy.read @y : !energy.array<K, D>
    // expected-error @below {{'energy.softmax_contract' op sums column values over its rows, but has no row index}}
    %l, %v = energy.softmax_contract generic rows () cols (%k : @K) score {
      %b = energy.extract %Y[%k] : !energy.array<K, D> -> !energy.array<D>
      %s = energy.reduce_elements sum %b : !energy.array<D>
      energy.yield %s : !energy.array<>
    } col_values {
      %b = energy.extract %Y[%k] : !energy.array<K, D> -> !energy.array<D>
      energy.yield %b : !energy.array<D>
    } : !energy.array<>, !energy.array<K, D>
    energy.yield %l : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @K
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @y : state [@K, @D]
  energy.tensor @w : state [@D]
  energy.term @e {
    %X = energy.read @x : !energy.array<N, D>
    %Y = energy.read @y : !energy.array<K, D>
    %L = energy.read @w : !energy.array<D>
    // expected-error @below {{'energy.softmax_contract' op takes its normaliser as '!energy.array<N>', found '!energy.array<D>'}}
    %v = energy.softmax_contract generic rows (%i : @N) cols (%k : @K) lse(%L : !energy.array<D>) score {
      %a = energy.extract %X[%i] : !energy.array<N, D> -> !energy.array<D>
      %b = energy.extract %Y[%k] : !energy.array<K, D> -> !energy.array<D>
      %s = energy.dot %a, %b : !energy.array<D>
      energy.yield %s : !energy.array<>
    } row_values {
      %b = energy.extract %Y[%k] : !energy.array<K, D> -> !energy.array<D>
      energy.yield %b : !energy.array<D>
    } : !energy.array<N, D>
    %l = energy.sum_last %v : !energy.array<N, D>
    %t = energy.reduce_elements sum %l : !energy.array<N>
    energy.yield %t : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @K
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @y : state [@K, @D]
  energy.tensor @w : state [@D]
  energy.term @e {
    %X = energy.read @x : !energy.array<N, D>
    %Y = energy.read @y : !energy.array<K, D>
    // expected-error @below {{'energy.softmax_contract' op has result types '!energy.array<N>', '!energy.array<N>' but its domains and values give '!energy.array<N>', '!energy.array<N, D>'}}
    %l, %v = energy.softmax_contract generic rows (%i : @N) cols (%k : @K) score {
      %a = energy.extract %X[%i] : !energy.array<N, D> -> !energy.array<D>
      %b = energy.extract %Y[%k] : !energy.array<K, D> -> !energy.array<D>
      %s = energy.dot %a, %b : !energy.array<D>
      energy.yield %s : !energy.array<>
    } row_values {
      %b = energy.extract %Y[%k] : !energy.array<K, D> -> !energy.array<D>
      energy.yield %b : !energy.array<D>
    } : !energy.array<N>, !energy.array<N>
    %t = energy.reduce_elements sum %l : !energy.array<N>
    energy.yield %t : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @K
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @y : state [@K, @D]
  energy.tensor @w : state [@D]
  energy.term @e {
    %X = energy.read @x : !energy.array<N, D>
    %Y = energy.read @y : !energy.array<K, D>
    // expected-error @below {{'energy.softmax_contract' op is marked bilinear but has no row index}}
    %l = energy.softmax_contract bilinear rows () cols (%k : @K) score {
      %a = energy.read @w : !energy.array<D>
      %b = energy.extract %Y[%k] : !energy.array<K, D> -> !energy.array<D>
      %s = energy.dot %a, %b : !energy.array<D>
      energy.yield %s : !energy.array<>
    } : !energy.array<>
    energy.yield %l : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @K
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @y : state [@K, @D]
  energy.tensor @w : state [@D]
  energy.term @e {
    %X = energy.read @x : !energy.array<N, D>
    %Y = energy.read @y : !energy.array<K, D>
    // expected-error @below {{'energy.softmax_contract' op is marked bilinear but its score is not a dot product (times a scale)}}
    %l = energy.softmax_contract bilinear rows (%i : @N) cols (%k : @K) score {
      %a = energy.extract %X[%i] : !energy.array<N, D> -> !energy.array<D>
      %b = energy.extract %Y[%k] : !energy.array<K, D> -> !energy.array<D>
      %s = energy.dot %a, %b : !energy.array<D>
      %s2 = energy.exp %s : !energy.array<>
      energy.yield %s2 : !energy.array<>
    } : !energy.array<N>
    %t = energy.reduce_elements sum %l : !energy.array<N>
    energy.yield %t : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @K
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @y : state [@K, @D]
  energy.tensor @w : state [@D]
  energy.term @e {
    %X = energy.read @x : !energy.array<N, D>
    %Y = energy.read @y : !energy.array<K, D>
    // expected-error @below {{'energy.softmax_contract' op is marked bilinear but its score is not a dot product of a row of a table at the row indices and a row of a table at the column}}
    %l = energy.softmax_contract bilinear rows (%i : @N) cols (%k : @K) score {
      %a = energy.extract %X[%i] : !energy.array<N, D> -> !energy.array<D>
      %b = energy.read @y[%k] : !energy.array<D>
      %s = energy.dot %a, %b : !energy.array<D>
      energy.yield %s : !energy.array<>
    } : !energy.array<N>
    %t = energy.reduce_elements sum %l : !energy.array<N>
    energy.yield %t : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @K
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @y : state [@K, @D]
  energy.tensor @w : state [@D]
  energy.term @e {
    %X = energy.read @x : !energy.array<N, D>
    %Y = energy.read @y : !energy.array<K, D>
    // expected-error @below {{'energy.softmax_contract' op is marked bilinear but a row value is not a row of a table at the column}}
    %l, %v = energy.softmax_contract bilinear rows (%i : @N) cols (%k : @K) score {
      %a = energy.extract %X[%i] : !energy.array<N, D> -> !energy.array<D>
      %b = energy.extract %Y[%k] : !energy.array<K, D> -> !energy.array<D>
      %s = energy.dot %a, %b : !energy.array<D>
      energy.yield %s : !energy.array<>
    } row_values {
      %b = energy.read @y[%k] : !energy.array<D>
      energy.yield %b : !energy.array<D>
    } : !energy.array<N>, !energy.array<N, D>
    %t = energy.reduce_elements sum %l : !energy.array<N>
    energy.yield %t : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @K
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @y : state [@K, @D]
  energy.tensor @w : state [@D]
  energy.term @e {
    %X = energy.read @x : !energy.array<N, D>
    %Y = energy.read @y : !energy.array<K, D>
    // expected-error @below {{'energy.softmax_contract' op is marked bilinear but a column value is not a row of a table at the row indices}}
    %l, %v = energy.softmax_contract bilinear rows (%i : @N) cols (%k : @K) score {
      %a = energy.extract %X[%i] : !energy.array<N, D> -> !energy.array<D>
      %b = energy.extract %Y[%k] : !energy.array<K, D> -> !energy.array<D>
      %s = energy.dot %a, %b : !energy.array<D>
      energy.yield %s : !energy.array<>
    } col_values {
      %a = energy.extract %X[%k] : !energy.array<N, D> -> !energy.array<D>
      energy.yield %a : !energy.array<D>
    } : !energy.array<N>, !energy.array<K, D>
    %t = energy.reduce_elements sum %l : !energy.array<N>
    energy.yield %t : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @K
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @y : state [@K, @D]
  energy.tensor @w : state [@D]
  energy.term @e {
    %X = energy.read @x : !energy.array<N, D>
    %Y = energy.read @y : !energy.array<K, D>
    // expected-error @below {{'energy.softmax_contract' op is marked bilinear but its predicate is not a conjunction of linear comparisons of the row and the column}}
    %l = energy.softmax_contract bilinear rows (%i : @N) cols (%k : @K) where {
      %a = arith.cmpi sle, %k, %i : index
      %b = arith.cmpi eq, %k, %i : index
      %c = arith.ori %a, %b : i1
      energy.yield %c : i1
    } score {
      %a = energy.extract %X[%i] : !energy.array<N, D> -> !energy.array<D>
      %b = energy.extract %Y[%k] : !energy.array<K, D> -> !energy.array<D>
      %s = energy.dot %a, %b : !energy.array<D>
      energy.yield %s : !energy.array<>
    } : !energy.array<N>
    %t = energy.reduce_elements sum %l : !energy.array<N>
    energy.yield %t : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.tensor @y : state [@N]
  energy.tensor @z : state [@N]
  energy.gradient @x and [@y] {
    %z = energy.read @z : !energy.array<N>
    // expected-error @below {{'energy.accumulate' op accumulates into @z inside the gradient of @x}}
    energy.accumulate %z into @z : !energy.array<N>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  // expected-error @below {{'energy.gradient' op names @x twice}}
  energy.gradient @x and [@x] {
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  // expected-error @below {{'energy.gradient' op is the gradient with respect to @w, which is not a tensor}}
  energy.gradient @x and [@w] {
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.tensor @y : state [@N]
  energy.update_program {
    // expected-error @below {{'energy.grad' op has 1 results for the gradients of 2 tensors}}
    %g = energy.grad @x and [@y] : !energy.array<N>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N]
  energy.tensor @y : state [@D]
  energy.update_program {
    // expected-error @below {{'energy.grad' op has type '!energy.array<N>' but the gradient of @y has type '!energy.array<D>'}}
    %g:2 = energy.grad @x and [@y] : !energy.array<N>, !energy.array<N>
  }
}

// -----

// Plugins' functions and aggregations are verified against the tables: none
// is loaded here.
energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    %0 = energy.read @x[] : !energy.array<N>
    // expected-error @below {{'energy.apply' op names 'softsign', which no loaded plugin registers as an element-wise function (load its plugin with --plugin)}}
    %1 = energy.apply "softsign"[0] %0 : !energy.array<N>
    %2 = energy.reduce_elements sum %1 : !energy.array<N>
    energy.yield %2 : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    %0 = energy.read @x[] : !energy.array<N>
    // expected-error @below {{'energy.similarity' op names 'exp', which no loaded plugin registers as a similarity (load its plugin with --plugin)}}
    %1 = energy.similarity "exp" %0, %0 : !energy.array<N>
    energy.yield %1 : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    // expected-error @below {{'energy.reduce' op names aggregation 'sparsemax', which no loaded plugin registers (load its plugin with --plugin)}}
    %0 = energy.reduce custom (%i : @N) {
      %1 = energy.read @x[%i] : !energy.array<>
      energy.yield %1 : !energy.array<>
    } {aggregation = "sparsemax"} : !energy.array<>
    energy.yield %0 : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    // expected-error @below {{'energy.reduce' op names an aggregation exactly when it is 'custom'}}
    %0 = energy.reduce sum (%i : @N) {
      %1 = energy.read @x[%i] : !energy.array<>
      energy.yield %1 : !energy.array<>
    } {aggregation = "lse"} : !energy.array<>
    energy.yield %0 : !energy.array<>
  }
}

// -----

// energy.batch_matmul: the batch axis, the inner dims, the result type.

energy.model @m {
  energy.dim @N
  energy.dim @H
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @W : param [@H, @D, @D]
  energy.tensor @V : param [@N, @D, @D]
  energy.term @e {
    %x = energy.read @x : !energy.array<N, D>
    %w = energy.read @W : !energy.array<H, D, D>
    %v = energy.read @V : !energy.array<N, D, D>
    // Two matrices are a batch of one: no batch axis in the result.
    // expected-error @below {{'energy.batch_matmul' op expected result type '!energy.array<N, N>'}}
    %a = energy.batch_matmul %x, %x transposed : !energy.array<N, D>, !energy.array<N, D> -> !energy.array<H, N, N>
    %s = energy.constant 1.0
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @H
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @W : param [@H, @D, @D]
  energy.tensor @V : param [@N, @D, @D]
  energy.term @e {
    %x = energy.read @x : !energy.array<N, D>
    %w = energy.read @W : !energy.array<H, D, D>
    %v = energy.read @V : !energy.array<N, D, D>
    // expected-error @below {{'energy.batch_matmul' op expected one batch axis, the first of an operand of three axes (the same when both have one)}}
    %b = energy.batch_matmul %w, %v : !energy.array<H, D, D>, !energy.array<N, D, D> -> !energy.array<H, D, D>
    %s = energy.constant 1.0
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @H
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @W : param [@H, @D, @D]
  energy.tensor @V : param [@N, @D, @D]
  energy.term @e {
    %x = energy.read @x : !energy.array<N, D>
    %w = energy.read @W : !energy.array<H, D, D>
    %v = energy.read @V : !energy.array<N, D, D>
    // expected-error @below {{'energy.batch_matmul' op the matrices' inner dims differ}}
    %c = energy.batch_matmul %x transposed, %w : !energy.array<N, D>, !energy.array<H, D, D> -> !energy.array<H, D, D>
    %s = energy.constant 1.0
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @H
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @W : param [@H, @D, @D]
  energy.tensor @V : param [@N, @D, @D]
  energy.term @e {
    %x = energy.read @x : !energy.array<N, D>
    %w = energy.read @W : !energy.array<H, D, D>
    %v = energy.read @V : !energy.array<N, D, D>
    // expected-error @below {{'energy.batch_matmul' op expected result type '!energy.array<H, N, D>'}}
    %d = energy.batch_matmul %x, %w transposed : !energy.array<N, D>, !energy.array<H, D, D> -> !energy.array<N, D>
    %s = energy.constant 1.0
    energy.yield %s : !energy.array<>
  }
}

// -----

// Several row axes: the lhs's axes are a batch, the rows, the inner dim.
energy.model @m {
  energy.dim @N
  energy.dim @H
  energy.dim @D
  energy.tensor @W : param [@H, @D, @D]
  energy.tensor @V : param [@N, @D, @D]
  energy.term @e {
    %w = energy.read @W : !energy.array<H, D, D>
    %v = energy.read @V : !energy.array<N, D, D>
    // expected-error @below {{'energy.batch_matmul' op expected lhs of 4 or 5 axes and rhs of two or three}}
    %a = energy.batch_matmul %v, %w {lhs_rows = 3 : i64} : !energy.array<N, D, D>, !energy.array<H, D, D> -> !energy.array<H, D, D>
    %s = energy.constant 1.0
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @H
  energy.dim @D
  energy.tensor @W : param [@H, @D, @D]
  energy.tensor @V : param [@N, @D, @D]
  energy.term @e {
    %w = energy.read @W : !energy.array<H, D, D>
    %v = energy.read @V : !energy.array<N, D, D>
    // expected-error @below {{'energy.batch_matmul' op the matrices' inner dims differ}}
    %a = energy.batch_matmul %v transposed, %w {lhs_rows = 2 : i64} : !energy.array<N, D, D>, !energy.array<H, D, D> -> !energy.array<D, D>
    %s = energy.constant 1.0
    energy.yield %s : !energy.array<>
  }
}

// -----

// A transposed lhs with several row axes sums over them with the same row
// axes of rhs, which is not transposed.
energy.model @m {
  energy.dim @N
  energy.dim @H
  energy.dim @D
  energy.tensor @W : param [@N, @D, @D]
  energy.tensor @V : param [@N, @D, @D]
  energy.term @e {
    %w = energy.read @W : !energy.array<N, D, D>
    %v = energy.read @V : !energy.array<N, D, D>
    // expected-error @below {{'energy.batch_matmul' op expected at least one row axis of lhs, and rhs not transposed when lhs is with several}}
    %a = energy.batch_matmul %v transposed, %w transposed {lhs_rows = 2 : i64} : !energy.array<N, D, D>, !energy.array<N, D, D> -> !energy.array<D, D>
    %s = energy.constant 1.0
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.tensor @t : param []
  energy.term @e {
    %t = energy.read @t : !energy.array<>
    // expected-error @below {{'energy.prefix_sum' op needs an array with a leading axis, not a scalar}}
    %p = energy.prefix_sum %t : !energy.array<>
    energy.yield %p : !energy.array<>
  }
}

// -----

// A quadratic contraction's column values are moments: 1, X[r], X[r] − M[c]
// or its outer product with itself; twice X[r] is not one.
energy.model @m {
  energy.dim @N
  energy.dim @K
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @mu : state [@K, @D]
  energy.tensor @prec : state [@K, @D, @D]
  energy.term @e {
    %X = energy.read @x : !energy.array<N, D>
    %M = energy.read @mu : !energy.array<K, D>
    %P = energy.read @prec : !energy.array<K, D, D>
    %two = energy.constant 2.0
    // expected-error @below {{'energy.softmax_contract' op is marked quadratic but a column value is not 1, X[r], X[r] − M[c] or the outer product of X[r] − M[c] with itself}}
    %l:2 = energy.softmax_contract quadratic rows (%i : @N) cols (%k : @K) score {
      %a = energy.extract %X[%i] : !energy.array<N, D> -> !energy.array<D>
      %b = energy.extract %M[%k] : !energy.array<K, D> -> !energy.array<D>
      %p = energy.extract %P[%k] : !energy.array<K, D, D> -> !energy.array<D, D>
      %d = energy.sub %a, %b : !energy.array<D>, !energy.array<D>
      %q = energy.quad %d, %p : !energy.array<D>, !energy.array<D, D>
      %s = energy.neg %q : !energy.array<>
      energy.yield %s : !energy.array<>
    } col_values {
      %a = energy.extract %X[%i] : !energy.array<N, D> -> !energy.array<D>
      %v = energy.mul %a, %two : !energy.array<D>, !energy.array<>
      energy.yield %v : !energy.array<D>
    } : !energy.array<N>, !energy.array<K, D>
    %t = energy.reduce_elements sum %l#0 : !energy.array<N>
    energy.yield %t : !energy.array<>
  }
}

// -----

// A quadratic contraction's row values are scalars computed outside it.
energy.model @m {
  energy.dim @N
  energy.dim @K
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @mu : state [@K, @D]
  energy.tensor @prec : state [@K, @D, @D]
  energy.term @e {
    %X = energy.read @x : !energy.array<N, D>
    %M = energy.read @mu : !energy.array<K, D>
    %P = energy.read @prec : !energy.array<K, D, D>
    // expected-error @below {{'energy.softmax_contract' op is marked quadratic but a row value is not a scalar computed outside it}}
    %l:2 = energy.softmax_contract quadratic rows (%i : @N) cols (%k : @K) score {
      %a = energy.extract %X[%i] : !energy.array<N, D> -> !energy.array<D>
      %b = energy.extract %M[%k] : !energy.array<K, D> -> !energy.array<D>
      %p = energy.extract %P[%k] : !energy.array<K, D, D> -> !energy.array<D, D>
      %d = energy.sub %a, %b : !energy.array<D>, !energy.array<D>
      %q = energy.quad %d, %p : !energy.array<D>, !energy.array<D, D>
      %s = energy.neg %q : !energy.array<>
      energy.yield %s : !energy.array<>
    } row_values {
      %b = energy.extract %M[%k] : !energy.array<K, D> -> !energy.array<D>
      energy.yield %b : !energy.array<D>
    } : !energy.array<N>, !energy.array<N, D>
    %t = energy.reduce_elements sum %l#0 : !energy.array<N>
    energy.yield %t : !energy.array<>
  }
}

// -----

// `reuses_scores` needs the normaliser of an earlier contraction with the
// same scores.
energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @y : state [@N, @D]
  energy.gradient @x {
    %q = energy.read @x : !energy.array<N, D>
    %k = energy.read @y : !energy.array<N, D>
    // expected-error @below {{'energy.softmax_contract' op reuses the scores of the contraction that gives its normaliser, but its normaliser is not the first result of a contraction before it in its block}}
    %l:2 = energy.softmax_contract bilinear rows (%c : @N) cols (%p : @N) score {
      %a = energy.extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %b = energy.extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %s = energy.dot %a, %b : !energy.array<D>
      energy.yield %s : !energy.array<>
    } row_values {
      %b = energy.extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      energy.yield %b : !energy.array<D>
    } {reuses_scores} : !energy.array<N>, !energy.array<N, D>
    energy.accumulate %l#1 into @x : !energy.array<N, D>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @y : state [@N, @D]
  energy.gradient @x {
    %q = energy.read @x : !energy.array<N, D>
    %k = energy.read @y : !energy.array<N, D>
    %l:2 = energy.softmax_contract bilinear rows (%c : @N) cols (%p : @N) score {
      %a = energy.extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %b = energy.extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %s = energy.dot %a, %b : !energy.array<D>
      energy.yield %s : !energy.array<>
    } row_values {
      %b = energy.extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      energy.yield %b : !energy.array<D>
    } : !energy.array<N>, !energy.array<N, D>
    // expected-error @below {{'energy.softmax_contract' op reuses the scores of the contraction that gives its normaliser, but their scores differ}}
    %g = energy.softmax_contract bilinear rows (%c : @N) cols (%p : @N) lse(%l#0 : !energy.array<N>) score {
      %a = energy.extract %k[%c] : !energy.array<N, D> -> !energy.array<D>
      %b = energy.extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %s = energy.dot %a, %b : !energy.array<D>
      energy.yield %s : !energy.array<>
    } col_values {
      %a = energy.extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      energy.yield %a : !energy.array<D>
    } {reuses_scores} : !energy.array<N, D>
    energy.accumulate %g into @x : !energy.array<N, D>
  }
}

// -----

// Several batch axes: the same dims, in the same order, in both operands.
energy.model @m {
  energy.dim @G
  energy.dim @R
  energy.dim @B
  energy.dim @Y
  energy.dim @D
  energy.tensor @X : param [@B, @D]
  energy.tensor @W : param [@G, @R, @Y, @D]
  energy.tensor @V : param [@R, @G, @Y, @D]
  energy.term @e {
    %x = energy.read @X : !energy.array<B, D>
    %w = energy.read @W : !energy.array<G, R, Y, D>
    %v = energy.read @V : !energy.array<R, G, Y, D>
    %p = energy.batch_matmul %x, %w transposed {batch_axes = 2 : i64} : !energy.array<B, D>, !energy.array<G, R, Y, D> -> !energy.array<G, R, B, Y>
    // expected-error @below {{'energy.batch_matmul' op expected the same batch axes in both operands}}
    %q = energy.batch_matmul %p, %v {batch_axes = 2 : i64} : !energy.array<G, R, B, Y>, !energy.array<R, G, Y, D> -> !energy.array<G, R, B, D>
    %s = energy.constant 1.0
    energy.yield %s : !energy.array<>
  }
}
