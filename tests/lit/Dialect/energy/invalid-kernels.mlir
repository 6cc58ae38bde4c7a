// RUN: energy-opt %s -split-input-file -verify-diagnostics

// Kernel-plan ops: the reasons a softmax contraction is not of its form,
// does not reuse another's scores, or does not suit its engine, and
// batch_matmul's shapes and packed-operand attributes. (invalid.mlir and
// softmax-contract-engine-invalid.mlir have the first cases of each.)

energy.model @m {
  energy.dim @K
  energy.dim @D
  energy.tensor @y : state [@K, @D]
  energy.tensor @w : state [@D]
  energy.term @e {
    %Y = energy.read @y : !energy.array<K, D>
    // expected-error @below {{'energy.softmax_contract' op is marked quadratic but it does not have exactly one row index}}
    %l = energy.softmax_contract quadratic rows () cols (%k : @K) score {
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
  energy.tensor @mu : state [@K, @D]
  energy.tensor @prec : state [@K, @D, @D]
  energy.term @e {
    %X = energy.read @x : !energy.array<N, D>
    %M = energy.read @mu : !energy.array<K, D>
    %P = energy.read @prec : !energy.array<K, D, D>
    // expected-error @below {{'energy.softmax_contract' op is marked quadratic but it has a predicate, a temperature or a given normaliser}}
    %l = energy.softmax_contract quadratic rows (%i : @N) cols (%k : @K) where {
      %ok = arith.cmpi sle, %k, %i : index
      energy.yield %ok : i1
    } score {
      %a = energy.extract %X[%i] : !energy.array<N, D> -> !energy.array<D>
      %b = energy.extract %M[%k] : !energy.array<K, D> -> !energy.array<D>
      %p = energy.extract %P[%k] : !energy.array<K, D, D> -> !energy.array<D, D>
      %d = energy.sub %a, %b : !energy.array<D>, !energy.array<D>
      %q = energy.quad %d, %p : !energy.array<D>, !energy.array<D, D>
      %s = energy.neg %q : !energy.array<>
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
  energy.tensor @mu : state [@K, @D]
  energy.term @e {
    %X = energy.read @x : !energy.array<N, D>
    %M = energy.read @mu : !energy.array<K, D>
    // expected-error @below {{'energy.softmax_contract' op is marked quadratic but its score is not bias[c] ± scale · quad(X[r] − M[c], P[c])}}
    %l = energy.softmax_contract quadratic rows (%i : @N) cols (%k : @K) score {
      %a = energy.extract %X[%i] : !energy.array<N, D> -> !energy.array<D>
      %b = energy.extract %M[%k] : !energy.array<K, D> -> !energy.array<D>
      %s = energy.dot %a, %b : !energy.array<D>
      energy.yield %s : !energy.array<>
    } : !energy.array<N>
    %t = energy.reduce_elements sum %l : !energy.array<N>
    energy.yield %t : !energy.array<>
  }
}

// -----

// `reuses_scores`: both contractions bilinear, with the same domains,
// constraints and temperature, and no pair term the other lacks.

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @y : state [@N, @D]
  energy.gradient @x {
    %q = energy.read @x : !energy.array<N, D>
    %k = energy.read @y : !energy.array<N, D>
    %l:2 = energy.softmax_contract generic rows (%c : @N) cols (%p : @N) score {
      %a = energy.extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %b = energy.extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %s = energy.dot %a, %b : !energy.array<D>
      energy.yield %s : !energy.array<>
    } row_values {
      %b = energy.extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      energy.yield %b : !energy.array<D>
    } : !energy.array<N>, !energy.array<N, D>
    // expected-error @below {{'energy.softmax_contract' op reuses the scores of the contraction that gives its normaliser, but the two are not both bilinear}}
    %g = energy.softmax_contract generic rows (%c : @N) cols (%p : @N) lse(%l#0 : !energy.array<N>) score {
      %a = energy.extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
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
    // expected-error @below {{'energy.softmax_contract' op reuses the scores of the contraction that gives its normaliser, but their domains, constraints or temperatures differ}}
    %g = energy.softmax_contract bilinear rows (%c : @N) cols (%p : @N) where {
      %ok = arith.cmpi sle, %p, %c : index
      energy.yield %ok : i1
    } lse(%l#0 : !energy.array<N>) score {
      %a = energy.extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
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
    // expected-error @below {{'energy.softmax_contract' op reuses the scores of the contraction that gives its normaliser, but it weighs its sums by a pair term that the other does not}}
    %g = energy.softmax_contract bilinear rows (%c : @N) cols (%p : @N) lse(%l#0 : !energy.array<N>) score {
      %a = energy.extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %b = energy.extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %s = energy.dot %a, %b : !energy.array<D>
      energy.yield %s : !energy.array<>
    } row_values {
      %a = energy.extract %k[%c] : !energy.array<N, D> -> !energy.array<D>
      %b = energy.extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %t = energy.dot %a, %b : !energy.array<D>
      %v = energy.mul %b, %t : !energy.array<D>, !energy.array<>
      energy.yield %v : !energy.array<D>
    } {reuses_scores} : !energy.array<N, D>
    energy.accumulate %g into @x : !energy.array<N, D>
  }
}

// -----

// Engines: each takes some forms; cuDNN's fused attention takes plain
// attention alone.

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @y : state [@N, @D]
  energy.gradient @x {
    %q = energy.read @x : !energy.array<N, D>
    %k = energy.read @y : !energy.array<N, D>
    // expected-error @below {{'energy.softmax_contract' op has engine "cuda", which takes bilinear and quadratic contractions, not generic ones}}
    %l:2 = energy.softmax_contract generic rows (%c : @N) cols (%p : @N) score {
      %a = energy.extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %b = energy.extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %s = energy.dot %a, %b : !energy.array<D>
      energy.yield %s : !energy.array<>
    } row_values {
      %b = energy.extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      energy.yield %b : !energy.array<D>
    } {engine = "cuda"} : !energy.array<N>, !energy.array<N, D>
    energy.accumulate %l#1 into @x : !energy.array<N, D>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @y : state [@N, @D]
  energy.tensor @L : state [@N]
  energy.gradient @x {
    %q = energy.read @x : !energy.array<N, D>
    %k = energy.read @y : !energy.array<N, D>
    %L = energy.read @L : !energy.array<N>
    // expected-error @below {{'energy.softmax_contract' op is given to cuDNN's fused attention, but its normaliser is given}}
    %g = energy.softmax_contract bilinear rows (%c : @N) cols (%p : @N) lse(%L : !energy.array<N>) score {
      %a = energy.extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %b = energy.extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %s = energy.dot %a, %b : !energy.array<D>
      energy.yield %s : !energy.array<>
    } row_values {
      %b = energy.extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      energy.yield %b : !energy.array<D>
    } {engine = "cudnn"} : !energy.array<N, D>
    energy.accumulate %g into @x : !energy.array<N, D>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @y : state [@N, @D]
  energy.term @e {
    %q = energy.read @x : !energy.array<N, D>
    %k = energy.read @y : !energy.array<N, D>
    // expected-error @below {{'energy.softmax_contract' op is given to cuDNN's fused attention, but it has no row values}}
    %l = energy.softmax_contract bilinear rows (%c : @N) cols (%p : @N) score {
      %a = energy.extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %b = energy.extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %s = energy.dot %a, %b : !energy.array<D>
      energy.yield %s : !energy.array<>
    } {engine = "cudnn"} : !energy.array<N>
    %t = energy.reduce_elements sum %l : !energy.array<N>
    energy.yield %t : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @y : state [@N, @D]
  energy.const @beta = 2.0
  energy.gradient @x {
    %q = energy.read @x : !energy.array<N, D>
    %k = energy.read @y : !energy.array<N, D>
    %beta = energy.read @beta : !energy.array<>
    // expected-error @below {{'energy.softmax_contract' op is given to cuDNN's fused attention, but a row value has a factor}}
    %l:2 = energy.softmax_contract bilinear rows (%c : @N) cols (%p : @N) score {
      %a = energy.extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %b = energy.extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %s = energy.dot %a, %b : !energy.array<D>
      energy.yield %s : !energy.array<>
    } row_values {
      %b = energy.extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %v = energy.mul %b, %beta : !energy.array<D>, !energy.array<>
      energy.yield %v : !energy.array<D>
    } {engine = "cudnn"} : !energy.array<N>, !energy.array<N, D>
    energy.accumulate %l#1 into @x : !energy.array<N, D>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.tensor @y : state [@N, @D]
  energy.tensor @r : state [@N]
  energy.gradient @x {
    %q = energy.read @x : !energy.array<N, D>
    %k = energy.read @y : !energy.array<N, D>
    %R = energy.read @r : !energy.array<N>
    // expected-error @below {{'energy.softmax_contract' op is given to cuDNN's fused attention, but its score has a bias}}
    %l:2 = energy.softmax_contract bilinear rows (%c : @N) cols (%p : @N) score {
      %a = energy.extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %b = energy.extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %s = energy.dot %a, %b : !energy.array<D>
      %bias = energy.extract %R[%p] : !energy.array<N> -> !energy.array<>
      %t = energy.add %s, %bias : !energy.array<>, !energy.array<>
      energy.yield %t : !energy.array<>
    } row_values {
      %b = energy.extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      energy.yield %b : !energy.array<D>
    } {engine = "cudnn"} : !energy.array<N>, !energy.array<N, D>
    energy.accumulate %l#1 into @x : !energy.array<N, D>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @v : state [@N]
  energy.tensor @W : param [@D, @D]
  energy.term @e {
    %v = energy.read @v : !energy.array<N>
    %w = energy.read @W : !energy.array<D, D>
    // expected-error @below {{'energy.batch_matmul' op expected operands of two or three axes}}
    %a = energy.batch_matmul %v, %w : !energy.array<N>, !energy.array<D, D> -> !energy.array<N, D>
    %s = energy.constant 1.0
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : input [@N, @D]
  energy.tensor @W : param [@D, @D]
  energy.tensor @cache.0 : state [@D, @D] = zeros
  energy.term @e {
    %x = energy.read @x : !energy.array<N, D>
    %w = energy.read @W : !energy.array<D, D>
    // expected-error @below {{'energy.batch_matmul' op expects `energy.packed_rhs` and `energy.packed_rhs_valid` together, each a symbol (a scratch tensor and its flag)}}
    %a = energy.batch_matmul %x, %w transposed {energy.packed_rhs = @cache.0} : !energy.array<N, D>, !energy.array<D, D> -> !energy.array<N, D>
    %s = energy.constant 1.0
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : input [@N, @D]
  energy.tensor @W : param [@D, @D]
  energy.term @e {
    %x = energy.read @x : !energy.array<N, D>
    %w = energy.read @W : !energy.array<D, D>
    // expected-error @below {{'energy.batch_matmul' op expects `energy.packed_rhs` and `energy.packed_rhs_valid` together, each a symbol (a scratch tensor and its flag)}}
    %a = energy.batch_matmul %x, %w transposed {energy.packed_rhs = "cache.0", energy.packed_rhs_valid = @cache.0.valid} : !energy.array<N, D>, !energy.array<D, D> -> !energy.array<N, D>
    %s = energy.constant 1.0
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : input [@N, @D]
  energy.tensor @W : param [@D, @D]
  energy.tensor @cache.0 : state [@N, @D] = zeros
  energy.tensor @cache.0.valid : state [] = zeros
  energy.term @e {
    %x = energy.read @x : !energy.array<N, D>
    %w = energy.read @W : !energy.array<D, D>
    // expected-error @below {{'energy.batch_matmul' op keeps rhs '!energy.array<D, D>' packed, but its cache @cache.0 is '!energy.array<N, D>'}}
    %a = energy.batch_matmul %x, %w transposed {energy.packed_rhs = @cache.0, energy.packed_rhs_valid = @cache.0.valid} : !energy.array<N, D>, !energy.array<D, D> -> !energy.array<N, D>
    %s = energy.constant 1.0
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : input [@N, @D]
  energy.tensor @W : param [@D, @D]
  energy.term @e {
    %x = energy.read @x : !energy.array<N, D>
    %w = energy.read @W : !energy.array<D, D>
    // expected-error @below {{'energy.batch_matmul' op keeps rhs packed in @cache.0 under @cache.0.valid, which must be state tensors}}
    %a = energy.batch_matmul %x, %w transposed {energy.packed_rhs = @cache.0, energy.packed_rhs_valid = @cache.0.valid} : !energy.array<N, D>, !energy.array<D, D> -> !energy.array<N, D>
    %s = energy.constant 1.0
    energy.yield %s : !energy.array<>
  }
}
