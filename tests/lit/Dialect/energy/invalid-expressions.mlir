// RUN: energy-opt %s -split-input-file -verify-diagnostics

// Expression ops: leaves (read, size, eye), indexing (extract, embed),
// vector and matrix math, reductions, plugins' aggregations. (invalid.mlir
// has the first cases of each.)

energy.model @m {
  energy.dim @N
  energy.term @e {
    // expected-error @below {{'energy.read' op reads @N, which is not a tensor, let or const}}
    %n = energy.read @N : !energy.array<>
    energy.yield %n : !energy.array<>
  }
}

// -----

// The custom syntax gives an affine map as many inputs as index operands;
// the generic one need not.
energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    %s = energy.step : index
    // expected-error @below {{'energy.read' op has 1 index operands for a map of 0 inputs}}
    %x = "energy.read"(%s) <{map = affine_map<() -> (0)>, source = @x}> : (index) -> !energy.array<>
    energy.yield %x : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    // expected-error @below {{'energy.size' op refers to '@Q', which is not a dim}}
    %q = energy.size @Q : index
    %x = energy.read @x[%q] : !energy.array<>
    energy.yield %x : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.term @e {
    // expected-error @below {{'energy.eye' op of @N has type '!energy.array<N, D>'; expected a square matrix over 'N'}}
    %i = energy.eye @N : !energy.array<N, D>
    %s = energy.reduce_elements sum %i : !energy.array<N, D>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    // expected-error @below {{'energy.eye' op refers to @x, which is not a dim}}
    %i = energy.eye @x : !energy.array<x, x>
    %s = energy.reduce_elements sum %i : !energy.array<x, x>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    %x = energy.read @x : !energy.array<N>
    %s = energy.step : index
    // expected-error @below {{'energy.extract' op indexes @value of shape [N] with 2 indices}}
    %v = energy.extract %x[%s, %s] : !energy.array<N> -> !energy.array<>
    energy.yield %v : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N, @D]
  energy.term @e {
    %x = energy.read @x : !energy.array<N, D>
    %s = energy.step : index
    // expected-error @below {{'energy.extract' op extracts from @value as '!energy.array<>' but its element at 1 indices has type '!energy.array<D>'}}
    %v = energy.extract %x[%s] : !energy.array<N, D> -> !energy.array<>
    energy.yield %v : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    %x = energy.read @x : !energy.array<N>
    // expected-error @below {{'energy.extract' op has 0 index operands for a map of 1 inputs}}
    %v = "energy.extract"(%x) <{map = affine_map<(d0) -> (d0)>}> : (!energy.array<N>) -> !energy.array<>
    energy.yield %v : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.term @e {
    %c = energy.constant 1.0
    %s = energy.step : index
    // expected-error @below {{'energy.embed' op embeds into @result as '!energy.array<>' but its element at 1 indices has type '!energy.array<D>'}}
    %v = energy.embed %c into [%s] : !energy.array<> -> !energy.array<N, D>
    %t = energy.reduce_elements sum %v : !energy.array<N, D>
    energy.yield %t : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.term @e {
    %c = energy.constant 1.0
    %s = energy.step : index
    // expected-error @below {{'energy.embed' op indexes @result of shape [N] with 2 indices}}
    %v = energy.embed %c into [%s, %s] : !energy.array<> -> !energy.array<N>
    %t = energy.reduce_elements sum %v : !energy.array<N>
    energy.yield %t : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    %x = energy.read @x : !energy.array<N>
    // expected-error @below {{transpose expects at least two axes, found [N]}}
    %t = energy.transpose %x : !energy.array<N>
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
    %x = energy.read @x : !energy.array<N, D>
    // expected-error @below {{shape mismatch in dot: expected two vectors of the same length, found [N, D] and [N, D]}}
    %d = energy.dot %x, %x : !energy.array<N, D>
    energy.yield %d : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @v : state [@N]
  energy.tensor @M : param [@N, @D]
  energy.term @e {
    %v = energy.read @v : !energy.array<N>
    %m = energy.read @M : !energy.array<N, D>
    // expected-error @below {{shape mismatch in quad: expected a vector [n] and a matrix [n, n], found [N] and [N, D]}}
    %q = energy.quad %v, %m : !energy.array<N>, !energy.array<N, D>
    energy.yield %q : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @v : state [@N]
  energy.tensor @M : param [@N, @D]
  energy.term @e {
    %v = energy.read @v : !energy.array<N>
    %m = energy.read @M : !energy.array<N, D>
    // expected-error @below {{outer expects two vectors, found [N] and [N, D]}}
    %o = energy.outer %v, %m : !energy.array<N>, !energy.array<N, D>
    %s = energy.reduce_elements sum %o : !energy.array<N, N>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.term @e {
    %c = energy.constant 1.0
    // expected-error @below {{sum_last expects at least one axis, found []}}
    %s = energy.sum_last %c : !energy.array<>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @M : param [@N, @D]
  energy.term @e {
    %m = energy.read @M : !energy.array<N, D>
    // expected-error @below {{diag expects a vector, found [N, D]}}
    %d = energy.diag %m : !energy.array<N, D>
    %s = energy.reduce_elements sum %d : !energy.array<N, N>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @M : param [@N, @D]
  energy.term @e {
    %m = energy.read @M : !energy.array<N, D>
    // expected-error @below {{diag_part expects a square matrix, found [N, D]}}
    %d = energy.diag_part %m : !energy.array<N, D>
    %s = energy.reduce_elements sum %d : !energy.array<N>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @M : param [@N, @D]
  energy.term @e {
    %m = energy.read @M : !energy.array<N, D>
    // expected-error @below {{'energy.inverse' op expects a square matrix, found [N, D]}}
    %i = energy.inverse %m : !energy.array<N, D>
    %s = energy.reduce_elements sum %i : !energy.array<N, D>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.dim @D
  energy.tensor @x : state [@N]
  energy.term @e {
    %x = energy.read @x : !energy.array<N>
    // expected-error @below {{'energy.broadcast' op cannot broadcast [N] to [D, N]; the operand's shape must be a proper prefix}}
    %b = energy.broadcast %x : !energy.array<N> to !energy.array<D, N>
    %s = energy.reduce_elements sum %b : !energy.array<D, N>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    %x = energy.read @x : !energy.array<N>
    // expected-error @below {{'energy.broadcast' op cannot broadcast [N] to [N]; the operand's shape must be a proper prefix}}
    %b = energy.broadcast %x : !energy.array<N> to !energy.array<N>
    %s = energy.reduce_elements sum %b : !energy.array<N>
    energy.yield %s : !energy.array<>
  }
}

// -----

// Reductions over index domains.

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    // expected-error @below {{unknown reduction 'prod'; expected sum, mean, max, lse or custom}}
    %s = energy.reduce prod (%i : @N) {
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
    // expected-error @below {{'energy.reduce' op expects at least one index in its domain}}
    %s = energy.reduce sum () {
      %c = energy.constant 1.0
      energy.yield %c : !energy.array<>
    } : !energy.array<>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    // expected-error @below {{'energy.reduce' op expects its body to yield '!energy.array<>', found '!energy.array<N>'}}
    %s = energy.reduce sum (%i : @N) {
      %x = energy.read @x : !energy.array<N>
      energy.yield %x : !energy.array<N>
    } : !energy.array<>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    // expected-error @below {{'energy.reduce' op of a plugin's aggregation takes no predicate}}
    %s = energy.reduce custom (%i : @N) where {
      %t = arith.constant true
      energy.yield %t : i1
    } {
      %xi = energy.read @x[%i] : !energy.array<>
      energy.yield %xi : !energy.array<>
    } {aggregation = "sparsemax"} : !energy.array<>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    // expected-error @below {{'energy.reduce' op of a plugin's aggregation yields a scalar}}
    %s = energy.reduce custom (%i : @N) {
      %x = energy.read @x : !energy.array<N>
      energy.yield %x : !energy.array<N>
    } {aggregation = "sparsemax"} : !energy.array<N>
    %t = energy.reduce_elements sum %s : !energy.array<N>
    energy.yield %t : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    // expected-error @below {{'energy.reduce' op of a plugin's aggregation ranges over dims, not #energy.dim<@N - 1>}}
    %s = energy.reduce custom (%i : @N - 1) {
      %xi = energy.read @x[%i] : !energy.array<>
      energy.yield %xi : !energy.array<>
    } {aggregation = "sparsemax"} : !energy.array<>
    energy.yield %s : !energy.array<>
  }
}

// -----

// Plugins' aggregations are verified against the table: none is loaded here,
// and a built-in aggregation is not a plugin's.
energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    %x = energy.read @x : !energy.array<N>
    // expected-error @below {{'energy.aggregate' op names aggregation 'sum', which no loaded plugin registers (load its plugin with --plugin)}}
    %s = energy.aggregate "sum" %x : !energy.array<N>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    %x = energy.read @x : !energy.array<N>
    // expected-error @below {{'energy.aggregate_weights' op names aggregation 'sparsemax', which no loaded plugin registers (load its plugin with --plugin)}}
    %w = energy.aggregate_weights "sparsemax" %x : !energy.array<N>
    %s = energy.reduce_elements sum %w : !energy.array<N>
    energy.yield %s : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    %x = energy.read @x : !energy.array<N>
    // expected-error @below {{'energy.similarity_gradient' op names 'cosine', which no loaded plugin registers as a similarity (load its plugin with --plugin)}}
    %g = energy.similarity_gradient "cosine"[0] %x, %x : !energy.array<N>
    %s = energy.reduce_elements sum %g : !energy.array<N>
    energy.yield %s : !energy.array<>
  }
}

// -----

// Parallel chunks add their partial results: a maximum cannot run so.
energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    %x = energy.read @x : !energy.array<N>
    // expected-error @below {{'energy.reduce' op is marked parallel as 'max'; only sums run in parallel chunks}}
    %m = energy.reduce max parallel (%i : @N) {
      %1 = energy.extract %x[%i] : !energy.array<N> -> !energy.array<>
      energy.yield %1 : !energy.array<>
    } : !energy.array<>
    energy.yield %m : !energy.array<>
  }
}
